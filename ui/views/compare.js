// Compare: two documents (ids or pasted texts) side by side, the passages
// they share (POST /explain) highlighted in matching colours; clicking a
// passage scrolls to its partner; long unmatched stretches fold. When one
// text is mostly inside the other (an excerpt, a quote) it says so and
// shows where the excerpt sits in the longer text. Boilerplate (text
// common in the collection, or a registered template) is greyed on both
// sides, apart from the shared content passages, and the content scores
// (boilerplate left out) stand beside the raw ones. A second tab shows a
// word edit diff.

import { h, fill } from '../dom.js';
import { ctx, action } from '../shell.js';
import { showPair } from '../pair.js';

export default async function compare(root, params) {
  const pending = ctx.compare || {};
  const a = side('a', params.get('a') ? { id: params.get('a') } : pending.a);
  const b = side('b', params.get('b') ? { id: params.get('b') } : pending.b);
  const out = h('div', { class: 'compare-out' });

  async function run(ev) {
    if (ev) ev.preventDefault();
    const input = { a: a.value(), b: b.value() };
    if (!input.a || !input.b) {
      fill(out, h('p', { class: 'muted' }, 'Give an id or a text on both sides.'));
      return;
    }
    ctx.compare = input;
    await action('compare', () => showPair(out, input));
  }

  fill(root,
    h('h1', {}, 'Compare'),
    h('form', { class: 'compare-in', onsubmit: run },
      h('div', { class: 'sides' }, a.el, b.el),
      h('button', { type: 'submit', testid: 'compare-submit' }, 'Compare')),
    out);
  if (a.value() && b.value()) await showPair(out, { a: a.value(), b: b.value() });
}

/** One side's input: an id, or a pasted text. */
function side(name, initial) {
  const id = h('input', { placeholder: `document ${name.toUpperCase()}: an id`, spellcheck: 'false', value: initial && initial.id ? initial.id : '' });
  const text = h('textarea', { rows: 3, placeholder: 'or a text', value: initial && initial.text ? initial.text : '' });
  return {
    el: h('div', {}, id, text),
    value() {
      if (id.value.trim()) return { id: id.value.trim() };
      if (text.value.trim()) return { text: text.value };
      return null;
    },
  };
}
