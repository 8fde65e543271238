// A pair of texts side by side, as Compare and Review show it: the
// scores (raw and, where the collection counts boilerplate, content), the
// passages the two share (POST /explain) highlighted in matching colours,
// clicking a passage scrolls to its partner, long unmatched stretches fold,
// boilerplate greyed apart from the shared content passages, a note when
// one text is mostly inside the other, and a word edit diff in a second tab.
// Without /explain (texts not stored), two stored ids still get their
// scores from GET /compare.

import { api, collectionBase } from './api.js';
import { h, fill, num, errorBox } from './dom.js';
import { ctx } from './shell.js';
import { diffWords } from './worddiff.js';
import { A_IN_B_NOTE } from './measures.js';

/** Unmatched stretches longer than this (in characters) fold. */
const FOLD_OVER = 700;
/** What stays visible at each end of a folded stretch. */
const FOLD_KEEP = 240;
const COLOURS = 8;
/** One text is "inside" the other from this containment on ... */
const INSIDE_AT = 0.8;
/** ... when Jaccard is at most this share of it (else they are near-duplicates). */
const JACCARD_BELOW = 0.75;

/** Show the pair `input` ({a, b}, each {id} or {text}) in `out`: the
 * chosen collection's /explain answer, or /compare's scores without it.
 * The panes are `[data-testid="compare-a"]` and `compare-b`: one pair a page.
 * The /explain answer, or null when there is none. */
export async function showPair(out, input) {
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
        out.append(scores(c), h('p', { class: 'muted legend' }, A_IN_B_NOTE),
          h('p', { class: 'muted' }, 'Scores only: the passages need POST /explain and the texts.'));
      } catch (e2) {
        out.append(errorBox(e2));
      }
    }
    return null;
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
  const inside = excerpt(answer, textA, textB);
  const marked = [answer.a, answer.b].some((x) => x.segments.some((seg) => seg.boilerplate));
  out.append(scores(answer), ...legend(answer.content, marked).filter(Boolean), ...(inside ? [inside.note] : []), tabs, passages, diff);
  // The longer side's pane opens at the first shared passage.
  if (inside) {
    const longer = inside.longer === 'a' ? paneA : paneB;
    const first = longer.querySelector('mark');
    if (first) longer.scrollTop = Math.max(0, first.offsetTop - longer.offsetTop - 40);
  }
  return answer;
}

/** When one text is mostly inside the other: the sentence saying so, and
 * a button that shows where the shorter sits in the longer. */
function excerpt(s, textA, textB) {
  const aInB = s.containment_a_in_b;
  const bInA = s.containment_b_in_a;
  if (aInB === undefined || bInA === undefined) return null;
  const shorter = aInB >= bInA ? 'a' : 'b';
  const c = Math.max(aInB, bInA);
  if (!(c >= INSIDE_AT && s.jaccard <= JACCARD_BELOW * c)) return null;
  const longer = shorter === 'a' ? 'b' : 'a';
  const S = shorter.toUpperCase();
  const L = longer.toUpperCase();
  const lenS = Array.from(shorter === 'a' ? textA : textB).length;
  const lenL = Array.from(shorter === 'a' ? textB : textA).length;
  const ratio = lenS > 0 ? lenL / lenS : null;
  const what = c >= 0.999 ? 'an excerpt' : 'mostly an excerpt';
  const sentence = `${S} is ${what} of ${L}: ${Math.round(c * 100)}% of ${S} is in ${L}`
    + (ratio !== null && ratio >= 1.05 ? `; ${L} is ${ratio.toFixed(1)}× longer.` : '.');
  const button = h('button', {
    type: 'button', class: 'link', testid: 'show-excerpt',
    onclick: () => {
      const first = document.querySelector(`[data-testid="compare-${longer}"] mark`);
      if (first) jump(longer, first.dataset.match);
    },
  }, `show where ${S} sits in ${L}`);
  return {
    longer,
    note: h('p', { class: 'notice', testid: 'compare-excerpt', role: 'status' }, sentence, ' ', button),
  };
}

/** What "A in B" means, where it appears; with content scores or
 * boilerplate marks, what they are and how the panes show them. */
