// Search: a pasted text (POST /similar) or a stored id (GET /similar),
// by a measure (Jaccard, or containment in either direction) on a score
// (raw: every shingle; content: boilerplate left out), with a threshold
// starting at the collection's and bounded by its tuned minimum (raw
// Jaccard) or anything above 0 (containment, content scores); results
// show raw and content scores side by side when the collection counts
// document frequency; a result row opens
// Compare. The one write control stores the pasted text (disabled with a
// read-only key, which may search: the server counts POST /similar as a
// read).

import { api, canWrite, collectionBase } from '../api.js';
import { h, fill, num, errorBox } from '../dom.js';
import { ctx, action, thresholds, go } from '../shell.js';
import { loadSnippets, snippetNode } from '../snippets.js';
import {
  MEASURES, isContainment, passageIndexOn, measureSelect, commonNote,
  SCORES, scoreSelect, floorFor, boilerplateOn, conflictBox,
  filterInputs,
} from '../measures.js';

/** The last search, kept while the page lives so Back shows it again. */
let last = { text: '', id: '', threshold: null, measure: 'jaccard', score: 'raw', answer: null, collection: null };

export default async function search(root, params) {
  const t = thresholds();
  if (last.collection !== ctx.collection) last = { text: '', id: '', threshold: null, measure: 'jaccard', score: 'raw', answer: null, collection: ctx.collection };
  if (params.get('id')) last.id = params.get('id');
  if (MEASURES.some((m) => m.value === params.get('measure'))) last.measure = params.get('measure');
  if (SCORES.some((m) => m.value === params.get('score'))) last.score = params.get('score');
  const threshold = last.threshold ?? t.threshold;
  const writable = canWrite();
  const floorNote = h('span', { class: 'muted', testid: 'threshold-floor' });
  const indexNote = h('span', { class: 'muted', testid: 'passage-index-note' });
  const measure = measureSelect('search-measure', last.measure, MEASURES, (value) => setMeasure(value));
  const scoreNote = h('span', { class: 'muted', testid: 'score-note' });
  const score = scoreSelect('search-score', last.score, (value) => { last.score = value; setMeasure(measure.value); });

  const text = h('textarea', { testid: 'search-text', rows: 6, placeholder: 'Paste a text to find its near-duplicates', value: last.text });
  const id = h('input', { testid: 'search-id', placeholder: 'or a stored document id', value: last.id, spellcheck: 'false' });
  const shown = h('output', { testid: 'threshold-value' }, num(threshold, 2));
  const slider = h('input', {
    type: 'range', testid: 'threshold-input', min: String(floorFor(last.measure, last.score, t.min)), max: '1', step: '0.01', value: String(threshold),
    'aria-label': 'threshold',
    oninput: () => { shown.textContent = num(Number(slider.value), 2); },
  });
  const limit = h('input', { type: 'number', min: '1', max: '1000', value: '20', class: 'narrow' });
  const results = h('div', { class: 'results' });
  const status = h('p', { class: 'muted' });
  const storeId = h('input', { placeholder: 'id (optional)', spellcheck: 'false', disabled: !writable });
  const store = h('button', { type: 'button', testid: 'store-submit', disabled: !writable, onclick: () => storeText() }, 'Store this text');

  /** A measure's threshold range: the slider's lower end, and what it means. */
  function setMeasure(value) {
    last.measure = value;
    const floor = floorFor(value, last.score, t.min);
    slider.min = String(floor);
    if (Number(slider.value) < floor) slider.value = String(floor);
    shown.textContent = num(Number(slider.value), 2);
    floorNote.textContent = last.score === 'content'
      ? '(a content score may be anything above 0)'
      : isContainment(value)
        ? '(a containment may be anything above 0)'
        : `(from ${num(floor, 2)}, the lowest this index is tuned for)`;
    indexNote.textContent = (isContainment(value) || last.score === 'content') && !passageIndexOn()
      ? `This collection keeps no passage index: ${isContainment(value) ? 'containment searches' : 'content-score searches'} need it.` : '';
    scoreNote.textContent = last.score === 'content' && !boilerplateOn()
      ? 'This collection counts no document frequency: content scores need it (see Boilerplate).' : '';
  }

  const meta = filterInputs('search');

  async function run(ev) {
    if (ev) ev.preventDefault();
    const narrowed = meta.read();
    if (!narrowed) return;
    last.text = text.value;
    last.id = id.value.trim();
    last.threshold = Number(slider.value);
    last.measure = measure.value;
    last.score = score.value;
    await action('search', async () => {
      fill(status);
      fill(results);
      try {
        const base = collectionBase(ctx.collection);
        const common = { threshold: last.threshold, limit: Number(limit.value) || 20, measure: last.measure, score: last.score };
        let answer;
        if (last.id) {
          const q = new URLSearchParams({ id: last.id, threshold: common.threshold, limit: common.limit, measure: common.measure, score: common.score });
          if (narrowed.filter) q.set('filter', JSON.stringify(narrowed.filter));
          if (narrowed.exclude_same.length) q.set('exclude_same', narrowed.exclude_same.join(','));
          answer = await api(`${base}/similar?${q}`);
        } else if (last.text.trim()) {
          const body = { text: last.text, ...common };
          if (narrowed.filter) body.filter = narrowed.filter;
          answer = await api(`${base}/similar`, { method: 'POST', body });
        } else {
          status.textContent = 'Paste a text or give an id.';
          return;
        }
        last.answer = answer;
        await show(answer);
      } catch (e) {
        results.append(conflictBox(e, () => run()) || errorBox(e));
      }
    });
  }

  async function show(answer) {
    const rows = answer.results;
    const asked = answer.measure || 'jaccard';
    const by = answer.score || 'raw';
    const withContent = by === 'content' || rows.some((r) => r.content);
    const cols = columns(asked, answer.id ? 'this document' : 'this text', by, withContent);
    status.textContent = `${rows.length} result${rows.length === 1 ? '' : 's'} at ${cols[0].phrase} ≥ ${num(answer.threshold, 2)}`
      + (by === 'content' ? ' (the threshold applied to the content score: boilerplate left out)' : withContent ? ' (the threshold applied to the raw score: every shingle)' : '')
      + `; ${answer.candidates} candidate${answer.candidates === 1 ? '' : 's'} verified${answer.truncated ? ' (candidates truncated)' : ''}.`;
    status.dataset.score = by;
    const note = commonNote(answer.passages);
    if (note) results.append(note);
    if (!rows.length) return;
    // Metadata is not in the answer: read each document (in parallel).
    const base = collectionBase(ctx.collection);
    // And what each one is: its snippet (one POST /snippets for the page).
    const [docs, snippets] = await Promise.all([
      Promise.all(rows.map((r) => api(`${base}/documents/${encodeURIComponent(r.id)}`).catch(() => null))),
      loadSnippets(ctx.collection, rows.map((r) => r.id)),
    ]);
    const body = rows.map((r, i) => h('tr', {
      testid: 'result-row', tabindex: '0', class: 'clickable', title: 'Compare side by side',
      dataset: { id: r.id },
      onclick: () => openCompare(r.id),
      onkeydown: (ev) => { if (ev.key === 'Enter') openCompare(r.id); },
    },
    h('td', { class: 'id' }, h('span', { class: 'doc-id' }, r.id), snippetNode(r.id, snippets.get(r.id))),
    cols.map((c, j) => h('td', { class: j === 0 ? 'n primary' : 'n', 'data-label': c.name, dataset: { score: c.key } }, num(c.value(r)))),
    withContent ? h('td', { class: 'n', 'data-label': 'shared', dataset: { score: 'shared' } }, shared(r)) : null,
    h('td', { class: 'n', 'data-label': 'estimate', dataset: { score: 'estimate' } }, num(r.estimate)),
    h('td', { 'data-label': 'created_at' }, r.created_at),
    h('td', { class: 'meta' }, docs[i] && docs[i].metadata != null ? JSON.stringify(docs[i].metadata) : '')));
    results.append(
      h('div', { class: 'table-wrap' }, h('table', { testid: 'search-results', class: 'stack', dataset: { measure: asked } },
        h('thead', {}, h('tr', {},
          h('th', {}, 'id'),
          cols.map((c, j) => h('th', { title: c.help, class: j === 0 ? 'primary' : c.content ? 'content' : null }, c.name)),
          withContent ? h('th', { title: 'shared shingles that are content, and those that are boilerplate' }, 'shared') : null,
          h('th', { title: 'the MinHash estimate of Jaccard' }, 'estimate'),
          h('th', {}, 'created_at'),
          h('th', {}, 'metadata'))),
        h('tbody', {}, body))),
      h('p', { class: 'muted legend', testid: 'score-legend' },
        cols.map((c) => h('span', {}, h('strong', {}, c.name), `: ${c.help}. `)),
        withContent ? h('span', {}, h('strong', {}, 'shared'), ': shared shingles that are content + those that are boilerplate (common in the collection, or a registered template). ') : null));
  }

  function openCompare(other) {
    ctx.compare = last.id ? { a: { id: last.id }, b: { id: other } } : { a: { text: last.text }, b: { id: other } };
    if (last.id) go('compare', { a: last.id, b: other });
    else go('compare', { b: other });
  }

  async function storeText() {
    await action('search', async () => {
      fill(status);
      try {
        const body = { text: text.value };
        const wanted = storeId.value.trim();
        const base = collectionBase(ctx.collection);
        const out = wanted
          ? await api(`${base}/documents/${encodeURIComponent(wanted)}`, { method: 'PUT', body })
          : await api(`${base}/documents`, { method: 'POST', body });
        status.textContent = `Stored as ${out.id} (${out.shingles} shingles).`;
      } catch (e) {
        status.append(errorBox(e));
      }
    });
  }

  fill(root,
    h('h1', {}, 'Search'),
    h('form', { class: 'search', onsubmit: run },
      text,
      h('div', { class: 'row' },
        id,
        h('label', {}, 'measure ', measure),
        h('label', { title: 'raw: every shingle counts; content: shingles common in the collection (boilerplate) and registered templates are left out' }, 'score ', score),
        indexNote, scoreNote),
      h('div', { class: 'row' },
        h('label', {}, 'threshold ', slider, ' ', shown),
        floorNote,
        h('label', {}, 'limit ', limit),
        h('button', { type: 'submit', testid: 'search-submit' }, 'Search')),
      h('div', { class: 'row' },
        h('label', { title: 'only stored documents whose metadata has these values: a JSON object of field → value or [values]' }, 'metadata filter ', meta.filter),
        h('label', { title: 'searches by id: leave out documents with the same value of these fields as that document' }, 'exclude same ', meta.exclude),
        meta.note),
      h('div', { class: 'row write' }, storeId, store,
        writable ? null : h('span', { class: 'muted', testid: 'read-only-note' }, 'This key is read-only: storing is disabled.'))),
    status,
    results);
  setMeasure(last.measure);
  if (last.answer && !params.get('id')) await show(last.answer);
  else if (params.get('id')) await run();
}

