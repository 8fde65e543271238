// The console's shell: the key prompt, the collection picker, the views.

import { api, discover, useKey, needsKey, whenUnauthorized } from './api.js';
import { h, fill, errorBox, errorText } from './dom.js';
import { ctx, begin, ready, current, loadInfo, parseHash } from './shell.js';
import search from './views/search.js';
import passages from './views/passages.js';
import compare from './views/compare.js';
import groups from './views/groups.js';
import tune from './views/tune.js';
import overview from './views/overview.js';
import boilerplate from './views/boilerplate.js';
import webhooks from './views/webhooks.js';
import review from './views/review.js';

const views = { search, passages, compare, groups, review, boilerplate, webhooks, tune, overview };
const $ = (id) => document.getElementById(id);

async function render() {
  const gen = begin();
  const { name, params } = parseHash();
  const view = views[name] ? name : 'search';
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.view === view);
  }
  const root = fill($('view'));
  if (needsKey()) {
    showKeyPrompt();
    root.append(h('p', { class: 'muted' }, 'Enter an API key to continue.'));
    ready(gen, 'key');
    return;
  }
  try {
    if (!ctx.info || ctx.info.name !== ctx.collection) await loadInfo();
    await views[view](root, params, () => current(gen));
  } catch (e) {
    if (current(gen)) root.append(errorBox(e));
  }
  ready(gen, view);
}

function showKeyPrompt(message) {
  $('keyprompt').hidden = false;
  $('keyerror').textContent = message || '';
  $('keyinput').focus();
}

async function loadCollections() {
  const { collections } = await api('/collections');
  const select = $('collection');
  const names = collections.map((c) => c.name);
  if (!names.includes(ctx.collection)) ctx.collection = names.includes('default') ? 'default' : names[0];
  fill(select, names.map((n) => h('option', { value: n }, n)));
  select.value = ctx.collection;
}

function showKeyState(readOnly) {
  $('keystate').textContent = readOnly ? 'read-only key: writes disabled' : 'key set';
  document.body.classList.toggle('read-only', readOnly);
}

async function submitKey(ev) {
  ev.preventDefault();
  const key = $('keyinput').value.trim();
  if (!key) {
    $('keyerror').textContent = 'Type a key first.';
    return;
  }
  const gen = begin();
  try {
    const { readOnly } = await useKey(key, ctx.collection);
    $('keyinput').value = '';
    $('keyprompt').hidden = true;
    $('keyerror').textContent = '';
    showKeyState(readOnly);
    await loadCollections();
    await render();
  } catch (e) {
    $('keyerror').textContent = e.status === 401
      ? 'The server refused this key.'
      : `The key could not be checked: ${errorText(e)}`;
    ready(gen, 'key');
  }
}

async function start() {
  $('keyform').addEventListener('submit', submitKey);
  $('collection').addEventListener('change', async (ev) => {
    ctx.collection = ev.target.value;
    ctx.info = null;
    await render();
  });
  whenUnauthorized(() => showKeyPrompt('The server asked for a key again.'));
  window.addEventListener('hashchange', render);
  try {
    await discover();
    if (!needsKey()) await loadCollections();
  } catch (e) {
    fill($('view'), errorBox(e));
    document.body.dataset.ready = 'error';
    return;
  }
  if (!needsKey()) $('keystate').textContent = 'no key needed';
  await render();
}

start();
