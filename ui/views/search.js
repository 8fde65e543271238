// Search: a pasted text (POST /similar) or a stored id (GET /similar),
// with a threshold starting at the collection's and bounded by its tuned
// minimum; a result row opens Compare. The one write control stores the
// pasted text (disabled with a read-only key, which may search: the
// server counts POST /similar as a read).

import { api, canWrite, collectionBase } from '../api.js';
import { h, fill, num, errorBox } from '../dom.js';
import { ctx, action, thresholds, go } from '../shell.js';

/** The last search, kept while the page lives so Back shows it again. */
let last = { text: '', id: '', threshold: null, answer: null, collection: null };

export default async function search(root, params) {
  const t = thresholds();
  if (last.collection !== ctx.collection) last = { text: '', id: '', threshold: null, answer: null, collection: ctx.collection };
  if (params.get('id')) last.id = params.get('id');
  const threshold = last.threshold ?? t.threshold;
  const writable = canWrite();

  const text = h('textarea', { testid: 'search-text', rows: 6, placeholder: 'Paste a text to find its near-duplicates', value: last.text });
  const id = h('input', { testid: 'search-id', placeholder: 'or a stored document id', value: last.id, spellcheck: 'false' });
  const shown = h('output', { testid: 'threshold-value' }, num(threshold, 2));
  const slider = h('input', {
    type: 'range', testid: 'threshold-input', min: String(floor2(t.min)), max: '1', step: '0.01', value: String(threshold),
    oninput: () => { shown.textContent = num(Number(slider.value), 2); },
  });
  const limit = h('input', { type: 'number', min: '1', max: '1000', value: '20', class: 'narrow' });
  const results = h('div', { class: 'results' });
  const status = h('p', { class: 'muted' });
  const storeId = h('input', { placeholder: 'id (optional)', spellcheck: 'false', disabled: !writable });
  const store = h('button', { type: 'button', testid: 'store-submit', disabled: !writable, onclick: () => storeText() }, 'Store this text');

  async function run(ev) {
    if (ev) ev.preventDefault();
    last.text = text.value;
    last.id = id.value.trim();
    last.threshold = Number(slider.value);
    await action('search', async () => {
      fill(status);
      fill(results);
      try {
        const base = collectionBase(ctx.collection);
        const common = { threshold: last.threshold, limit: Number(limit.value) || 20 };
        let answer;
        if (last.id) {
          const q = new URLSearchParams({ id: last.id, threshold: common.threshold, limit: common.limit });
          answer = await api(`${base}/similar?${q}`);
        } else if (last.text.trim()) {
          answer = await api(`${base}/similar`, { method: 'POST', body: { text: last.text, ...common } });
        } else {
          status.textContent = 'Paste a text or give an id.';
          return;
        }
        last.answer = answer;
        await show(answer);
      } catch (e) {
        results.append(errorBox(e));
      }
    });
  }

  async function show(answer) {
    const rows = answer.results;
    status.textContent = `${rows.length} result${rows.length === 1 ? '' : 's'} at Jaccard ≥ ${num(answer.threshold, 2)}; ${answer.candidates} candidate${answer.candidates === 1 ? '' : 's'} verified${answer.truncated ? ' (candidates truncated)' : ''}.`;
    if (!rows.length) return;
    // Metadata is not in the answer: read each document (in parallel).
    const base = collectionBase(ctx.collection);
    const docs = await Promise.all(rows.map((r) => api(`${base}/documents/${encodeURIComponent(r.id)}`).catch(() => null)));
    const body = rows.map((r, i) => h('tr', {
      testid: 'result-row', tabindex: '0', class: 'clickable', title: 'Compare side by side',
      dataset: { id: r.id },
      onclick: () => openCompare(r.id),
      onkeydown: (ev) => { if (ev.key === 'Enter') openCompare(r.id); },
    },
    h('td', { class: 'id' }, r.id),
    h('td', { class: 'n' }, num(r.jaccard)),
    h('td', { class: 'n' }, num(r.estimate)),
    h('td', {}, r.created_at),
    h('td', { class: 'meta' }, docs[i] && docs[i].metadata != null ? JSON.stringify(docs[i].metadata) : '')));
    results.append(h('table', {},
      h('thead', {}, h('tr', {}, ['id', 'jaccard', 'estimate', 'created_at', 'metadata'].map((c) => h('th', {}, c)))),
      h('tbody', {}, body)));
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
        h('label', {}, 'threshold ', slider, ' ', shown),
        h('span', { class: 'muted' }, `(from ${num(floor2(t.min), 2)}, the lowest this index is tuned for)`),
        h('label', {}, 'limit ', limit),
        h('button', { type: 'submit', testid: 'search-submit' }, 'Search')),
      h('div', { class: 'row write' }, storeId, store,
        writable ? null : h('span', { class: 'muted', testid: 'read-only-note' }, 'This key is read-only: storing is disabled.'))),
    status,
    results);
  if (last.answer && !params.get('id')) await show(last.answer);
  else if (params.get('id')) await run();
}

/** The slider's lower end: the minimum rounded up to the step, so every
 * position is a threshold the server accepts. */
function floor2(x) {
  return Math.ceil(x * 100) / 100;
}
