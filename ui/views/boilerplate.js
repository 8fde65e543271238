// Boilerplate: what text repeats across the collection's documents
// (GET /boilerplate: the most common passages with the documents holding
// them and a sample text), the registered templates (texts whose shingles
// are always boilerplate: list, add, view, delete), and whether and from
// when the collection counts document frequency (PATCH /collections/{name}
// {"boilerplate": {...}}; the default collection's come from the server
// configuration). Passage and template texts are shown as text only.

import { api, canWrite, collectionBase } from '../api.js';
import { h, fill, add, num, errorBox, confirmButton } from '../dom.js';
import { ctx, action, loadInfo, go } from '../shell.js';
import { boilerplateSettings, boilerplateOffBox } from '../measures.js';

const VIEW = 'boilerplate';

export default async function boilerplate(root) {
  const base = collectionBase(ctx.collection);
  const writable = canWrite();
  const settingsBox = h('section', { testid: 'bp-settings' });
  const commonBox = h('section', { testid: 'bp-common' });
  const templatesBox = h('section', { testid: 'bp-templates' });

  // The add form outlives reloads of the list (a passage can prefill it).
  const newId = h('input', { testid: 'template-id', placeholder: 'template id (e.g. site-footer)', spellcheck: 'false', disabled: !writable, 'aria-label': 'template id' });
  const newText = h('textarea', { testid: 'template-text', rows: 4, disabled: !writable, 'aria-label': 'template text', placeholder: 'The template’s text: a footer, a disclaimer, a signature block. Every shingle of it is boilerplate in this collection.' });
  const addStatus = h('p', { class: 'muted', role: 'status', testid: 'template-status' });

  async function loadSettings() {
    const s = boilerplateSettings();
    const isDefault = ctx.collection === 'default';
    const editable = writable && !isDefault;
    const enabled = h('input', { type: 'checkbox', testid: 'bp-enabled', checked: Boolean(s.enabled), disabled: !editable });
    const share = h('input', { type: 'number', testid: 'bp-share', min: '0.001', max: '1', step: 'any', value: String(s.share), disabled: !editable, 'aria-label': 'share' });
    const minDocs = h('input', { type: 'number', testid: 'bp-min-docs', min: '2', step: '1', value: String(s.min_docs), disabled: !editable, 'aria-label': 'min_docs' });
    const minColl = h('input', { type: 'number', testid: 'bp-min-collection-docs', min: '0', step: '1', value: String(s.min_collection_docs), disabled: !editable, 'aria-label': 'min_collection_docs' });
    const status = h('p', { class: 'muted', role: 'status', testid: 'bp-settings-status' });
    async function save(ev) {
      ev.preventDefault();
      const body = {
        enabled: enabled.checked,
        share: Number(share.value),
        min_docs: Number(minDocs.value),
        min_collection_docs: Number(minColl.value),
      };
      await action(VIEW, async () => {
        status.textContent = 'Saving…';
        try {
          await api(base, { method: 'PATCH', body: { boilerplate: body } });
          await loadInfo();
          await Promise.all([loadSettings(), loadCommon()]);
          settingsBox.querySelector('[data-testid="bp-settings-status"]').textContent = body.enabled
            ? 'Saved: document frequency is counted.' : 'Saved: document frequency is not counted.';
        } catch (e) {
          status.textContent = '';
          status.append(errorBox(e));
          if (e.status === 409) status.append(h('p', { class: 'muted' }, defaultHow()));
        }
      });
    }
    fill(settingsBox,
      h('h2', {}, 'Counting'),
      h('p', { class: 'muted' },
        'A shingle held by at least ', h('strong', {}, 'share'), ' of the documents, and by at least ', h('strong', {}, 'min_docs'),
        ' of them, is boilerplate; counts make boilerplate only once the collection holds ', h('strong', {}, 'min_collection_docs'),
        ' documents (templates apply from the first). Content scores leave boilerplate out.'),
      h('form', { class: 'settings', onsubmit: save },
        h('label', {}, enabled, ' count document frequency'),
        h('label', {}, 'share ', share),
        h('label', {}, 'min_docs ', minDocs),
        h('label', {}, 'min_collection_docs ', minColl),
        editable ? h('button', { type: 'submit', testid: 'bp-save' }, 'Save') : null),
      isDefault ? h('p', { class: 'notice', testid: 'bp-default-note' }, defaultHow()) : null,
      !isDefault && !writable ? h('p', { class: 'muted', testid: 'read-only-note' }, 'This key is read-only: the settings cannot be changed.') : null,
      status);
  }

  /** The common passages asked for last: kept when a template change reloads them. */
  const asked = { limit: 20, sample: 200 };

  async function loadCommon(limit = asked.limit, sample = asked.sample) {
    Object.assign(asked, { limit, sample });
    fill(commonBox, h('h2', {}, 'Common passages'));
    if (!boilerplateSettings().enabled) {
      commonBox.append(boilerplateOffBox(async () => {
        await Promise.all([loadSettings(), loadCommon()]);
      }));
      return;
    }
    const limitIn = h('input', { type: 'number', min: '1', max: '200', value: String(limit), class: 'narrow', 'aria-label': 'passages' });
    const sampleIn = h('input', { type: 'number', min: '0', max: '2000', value: String(sample), class: 'narrow', 'aria-label': 'sample' });
    commonBox.append(h('form', {
      class: 'row',
      onsubmit: (ev) => {
        ev.preventDefault();
        action(VIEW, () => loadCommon(Number(limitIn.value) || 20, Number(sampleIn.value) || 0));
      },
    },
    h('label', { title: 'passages listed, most common first' }, 'passages ', limitIn),
    h('label', { title: 'stored texts read to find them' }, 'texts sampled ', sampleIn),
    h('button', { type: 'submit', testid: 'bp-refresh' }, 'Find common passages')));
    let c;
    try {
      c = await api(`${base}/boilerplate?${new URLSearchParams({ limit: String(limit), sample: String(sample) })}`);
    } catch (e) {
      commonBox.append(errorBox(e));
      return;
    }
    add(commonBox,
      h('dl', { class: 'cards', testid: 'bp-summary' },
        card('documents counted', num(c.documents)),
        card('counts apply', c.applies ? 'yes' : `no: from ${num(c.min_collection_docs)} documents`, 'applies'),
        card('boilerplate from', c.threshold_docs == null ? '–' : `${num(c.threshold_docs)} documents`, 'threshold_docs'),
        card('distinct shingles', num(c.distinct_shingles)),
        card('boilerplate shingles', num(c.boilerplate_shingles), 'boilerplate_shingles'),
        card('templates', num(c.templates)),
        card('texts sampled', num(c.sampled))),
      c.applies ? null : h('p', { class: 'muted', testid: 'bp-not-yet' },
        `This collection holds ${num(c.documents)} document${c.documents === 1 ? '' : 's'}: no shingle is boilerplate by its count until it holds ${num(c.min_collection_docs)}. Templates apply already.`));
    if (!c.passages.length) {
      commonBox.append(h('p', { class: 'muted', testid: 'bp-none' }, c.sampled === 0
        ? 'No passage to show: the collection stores no texts (or none was sampled), so the common shingles cannot be traced back to text.'
        : `No common passage in the ${num(c.sampled)} texts sampled.`));
      return;
    }
    add(commonBox, h('div', { class: 'table-wrap' }, h('table', { testid: 'bp-passages', class: 'stack' },
      h('thead', {}, h('tr', {},
        h('th', { title: 'the fewest documents any of its shingles is in: at most this many hold it whole' }, 'documents'),
        h('th', { title: 'its distinct shingles' }, 'shingles'),
        h('th', { title: 'sampled texts it was found in' }, 'in sample'),
        h('th', {}, 'text (from one document)'),
        h('th', {}, ''))),
      h('tbody', {}, c.passages.map((p) => h('tr', { testid: 'bp-passage', dataset: { documents: String(p.documents) } },
        h('td', { class: 'n', 'data-label': 'documents', dataset: { score: 'documents' } }, `≤ ${num(p.documents)}`,
          c.documents ? h('div', { class: 'muted small' }, `${Math.round((100 * p.documents) / c.documents)}%`) : null),
        h('td', { class: 'n', 'data-label': 'shingles' }, num(p.shingles)),
        h('td', { class: 'n', 'data-label': 'in sample' }, num(p.sampled_in)),
        h('td', {},
          h('div', { class: 'bp-text', testid: 'bp-passage-text' }, p.text),
          h('div', { class: 'muted small' }, p.template ? 'a registered template’s · ' : '', 'in ',
            h('button', { type: 'button', class: 'link', testid: 'bp-passage-doc', title: 'search with this document', onclick: () => go('search', { id: p.id }) }, p.id))),
        h('td', { class: 'actions' }, writable && !p.template ? h('button', {
          type: 'button', class: 'link', testid: 'bp-use-as-template',
          title: 'fill the template form with this text (the first 400 characters)',
          onclick: () => {
            newText.value = p.text;
            newId.focus();
          },
        }, 'use as template') : null)))))),
    h('p', { class: 'muted legend' }, h('strong', {}, 'documents'),
      ': the fewest documents any of the passage’s shingles is in, so at most this many hold it whole. The text is where it was found in one sampled document (at most 400 characters).'));
  }

  async function loadTemplates() {
    fill(templatesBox, h('h2', {}, 'Templates'),
      h('p', { class: 'muted' }, 'Texts whose every shingle is boilerplate in this collection, whatever their count: a footer, a disclaimer, a signature block.'));
    let list;
    try {
      list = await api(`${base}/templates`);
    } catch (e) {
      templatesBox.append(errorBox(e));
      return;
    }
    const rows = [];
    for (const t of list.templates) {
      const detail = h('tr', { class: 'detail', hidden: true, testid: 'template-detail' }, h('td', { colspan: '5' }));
      const viewBtn = h('button', {
        type: 'button', class: 'link', testid: 'template-view', 'aria-expanded': 'false',
        onclick: () => action(VIEW, () => toggle(t, detail, viewBtn)),
      }, 'view');
      const del = confirmButton({ class: 'link', testid: 'template-delete', disabled: !writable }, 'delete', () =>
        action(VIEW, async () => {
          try {
            await api(`${base}/templates/${encodeURIComponent(t.id)}`, { method: 'DELETE' });
            await Promise.all([loadTemplates(), loadCommon()]);
            setStatus(`Deleted the template ${t.id}.`);
          } catch (e) {
            fill(addStatus, errorBox(e));
          }
        }));
      rows.push(h('tr', { testid: 'template-row', dataset: { id: t.id } },
        h('td', { class: 'id' }, t.id),
        h('td', { class: 'n', 'data-label': 'shingles' }, num(t.shingles)),
        h('td', { class: 'n', 'data-label': 'bytes' }, num(t.bytes)),
        h('td', { 'data-label': 'created_at' }, t.created_at),
        h('td', { class: 'actions' }, viewBtn, ' · ', del)), detail);
    }
    add(templatesBox,
      list.templates.length
        ? h('div', { class: 'table-wrap' }, h('table', { testid: 'templates', class: 'stack' },
          h('thead', {}, h('tr', {}, h('th', {}, 'id'), h('th', {}, 'shingles'), h('th', {}, 'bytes'), h('th', {}, 'created_at'), h('th', {}, ''))),
          h('tbody', {}, rows)))
        : h('p', { class: 'muted', testid: 'templates-none' }, 'No template registered.'),
      h('p', { class: 'muted small' }, `${num(list.templates.length)} of at most ${num(list.max_templates)}.`),
      h('form', { class: 'search write', onsubmit: addTemplate },
        h('h3', {}, 'Add a template'),
        h('div', { class: 'row' }, newId), newText,
        h('div', { class: 'row' },
          h('button', { type: 'submit', testid: 'template-add', disabled: !writable }, 'Add template'),
          writable ? null : h('span', { class: 'muted' }, 'This key is read-only: templates cannot be added.'))),
      addStatus);
  }

  function setStatus(text) {
    fill(addStatus, text);
  }

  async function toggle(t, detail, button) {
    if (!detail.hidden) {
      detail.hidden = true;
      button.setAttribute('aria-expanded', 'false');
      return;
    }
    const cell = detail.firstChild;
    try {
      const full = await api(`${base}/templates/${encodeURIComponent(t.id)}`);
      fill(cell, h('div', { class: 'template-text', testid: 'template-full-text' }, full.text));
    } catch (e) {
      fill(cell, errorBox(e));
    }
    detail.hidden = false;
    button.setAttribute('aria-expanded', 'true');
  }

  async function addTemplate(ev) {
    ev.preventDefault();
    const id = newId.value.trim();
    if (!id || !newText.value.trim()) {
      setStatus('Give the template an id and a text.');
      return;
    }
    await action(VIEW, async () => {
      try {
        const out = await api(`${base}/templates/${encodeURIComponent(id)}`, { method: 'PUT', body: { text: newText.value } });
        newId.value = '';
        newText.value = '';
        await Promise.all([loadTemplates(), loadCommon()]);
        setStatus(`Template ${out.id} registered (${num(out.shingles)} shingles): its text is boilerplate in this collection from now on.`);
      } catch (e) {
        fill(addStatus, errorBox(e));
      }
    });
  }

  fill(root,
    h('h1', {}, 'Boilerplate'),
    h('p', { class: 'muted' }, 'Text that many documents share (a site footer, a legal notice, a company’s description of itself) makes unrelated texts look alike and hides reprints under another site’s footer. Content scores leave it out.'),
    commonBox, templatesBox, settingsBox);
  await Promise.all([loadSettings(), loadCommon(), loadTemplates()]);
}

function card(label, value, key) {
  return h('div', {}, h('dt', {}, label), h('dd', { dataset: key ? { key } : {} }, value));
}

function defaultHow() {
  return ['The default collection’s boilerplate settings come from the server configuration: set ',
    h('code', {}, 'index.boilerplate.enabled'), ', ', h('code', {}, 'share'), ', ', h('code', {}, 'min_docs'), ' and ',
    h('code', {}, 'min_collection_docs'), ' (or ', h('code', {}, 'NEARDUP_INDEX__BOILERPLATE__ENABLED=true'),
    ' and its siblings) and restart the server. A named collection changes them here (',
    h('code', {}, 'PATCH /collections/{name}'), ').'];
}
