// Groups: the pages of GET /duplicates, by Jaccard or by containment
// (either text inside the other), on raw or content scores (boilerplate
// left out), with sizes and members; a member opens Compare with its best
// match; each group's original (the earliest by the collection's time
// field or created_at) is marked. The verified pairs behind them (GET
// /duplicates/pairs) list on demand with their raw and content scores, and
// the drop list (GET /duplicates/drop-list) under a keep policy, to view
// or download as NDJSON.

import { api, collectionBase } from '../api.js';
import { h, fill, add, num, errorBox } from '../dom.js';
import { ctx, action, thresholds, go } from '../shell.js';
import {
  measureSelect, passageIndexOn, scoreSelect, floorFor, boilerplateOn, conflictBox, filterInputs, A_IN_B_NOTE,
} from '../measures.js';
import { loadSnippets, snippetNode } from '../snippets.js';

const GROUP_MEASURES = [
  { value: 'jaccard', label: 'Jaccard: about the same text' },
  { value: 'containment', label: 'Containment: one text inside the other' },
];

const PAGE = 25;
/** Drop entries listed at most (the download has every one). */
const DROPS_SHOWN = 200;
/** Pairs listed at most (the highest scores of the whole answer). */
const PAIRS_SHOWN = 200;

export default async function groups(root) {
  const t = thresholds();
  const shown = h('output', {}, num(t.threshold, 2));
  const slider = h('input', {
    type: 'range', testid: 'threshold-input', min: String(floorFor('jaccard', 'raw', t.min)), max: '1', step: '0.01', value: String(t.threshold),
    'aria-label': 'threshold',
    oninput: () => { shown.textContent = num(Number(slider.value), 2); },
  });
  const indexNote = h('span', { class: 'muted' });
  const measure = measureSelect('groups-measure', 'jaccard', GROUP_MEASURES, () => limits());
  const score = scoreSelect('groups-score', 'raw', () => limits());
  /** The slider's lower end for the measure and score chosen, and what they need. */
  function limits() {
    const floor = floorFor(measure.value, score.value, t.min);
    slider.min = String(floor);
    if (Number(slider.value) < floor) slider.value = String(floor);
    shown.textContent = num(Number(slider.value), 2);
    const needs = [];
    if ((measure.value !== 'jaccard' || score.value === 'content') && !passageIndexOn()) needs.push('keeps no passage index');
    if (score.value === 'content' && !boilerplateOn()) needs.push('counts no document frequency');
    indexNote.textContent = needs.length
      ? `This collection ${needs.join(' and ')}: a ${score.value === 'content' ? 'content-score' : 'containment'} scan needs ${needs.length > 1 ? 'both' : 'it'}.` : '';
  }
  const pairsOut = h('div', { testid: 'pairs-out' });
  const dropOut = h('div', { testid: 'drop-list-out' });
  const keep = h('select', { testid: 'keep-policy', 'aria-label': 'keep policy' },
    h('option', { value: 'oldest' }, 'oldest (the original)'),
    h('option', { value: 'newest' }, 'newest'),
    h('option', { value: 'longest' }, 'longest (most shingles)'),
    h('option', { value: 'max' }, 'highest metadata number…'));
  const keepField = h('input', { type: 'text', class: 'narrow', placeholder: 'field', 'aria-label': 'metadata field', testid: 'keep-field' });
  const minSize = h('input', { type: 'number', min: '2', value: '2', class: 'narrow' });
  const list = h('div', {});
  const pager = h('div', { class: 'row' });
  const cursors = [null];
  const meta = filterInputs('groups');
  /** The filter and exclusions on `q`; false (and a note) for a bad filter. */
  function narrow(q) {
    const narrowed = meta.read();
    if (!narrowed) return false;
    if (narrowed.filter) q.set('filter', JSON.stringify(narrowed.filter));
    if (narrowed.exclude_same.length) q.set('exclude_same', narrowed.exclude_same.join(','));
    return true;
  }

  async function load(page) {
    fill(list);
    fill(pager);
    fill(pairsOut);
    fill(dropOut);
    const q = new URLSearchParams({ threshold: slider.value, measure: measure.value, score: score.value, min_size: minSize.value || '2', limit: String(PAGE) });
    if (cursors[page]) q.set('cursor', cursors[page]);
    if (!narrow(q)) return;
    let answer;
    try {
      answer = await fetchPage(`${collectionBase(ctx.collection)}/duplicates?${q}`);
    } catch (e) {
      list.append(conflictBox(e, () => load(0)) || errorBox(e));
      return;
    }
    cursors[page + 1] = answer.next_cursor;
    const byContainment = answer.measure === 'containment';
    const onContent = answer.score === 'content';
    list.append(h('p', { class: 'muted', testid: 'groups-total', dataset: { score: answer.score || 'raw' } },
      `${answer.total_groups} group${answer.total_groups === 1 ? '' : 's'}, ${answer.total_members} documents in them, at `
      + (onContent ? 'content ' : '')
      + (byContainment ? `containment ≥ ${num(answer.threshold, 2)} (one text inside the other: the share of the shorter’s shingles in the longer)`
        : `Jaccard ≥ ${num(answer.threshold, 2)}`)
      + (onContent ? ': the threshold applied to the content score, boilerplate left out; each member shows its content and raw scores with its best match.' : '.')));
    if (answer.groups.length) {
      // What each member is: one POST /snippets for the page's members.
      const snippets = await loadSnippets(ctx.collection, answer.groups.flatMap((g) => g.members.map((m) => m.id)));
      list.append(h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'size'), h('th', {}, 'members (each opens Compare with its best match)'))),
        h('tbody', {}, answer.groups.map((g) => row(g, byContainment, onContent, snippets))))));
    }
    pager.append(
      h('label', { title: 'which member of each group the drop list keeps; every other is to delete' }, 'keep ', keep, ' ', keepField),
      h('button', { type: 'button', testid: 'drop-list-submit', title: 'the ids to delete so that one document per group is left', onclick: () => action('groups', () => loadDrops()) }, 'Drop list'),
      h('button', { type: 'button', testid: 'pairs-submit', title: 'every verified pair at this threshold, with raw and content scores', onclick: () => action('groups', () => loadPairs()) }, 'List the pairs'),
      h('button', { type: 'button', disabled: page === 0, onclick: () => action('groups', () => load(page - 1)) }, '← previous'),
      h('span', { class: 'muted' }, `page ${page + 1}`),
      h('button', { type: 'button', testid: 'groups-next', disabled: !answer.next_cursor, onclick: () => action('groups', () => load(page + 1)) }, 'next →'));
  }

  function row(g, byContainment, onContent, snippets) {
    return h('tr', { testid: 'groups-row', dataset: { size: String(g.size) } },
      h('td', { class: 'n' }, String(g.size)),
      h('td', {}, h('ul', { class: 'members' }, g.members.map((m) => h('li', {},
        h('button', {
          type: 'button', class: 'link', testid: 'group-member', dataset: { id: m.id },
          title: `compare with its best match ${m.best_match}`,
          onclick: () => {
            ctx.compare = null;
            go('compare', { a: m.id, b: m.best_match });
          },
        }, m.id),
        h('span', { class: 'muted', dataset: { containment: String(m.containment) } }, memberScores(m, byContainment, onContent)),
        m.id === g.original ? h('strong', { testid: 'group-original', title: 'the earliest member: by the collection’s originals.time_field in its metadata, else by when it was stored' }, ' original') : null,
        snippetNode(m.id, snippets.get(m.id)))))));
  }

  /** A member's scores with its best match: the content ones first when the group was formed on them. */
  function memberScores(m, byContainment, onContent) {
    const raw = byContainment
      ? `${onContent ? 'raw ' : ''}containment ${num(m.containment)}, Jaccard ${num(m.jaccard)}`
      : `${onContent ? 'raw Jaccard ' : ''}${num(m.jaccard)}`;
    if (!onContent || !m.content) return ` ↔ ${m.best_match} (${raw})`;
    const content = byContainment
      ? `content containment ${num(m.content.containment)}, content Jaccard ${num(m.content.jaccard)}`
      : `content Jaccard ${num(m.content.jaccard)}`;
    return ` ↔ ${m.best_match} (${content}; ${raw})`;
  }

  /** The drop list under the keep policy chosen (GET /duplicates/drop-list,
   * its JSON pages of query.default_limit groups walked to the end):
   * listed, and offered as NDJSON. */
  async function loadDrops() {
    fill(dropOut);
    const policy = keep.value === 'max' ? `max:${keepField.value.trim()}` : keep.value;
    const drops = [];
    let cursor = null;
    let answer;
    try {
      do {
        const q = new URLSearchParams({ threshold: slider.value, measure: measure.value, score: score.value, min_size: minSize.value || '2', keep: policy });
        if (cursor) q.set('cursor', cursor);
        if (!narrow(q)) return;
        answer = await fetchPage(`${collectionBase(ctx.collection)}/duplicates/drop-list?${q}`);
        drops.push(...answer.drops);
        cursor = answer.next_cursor;
      } while (cursor);
    } catch (e) {
      dropOut.append(conflictBox(e, () => loadDrops()) || errorBox(e));
      return;
    }
    const ndjson = drops.map((d) => `${JSON.stringify(d)}\n`).join('');
    add(dropOut,
      h('h2', {}, 'Drop list'),
      h('p', { class: 'muted', testid: 'drop-list-total' },
        `${num(answer.total_drops)} document${answer.total_drops === 1 ? '' : 's'} to delete from ${num(answer.total_groups)} group${answer.total_groups === 1 ? '' : 's'}, keeping ${answer.keep}`
        + (drops.length > DROPS_SHOWN ? `; the first ${DROPS_SHOWN} shown, the download has every one.` : '.')),
      drops.length ? h('a', { testid: 'drop-list-download', download: 'drop-list.ndjson', href: `data:application/x-ndjson;charset=utf-8,${encodeURIComponent(ndjson)}` }, 'Download as NDJSON') : null,
      drops.length ? h('div', { class: 'table-wrap' }, h('table', { testid: 'drop-list', class: 'stack' },
        h('thead', {}, h('tr', {}, h('th', {}, 'delete'), h('th', {}, 'kept'), h('th', {}, 'group'))),
        h('tbody', {}, drops.slice(0, DROPS_SHOWN).map((d) => h('tr', { testid: 'drop-row', dataset: { id: d.id, kept: d.kept } },
          h('td', { class: 'id', 'data-label': 'delete' }, d.id),
          h('td', { class: 'id', 'data-label': 'kept' }, d.kept),
          h('td', { class: 'n', 'data-label': 'group' }, String(d.group))))))) : null);
  }

  /** The verified pairs (GET /duplicates/pairs, one JSON answer), the
   * highest scores first, at most PAIRS_SHOWN of them. */
  async function loadPairs() {
    fill(pairsOut);
    const q = new URLSearchParams({ threshold: slider.value, measure: measure.value, score: score.value });
    if (!narrow(q)) return;
    let answer;
    try {
      answer = await api(`${collectionBase(ctx.collection)}/duplicates/pairs?${q}`);
    } catch (e) {
      pairsOut.append(conflictBox(e, () => loadPairs()) || errorBox(e));
      return;
    }
    const onContent = answer.score === 'content';
    const byContainment = answer.measure === 'containment';
    const key = (p) => {
      const s = onContent && p.content ? p.content : p;
      return byContainment ? Math.max(s.a_in_b, s.b_in_a) : s.jaccard;
    };
    const pairs = [...answer.pairs].sort((x, y) => key(y) - key(x) || (x.a < y.a ? -1 : 1));
    const withContent = pairs.some((p) => p.content);
    const snippets = await loadSnippets(ctx.collection, pairs.slice(0, PAIRS_SHOWN).flatMap((p) => [p.a, p.b]));
    add(pairsOut,
      h('h2', {}, 'Pairs'),
      h('p', { class: 'muted', testid: 'pairs-total' },
        `${num(pairs.length)} pair${pairs.length === 1 ? '' : 's'} at ${onContent ? 'content ' : ''}${byContainment ? 'containment' : 'Jaccard'} ≥ ${num(answer.threshold, 2)}`
        + ` (${num(answer.documents)} documents, ${num(answer.candidates)} candidate${answer.candidates === 1 ? '' : 's'})`
        + (pairs.length > PAIRS_SHOWN ? `; the ${PAIRS_SHOWN} highest shown.` : '.')),
      h('p', { class: 'muted legend', testid: 'a-in-b-note' }, A_IN_B_NOTE),
      pairs.length ? h('div', { class: 'table-wrap' }, h('table', { testid: 'pairs', class: 'stack' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'a'), h('th', {}, 'b'),
          h('th', { class: onContent ? null : 'primary' }, 'Jaccard'), h('th', {}, 'a in b'), h('th', {}, 'b in a'),
          withContent ? [h('th', { class: onContent ? 'primary' : 'content' }, 'content Jaccard'), h('th', { class: 'content' }, 'content a in b'),
            h('th', { class: 'content' }, 'content b in a'), h('th', { class: 'content' }, 'weighted Jaccard'),
            h('th', { class: 'content', title: 'shared shingles that are content + those that are boilerplate' }, 'shared')] : null)),
        h('tbody', {}, pairs.slice(0, PAIRS_SHOWN).map((p) => h('tr', {
          testid: 'pair-row', class: 'clickable', tabindex: '0', title: 'compare side by side', dataset: { a: p.a, b: p.b },
          onclick: () => { ctx.compare = null; go('compare', { a: p.a, b: p.b }); },
          onkeydown: (ev) => { if (ev.key === 'Enter') { ctx.compare = null; go('compare', { a: p.a, b: p.b }); } },
        },
        h('td', { class: 'id', 'data-label': 'a' }, h('span', { class: 'doc-id' }, p.a), snippetNode(p.a, snippets.get(p.a))),
        h('td', { class: 'id', 'data-label': 'b' }, h('span', { class: 'doc-id' }, p.b), snippetNode(p.b, snippets.get(p.b))),
        h('td', { class: 'n', 'data-label': 'Jaccard', dataset: { score: 'jaccard' } }, num(p.jaccard)),
        h('td', { class: 'n', 'data-label': 'a in b' }, num(p.a_in_b)),
        h('td', { class: 'n', 'data-label': 'b in a' }, num(p.b_in_a)),
        withContent ? [
          h('td', { class: 'n', 'data-label': 'content Jaccard', dataset: { score: 'content_jaccard' } }, p.content ? num(p.content.jaccard) : '–'),
          h('td', { class: 'n', 'data-label': 'content a in b' }, p.content ? num(p.content.a_in_b) : '–'),
          h('td', { class: 'n', 'data-label': 'content b in a' }, p.content ? num(p.content.b_in_a) : '–'),
          h('td', { class: 'n', 'data-label': 'weighted Jaccard', dataset: { score: 'weighted_jaccard' } }, p.content ? num(p.content.weighted_jaccard) : '–'),
          h('td', { class: 'n', 'data-label': 'shared' }, p.content ? `${num(p.content.shared_content)} + ${num(p.content.shared_boilerplate)} boilerplate` : '–'),
        ] : null))))) : null);
  }

  fill(root,
    h('h1', {}, 'Groups'),
    h('form', { class: 'row', onsubmit: (ev) => { ev.preventDefault(); cursors.length = 1; action('groups', () => load(0)); } },
      h('label', {}, 'measure ', measure),
      h('label', { title: 'raw: every shingle counts; content: boilerplate (text common in the collection, templates) left out' }, 'score ', score),
      h('label', {}, 'threshold ', slider, ' ', shown),
      h('label', {}, 'smallest group ', minSize),
      indexNote,
      h('button', { type: 'submit', testid: 'groups-submit' }, 'List groups')),
    h('div', { class: 'row' },
      h('label', { title: 'both documents of a pair must have these metadata values: a JSON object of field → value or [values]' }, 'metadata filter ', meta.filter),
      h('label', { title: 'two documents with the same value of one of these fields are not a pair' }, 'exclude same ', meta.exclude),
      meta.note),
    list, pager, dropOut, pairsOut);
  await load(0);
}

/** A page; while the scan behind it runs (503 scan-in-progress) wait and retry. */
async function fetchPage(url) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await api(url);
    } catch (e) {
      if (e.type !== 'scan-in-progress' || attempt >= 20) throw e;
      await new Promise((r) => setTimeout(r, 1000 * (e.retryAfter || 1)));
    }
  }
}
