// What the views share: the chosen collection and its description, the
// pending Compare input, and the page's readiness mark for tests
// (`body[data-ready]` names the view once it has loaded its data).

import { api, collectionBase } from './api.js';

export const ctx = {
  /** The chosen collection's name. */
  collection: 'default',
  /** GET /collections/{name}: settings, derived banding, stats. */
  info: null,
  /** What Compare shows next when its URL names no ids: {a, b} of {id}|{text}. */
  compare: null,
};

let generation = 0;

/** A new view (or a new action in it) starts: the page is not ready. */
export function begin() {
  generation += 1;
  delete document.body.dataset.ready;
  return generation;
}

/** The work started by `begin()` returning `gen` is done (if nothing newer began). */
export function ready(gen, name) {
  if (gen === generation) document.body.dataset.ready = name;
}

export function current(gen) {
  return gen === generation;
}

/** Run an action of the current view: not ready until it settles. */
export async function action(name, fn) {
  const gen = begin();
  try {
    return await fn();
  } finally {
    ready(gen, name);
  }
}

/** Load the chosen collection's description. */
export async function loadInfo() {
  ctx.info = await api(collectionBase(ctx.collection));
  return ctx.info;
}

/** The collection's query threshold and the lowest it accepts. */
export function thresholds() {
  const s = ctx.info && ctx.info.stats && ctx.info.stats.index;
  const d = ctx.info && ctx.info.derived;
  return {
    threshold: s ? s.threshold : ctx.info ? ctx.info.settings.index.threshold : 0.8,
    min: d ? d.min_query_threshold : 0,
    bands: d ? d.bands : null,
    rows: d ? d.rows : null,
  };
}

/** Recall of LSH banding (b, r) at Jaccard s: 1 - (1 - s^r)^b. */
export function recall(s, b, r) {
  return 1 - Math.pow(1 - Math.pow(s, r), b);
}

/** Go to a view: `#/name?k=v`. */
export function go(name, params = {}) {
  const q = new URLSearchParams(params).toString();
  const hash = `#/${name}${q ? `?${q}` : ''}`;
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}

export function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [name, query] = raw.split('?');
  return { name: name || 'search', params: new URLSearchParams(query || '') };
}
