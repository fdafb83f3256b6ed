// A small, safe Markdown subset rendered straight to DOM nodes: headings, paragraphs,
// fenced code, lists, quotes, inline code, bold, italic and http(s) links. The text is
// never interpreted as HTML: every run of text becomes a text node.

import { h } from './dom.js';

export function renderMarkdown(source) {
  const root = h('div', { class: 'md' });
  const lines = String(source).replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)\s*$/);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1;
      const code = h('code', {}, body.join('\n'));
      if (fence[2]) code.dataset.lang = fence[2];
      root.append(h('pre', { class: 'code', tabindex: '0' }, code));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      const level = Math.min(heading[1].length + 2, 6);
      root.append(h('h' + level, {}, inline(heading[2])));
      i += 1;
      continue;
    }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? 'ol' : 'ul', {});
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
        list.append(h('li', {}, inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ''))));
        i += 1;
      }
      root.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      const quote = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) quote.push(lines[i++].replace(/^>\s?/, ''));
      root.append(h('blockquote', {}, inline(quote.join(' '))));
      continue;
    }
    if (line.trim() === '') {
      i += 1;
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() !== '' && !/^(#{1,6}\s|\s*```|\s*~~~|>|\s*([-*+]|\d+[.)])\s)/.test(lines[i])) {
      para.push(lines[i++]);
    }
    if (para.length === 0) para.push(lines[i++]);
    root.append(h('p', {}, inline(para.join('\n'))));
  }
  return root;
}

const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*|_[^_\n]+_)|(\[[^\]\n]+\]\([^)\s]+\))/;

/** Inline markup → an array of nodes. */
export function inline(text) {
  const out = [];
  let rest = String(text);
  while (rest.length > 0) {
    const m = rest.match(INLINE);
    if (!m) {
      out.push(document.createTextNode(rest));
      break;
    }
    if (m.index > 0) out.push(document.createTextNode(rest.slice(0, m.index)));
    const token = m[0];
    if (m[1]) out.push(h('code', {}, token.slice(1, -1)));
    else if (m[2]) out.push(h('strong', {}, token.slice(2, -2)));
    else if (m[3]) out.push(h('em', {}, token.slice(1, -1)));
    else out.push(link(token));
    rest = rest.slice(m.index + token.length);
  }
  return out;
}

function link(token) {
  const m = token.match(/^\[([^\]]+)\]\(([^)\s]+)\)$/);
  if (!m) return document.createTextNode(token);
  let url;
  try {
    url = new URL(m[2]);
  } catch {
    return document.createTextNode(token);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return document.createTextNode(token);
  return h('a', { href: url.href, rel: 'noopener noreferrer', target: '_blank' }, m[1]);
}
