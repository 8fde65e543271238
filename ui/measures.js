// The scores a search or a scan can ask by, in words, and what the
// console says when a collection keeps no passage index (the index the
// containment measures and passage lookups need).

import { api, canWrite, collectionBase } from './api.js';
import { h, num, errorText } from './dom.js';
import { ctx, loadInfo } from './shell.js';

/** The measures of GET/POST /similar, as the API spells them. */
export const MEASURES = [
  { value: 'jaccard', label: 'Jaccard: about the same text' },
  { value: 'query_in_stored', label: 'Query inside a stored document (an excerpt or quote of it)' },
  { value: 'stored_in_query', label: 'Stored document inside the query (the query embeds it)' },
  { value: 'containment', label: 'Either inside the other' },
];

/** What "A in B" means, in one line, wherever the console shows it. */
export const A_IN_B_NOTE = 'A in B: containment, the share of A’s shingles that are also in B (1 = all of A is inside B); B in A the other way round.';

export function isContainment(measure) {
  return measure && measure !== 'jaccard';
}

/** Whether the chosen collection keeps the passage index. */
export function passageIndexOn(info = ctx.info) {
  return Boolean(info && info.settings && info.settings.index && info.settings.index.passage_index);
}

/** The lowest threshold a measure accepts: the tuned minimum for Jaccard,
 * anything above 0 for a containment. */
export function thresholdFloor(measure, tunedMin) {
  return isContainment(measure) ? 0.01 : Math.ceil(tunedMin * 100) / 100;
}

/** A measure's select; `onchange(value)` when it changes. */
export function measureSelect(testid, value, options, onchange) {
  const select = h('select', { testid, class: 'measure', 'aria-label': 'measure', onchange: () => onchange(select.value) },
    options.map((m) => h('option', { value: m.value }, m.label)));
  select.value = value;
  return select;
}

/** "N common passages skipped (held by up to M documents)", or null. */
export function commonNote(passages) {
  if (!passages || !passages.common) return null;
  const most = passages.common_documents && passages.common_documents.length
    ? Math.max(...passages.common_documents) : null;
  return h('p', {
    class: 'muted', testid: 'common-passages',
    title: 'Passages held by very many stored documents (a footer, a licence sentence) are not looked up; they still count as shared in the scores.',
  }, `${num(passages.common)} common passage${passages.common === 1 ? '' : 's'} skipped`
    + (most !== null ? ` (held by up to ${num(most)} documents)` : '')
    + ': boilerplate, still counted as shared.');
}

/** Whether an error is the server saying the collection has no passage index. */
export function isPassageIndexOff(e) {
  return e && e.type === 'passage-index-off';
}

/** What to show for a 409 passage-index-off: what is off, and how to turn
 * it on (a button for a named collection when the key may write). */
export function passageIndexOffBox(onEnabled) {
  const name = ctx.collection;
  const how = name === 'default'
    ? h('p', {}, 'The default collection takes it from the server configuration: set ',
      h('code', {}, 'index.passage_index = true'), ' (or the environment variable ',
      h('code', {}, 'NEARDUP_INDEX__PASSAGE_INDEX=true'), ') and restart the server.')
    : h('p', {}, 'Turn it on with ', h('code', {}, `PATCH /collections/${name} {"passage_index": true}`),
      ' (it is built from the stored fingerprints and costs a few hundred bytes per document).');
  const status = h('p', { class: 'muted', role: 'status' });
  const button = name !== 'default' && canWrite() ? h('button', {
    type: 'button', testid: 'enable-passage-index',
    onclick: async () => {
      button.disabled = true;
      status.textContent = 'Turning the passage index on…';
      try {
        await api(collectionBase(name), { method: 'PATCH', body: { passage_index: true } });
        await loadInfo();
        status.textContent = 'The passage index is on.';
        if (onEnabled) await onEnabled();
      } catch (e) {
        status.textContent = `It could not be turned on: ${errorText(e)}`;
        button.disabled = false;
      }
    },
  }, 'Turn the passage index on') : null;
  return h('div', { class: 'notice', role: 'alert', testid: 'passage-index-off' },
    h('p', {}, h('strong', {}, `The collection “${name}” keeps no passage index`),
      ', so it cannot search by containment (a text inside another) or on content scores, nor look up passages. Raw Jaccard searches still work.'),
    how, button, status);
}

/** The scores of score=raw|content: over all shingles, or over the shingles
 * that are not boilerplate in the collection. */
export const SCORES = [
  { value: 'raw', label: 'raw: every shingle counts' },
  { value: 'content', label: 'content: boilerplate left out' },
];

/** A score's select (`onchange(value)`). */
export function scoreSelect(testid, value, onchange) {
  const select = h('select', { testid, class: 'score', 'aria-label': 'score', onchange: () => onchange(select.value) },
    SCORES.map((s) => h('option', { value: s.value }, s.label)));
  select.value = value;
  return select;
}

/** The collection's boilerplate settings (`index.boilerplate`), or defaults
 * with `enabled: false` when it names none. */
