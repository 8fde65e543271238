// Overview: every collection this key may see, with its documents, memory
// per document, banding (b, r), recall at its threshold, retention,
// whether it keeps the passage index, and whether it counts boilerplate
// (document frequency, for content scores) and how many template shingles
// it has.

import { api, collectionBase } from '../api.js';
import { h, fill, num, bytes, duration } from '../dom.js';
import { ctx } from '../shell.js';
import { boilerplateSettings } from '../measures.js';

export default async function overview(root) {
  const { collections } = await api('/collections');
  // The list has no memory figures: each collection's description has its stats.
  const described = await Promise.all(collections.map((c) => api(collectionBase(c.name)).catch(() => c)));
  const select = document.getElementById('collection');
  const use = (name) => {
    select.value = name;
    select.dispatchEvent(new Event('change'));
  };
  fill(root,
    h('h1', {}, 'Overview'),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'overview' },
      h('thead', {}, h('tr', {}, ['collection', 'status', 'documents', 'memory per document', 'memory', 'threshold', '(b, r)', 'recall at threshold', 'recipe', 'retention', 'passage index', 'boilerplate'].map((c) => h('th', {}, c)))),
      h('tbody', {}, described.map((c) => {
        const s = c.stats;
        const idx = c.settings.index || {};
        const sh = c.settings.shingle || {};
        const norm = c.settings.normalize || {};
        return h('tr', {
          testid: 'overview-row', class: c.name === ctx.collection ? 'current clickable' : 'clickable', dataset: { name: c.name },
          title: 'use this collection', tabindex: '0',
          onclick: () => use(c.name),
          onkeydown: (ev) => { if (ev.key === 'Enter') use(c.name); },
        },
        h('td', { class: 'id' }, c.name),
        h('td', {}, c.status),
        h('td', { class: 'n' }, num(c.documents)),
        h('td', { class: 'n' }, s ? bytes(s.memory.bytes_per_document) : '–'),
        h('td', { class: 'n' }, s ? bytes(s.memory.total_bytes) : '–'),
        h('td', { class: 'n' }, num(s ? s.index.threshold : idx.threshold, 2)),
        h('td', { class: 'n' }, `(${c.derived.bands}, ${c.derived.rows})`),
        h('td', { class: 'n' }, num(c.derived.recall_at_threshold, 4)),
        h('td', { title: 'text recipe version 1: lowercase, words split at whitespace only (data written before versions); 2: full case folding, every character of Chinese, Japanese, Thai… a word' },
          `${sh.kind || 'word'} ${sh.k ?? ''}-shingles, ${idx.num_perm ?? '?'} hashes, text v${norm.version ?? 1}`
          + (norm.fold_accents ? ' + accents folded' : '') + (norm.confusables ? ' + confusables' : '')),
        h('td', {}, duration(c.settings.retention ? c.settings.retention.ttl_secs : null)),
        h('td', {
          testid: 'overview-passage-index',
          title: 'the index containment searches, containment groups and passage lookups need'
            + (c.name === 'default' ? ' (config index.passage_index)' : ' (PATCH /collections/{name} {"passage_index": true|false})'),
        }, idx.passage_index ? 'on' : 'off'),
        boilerplateCell(c));
      })))));
}

/** Whether a collection counts boilerplate, and from when. */
function boilerplateCell(c) {
  const b = boilerplateSettings(c);
  const templates = c.stats && c.stats.index && c.stats.index.boilerplate ? c.stats.index.boilerplate.template_shingles : null;
  const how = c.name === 'default' ? ' (config index.boilerplate)' : ' (PATCH /collections/{name} {"boilerplate": {...}}, or the Boilerplate view)';
  return h('td', {
    testid: 'overview-boilerplate', dataset: { enabled: String(Boolean(b.enabled)) },
    title: `whether document frequency is counted, which content scores and the common passages need${how}`,
  }, b.enabled ? `counted: ≥ ${num(b.share * 100, 1)}% and ≥ ${num(b.min_docs)} documents, from ${num(b.min_collection_docs)}` : 'off',
  templates ? h('div', { class: 'muted small' }, `${num(templates)} template shingles`) : null);
}
