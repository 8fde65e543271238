// Review: the review desk of a collection. The queue (GET /review/queue):
// pairs detected at the collection's threshold and a sample across score
// bands below it, each with both documents' snippets; the current pair side
// by side as Compare shows it (shared passages, boilerplate greyed), decided
// with Duplicate / Not a duplicate / Related / Skip and an optional note, by
// mouse or with the keys d, n, r, s (not while typing). The decisions
// recorded (GET /review/decisions): filtered by verdict, paged, each
// editable and deletable, and exported as NDJSON. The precision per score
// band measured from those labels (GET /review/precision), with Wilson
// intervals and the suggested threshold, redrawn after every decision.
// Read-only keys see the queue, the decisions and the precision, but cannot
// decide. Text from the server is only ever text.

import { api, apiText, canWrite, collectionBase } from '../api.js';
import { h, fill, add, num, errorBox, confirmButton } from '../dom.js';
import { ctx, action, thresholds } from '../shell.js';
import { showPair } from '../pair.js';
import { conflictBox } from '../measures.js';
import { snippetNode } from '../snippets.js';

const VIEW = 'review';
const VERDICTS = [
  { value: 'duplicate', label: 'Duplicate', key: 'd' },
  { value: 'not_duplicate', label: 'Not a duplicate', key: 'n' },
  { value: 'related', label: 'Related', key: 'r' },
];
const VERDICT_WORDS = { duplicate: 'duplicate', not_duplicate: 'not a duplicate', related: 'related' };
/** The queue's items a load, and the decisions a page. */
const QUEUE_LIMIT = 20;
const PAGE = 20;
/** A note's limit (the API's, in UTF-8 bytes). */
const NOTE_BYTES = 2000;
/** Labels the precision needs before it suggests a threshold (sent, so the page can say it). */
const MIN_LABELS = 30;
const READ_ONLY = 'This key may only read: it sees the queue, the decisions and the precision, but cannot record, change or delete a decision.';

/** Pairs skipped while the page lives, per collection: a reload of the
 * queue (which is stable) shows them last, not first. */
const skipped = { collection: null, keys: new Set() };

const pairKey = (a, b) => (a < b ? `${a}\u0000${b}` : `${b}\u0000${a}`);