/** A match's shared shingles: content + boilerplate. */
function shared(r) {
  if (!r.content) return '–';
  return `${num(r.content.shared_content)} + ${num(r.content.shared_boilerplate)} boilerplate`;
}

/** The score columns of a result: the measure asked on the score asked
 * first, then the others of that score, then the other score's (raw and
 * content; content columns only when the answer has them). `query` names
 * the query: this text, or this document for a search by id. */
function columns(measure, query, score, withContent) {
  const c = (r) => r.content || {};
  const raw = {
    jaccard: {
      key: 'jaccard', name: 'Jaccard', phrase: 'Jaccard', value: (r) => r.jaccard,
      help: 'shared shingles over all shingles of both texts (1 = the same text)',
    },
    query_in_stored: {
      key: 'query_in_stored', name: `${query} in it`, phrase: `containment of ${query} in the document`, value: (r) => r.query_in_stored,
      help: `containment of ${query} in the stored document: the share of ${query}'s shingles that it holds (1 = ${query} is an excerpt or quote of it)`,
    },
    stored_in_query: {
      key: 'stored_in_query', name: `it in ${query}`, phrase: `containment of the document in ${query}`, value: (r) => r.stored_in_query,
      help: `containment of the stored document in ${query}: the share of its shingles that ${query} holds (1 = ${query} embeds all of it)`,
    },
    containment: {
      key: 'containment', name: 'either inside the other', phrase: 'containment either way', value: (r) => Math.max(r.query_in_stored, r.stored_in_query),
      help: 'the larger of the two containments',
    },
  };
  const content = {
    jaccard: {
      key: 'content_jaccard', content: true, name: 'content Jaccard', phrase: 'content Jaccard', value: (r) => c(r).jaccard,
      help: 'Jaccard over the shingles that are not boilerplate (a shared footer or template does not count)',
    },
    query_in_stored: {
      key: 'content_query_in_stored', content: true, name: `content: ${query} in it`, phrase: `content containment of ${query} in the document`, value: (r) => c(r).query_in_stored,
      help: `the containment of ${query} in the stored document over content shingles (boilerplate left out)`,
    },
    stored_in_query: {
      key: 'content_stored_in_query', content: true, name: `content: it in ${query}`, phrase: `content containment of the document in ${query}`, value: (r) => c(r).stored_in_query,
      help: `the containment of the stored document in ${query} over content shingles (boilerplate left out)`,
    },
    containment: {
      key: 'content_containment', content: true, name: 'content: either inside the other', phrase: 'content containment either way',
      value: (r) => (r.content ? Math.max(r.content.query_in_stored, r.content.stored_in_query) : undefined),
      help: 'the larger of the two content containments',
    },
    weighted: {
      key: 'weighted_jaccard', content: true, name: 'weighted Jaccard', phrase: 'weighted Jaccard', value: (r) => c(r).weighted_jaccard,
      help: 'Jaccard with each shingle weighted by its rarity in the collection (IDF); boilerplate weighs nothing',
    },
  };
  const rest = ['jaccard', 'query_in_stored', 'stored_in_query'];
  const first = measure === 'containment' || raw[measure] ? measure : 'jaccard';
  const others = rest.filter((k) => k !== first);
  const rawCols = [raw[first], ...others.map((k) => raw[k])];
  if (!withContent) return rawCols;
  const contentCols = [content[first], ...others.map((k) => content[k]), content.weighted];
  return score === 'content' ? [...contentCols, ...rawCols] : [...rawCols, ...contentCols];
}
