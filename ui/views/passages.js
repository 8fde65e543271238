// Passages: where else does this passage appear? A pasted paragraph or
// quote (POST /passages), optionally the shortest run of consecutive
// shingles that counts; the stored documents holding it, with their
// longest shared run, how many of its shingles they hold, and (when the
// collection stores texts) where it sits, highlighted in a snippet of the
// stored text. A row opens Compare (the passage against the document) or
// shows the whole document with the passage marked.

import { api, collectionBase } from '../api.js';
import { h, fill, num, errorBox } from '../dom.js';
import { ctx, action, go } from '../shell.js';
import { passageIndexOn, commonNote, isPassageIndexOff, passageIndexOffBox } from '../measures.js';

/** Characters (code points) of stored text shown around a span. */
const CONTEXT = 80;

/** The last lookup, kept while the page lives so Back shows it again. */
let last = { text: '', minRun: '', answer: null, docs: null, collection: null };

export default async function passages(root) {
  if (last.collection !== ctx.collection) last = { text: '', minRun: '', answer: null, docs: null, collection: ctx.collection };
  const text = h('textarea', {
    testid: 'passages-text', rows: 5, value: last.text, 'aria-label': 'passage',
    placeholder: 'Paste a passage (a paragraph, a quote) to find the stored documents that hold it',
  });
  const minRun = h('input', {
    type: 'number', min: '1', step: '1', class: 'narrow', testid: 'passages-min-run', value: last.minRun,
    placeholder: 'default', 'aria-label': 'shortest run in shingles',
  });
  const limit = h('input', { type: 'number', min: '1', max: '1000', value: '20', class: 'narrow', 'aria-label': 'limit' });
  const status = h('p', { class: 'muted', testid: 'passages-status', role: 'status' });
  const results = h('div', { class: 'results' });

  async function run(ev) {
    if (ev) ev.preventDefault();
    last.text = text.value;
    last.minRun = minRun.value.trim();
    await action('passages', async () => {
      fill(status);
      fill(results);
      if (!last.text.trim()) {
        status.textContent = 'Paste a passage first.';
        return;
      }
      const body = { text: last.text, limit: Number(limit.value) || 20 };
      if (last.minRun) body.min_run = Number(last.minRun);
      try {
        const base = collectionBase(ctx.collection);
        const answer = await api(`${base}/passages`, { method: 'POST', body });
        // Where the passage sits: the stored texts around its spans.
        const docs = await Promise.all(answer.results.map((r) => (r.spans && r.spans.length
          ? api(`${base}/documents/${encodeURIComponent(r.id)}?include=text`).catch(() => null)
          : null)));
        last.answer = answer;
        last.docs = docs;
        show(answer, docs);
      } catch (e) {
        last.answer = null;
        results.append(isPassageIndexOff(e) ? passageIndexOffBox(() => run()) : errorBox(e));
      }
    });
  }

  function show(answer, docs) {
    const n = answer.results.length;
    minRun.placeholder = String(answer.guaranteed_run);
    status.textContent = `${n} document${n === 1 ? '' : 's'} hold${n === 1 ? 's' : ''} a run of at least ${num(answer.min_run)} consecutive shingles of this passage `
      + `(${num(answer.passage_shingles)} shingles, ${num(answer.passage_distinct)} distinct; runs of ${num(answer.guaranteed_run)} or more are always found). `
      + `${num(answer.candidates)} candidate${answer.candidates === 1 ? '' : 's'} checked${answer.truncated ? ' (truncated)' : ''}.`;
    const note = commonNote(answer.passages);
    if (note) results.append(note);
    if (!n) return;
    const rows = [];
    answer.results.forEach((r, i) => {
      const detail = h('tr', { class: 'detail', hidden: true }, h('td', { colspan: '5' }));
      const open = h('button', {
        type: 'button', class: 'link', testid: 'passage-open', 'aria-expanded': 'false',
        title: 'show the whole document with the passage marked',
        onclick: () => toggleDocument(r, detail, open),
      }, 'document');
      rows.push(h('tr', { testid: 'passage-row', dataset: { id: r.id } },
        h('td', { class: 'id' }, r.id, h('div', { class: 'muted small' }, r.created_at)),
        h('td', { class: 'n', 'data-label': 'longest run', dataset: { score: 'longest_run' } }, num(r.longest_run)),
        h('td', { class: 'n', 'data-label': 'shared shingles', dataset: { score: 'shared' } }, `${num(r.shared)} / ${num(answer.passage_distinct)}`,
          h('span', { class: 'muted small' }, ` (${Math.round(r.share * 100)}%)`)),
        h('td', { class: 'where' }, where(r, docs[i])),
        h('td', { class: 'actions' },
          h('button', {
            type: 'button', class: 'link', testid: 'passage-compare', title: 'compare the passage with this document',
            onclick: () => {
              ctx.compare = { a: { text: last.text }, b: { id: r.id } };
              go('compare', { b: r.id });
            },
          }, 'compare'),
          ' · ', open)),
        detail);
    });
    results.append(
      h('div', { class: 'table-wrap' }, h('table', { testid: 'passages-results', class: 'stack' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'document'),
          h('th', { title: 'the longest run of the passage’s consecutive shingles all in this document' }, 'longest run'),
          h('th', { title: 'distinct shingles of the passage this document holds, of all of them' }, 'shared shingles'),
          h('th', {}, 'where it sits'),
          h('th', {}, ''))),
        h('tbody', {}, rows))),
      h('p', { class: 'muted legend' },
        'A shingle is a run of k words (the collection’s recipe); ', h('strong', {}, 'longest run'),
        ' counts consecutive shingles of the passage found in order in the document, ', h('strong', {}, 'shared shingles'),
        ' counts them in any order.'));
  }

  async function toggleDocument(r, detail, button) {
    if (!detail.hidden) {
      detail.hidden = true;
      button.setAttribute('aria-expanded', 'false');
      return;
    }
    await action('passages', async () => {
      const cell = detail.firstChild;
      fill(cell);
      try {
        const doc = await api(`${collectionBase(ctx.collection)}/documents/${encodeURIComponent(r.id)}?include=text`);
        fill(cell,
          doc.metadata != null ? h('p', { class: 'meta' }, JSON.stringify(doc.metadata)) : null,
          typeof doc.text === 'string'
            ? h('div', { class: 'pane doc', testid: 'passage-document' }, marked(doc.text, r.spans || []))
            : h('p', { class: 'muted' }, 'This collection does not store texts: Compare the passage with a pasted copy to see where it sits.'));
      } catch (e) {
        cell.append(errorBox(e));
      }
      detail.hidden = false;
      button.setAttribute('aria-expanded', 'true');
      const first = cell.querySelector('mark');
      if (first) first.scrollIntoView({ block: 'nearest', behavior: 'instant' });
    });
  }

  fill(root,
    h('h1', {}, 'Passages'),
    h('p', { class: 'muted' }, 'Where else does this passage appear? The stored documents that hold a run of consecutive shingles of it, however long they are.'),
    passageIndexOn() ? null : h('p', { class: 'muted', testid: 'passage-index-note' },
      'This collection keeps no passage index: lookups need it.'),
    h('form', { class: 'search', onsubmit: run },
      text,
      h('div', { class: 'row' },
        h('label', { title: 'the shortest run of consecutive shingles that counts; empty: the run the index always finds' }, 'shortest run (shingles) ', minRun),
        h('label', {}, 'limit ', limit),
        h('button', { type: 'submit', testid: 'passages-submit' }, 'Find'))),
    status,
    results);
  if (last.answer) show(last.answer, last.docs || []);
}

