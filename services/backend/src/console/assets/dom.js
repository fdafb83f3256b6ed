// DOM helpers. Every piece of text from the backend (model answers, tool output, titles)
// becomes a text node: nothing is ever parsed as HTML.

/** h('div', {class: 'x', onclick: f}, child, 'text', [more]) */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      el.className = value;
    } else if (key === 'text') {
      el.textContent = String(value);
    } else if (value === true) {
      el.setAttribute(key, '');
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

/** JSON for people: indented, clipped to `max` characters. */
export function pretty(value, max = 20000) {
  let text;
  try {
    text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  } catch {
    text = String(value);
  }
  if (text === undefined) text = '';
  return text.length > max ? text.slice(0, max) + `\n… (${text.length - max} more characters)` : text;
}

/** A unified diff as lines coloured by their first character. */
export function diffView(diff) {
  const pre = h('pre', { class: 'diff', tabindex: '0', 'aria-label': 'diff' });
  for (const line of String(diff).split('\n')) {
    let cls = 'ctx';
    if (line.startsWith('+++') || line.startsWith('---')) cls = 'file';
    else if (line.startsWith('@@')) cls = 'hunk';
    else if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    pre.append(h('span', { class: cls }, line + '\n'));
  }
  return pre;
}

export function time(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  return d.toLocaleString();
}

export function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
