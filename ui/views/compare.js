// Compare: two documents (ids or pasted texts) side by side, the passages
// they share (POST /explain) highlighted in matching colours; clicking a
// passage scrolls to its partner; long unmatched stretches fold. A second
// tab shows a word edit diff.

import { api, collectionBase } from '../api.js';
import { h, fill, num, errorBox } from '../dom.js';
import { ctx, action } from '../shell.js';
import { diffWords } from '../worddiff.js';

/** Unmatched stretches longer than this (in characters) fold. */
const FOLD_OVER = 700;
/** What stays visible at each end of a folded stretch. */
const FOLD_KEEP = 240;
const COLOURS = 8;

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
    await action('compare', () => explain(out, input));
  }

  fill(root,
    h('h1', {}, 'Compare'),
    h('form', { class: 'compare-in', onsubmit: run },
      h('div', { class: 'sides' }, a.el, b.el),
      h('button', { type: 'submit', testid: 'compare-submit' }, 'Compare')),
    out);
  if (a.value() && b.value()) await explain(out, { a: a.value(), b: b.value() });
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

async function explain(out, input) {
  fill(out);
  const base = collectionBase(ctx.collection);
  let answer;
  try {
    answer = await api(`${base}/explain`, { method: 'POST', body: input });
  } catch (e) {
    out.append(errorBox(e));
    // Without /explain (a read-only key, or texts not stored), two stored
    // ids still have their scores.
    if (input.a.id && input.b.id) {
      try {
        const q = new URLSearchParams({ a: input.a.id, b: input.b.id });
        const c = await api(`${base}/compare?${q}`);
        out.append(scores(c), h('p', { class: 'muted' }, 'Scores only: the passages need POST /explain and the texts.'));
      } catch (e2) {
        out.append(errorBox(e2));
      }
    }
    return;
  }
  const paneA = pane('a', answer.a.segments);
  const paneB = pane('b', answer.b.segments);
  const textA = answer.a.segments.map((s) => s.text).join('');
  const textB = answer.b.segments.map((s) => s.text).join('');
  const passages = h('div', { class: 'tab', dataset: { tab: 'passages' } },
    h('div', { class: 'panes' },
      h('section', {}, h('h2', {}, label(input.a, 'A')), paneA),
      h('section', {}, h('h2', {}, label(input.b, 'B')), paneB)));
  const diff = h('div', { class: 'tab', dataset: { tab: 'diff' }, hidden: true });
  const tabs = h('div', { class: 'tabs', role: 'tablist' },
    tabButton('Shared passages', 'passages', true),
    tabButton('Word edit diff', 'diff', false));
  function tabButton(title, name, selected) {
    return h('button', {
      type: 'button', role: 'tab', testid: `tab-${name}`, 'aria-selected': String(selected),
      onclick: () => {
        for (const btn of tabs.children) btn.setAttribute('aria-selected', String(btn.dataset.testid === `tab-${name}`));
        passages.hidden = name !== 'passages';
        diff.hidden = name !== 'diff';
        if (name === 'diff' && !diff.firstChild) fill(diff, wordDiff(textA, textB));
      },
    }, title);
  }
  out.append(scores(answer), tabs, passages, diff);
}

function label(input, letter) {
  return input.id ? `${letter}: ${input.id}` : `${letter}: pasted text`;
}

function scores(s) {
  const items = [
    ['jaccard', s.jaccard], ['estimate', s.estimate],
    ['intersection', s.intersection], ['union', s.union],
    ['A in B', s.containment_a_in_b], ['B in A', s.containment_b_in_a],
  ].filter(([, v]) => v !== undefined);
  return h('dl', { class: 'scores', testid: 'compare-scores' },
    items.map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', { dataset: { score: k } }, num(v)))));
}

/** A side's segments: matched passages as marks, unmatched text folded when long. */
function pane(name, segments) {
  const other = name === 'a' ? 'b' : 'a';
  const el = h('div', { class: 'pane', testid: `compare-${name}`, lang: '' });
  for (const seg of segments) {
    if (seg.match === null || seg.match === undefined) {
      el.append(folded(seg.text));
      continue;
    }
    el.append(h('mark', {
      testid: 'passage', tabindex: '0', class: `p${seg.match % COLOURS}`,
      dataset: { match: String(seg.match), side: name },
      title: `passage ${seg.match}: click to see it on the other side`,
      onclick: () => jump(other, seg.match),
      onkeydown: (ev) => { if (ev.key === 'Enter') jump(other, seg.match); },
    }, seg.text));
  }
  return el;
}

function jump(side, match) {
  const target = document.querySelector(`[data-testid="compare-${side}"] mark[data-match="${Number(match)}"]`);
  if (!target) return;
  target.scrollIntoView({ block: 'center', behavior: 'instant' });
  target.focus({ preventScroll: true });
  target.classList.remove('flash');
  void target.offsetWidth;
  target.classList.add('flash');
}

/** Unmatched text; a long stretch shows its ends and folds the middle. */
function folded(text) {
  const graphemes = splitGraphemes(text);
  if (graphemes.length <= FOLD_OVER) return document.createTextNode(text);
  const head = graphemes.slice(0, FOLD_KEEP).join('');
  const middle = graphemes.slice(FOLD_KEEP, graphemes.length - FOLD_KEEP).join('');
  const tail = graphemes.slice(graphemes.length - FOLD_KEEP).join('');
  const fold = h('button', {
    type: 'button', class: 'fold', testid: 'fold', title: 'show the folded text',
    onclick: () => fold.replaceWith(document.createTextNode(middle)),
  }, `… ${graphemes.length - 2 * FOLD_KEEP} characters without a shared passage …`);
  return h('span', {}, head, fold, tail);
}

/** Split at grapheme boundaries, so a fold never cuts a combining mark or an emoji. */
function splitGraphemes(text) {
  if (typeof Intl !== 'undefined' && Intl.Segmenter) {
    return Array.from(new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(text), (s) => s.segment);
  }
  return Array.from(text);
}

function wordDiff(a, b) {
  const runs = diffWords(a, b);
  if (!runs) return h('p', { class: 'muted' }, 'These texts differ in too many places for a word diff.');
  return h('div', { class: 'diff', testid: 'word-diff' }, runs.map((r) => {
    if (r.op === '=') return r.text.length > FOLD_OVER ? folded(r.text) : r.text;
    return h(r.op === '+' ? 'ins' : 'del', {}, r.text);
  }));
}
