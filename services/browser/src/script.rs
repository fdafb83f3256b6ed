//! The scripts run in pages. Each is a function of one JSON argument, called as
//! `(<function>)(<argument>)`; a result with an `error` field is a failure worded for the
//! model. Element references are `data-lumina-ref` attributes (numbered per document).

/// Names an element briefly for messages: `button#send "Send"`.
const DESCRIBE: &str = r#"
  const describe = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += '#' + el.id;
    if (el.name) s += '[name=' + el.name + ']';
    const text = (el.innerText || el.value || el.getAttribute('aria-label') || '').trim().replace(/\s+/g, ' ');
    if (text) s += ' "' + text.slice(0, 40) + '"';
    return s;
  };
  const find = (selector) => {
    const el = document.querySelector(selector);
    if (!el) throw new Error('no element matches ' + selector + ' (list elements and their refs with browser_extract)');
    return el;
  };
"#;

/// Marks the current document (once) and returns the mark, so a later call can tell
/// whether a navigation replaced it.
pub(crate) const MARK: &str = r#"() => {
  if (!window.__luminaDoc) window.__luminaDoc = Math.random().toString(36).slice(2);
  return window.__luminaDoc;
}"#;

/// The current mark (or null in a new document) and the ready state.
pub(crate) const STATE: &str =
    r#"() => [window.__luminaDoc || null, document.readyState, location.href, document.title]"#;

/// Location and title.
pub(crate) const LOCATION: &str = r#"() => ({ url: location.href, title: document.title })"#;

pub(crate) fn click() -> String {
    format!(
        r#"(args) => {{ {DESCRIBE}
  const el = find(args.selector);
  el.scrollIntoView({{ block: 'center', inline: 'center' }});
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) return {{ error: describe(el) + ' is not visible' }};
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  const covered = hit && hit !== el && !el.contains(hit) && !(hit.control === el);
  if (covered) {{ el.click(); return {{ what: describe(el), covered: describe(hit) }}; }}
  return {{ x, y, what: describe(el) }};
}}"#
    )
}

pub(crate) fn focus() -> String {
    format!(
        r#"(args) => {{ {DESCRIBE}
  const el = find(args.selector);
  el.scrollIntoView({{ block: 'center', inline: 'center' }});
  el.focus();
  const active = document.activeElement;
  if (!active || (active !== el && !el.contains(active))) return {{ error: describe(el) + ' cannot take keyboard focus' }};
  if (active.disabled || active.readOnly) return {{ error: describe(el) + ' is disabled or read-only' }};
  if (args.clear) {{
    if ('value' in active) {{ active.value = ''; active.dispatchEvent(new Event('input', {{ bubbles: true }})); }}
    else if (active.isContentEditable) active.textContent = '';
  }}
  return {{ what: describe(el) }};
}}"#
    )
}

pub(crate) fn select() -> String {
    format!(
        r#"(args) => {{ {DESCRIBE}
  const el = find(args.selector);
  if (el.tagName !== 'SELECT') return {{ error: describe(el) + ' is not a <select>' }};
  const want = String(args.option).trim();
  const opts = Array.from(el.options);
  const o = opts.find(o => o.value === args.option)
    || opts.find(o => o.text.trim() === want)
    || opts.find(o => o.text.trim().toLowerCase() === want.toLowerCase());
  if (!o) return {{ error: 'no option ' + JSON.stringify(args.option) + ' in ' + describe(el) + '; options: '
    + opts.slice(0, 30).map(o => JSON.stringify(o.value) + ' (' + o.text.trim() + ')').join(', ') }};
  if (o.disabled || el.disabled) return {{ error: 'option ' + JSON.stringify(o.value) + ' of ' + describe(el) + ' is disabled' }};
  el.value = o.value;
  o.selected = true;
  el.dispatchEvent(new Event('input', {{ bubbles: true }}));
  el.dispatchEvent(new Event('change', {{ bubbles: true }}));
  return {{ value: o.value, label: o.text.trim() }};
}}"#
    )
}

/// Text and interactive elements of the page or of what `selector` matches.
pub(crate) const EXTRACT: &str = r#"(args) => {
  const scope = args.selector
    ? Array.from(document.querySelectorAll(args.selector))
    : [document.body || document.documentElement];
  if (scope.length === 0) return { error: 'no element matches ' + args.selector };
  let text = scope.map(e => (e.innerText ?? e.textContent ?? '').trim()).join('\n\n');
  if (text.length > args.max_text) text = text.slice(0, args.max_text);
  const SEL = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [role=button], [role=link], '
    + '[role=checkbox], [role=radio], [role=tab], [role=menuitem], [role=option], [role=switch], '
    + '[contenteditable=""], [contenteditable=true], [onclick]';
  const root = document.documentElement;
  let next = Number(root.getAttribute('data-lumina-next') || '1');
  const seen = new Set();
  const elements = [];
  outer: for (const s of scope) {
    for (const el of [s, ...s.querySelectorAll(SEL)]) {
      if (!el.matches || !el.matches(SEL) || seen.has(el)) continue;
      seen.add(el);
      const r = el.getBoundingClientRect();
      const cs = getComputedStyle(el);
      if ((r.width === 0 && r.height === 0) || cs.visibility === 'hidden' || cs.display === 'none') continue;
      let ref = el.getAttribute('data-lumina-ref');
      if (!ref) { ref = String(next++); el.setAttribute('data-lumina-ref', ref); }
      const tag = el.tagName.toLowerCase();
      const field = tag === 'input' || tag === 'textarea' || tag === 'select';
      const labelled = field && el.labels && el.labels.length ? el.labels[0].innerText : '';
      const label = (el.getAttribute('aria-label') || labelled || (field ? el.placeholder : '')
        || el.innerText || (tag === 'input' && /^(submit|button|reset)$/.test(el.type) ? el.value : '')
        || el.title || el.alt || '').trim().replace(/\s+/g, ' ').slice(0, 80);
      const kind = tag === 'input' ? 'input[' + (el.type || 'text') + ']' : (el.getAttribute('role') || tag);
      elements.push({
        ref: Number(ref), kind, label,
        name: el.name || null,
        value: field && el.type !== 'password' ? String(el.value).slice(0, 200) : null,
        href: tag === 'a' ? el.href : null,
      });
      if (elements.length >= args.max_elements) break outer;
    }
  }
  root.setAttribute('data-lumina-next', String(next));
  return { url: location.href, title: document.title, matched: scope.length, text, elements };
}"#;

/// `(<function>)(<argument>)`: the argument as a JSON literal (valid JavaScript).
pub(crate) fn call(function: &str, argument: &serde_json::Value) -> String {
    format!("({function})({argument})")
}