export default async function review(root, params) {
  if (skipped.collection !== ctx.collection) {
    skipped.collection = ctx.collection;
    skipped.keys.clear();
  }
  const base = collectionBase(ctx.collection);
  const t = thresholds();
  let writable = canWrite();

  // ---- controls -----------------------------------------------------------
  const measure = h('select', { testid: 'review-measure', 'aria-label': 'measure' },
    h('option', { value: 'jaccard' }, 'Jaccard'),
    h('option', { value: 'containment' }, 'containment (either inside the other)'));
  measure.value = params.get('measure') === 'containment' ? 'containment' : 'jaccard';
  const score = h('select', { testid: 'review-score', 'aria-label': 'score' },
    h('option', { value: 'raw' }, 'raw'),
    h('option', { value: 'content' }, 'content (boilerplate left out)'));
  score.value = params.get('score') === 'content' ? 'content' : 'raw';
  // A decision records the pair's content Jaccard, not a content containment.
  const contentOption = score.querySelector('option[value="content"]');
  const scoreFits = () => {
    contentOption.disabled = measure.value === 'containment';
    if (contentOption.disabled && score.value === 'content') score.value = 'raw';
  };
  measure.addEventListener('change', scoreFits);
  scoreFits();
  const defaultFrom = Math.max(0, Math.round((t.threshold - 0.3) * 100) / 100);
  const from = h('input', {
    type: 'number', min: '0', max: '1', step: '0.01', class: 'narrow', testid: 'review-from', 'aria-label': 'lowest score sampled',
    value: params.get('from') || String(defaultFrom),
  });
  const width = h('input', {
    type: 'number', min: '0.01', max: '0.5', step: '0.01', class: 'narrow', testid: 'review-width', 'aria-label': 'band width',
    value: params.get('width') || '0.05',
  });

  // ---- the page's parts ---------------------------------------------------
  const panel = h('div', { class: 'review' });
  const pairBox = h('section', { class: 'review-pair', testid: 'review-pair', 'aria-label': 'the pair to decide' });
  const queueBox = h('section', { class: 'review-queue', testid: 'review-queue' });
  const precBox = h('section', { class: 'review-precision', testid: 'review-precision' });
  const decBox = h('section', { class: 'review-decisions', testid: 'review-decisions' });

  // The queue and what was done to its items on this page.
  const q = { answer: null, items: [], at: -1, decided: new Map(), busy: false };
  // The decisions list: its filter and the cursors of the pages seen.
  const list = { verdict: '', cursors: [null], page: 0 };

  // ---- the pair and its decision ------------------------------------------
  const note = h('input', {
    type: 'text', class: 'wide', testid: 'review-note', 'aria-label': 'note (optional)',
    placeholder: 'note (optional): why, for the next moderator', spellcheck: 'true',
    // Escape leaves the note, so the keys decide again.
    onkeydown: (ev) => { if (ev.key === 'Escape') note.blur(); },
  });
  const decideButtons = VERDICTS.map((v) => h('button', {
    type: 'button', testid: `decide-${v.value}`, class: `verdict-btn v-${v.value}`, dataset: { verdict: v.value },
    title: `${v.label} (key ${v.key})`, 'aria-keyshortcuts': v.key,
    onclick: () => decide(v.value),
  }, v.label, ' ', h('kbd', {}, v.key)));
  const skipButton = h('button', {
    type: 'button', testid: 'decide-skip', class: 'verdict-btn v-skip', title: 'Skip this pair for now (key s)', 'aria-keyshortcuts': 's',
    onclick: () => skip(),
  }, 'Skip ', h('kbd', {}, 's'));
  const readOnlyNote = h('p', { class: 'notice', testid: 'review-read-only', hidden: writable }, READ_ONLY);
  const decideStatus = h('div', { role: 'status', testid: 'review-status', class: 'muted' });
  const pairHead = h('div', { class: 'pair-head' });
  const pairOut = h('div', { class: 'compare-out' });

  function setWritable(yes) {
    writable = yes;
    readOnlyNote.hidden = yes;
    for (const b of decideButtons) b.disabled = !yes || !current();
    note.disabled = !yes;
    for (const b of decBox.querySelectorAll('button.write')) b.disabled = !yes;
  }

  function current() {
    return q.at >= 0 && q.at < q.items.length ? q.items[q.at] : null;
  }

  function showPairBox() {
    const item = current();
    for (const b of decideButtons) b.disabled = !writable || !item;
    skipButton.disabled = !item;
    if (!item) {
      fill(pairHead, h('p', { class: 'muted', testid: 'review-empty' }, q.answer
        ? (q.items.length ? 'Every pair of this queue was decided or skipped.' : 'No undecided pair found in these bands.')
        : 'No queue loaded.'),
      q.answer && skipped.keys.size ? h('button', {
        type: 'button', class: 'link', testid: 'review-unskip',
        onclick: () => action(VIEW, async () => { skipped.keys.clear(); await loadQueue(); }),
      }, `show the ${skipped.keys.size} skipped pair${skipped.keys.size === 1 ? '' : 's'} again`) : null);
      fill(pairOut);
      return null;
    }
    const snippets = (q.answer && q.answer.snippets) || {};
    fill(pairHead,
      h('p', { class: 'pair-where' },
        h('span', { testid: 'review-position' }, `Pair ${q.at + 1} of ${q.items.length}`), ' · ',
        `${measure.value} ${score.value === 'content' ? 'content ' : ''}score `, h('strong', { dataset: { score: 'queue' } }, num(item.score)),
        ' · band ', bandText(item.band), ' · ', sourceBadge(item.source)),
      h('div', { class: 'pair-ids' },
        docCell('A', item.a, snippets[item.a]),
        docCell('B', item.b, snippets[item.b])));
    return item;
  }

  async function openCurrent() {
    const item = showPairBox();
    if (!item) return;
    markQueue();
    await showPair(pairOut, { a: { id: item.a }, b: { id: item.b } });
  }

  async function decide(verdict) {
    const item = current();
    if (!item || q.busy || !writable) return;
    const text = note.value.trim();
    if (new TextEncoder().encode(text).length > NOTE_BYTES) {
      fill(decideStatus, errorBox(new Error(`The note is longer than ${NOTE_BYTES} bytes: shorten it.`)));
      return;
    }
    q.busy = true;
    try {
      await action(VIEW, async () => {
        let d;
        try {
          const body = { a: item.a, b: item.b, verdict };
          if (text) body.note = text;
          d = await api(`${base}/review/decisions`, { method: 'PUT', body });
        } catch (e) {
          if (e.status === 403) setWritable(false);
          fill(decideStatus, errorBox(e));
          return;
        }
        q.decided.set(pairKey(item.a, item.b), d.verdict);
        note.value = '';
        fill(decideStatus, `${d.revision > 1 ? 'Changed' : 'Recorded'}: `, h('span', { class: 'id' }, d.a), ' and ', h('span', { class: 'id' }, d.b),
          ` ${d.verdict === 'not_duplicate' ? 'are not duplicates' : d.verdict === 'duplicate' ? 'are duplicates' : 'are related'}`,
          d.revision > 1 ? ` (revision ${d.revision})` : '', '.');
        await next();
        await Promise.all([loadDecisions(), loadPrecision()]);
      });
    } finally {
      q.busy = false;
    }
  }

  async function skip() {
    const item = current();
    if (!item || q.busy) return;
    q.busy = true;
    try {
      await action(VIEW, async () => {
        skipped.keys.add(pairKey(item.a, item.b));
        fill(decideStatus, 'Skipped: ', h('span', { class: 'id' }, item.a), ' and ', h('span', { class: 'id' }, item.b), '.');
        await next();
      });
    } finally {
      q.busy = false;
    }
  }

  const open = (i) => !q.decided.has(pairKey(q.items[i].a, q.items[i].b)) && !skipped.keys.has(pairKey(q.items[i].a, q.items[i].b));

  /** The next undecided, unskipped item after the current one; at the end
   * of the list, a fresh queue (decided pairs drop out of it). */
  async function next() {
    const n = q.items.length;
    for (let step = 1; step <= n; step += 1) {
      const i = (q.at + step) % n;
      if (open(i)) {
        q.at = i;
        await openCurrent();
        return;
      }
    }
    await loadQueue();
  }

  function onKey(ev) {
    if (!panel.isConnected) {
      document.removeEventListener('keydown', onKey);
      return;
    }
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return;
    const target = ev.target;
    if (target && target.closest && target.closest('input, textarea, select, [contenteditable]')) return;
    const key = ev.key.length === 1 ? ev.key.toLowerCase() : '';
    const verdict = VERDICTS.find((v) => v.key === key);
    if (verdict) {
      ev.preventDefault();
      if (!writable) {
        readOnlyNote.hidden = false;
        return;
      }
      decide(verdict.value);
    } else if (key === 's') {
      ev.preventDefault();
      skip();
    }
  }
  document.addEventListener('keydown', onKey);

  // ---- the queue ----------------------------------------------------------
  const queueStatus = h('p', { class: 'muted', testid: 'queue-status', role: 'status' });
  const queueList = h('ol', { class: 'queue', testid: 'queue-list' });
  const bandsBox = h('div', { class: 'queue-bands' });

  async function loadQueue() {
    fill(queueStatus);
    fill(queueList);
    fill(bandsBox);
    const qs = new URLSearchParams({ measure: measure.value, score: score.value, limit: String(QUEUE_LIMIT) });
    if (from.value.trim()) qs.set('from', from.value.trim());
    if (width.value.trim()) qs.set('width', width.value.trim());
    q.answer = null;
    q.items = [];
    q.at = -1;
    q.decided.clear();
    try {
      q.answer = await api(`${base}/review/queue?${qs}`);
    } catch (e) {
      fill(queueStatus, conflictBox(e, () => action(VIEW, () => Promise.all([loadQueue(), loadPrecision()]))) || errorBox(e));
      showPairBox();
      return;
    }
    const a = q.answer;
    // Skipped pairs go last: the queue is stable, so they would come first again.
    const fresh = a.items.filter((it) => !skipped.keys.has(pairKey(it.a, it.b)));
    const again = a.items.filter((it) => skipped.keys.has(pairKey(it.a, it.b)));
    q.items = fresh.concat(again);
    q.at = fresh.length ? 0 : -1;
    fill(queueStatus,
      `${num(a.items.length)} pair${a.items.length === 1 ? '' : 's'} to review: ${a.measure} ${a.score === 'content' ? 'content ' : ''}scores from ${num(a.from, 2)}, `
      + `bands of ${num(a.width, 2)}; the collection's threshold is ${num(a.threshold, 2)}. ${num(a.documents_searched)} documents searched`
      + (a.complete ? '.' : ' (the walk stopped at its budget: more pairs may exist).'),
      again.length ? ` ${again.length} skipped on this page go last.` : '');
    if (a.bands && a.bands.length) {
      add(bandsBox, h('details', { testid: 'queue-bands' },
        h('summary', {}, 'Bands: labels and pairs found'),
        h('div', { class: 'table-wrap' }, h('table', { class: 'compact' },
          h('thead', {}, h('tr', {}, h('th', {}, 'band'), h('th', { title: 'decisions whose score falls in this band' }, 'labels'),
            h('th', { title: 'undecided pairs the walk found in this band' }, 'found'))),
          h('tbody', {}, a.bands.map((b) => h('tr', { testid: 'queue-band', dataset: { lo: String(b.lo), labels: String(b.labels), found: String(b.found) } },
            h('td', {}, bandText(b)), h('td', { class: 'n' }, num(b.labels)), h('td', { class: 'n' }, num(b.found)))))))));
    }
    q.items.forEach((item, i) => queueList.append(queueItem(item, i)));
    await openCurrent();
  }

  function queueItem(item, i) {
    const snippets = (q.answer && q.answer.snippets) || {};
    return h('li', { testid: 'queue-item', class: 'queue-item', dataset: { a: item.a, b: item.b, source: item.source, index: String(i) } },
      h('div', { class: 'queue-head' },
        h('button', {
          type: 'button', class: 'link', testid: 'queue-open', title: 'review this pair',
          onclick: () => action(VIEW, async () => { q.at = i; await openCurrent(); }),
        }, `${i + 1}. review`),
        ' ', h('span', { dataset: { score: 'score' } }, num(item.score)),
        ' · ', bandText(item.band), ' · ', sourceBadge(item.source),
        h('span', { class: 'queue-mark', testid: 'queue-mark' })),
      h('div', { class: 'pair-ids' },
        docCell('A', item.a, snippets[item.a]),
        docCell('B', item.b, snippets[item.b])));
  }

  /** The list's marks: which item is shown, which were decided or skipped. */
  function markQueue() {
    for (const li of queueList.children) {
      const i = Number(li.dataset.index);
      const it = q.items[i];
      const k = pairKey(it.a, it.b);
      const verdict = q.decided.get(k);
      li.classList.toggle('current', i === q.at);
      if (i === q.at) li.setAttribute('aria-current', 'true');
      else li.removeAttribute('aria-current');
      li.dataset.state = verdict || (skipped.keys.has(k) ? 'skipped' : 'open');
      fill(li.querySelector('.queue-mark'), verdict ? ` · ${VERDICT_WORDS[verdict]}` : skipped.keys.has(k) ? ' · skipped' : '');
    }
  }

  // ---- precision ----------------------------------------------------------
  const related = h('select', { testid: 'precision-related', 'aria-label': 'a related pair counts as' },
    h('option', { value: 'not_duplicate' }, 'not a duplicate'),
    h('option', { value: 'duplicate' }, 'a duplicate'));
  const target = h('input', { type: 'number', min: '0.5', max: '0.999', step: '0.01', value: '0.95', class: 'narrow', testid: 'precision-target', 'aria-label': 'target precision' });
  const suggestion = h('p', { class: 'advice-line', testid: 'precision-suggestion', role: 'status' });
  const chartBox = h('div', { class: 'plot precision-plot', testid: 'precision-chart' });
  const bandTable = h('div', { class: 'table-wrap' });
  let chart = null;

  async function loadPrecision() {
    fill(suggestion);
    fill(bandTable);
    if (chart) chart.destroy();
    chart = null;
    fill(chartBox);
    const qs = new URLSearchParams({ measure: measure.value, score: score.value, related: related.value, min_labels: String(MIN_LABELS) });
    if (width.value.trim()) qs.set('width', width.value.trim());
    if (target.value.trim()) qs.set('target', target.value.trim());
    let p;
    try {
      p = await api(`${base}/review/precision?${qs}`);
    } catch (e) {
      chartBox.append(errorBox(e));
      return;
    }
    chartBox.dataset.labels = String(p.labels);
    const measured = p.bands.filter((b) => b.labels > 0);
    chartBox.dataset.points = String(measured.length);
    suggestion.textContent = p.suggested
      ? p.suggested.why
      : p.labels < MIN_LABELS
        ? `No suggestion yet: ${num(p.labels)} label${p.labels === 1 ? '' : 's'} with a ${p.measure} score; it takes ${MIN_LABELS}.`
        : `No threshold reaches precision ${num(p.target, 2)} with these ${num(p.labels)} labels.`;
    suggestion.dataset.threshold = p.suggested ? String(p.suggested.threshold) : '';
    if (!measured.length) {
      chartBox.append(h('p', { class: 'muted' }, 'No labels yet on this measure: decide pairs to measure the precision per band.'));
    } else if (window.uPlot) {
      chart = precisionChart(chartBox, p);
    } else {
      chartBox.append(errorBox(new Error('the charting library did not load')));
    }
    if (!measured.length) return;
    bandTable.append(h('table', { class: 'stack compact', testid: 'precision-table' },
      h('thead', {}, h('tr', {}, ['band', 'labels', 'duplicates', 'related', 'not duplicates', 'precision', '95% interval'].map((c) => h('th', {}, c)))),
      h('tbody', {}, measured.map((b) => h('tr', { testid: 'precision-band', dataset: { lo: String(b.lo), labels: String(b.labels) } },
        h('td', { 'data-label': 'band' }, bandText(b)),
        h('td', { class: 'n', 'data-label': 'labels' }, num(b.labels)),
        h('td', { class: 'n', 'data-label': 'duplicates' }, num(b.duplicates)),
        h('td', { class: 'n', 'data-label': 'related' }, num(b.related)),
        h('td', { class: 'n', 'data-label': 'not duplicates' }, num(b.not_duplicates)),
        h('td', { class: 'n', 'data-label': 'precision', dataset: { score: 'precision' } }, num(b.precision, 3)),
        h('td', { class: 'n', 'data-label': '95% interval' }, b.low === null ? '–' : `${num(b.low, 3)} – ${num(b.high, 3)}`))))));
  }

  // ---- decisions ----------------------------------------------------------
  const filter = h('select', {
    testid: 'decisions-filter', 'aria-label': 'verdict',
    onchange: () => action(VIEW, async () => { list.verdict = filter.value; list.cursors = [null]; list.page = 0; await loadDecisions(); }),
  }, h('option', { value: '' }, 'every verdict'), VERDICTS.map((v) => h('option', { value: v.value }, VERDICT_WORDS[v.value])));
  const exportButton = h('button', { type: 'button', testid: 'decisions-export', onclick: () => action(VIEW, exportDecisions) }, 'Export NDJSON');
  const decStatus = h('div', { role: 'status', testid: 'decisions-status' });
  const decTable = h('div', { class: 'table-wrap' });
  const pager = h('div', { class: 'row' });

  async function loadDecisions() {
    fill(decTable);
    fill(pager);
    const qs = new URLSearchParams({ limit: String(PAGE) });
    if (list.verdict) qs.set('verdict', list.verdict);
    const cursor = list.cursors[list.page];
    if (cursor) qs.set('cursor', cursor);
    let page;
    try {
      page = await api(`${base}/review/decisions?${qs}`);
    } catch (e) {
      decTable.append(errorBox(e));
      return;
    }
    list.cursors[list.page + 1] = page.next_cursor;
    list.cursors.length = list.page + 2;
    const first = list.page * PAGE;
    add(decTable,
      h('p', { class: 'muted', testid: 'decisions-total', dataset: { total: String(page.total) } },
        page.total === 0 ? `No decision${list.verdict ? ` “${VERDICT_WORDS[list.verdict]}”` : ''} yet.`
          : `${num(page.total)} decision${page.total === 1 ? '' : 's'}${list.verdict ? ` “${VERDICT_WORDS[list.verdict]}”` : ''}; `
          + `${num(first + 1)}–${num(first + page.decisions.length)} shown.`),
      page.decisions.length ? h('table', { class: 'stack', testid: 'decisions-table' },
        h('thead', {}, h('tr', {}, ['pair', 'verdict', 'note', 'decided', 'scores', ''].map((c) => h('th', {}, c)))),
        h('tbody', {}, page.decisions.map(decisionRow))) : null);
    if (list.page > 0 || page.next_cursor) {
      pager.append(
        h('button', {
          type: 'button', testid: 'decisions-prev', disabled: list.page === 0,
          onclick: () => action(VIEW, async () => { list.page -= 1; await loadDecisions(); }),
        }, 'Previous'),
        h('span', { class: 'muted' }, `page ${list.page + 1}`),
        h('button', {
          type: 'button', testid: 'decisions-next', disabled: !page.next_cursor,
          onclick: () => action(VIEW, async () => { list.page += 1; await loadDecisions(); }),
        }, 'Next'));
    }
  }

  function decisionRow(d) {
    const verdictCell = h('td', { 'data-label': 'verdict', dataset: { key: 'verdict' } }, verdictBadge(d.verdict));
    const noteCell = h('td', { class: 'note', 'data-label': 'note', dataset: { key: 'note' } }, d.note === null || d.note === undefined ? '' : d.note);
    const actions = h('td', { class: 'actions' });
    const row = h('tr', { testid: 'decision-row', dataset: { a: d.a, b: d.b, verdict: d.verdict, revision: String(d.revision) } },
      h('td', { class: 'id', 'data-label': 'pair' }, d.a, h('br'), d.b),
      verdictCell, noteCell,
      h('td', { 'data-label': 'decided' }, d.decided_by ? [h('span', { dataset: { key: 'decided_by' } }, d.decided_by), ', '] : null,
        h('span', { class: 'small' }, d.decided_at), d.revision > 1 ? h('span', { class: 'muted small' }, ` (revision ${d.revision})`) : null),
      h('td', { class: 'small', 'data-label': 'scores' }, scoreText(d.scores)),
      actions);
    const edit = h('button', {
      type: 'button', class: 'link write', testid: 'decision-edit', disabled: !writable,
      onclick: () => editRow(d, verdictCell, noteCell, actions, row),
    }, 'edit');
    const del = confirmButton({ class: 'link write', testid: 'decision-delete', disabled: !writable }, 'delete', () =>
      action(VIEW, async () => {
        const qs = new URLSearchParams({ a: d.a, b: d.b });
        try {
          await api(`${base}/review/decision?${qs}`, { method: 'DELETE' });
        } catch (e) {
          if (e.status === 403) setWritable(false);
          fill(decStatus, errorBox(e));
          return;
        }
        q.decided.delete(pairKey(d.a, d.b));
        markQueue();
        fill(decStatus, h('p', { class: 'muted' }, 'Deleted the decision on ', h('span', { class: 'id' }, d.a), ' and ', h('span', { class: 'id' }, d.b), '.'));
        await Promise.all([loadDecisions(), loadPrecision()]);
      }));
    add(actions, edit, ' · ', del);
    return row;
  }

  function editRow(d, verdictCell, noteCell, actions, row) {
    const verdict = h('select', { testid: 'decision-verdict', 'aria-label': 'verdict' }, VERDICTS.map((v) => h('option', { value: v.value }, VERDICT_WORDS[v.value])));
    verdict.value = d.verdict;
    const text = h('input', { type: 'text', testid: 'decision-note', 'aria-label': 'note', value: d.note || '', class: 'wide' });
    fill(verdictCell, verdict);
    fill(noteCell, text);
    fill(actions,
      h('button', {
        type: 'button', class: 'link write', testid: 'decision-save',
        onclick: () => action(VIEW, async () => {
          const body = { a: d.a, b: d.b, verdict: verdict.value };
          if (text.value.trim()) body.note = text.value.trim();
          if (new TextEncoder().encode(body.note || '').length > NOTE_BYTES) {
            fill(decStatus, errorBox(new Error(`The note is longer than ${NOTE_BYTES} bytes: shorten it.`)));
            return;
          }
          let saved;
          try {
            saved = await api(`${base}/review/decisions`, { method: 'PUT', body });
          } catch (e) {
            if (e.status === 403) setWritable(false);
            fill(decStatus, errorBox(e));
            return;
          }
          if (q.decided.has(pairKey(d.a, d.b))) q.decided.set(pairKey(d.a, d.b), saved.verdict);
          markQueue();
          fill(decStatus, h('p', { class: 'muted' }, 'Changed the decision on ', h('span', { class: 'id' }, d.a), ' and ', h('span', { class: 'id' }, d.b),
            `: ${VERDICT_WORDS[saved.verdict]} (revision ${saved.revision}).`));
          await Promise.all([loadDecisions(), loadPrecision()]);
        }),
      }, 'save'),
      ' · ',
      h('button', { type: 'button', class: 'link', testid: 'decision-cancel', onclick: () => row.replaceWith(decisionRow(d)) }, 'cancel'));
    verdict.focus();
  }

  /** Every decision matching the filter as NDJSON, saved as a file. */
  async function exportDecisions() {
    fill(decStatus);
    const qs = new URLSearchParams();
    if (list.verdict) qs.set('verdict', list.verdict);
    let text;
    try {
      text = await apiText(`${base}/review/decisions${qs.toString() ? `?${qs}` : ''}`, 'application/x-ndjson');
    } catch (e) {
      fill(decStatus, errorBox(e));
      return;
    }
    const lines = text.split('\n').filter((l) => l.trim() !== '').length;
    const name = `decisions-${ctx.collection}${list.verdict ? `-${list.verdict}` : ''}.ndjson`;
    const url = URL.createObjectURL(new Blob([text], { type: 'application/x-ndjson' }));
    const link = h('a', { href: url, download: name, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    fill(decStatus, h('p', { class: 'muted', testid: 'decisions-exported', dataset: { lines: String(lines) } },
      `Exported ${num(lines)} decision${lines === 1 ? '' : 's'} as ${name}.`));
  }

  // ---- the page -------------------------------------------------------------
  async function reload(ev) {
    if (ev) ev.preventDefault();
    // The choices go into the address (no hashchange: nothing re-renders),
    // so a reload or a shared link opens the same queue.
    const choice = new URLSearchParams({ measure: measure.value, score: score.value, from: from.value.trim(), width: width.value.trim() });
    history.replaceState(null, '', `#/${VIEW}?${choice}`);
    await action(VIEW, async () => {
      list.cursors = [null];
      list.page = 0;
      await Promise.all([loadQueue(), loadPrecision()]);
    });
  }

  fill(root, add(panel,
    h('h1', {}, 'Review'),
    h('p', { class: 'muted legend' },
      'Decide whether pairs are duplicates. The queue holds pairs the collection reports (',
      h('strong', {}, 'detected'), ': at or above its threshold) and a ', h('strong', {}, 'sample'),
      ' from every score band below it, the band with the fewest labels first, so that the labels measure the precision at every threshold.'),
    h('form', { class: 'row', onsubmit: reload },
      h('label', {}, 'measure ', measure),
      h('label', {}, 'score ', score),
      h('label', { title: 'the lowest score sampled' }, 'from ', from),
      h('label', { title: 'the width of a score band' }, 'band width ', width),
      h('button', { type: 'submit', testid: 'review-load' }, 'Load')),
    add(pairBox,
      h('h2', {}, 'Decide'),
      readOnlyNote,
      pairHead,
      h('div', { class: 'decide' }, decideButtons, skipButton),
      h('label', { class: 'note-label' }, 'note ', note),
      h('p', { class: 'muted small' }, 'Keys: ', h('kbd', {}, 'd'), ' duplicate · ', h('kbd', {}, 'n'), ' not a duplicate · ',
        h('kbd', {}, 'r'), ' related (same source, not a copy) · ', h('kbd', {}, 's'), ' skip; not while typing a note (', h('kbd', {}, 'Esc'), ' leaves it).'),
      decideStatus,
      pairOut),
    add(queueBox, h('h2', {}, 'Queue'), queueStatus, bandsBox, queueList),
    add(precBox,
      h('h2', {}, 'Precision per band'),
      h('p', { class: 'muted legend' }, 'The share of the reviewed pairs in each score band judged duplicates, with its 95% Wilson interval; the suggestion is the lowest threshold whose pairs above it reach the target precision.'),
      h('div', { class: 'row' },
        h('label', {}, 'a related pair counts as ', related),
        h('label', {}, 'target precision ', target),
        h('button', { type: 'button', testid: 'precision-refresh', onclick: () => action(VIEW, loadPrecision) }, 'Refresh')),
      suggestion, chartBox, bandTable),
    add(decBox,
      h('h2', {}, 'Decisions'),
      h('div', { class: 'row' }, h('label', {}, 'verdict ', filter), exportButton),
      decStatus, decTable, pager)));
  related.addEventListener('change', () => action(VIEW, loadPrecision));
  setWritable(writable);
  await Promise.all([loadQueue(), loadDecisions(), loadPrecision()]);
}

function bandText(b) {
  return b ? `${num(b.lo, 2)}–${num(b.hi, 2)}` : '–';
}

function sourceBadge(source) {
  return h('span', {
    class: `badge ${source === 'detected' ? 'detected' : 'sample'}`, dataset: { source },
    title: source === 'detected' ? 'at or above the collection’s threshold: reported as a duplicate' : 'below the threshold: sampled to measure precision there',
  }, source);
}

function verdictBadge(verdict) {
  return h('span', { class: `badge v-${verdict}` }, VERDICT_WORDS[verdict] || verdict);
}

/** A document's id with its snippet (snippets.js: the title and the
 * first words of its text, as text). */
function docCell(letter, id, s) {
  return h('div', { class: 'doc-cell', testid: 'review-doc', dataset: { id } },
    h('div', { class: 'id' }, `${letter}: `, id),
    snippetNode(id, s) || h('div', { class: 'snip muted' }, 'no text or title stored'));
}

function scoreText(s) {
  if (!s) return '–';
  const parts = [`J ${num(s.jaccard)}`, `C ${num(s.containment)}`];
  if (s.content_jaccard !== null && s.content_jaccard !== undefined) parts.push(`content J ${num(s.content_jaccard)}`);
  return parts.join(' · ');
}

/** The precision per band: a point per band with labels, its Wilson
 * interval as a whisker, and the suggested threshold as a dashed line. */
function precisionChart(box, p) {
  const bands = p.bands;
  const xs = bands.map((b) => (b.lo + b.hi) / 2);
  const ys = bands.map((b) => (b.labels > 0 ? b.precision : null));
  const lo = Math.min(...bands.map((b) => b.lo));
  const hi = Math.max(...bands.map((b) => b.hi));
  const suggested = p.suggested ? p.suggested.threshold : null;
  function whiskers(u) {
    const c = u.ctx;
    c.save();
    c.strokeStyle = '#0b5cad';
    c.lineWidth = 1.5 * devicePixelRatio;
    const cap = 4 * devicePixelRatio;
    bands.forEach((b, i) => {
      if (b.low === null || b.high === null || b.labels === 0) return;
      const x = Math.round(u.valToPos(xs[i], 'x', true));
      const y1 = u.valToPos(b.low, 'y', true);
      const y2 = u.valToPos(b.high, 'y', true);
      c.beginPath();
      c.moveTo(x, y1);
      c.lineTo(x, y2);
      c.moveTo(x - cap, y1);
      c.lineTo(x + cap, y1);
      c.moveTo(x - cap, y2);
      c.lineTo(x + cap, y2);
      c.stroke();
    });
    const line = (v, colour, dash) => {
      c.strokeStyle = colour;
      c.setLineDash(dash);
      c.beginPath();
      if (dash.length) {
        const x = Math.round(u.valToPos(v, 'x', true));
        c.moveTo(x, u.bbox.top);
        c.lineTo(x, u.bbox.top + u.bbox.height);
      } else {
        const y = Math.round(u.valToPos(v, 'y', true));
        c.moveTo(u.bbox.left, y);
        c.lineTo(u.bbox.left + u.bbox.width, y);
      }
      c.stroke();
    };
    line(p.target, '#8a939b', []);
    if (suggested !== null) line(suggested, '#2ca02c', [6, 4]);
    c.restore();
  }
  const widthPx = Math.max(260, Math.min(720, Math.floor(box.clientWidth || 560)));
  return new window.uPlot({
    width: widthPx,
    height: 240,
    title: `Precision per band (${p.labels.toLocaleString('en')} label${p.labels === 1 ? '' : 's'})`,
    scales: { x: { time: false, range: [lo, hi] }, y: { range: [0, 1] } },
    axes: [{ label: `${p.measure}${p.score === 'content' ? ' (content)' : ''}` }, { label: 'precision', size: 50 }],
    series: [{}, {
      label: 'precision', stroke: '#0b5cad', width: 0, paths: () => null,
      points: { show: true, size: 8, fill: '#0b5cad', stroke: '#0b5cad' },
    }],
    legend: { show: false },
    hooks: { draw: [whiskers] },
  }, [xs, ys], box);
}
