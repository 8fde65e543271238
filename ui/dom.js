// DOM helpers. Every piece of text from the server (document texts, ids,
// metadata, problem details) becomes a Text node: nothing here, or in any
// view, parses a string as HTML. The page's CSP requires Trusted Types
// with no policy, so an HTML sink would throw even if one slipped in.

/** Make an element: attrs (class, testid, on<event>, dataset, properties or
 * attributes) and children (nodes, or anything else as text). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'testid') el.dataset.testid = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Append children to el (nodes, or anything else as text; null, undefined
 * and false skipped, arrays flattened), unlike Element.append, which
 * writes "null". */
export function add(el, ...children) {
  append(el, children);
  return el;
}

/** Replace el's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A button that acts only on a second click: the first arms it, and
 * says so ("delete: click again"). attrs as for h(); onConfirm runs on the
 * second click. */
export function confirmButton(attrs, label, onConfirm) {
  const button = h('button', {
    type: 'button', ...attrs,
    onclick: () => {
      if (button.dataset.armed !== 'true') {
        button.dataset.armed = 'true';
        button.textContent = `${label}: click again`;
        return;
      }
      onConfirm();
    },
  }, label);
  return button;
}

/** A number as the API gives it, shortened for a table. */
export function num(x, digits = 3) {
  if (x === null || x === undefined) return '–';
  if (typeof x !== 'number') return String(x);
  return Number.isInteger(x) ? x.toLocaleString('en') : x.toFixed(digits);
}

export function bytes(n) {
  if (n === null || n === undefined) return '–';
  if (n < 1024) return `${Math.round(n)} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function duration(secs) {
  if (secs === null || secs === undefined) return 'kept until deleted';
  const units = [[86400, 'd'], [3600, 'h'], [60, 'min'], [1, 's']];
  for (const [size, name] of units) {
    if (secs % size === 0) return `${secs / size} ${name}`;
  }
  return `${secs} s`;
}

/** An error's message as text for the page. */
export function errorText(e) {
  return e && e.message ? e.message : String(e);
}

export function errorBox(e) {
  return h('p', { class: 'error', role: 'alert' }, errorText(e));
}
