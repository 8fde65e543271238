// Webhooks: the collection's subscriptions (GET /webhooks: url, event
// types, the score rule, deliveries pending and failed), creating one
// (POST /webhooks, whose answer carries the secret: shown here once, in a
// box of its own, never stored by the page), deleting one, its failed
// deliveries and their retry (GET /webhooks/{id}/failed, POST
// /webhooks/{id}/failed/retry), and the event feed (GET /events, NDJSON,
// walked with its cursors). URLs, ids, errors and document ids are the
// server's text and are shown as text only.

import { api, apiLines, canWrite, collectionBase } from '../api.js';
import { h, fill, add, num, errorBox, confirmButton } from '../dom.js';
import { ctx, action, go, thresholds } from '../shell.js';
import { MEASURES, SCORES } from '../measures.js';

const VIEW = 'webhooks';
const KINDS = ['document.duplicate', 'document.refused'];
/** Events the feed panel keeps and shows: the newest. */
const FEED_SHOWN = 100;
/** Events asked per page of GET /events (its most). */
const FEED_PAGE = 1000;
/** Pages read at most per load, so a long log does not hold the page. */
const FEED_MAX_PAGES = 20;

export default async function webhooks(root) {
  const base = collectionBase(ctx.collection);
  const writable = canWrite();
  const listBox = h('section', { testid: 'wh-subscriptions' });
  const secretBox = h('div', { testid: 'wh-secret-slot' });
  const createBox = h('section', { testid: 'wh-create-section' });
  const feedBox = h('section', { testid: 'wh-feed' });
  const listStatus = h('div', { role: 'status', testid: 'wh-list-status' });

  // ---- subscriptions ----------------------------------------------------

  async function loadList() {
    fill(listBox, h('h2', {}, 'Subscriptions'));
    let list;
    try {
      list = await api(`${base}/webhooks`);
    } catch (e) {
      listBox.append(errorBox(e), listStatus);
      return;
    }
    const rows = [];
    for (const s of list.webhooks) {
      const detail = h('tr', { class: 'detail', hidden: true, testid: 'wh-failed-detail', dataset: { id: s.id } }, h('td', { colspan: '8' }));
      const failedBtn = h('button', {
        type: 'button', class: 'link', testid: 'wh-failed-open', 'aria-expanded': 'false',
        onclick: () => action(VIEW, () => toggleFailed(s, detail, failedBtn)),
      }, 'failed deliveries');
      const del = confirmButton({ class: 'link', testid: 'wh-delete', disabled: !writable }, 'delete', () =>
        action(VIEW, async () => {
          try {
            await api(`${base}/webhooks/${encodeURIComponent(s.id)}`, { method: 'DELETE' });
            await loadList();
            fill(listStatus, h('p', { class: 'muted' }, `Deleted the subscription ${s.id}, with its pending and failed deliveries.`));
          } catch (e) {
            fill(listStatus, errorBox(e));
          }
        }));
      rows.push(h('tr', { testid: 'wh-row', dataset: { id: s.id } },
        h('td', { class: 'id', 'data-label': 'id' }, s.id),
        h('td', { class: 'id', 'data-label': 'url', testid: 'wh-row-url' }, s.url),
        h('td', { 'data-label': 'kinds' }, s.kinds.join(', ')),
        h('td', { 'data-label': 'rule' }, `${s.measure} / ${s.score} ≥ ${num(s.threshold)}`),
        h('td', { class: 'n', 'data-label': 'pending', dataset: { key: 'pending' } }, num(s.pending)),
        h('td', { class: 'n', 'data-label': 'failed', dataset: { key: 'failed' } }, num(s.failed)),
        h('td', { 'data-label': 'created' }, s.created_at),
        h('td', { class: 'actions' }, failedBtn, ' · ', del)), detail);
    }
    add(listBox,
      list.webhooks.length
        ? h('div', { class: 'table-wrap' }, h('table', { testid: 'wh-table', class: 'stack' },
          h('thead', {}, h('tr', {}, ['id', 'url', 'kinds', 'measure / score ≥ threshold', 'pending', 'failed', 'created', ''].map((c) => h('th', {}, c)))),
          h('tbody', {}, rows)))
        : h('p', { class: 'muted', testid: 'wh-none' }, 'No subscription: writes of this collection record no event.'),
      h('p', { class: 'muted small' }, `${num(list.webhooks.length)} of at most ${num(list.max_subscriptions)}. `,
        h('strong', {}, 'pending'), ': deliveries owed (new, in flight or waiting for a retry); ',
        h('strong', {}, 'failed'), ': deliveries that used up their attempts.'),
      h('div', { class: 'row' }, h('button', { type: 'button', testid: 'wh-refresh', onclick: () => action(VIEW, loadList) }, 'Refresh')),
      listStatus);
  }

  async function toggleFailed(s, detail, button) {
    if (!detail.hidden) {
      detail.hidden = true;
      button.setAttribute('aria-expanded', 'false');
      return;
    }
    detail.hidden = false;
    button.setAttribute('aria-expanded', 'true');
    await loadFailed(s, detail.firstChild);
  }

  async function loadFailed(s, cell, message) {
    const status = h('div', { role: 'status', testid: 'wh-failed-status' }, message || null);
    let out;
    try {
      out = await api(`${base}/webhooks/${encodeURIComponent(s.id)}/failed?limit=100`);
    } catch (e) {
      fill(cell, errorBox(e));
      return;
    }
    const retry = (event) => action(VIEW, async () => {
      try {
        const r = await api(`${base}/webhooks/${encodeURIComponent(s.id)}/failed/retry`, { method: 'POST', body: event ? { event } : {} });
        const said = `${num(r.retried)} deliver${r.retried === 1 ? 'y' : 'ies'} put back into delivery, attempts reset.`;
        await loadList();
        // The list was redrawn: open this subscription's failed list again.
        const again = listBox.querySelector(`tr[data-testid="wh-failed-detail"][data-id="${CSS.escape(s.id)}"]`);
        const btn = again && again.previousElementSibling.querySelector('[data-testid="wh-failed-open"]');
        if (again && btn) {
          again.hidden = false;
          btn.setAttribute('aria-expanded', 'true');
          await loadFailed(s, again.firstChild, said);
        }
      } catch (e) {
        fill(status, errorBox(e));
      }
    });
    if (!out.failed.length) {
      fill(cell, h('p', { class: 'muted', testid: 'wh-failed-none' }, 'No failed delivery.'), status);
      return;
    }
    fill(cell,
      h('div', { class: 'row' },
        h('strong', {}, `Failed deliveries (${num(out.failed.length)}, newest first)`),
        h('button', { type: 'button', testid: 'wh-retry-all', disabled: !writable, onclick: () => retry(null) }, 'Retry all')),
      h('div', { class: 'table-wrap' }, h('table', { testid: 'wh-failed-table', class: 'stack' },
        h('thead', {}, h('tr', {}, ['event', 'document', 'attempts', 'error', 'failed at', ''].map((c) => h('th', {}, c)))),
        h('tbody', {}, out.failed.map((f) => h('tr', { testid: 'wh-failed-row', dataset: { event: f.event.id } },
          h('td', { class: 'id', 'data-label': 'event' }, f.event.id),
          h('td', { class: 'id', 'data-label': 'document' }, f.event.document),
          h('td', { class: 'n', 'data-label': 'attempts' }, num(f.attempts)),
          h('td', { 'data-label': 'error', testid: 'wh-failed-error' }, f.error),
          h('td', { 'data-label': 'failed at' }, f.failed_at),
          h('td', { class: 'actions' }, h('button', {
            type: 'button', class: 'link', testid: 'wh-retry', disabled: !writable, onclick: () => retry(f.event.id),
          }, 'retry'))))))),
      status);
  }

  // ---- creating a subscription --------------------------------------------

  const url = h('input', { testid: 'wh-url', type: 'url', class: 'wide', placeholder: 'https://hooks.example.com/neardup', spellcheck: 'false', 'aria-label': 'url', disabled: !writable });
  const kindBoxes = KINDS.map((k) => h('input', { type: 'checkbox', testid: `wh-kind-${k.split('.')[1]}`, value: k, checked: true, disabled: !writable }));
  const measure = h('select', { testid: 'wh-measure', class: 'measure', 'aria-label': 'measure', disabled: !writable },
    MEASURES.map((m) => h('option', { value: m.value }, m.label)));
  const score = h('select', { testid: 'wh-score', class: 'score', 'aria-label': 'score', disabled: !writable },
    SCORES.map((s) => h('option', { value: s.value }, s.label)));
  const threshold = h('input', {
    testid: 'wh-threshold', type: 'number', class: 'narrow', min: '0.01', max: '1', step: 'any', 'aria-label': 'threshold',
    placeholder: num(thresholds().threshold, 2), disabled: !writable,
  });
  const newId = h('input', { testid: 'wh-id', placeholder: 'id (optional)', spellcheck: 'false', 'aria-label': 'id', disabled: !writable });
  const createStatus = h('div', { role: 'status', testid: 'wh-create-status' });

  async function create(ev) {
    ev.preventDefault();
    fill(secretBox);
    const kinds = kindBoxes.filter((b) => b.checked).map((b) => b.value);
    if (!url.value.trim()) {
      fill(createStatus, h('p', { class: 'error' }, 'Give the URL the events are posted to.'));
      return;
    }
    if (!kinds.length) {
      fill(createStatus, h('p', { class: 'error' }, 'Choose at least one event type.'));
      return;
    }
    const body = { url: url.value.trim(), kinds, measure: measure.value, score: score.value };
    if (threshold.value.trim() !== '') body.threshold = Number(threshold.value);
    if (newId.value.trim()) body.id = newId.value.trim();
    await action(VIEW, async () => {
      fill(createStatus, h('p', { class: 'muted' }, 'Creating…'));
      try {
        const s = await api(`${base}/webhooks`, { method: 'POST', body });
        url.value = '';
        newId.value = '';
        threshold.value = '';
        fill(createStatus, h('p', { class: 'muted' }, `Subscription ${s.id} stored: it receives the events recorded from now on.`));
        showSecret(s);
        await loadList();
      } catch (e) {
        fill(createStatus, errorBox(e));
        if (e.type === 'webhook-url-not-allowed') {
          createStatus.append(h('p', { class: 'muted', testid: 'wh-url-help' },
            'The server refuses URLs whose host is not in ', h('code', {}, 'webhooks.allowed_hosts'),
            ' and, by default, hosts on loopback, private or link-local addresses. An internal receiver must be listed there by its name or address (see the configuration reference).'));
        }
      }
    });
  }

  /** The secret of the subscription just created: shown this once. */
  function showSecret(s) {
    const value = h('code', { testid: 'wh-secret-value', class: 'secret' }, s.secret);
    const copied = h('span', { class: 'muted', role: 'status', testid: 'wh-secret-copied' });
    const copy = h('button', {
      type: 'button', testid: 'wh-secret-copy',
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(s.secret);
          copied.textContent = 'Copied.';
        } catch {
          // No clipboard access (an insecure origin, a refused permission): select it for Ctrl-C.
          const range = document.createRange();
          range.selectNodeContents(value);
          const sel = window.getSelection();
          sel.removeAllRanges();
          sel.addRange(range);
          copied.textContent = 'Selected: copy it with Ctrl-C (the browser refused the clipboard).';
        }
      },
    }, 'Copy');
    fill(secretBox, h('div', { class: 'notice secret-box', testid: 'wh-secret', role: 'region', 'aria-label': 'the new subscription’s secret' },
      h('p', {}, h('strong', {}, `Signing secret of ${s.id}`)),
      h('p', {}, value),
      h('div', { class: 'row' }, copy, copied,
        h('button', { type: 'button', class: 'link', testid: 'wh-secret-dismiss', onclick: () => fill(secretBox) }, 'I have stored it')),
      h('p', {}, 'This is the only time it is shown: the server never returns it again, and this page forgets it when you leave the view. ',
        'Receivers verify each delivery’s ', h('code', {}, 'webhook-signature'), ' with it (Standard Webhooks).')));
  }

  fill(createBox,
    h('form', { class: 'search write', onsubmit: create, testid: 'wh-create-form' },
      h('h2', {}, 'New subscription'),
      h('div', { class: 'row' }, h('label', {}, 'URL ', url)),
      h('div', { class: 'row' }, h('span', {}, 'events:'),
        kindBoxes.map((b) => h('label', {}, b, ` ${b.value}`))),
      h('div', { class: 'row' }, h('label', {}, 'measure ', measure), h('label', {}, 'score ', score)),
      h('div', { class: 'row' },
        h('label', { title: 'least score of a match the subscription receives; empty: the collection’s threshold' }, 'threshold ', threshold),
        h('label', {}, 'id ', newId)),
      h('div', { class: 'row' },
        h('button', { type: 'submit', testid: 'wh-create', disabled: !writable }, 'Create subscription'),
        writable ? null : h('span', { class: 'muted', testid: 'read-only-note' }, 'This key is read-only: subscriptions cannot be created or deleted.'))),
    createStatus);

  // ---- the event feed ---------------------------------------------------

  /** What the panel holds: the newest events read, oldest first, and where to go on. */
  const feed = { events: [], next: null, trimmed: false, read: 0, more: false };

  /** Read pages after `feed.next` until a short page (or the page bound). */
  async function walk() {
    for (let pages = 0; pages < FEED_MAX_PAGES; pages += 1) {
      const q = new URLSearchParams({ limit: String(FEED_PAGE) });
      if (feed.next) q.set('after', feed.next);
      const { items, headers } = await apiLines(`${base}/events?${q}`);
      if (headers.get('neardup-events-trimmed') === 'true') feed.trimmed = true;
      feed.next = headers.get('neardup-next-cursor') || feed.next;
      feed.read += items.length;
      feed.events = feed.events.concat(items).slice(-FEED_SHOWN);
      feed.more = items.length === FEED_PAGE;
      if (!feed.more) return;
    }
  }

  async function loadFeed(newer) {
    const status = h('div', { role: 'status', testid: 'wh-feed-status' });
    try {
      if (!newer) Object.assign(feed, { events: [], next: null, trimmed: false, read: 0, more: false });
      await walk();
    } catch (e) {
      status.append(errorBox(e));
    }
    drawFeed(status);
  }

  function drawFeed(status) {
    const shown = feed.events.slice().reverse();
    fill(feedBox,
      h('h2', {}, 'Event feed'),
      h('p', { class: 'muted' }, 'The collection’s recorded events (', h('code', {}, 'GET /events'),
        '), newest first: the ', num(FEED_SHOWN), ' newest read. Events are recorded only while the collection has subscriptions.'),
      h('div', { class: 'row' },
        h('button', { type: 'button', testid: 'wh-feed-newer', onclick: () => action(VIEW, () => loadFeed(true)) }, 'Load newer'),
        h('button', { type: 'button', class: 'link', testid: 'wh-feed-reload', onclick: () => action(VIEW, () => loadFeed(false)) }, 'read from the oldest again'),
        h('span', { class: 'muted small', testid: 'wh-feed-cursor' }, feed.next ? `next cursor ${feed.next}` : '')),
      feed.trimmed ? h('p', { class: 'notice', testid: 'wh-feed-trimmed' },
        'Some events were trimmed (by the collection’s retention) before they were read here: the feed went on from the oldest one retained.') : null,
      feed.more ? h('p', { class: 'muted', testid: 'wh-feed-more' },
        `Read ${num(feed.read)} events so far and stopped: there are more. “Load newer” reads on.`) : null,
      shown.length
        ? h('div', { class: 'table-wrap' }, h('table', { testid: 'wh-events', class: 'stack' },
          h('thead', {}, h('tr', {}, ['time', 'type', 'document', 'matches'].map((c) => h('th', {}, c)))),
          h('tbody', {}, shown.map((e) => h('tr', { testid: 'wh-event', dataset: { id: e.id, cursor: e.cursor, type: e.type } },
            h('td', { 'data-label': 'time' }, e.time),
            h('td', { 'data-label': 'type' }, e.type, h('div', { class: 'muted small' }, e.write)),
            h('td', { class: 'id', 'data-label': 'document' },
              h('button', { type: 'button', class: 'link', testid: 'wh-event-document', title: 'search with this document', onclick: () => go('search', { id: e.document }) }, e.document)),
            h('td', { 'data-label': 'matches' }, h('ul', { class: 'matches' }, e.matches.map((m) => h('li', { testid: 'wh-event-match', dataset: { id: m.id } },
              h('span', { class: 'id' }, m.id), ' ', h('span', { class: 'muted small' }, scores(m)))))))))))
        : h('p', { class: 'muted', testid: 'wh-feed-none' }, 'No event recorded yet.'),
      status);
  }

  fill(root,
    h('h1', {}, 'Webhooks'),
    h('p', { class: 'muted' }, 'Writes that are near-duplicates of stored documents (and ', h('code', {}, 'if_unique'),
      ' writes refused for one) become events: each subscription receives those at or above its threshold as signed POSTs, with retries; the feed lists them for consumers that pull.'),
    listBox, createBox, secretBox, feedBox);
  await Promise.all([loadList(), loadFeed(false)]);
}

/** A match's scores as text: "jaccard 0.912 · q in s 0.950 · s in q 0.950". */
function scores(m) {
  const parts = [`jaccard ${num(m.jaccard)}`, `query in stored ${num(m.query_in_stored)}`, `stored in query ${num(m.stored_in_query)}`];
  if (m.content_jaccard !== undefined && m.content_jaccard !== null) parts.push(`content jaccard ${num(m.content_jaccard)}`);
  return parts.join(' · ');
}