export function boilerplateSettings(info = ctx.info) {
  const fromStats = info && info.stats && info.stats.index && info.stats.index.boilerplate;
  const fromSettings = info && info.settings && info.settings.index && info.settings.index.boilerplate;
  return { enabled: false, share: 0.05, min_docs: 10, min_collection_docs: 50, ...(fromSettings || {}), ...(fromStats || {}) };
}

/** Whether the collection counts document frequency (content scores). */
export function boilerplateOn(info = ctx.info) {
  return Boolean(boilerplateSettings(info).enabled);
}

/** The lowest threshold a measure accepts on a score: content scores take
 * anything above 0, like containments. */
export function floorFor(measure, score, tunedMin) {
  return score === 'content' ? 0.01 : thresholdFloor(measure, tunedMin);
}

/** Whether an error is the server saying the collection counts no document frequency. */
export function isBoilerplateOff(e) {
  return e && e.type === 'boilerplate-off';
}

/** What to show for a 409 boilerplate-off: content scores need the
 * collection to count document frequency; how to turn it on. */
export function boilerplateOffBox(onEnabled) {
  const name = ctx.collection;
  const how = name === 'default'
    ? h('p', {}, 'The default collection takes it from the server configuration: set ',
      h('code', {}, 'index.boilerplate.enabled = true'), ' (or ',
      h('code', {}, 'NEARDUP_INDEX__BOILERPLATE__ENABLED=true'), ') and restart the server.')
    : h('p', {}, 'Turn it on in the Boilerplate view, or with ',
      h('code', {}, `PATCH /collections/${name} {"boilerplate": {"enabled": true}}`),
      ' (the counts are built from every stored document).');
  const status = h('p', { class: 'muted', role: 'status' });
  const button = name !== 'default' && canWrite() ? h('button', {
    type: 'button', testid: 'enable-boilerplate',
    onclick: async () => {
      button.disabled = true;
      status.textContent = 'Turning document frequency counting on…';
      try {
        await api(collectionBase(name), { method: 'PATCH', body: { boilerplate: { enabled: true } } });
        await loadInfo();
        status.textContent = 'Document frequency is counted.';
        if (onEnabled) await onEnabled();
      } catch (e) {
        status.textContent = `It could not be turned on: ${errorText(e)}`;
        button.disabled = false;
      }
    },
  }, 'Count document frequency') : null;
  return h('div', { class: 'notice', role: 'alert', testid: 'boilerplate-off' },
    h('p', {}, h('strong', {}, `The collection “${name}” counts no document frequency`),
      ', so it cannot tell boilerplate from content: content scores and the common passages need it. Raw scores still work.'),
    how, button, status);
}

/** The box for a 409 that a content or containment query can meet. */
export function conflictBox(e, retry) {
  if (isPassageIndexOff(e)) return passageIndexOffBox(retry);
  if (isBoilerplateOff(e)) return boilerplateOffBox(retry);
  return null;
}

/** Check the text of a metadata filter box: empty (no filter), or a JSON
 * object whose values are strings, numbers or booleans or non-empty
 * arrays of them (the rules of the API's `filter`). Returns the object or
 * null; throws an Error with a readable message otherwise. */
export function parseFilter(text) {
  const trimmed = text.trim();
  if (!trimmed) return null;
  let value;
  try {
    value = JSON.parse(trimmed);
  } catch (e) {
    throw new Error(`The filter is not valid JSON (${e.message}). Write an object, e.g. {"site": "example.org"}.`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error('The filter must be a JSON object of field → value, e.g. {"site": "example.org", "views": [1, 2]}.');
  }
  const scalar = (v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
  for (const [field, v] of Object.entries(value)) {
    if (Array.isArray(v) ? v.length === 0 || !v.every(scalar) : !scalar(v)) {
      throw new Error(`filter.${field}: a value must be a string, a number or a boolean, or a non-empty list of them.`);
    }
  }
  return Object.keys(value).length ? value : null;
}

/** The field names of an "exclude same" box: comma-separated, blanks dropped. */
export function parseExcludeSame(text) {
  return text.split(',').map((f) => f.trim()).filter((f) => f);
}

/** The metadata filter inputs of a view: a JSON object box and an
 * "exclude same" box, with a note for a filter the browser refuses. */
export function filterInputs(testid) {
  const filter = h('input', {
    type: 'text', testid: `${testid}-filter`, class: 'wide', spellcheck: 'false',
    placeholder: '{"site": "example.org"}', 'aria-label': 'metadata filter (a JSON object)',
  });
  const exclude = h('input', {
    type: 'text', testid: `${testid}-exclude-same`, spellcheck: 'false',
    placeholder: 'site, author', 'aria-label': 'exclude documents with the same value of these fields',
  });
  const note = h('span', { class: 'muted', role: 'alert', testid: `${testid}-filter-note` });
  return {
    filter, exclude, note,
    /** {filter, exclude_same} to send, or null (the note then says why). */
    read() {
      note.textContent = '';
      try {
        return { filter: parseFilter(filter.value), exclude_same: parseExcludeSame(exclude.value) };
      } catch (e) {
        note.textContent = e.message;
        return null;
      }
    },
  };
}
