// Groups: the pages of GET /duplicates, by Jaccard or by containment
// (either text inside the other), with sizes and members; a member opens
// Compare with its best match.

import { api, collectionBase } from '../api.js';
import { h, fill, num, errorBox } from '../dom.js';
import { ctx, action, thresholds, go } from '../shell.js';
import { thresholdFloor, measureSelect, isPassageIndexOff, passageIndexOffBox, passageIndexOn } from '../measures.js';

const GROUP_MEASURES = [
  { value: 'jaccard', label: 'Jaccard: about the same text' },
  { value: 'containment', label: 'Containment: one text inside the other' },
];

const PAGE = 25;

export default async function groups(root) {
  const t = thresholds();
  const shown = h('output', {}, num(t.threshold, 2));
  const slider = h('input', {
    type: 'range', testid: 'threshold-input', min: String(thresholdFloor('jaccard', t.min)), max: '1', step: '0.01', value: String(t.threshold),
    'aria-label': 'threshold',
    oninput: () => { shown.textContent = num(Number(slider.value), 2); },
  });
  const indexNote = h('span', { class: 'muted' });
  const measure = measureSelect('groups-measure', 'jaccard', GROUP_MEASURES, (value) => {
    const floor = thresholdFloor(value, t.min);
    slider.min = String(floor);
    if (Number(slider.value) < floor) slider.value = String(floor);
    shown.textContent = num(Number(slider.value), 2);
    indexNote.textContent = value !== 'jaccard' && !passageIndexOn()
      ? 'This collection keeps no passage index: a containment scan needs it.' : '';
  });
  const minSize = h('input', { type: 'number', min: '2', value: '2', class: 'narrow' });
  const list = h('div', {});
  const pager = h('div', { class: 'row' });
  const cursors = [null];

  async function load(page) {
    fill(list);
    fill(pager);
    const q = new URLSearchParams({ threshold: slider.value, measure: measure.value, min_size: minSize.value || '2', limit: String(PAGE) });
    if (cursors[page]) q.set('cursor', cursors[page]);
    let answer;
    try {
      answer = await fetchPage(`${collectionBase(ctx.collection)}/duplicates?${q}`);
    } catch (e) {
      list.append(isPassageIndexOff(e) ? passageIndexOffBox(() => load(0)) : errorBox(e));
      return;
    }
    cursors[page + 1] = answer.next_cursor;
    const byContainment = answer.measure === 'containment';
    list.append(h('p', { class: 'muted', testid: 'groups-total' },
      `${answer.total_groups} group${answer.total_groups === 1 ? '' : 's'}, ${answer.total_members} documents in them, at `
      + (byContainment ? `containment ≥ ${num(answer.threshold, 2)} (one text inside the other: the share of the shorter’s shingles in the longer).`
        : `Jaccard ≥ ${num(answer.threshold, 2)}.`)));
    if (answer.groups.length) {
      list.append(h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'size'), h('th', {}, 'members (each opens Compare with its best match)'))),
        h('tbody', {}, answer.groups.map((g) => row(g, byContainment))))));
    }
    pager.append(
      h('button', { type: 'button', disabled: page === 0, onclick: () => action('groups', () => load(page - 1)) }, '← previous'),
      h('span', { class: 'muted' }, `page ${page + 1}`),
      h('button', { type: 'button', testid: 'groups-next', disabled: !answer.next_cursor, onclick: () => action('groups', () => load(page + 1)) }, 'next →'));
  }

  function row(g, byContainment) {
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
        h('span', { class: 'muted', dataset: { containment: String(m.containment) } }, byContainment
          ? ` ↔ ${m.best_match} (containment ${num(m.containment)}, Jaccard ${num(m.jaccard)})`
          : ` ↔ ${m.best_match} (${num(m.jaccard)})`))))));
  }

  fill(root,
    h('h1', {}, 'Groups'),
    h('form', { class: 'row', onsubmit: (ev) => { ev.preventDefault(); cursors.length = 1; action('groups', () => load(0)); } },
      h('label', {}, 'measure ', measure),
      h('label', {}, 'threshold ', slider, ' ', shown),
      h('label', {}, 'smallest group ', minSize),
      indexNote,
      h('button', { type: 'submit', testid: 'groups-submit' }, 'List groups')),
    list, pager);
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