/** Where a result's passage sits: each span in a snippet of the stored
 * text (or the span's own text when the stored text is not at hand). */
function where(r, doc) {
  if (!r.spans) return h('span', { class: 'muted' }, 'texts not stored: compare to see it');
  if (!r.spans.length) return h('span', { class: 'muted' }, 'no single span (shared shingles apart)');
  const chars = doc && typeof doc.text === 'string' ? Array.from(doc.text) : null;
  return r.spans.slice(0, 3).map((span) => h('div', { class: 'snippet', testid: 'passage-span', dataset: { start: String(span.start), end: String(span.end) } },
    chars
      ? [span.start > CONTEXT ? '…' : '', chars.slice(Math.max(0, span.start - CONTEXT), span.start).join(''),
        h('mark', {}, chars.slice(span.start, span.end).join('')),
        chars.slice(span.end, span.end + CONTEXT).join(''), span.end + CONTEXT < chars.length ? '…' : '']
      : h('mark', {}, span.text)))
    .concat(r.spans.length > 3 ? [h('div', { class: 'muted small' }, `and ${r.spans.length - 3} more`)] : []);
}

/** A whole stored text with its spans (code-point offsets) marked. */
function marked(text, spans) {
  const chars = Array.from(text);
  const out = [];
  let at = 0;
  for (const s of [...spans].sort((x, y) => x.start - y.start)) {
    if (s.start < at) continue;
    out.push(chars.slice(at, s.start).join(''), h('mark', { class: 'p0' }, chars.slice(s.start, s.end).join('')));
    at = s.end;
  }
  out.push(chars.slice(at).join(''));
  return out;
}