function legend(content, marked) {
  return [h('p', { class: 'muted legend' },
    h('strong', {}, 'A in B'), ' is the containment of A in B: the share of A’s shingles that are also in B (1 = all of A is inside B). ',
    h('strong', {}, 'B in A'), ' the other way round. ', h('strong', {}, 'jaccard'), ' compares the whole of both texts.',
    content ? [' The ', h('strong', {}, 'content'), ' scores leave boilerplate out (shingles common in the collection, and registered templates); ',
      h('strong', {}, 'weighted Jaccard'), ' weighs each shingle by its rarity in the collection.'] : null),
  content || marked ? h('p', { class: 'legend marks', testid: 'compare-legend' },
    h('mark', { class: 'p0 key' }, 'shared content'), ' a passage both texts hold (the same colour on both sides) · ',
    h('span', { class: 'bp key' }, 'boilerplate'), ' text common in the collection or a template: it does not count in the content scores · ',
    h('mark', { class: 'bp key' }, 'shared boilerplate'), ' both hold it, and it is boilerplate.') : null];
}

function label(input, letter) {
  return input.id ? `${letter}: ${input.id}` : `${letter}: pasted text`;
}

function scores(s) {
  const c = s.content;
  const items = [
    ['jaccard', s.jaccard], ['estimate', s.estimate],
    ['intersection', s.intersection], ['union', s.union],
    ['A in B', s.containment_a_in_b], ['B in A', s.containment_b_in_a],
  ].filter(([, v]) => v !== undefined);
  const contentItems = c ? [
    ['content jaccard', c.jaccard], ['weighted jaccard', c.weighted_jaccard],
    ['content A in B', c.query_in_stored], ['content B in A', c.stored_in_query],
    ['shared content', c.shared_content], ['shared boilerplate', c.shared_boilerplate],
  ].filter(([, v]) => v !== undefined) : [];
  const help = {
    'A in B': 'containment of A in B: the share of A’s shingles that are in B',
    'B in A': 'containment of B in A: the share of B’s shingles that are in A',
    jaccard: 'shared shingles over all shingles of both',
    estimate: 'the MinHash estimate of Jaccard',
    'content jaccard': 'Jaccard over the shingles that are not boilerplate',
    'weighted jaccard': 'Jaccard with each shingle weighted by its rarity in the collection (IDF); boilerplate weighs nothing',
    'content A in B': 'the share of A’s content shingles that are in B',
    'content B in A': 'the share of B’s content shingles that are in A',
    'shared content': 'shared shingles that are content',
    'shared boilerplate': 'shared shingles that are boilerplate (common in the collection, or a template’s)',
  };
  const item = ([k, v]) => h('div', { title: help[k], class: k.startsWith('content') || k.startsWith('weighted') || k.startsWith('shared') ? 'content' : null },
    h('dt', {}, k), h('dd', { dataset: { score: k } }, num(v)));
  return h('dl', { class: 'scores', testid: 'compare-scores' },
    h('div', { class: 'group' }, h('span', { class: 'muted small' }, 'raw (every shingle)'), h('div', { class: 'items' }, items.map(item))),
    contentItems.length ? h('div', { class: 'group', testid: 'content-scores' },
      h('span', { class: 'muted small' }, 'content (boilerplate left out)'), h('div', { class: 'items' }, contentItems.map(item))) : null);
}

/** A side's segments: matched passages as marks, unmatched text folded when long. */
function pane(name, segments) {
  const other = name === 'a' ? 'b' : 'a';
  const el = h('div', { class: 'pane', testid: `compare-${name}`, lang: '' });
  for (const seg of segments) {
    if (seg.match === null || seg.match === undefined) {
      el.append(seg.boilerplate
        ? h('span', { class: 'bp', testid: 'boilerplate', title: 'boilerplate: common in the collection, or a registered template' }, folded(seg.text))
        : folded(seg.text));
      continue;
    }
    el.append(h('mark', {
      testid: 'passage', tabindex: '0', class: seg.boilerplate ? `p${seg.match % COLOURS} bp` : `p${seg.match % COLOURS}`,
      dataset: seg.boilerplate ? { match: String(seg.match), side: name, boilerplate: 'true' } : { match: String(seg.match), side: name },
      title: seg.boilerplate
        ? `passage ${seg.match}, boilerplate (common in the collection, or a template): click to see it on the other side`
        : `passage ${seg.match}: click to see it on the other side`,
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
