// End-to-end tests of the /ui console in Debian's headless Chromium,
// driven by playwright-core (no browser download), against real neardup
// servers on free loopback ports with planted data.
//
//   NEARDUP_BIN   the server binary (required)
//   CHROMIUM      the browser (default /usr/bin/chromium)
//   SCREENSHOTS   a directory: save a screenshot of each view there
//
// Every page must load with no console error, no page error and no
// request to any other host; the few tests that provoke an error status on
// purpose (a wrong key) list the exact messages they allow.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import http from 'node:http';
import { createHmac } from 'node:crypto';
import { chromium } from 'playwright-core';

const BIN = process.env.NEARDUP_BIN;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.SCREENSHOTS || '';
const TIMEOUT = 15000;

if (!BIN) throw new Error('set NEARDUP_BIN to the neardup binary');

// ---------------------------------------------------------------------------
// Planted data
// ---------------------------------------------------------------------------

const HARBOUR = 'The harbour master’s “quiet” report: at dawn the fishing boats left Saint-Étienne with £40 of ice, '
  + 'a crate of Cyrillic newspapers (Привет, мир), and a note in Japanese 東京の港は静かです; the crew sang 🎶 and waved 👋 '
  + 'while the gulls circled the nets, the engines coughed in the cold, the cook counted the loaves and the tins of beans, '
  + 'the young deckhand from Kraków read the weather aloud, and the skipper swore at the fog that sat on the water '
  + 'until the lighthouse faded behind the grey café on the pier';
const TWIN_A = `${HARBOUR}.`;
// One word changed.
const TWIN_B = `${HARBOUR.replace('the cook counted', 'the cook checked')}.`;
// Two words more, and a combining acute (e + U+0301) where A has é.
const TWIN_C = `${HARBOUR.replace('Saint-Étienne', 'Saint-E\u0301tienne')} at seven.`;

// Near-duplicates of each other (a long shared tail), each carrying markup
// that must never run or render: a script, an image with an onerror
// handler, a javascript: link, in the text and in the metadata.
const COMMON = 'about the council budget vote tonight in the town hall where the mayor, the treasurer and '
  + 'eleven councillors will argue over the cost of the new bridge, the library roof, the tram line to '
  + 'the hospital and the winter salt for the roads, while the public gallery waits with questions '
  + 'about the rates, the parking fines and the flowers in the square';
const HOSTILE = [
  { id: 'hostile-script', text: `Breaking news <script>window.__pwned = "script"</script> ${COMMON}`, metadata: { note: '<script>window.__pwned = "meta"</script>' } },
  { id: 'hostile-img', text: `Photo <img src=x onerror="window.__pwned = 'img'"> ${COMMON}`, metadata: { html: '<img src=x onerror=alert(1)>' } },
  // A right-to-left override and mark too: they must not reorder the page around them.
  { id: 'hostile-link', text: `Read \u202E<a href="javascript:window.__pwned='link'">here</a>\u200F ${COMMON}`, metadata: { link: 'javascript:alert(1)' } },
];

const WORDS = ('river stone garden window letter market bridge winter summer engine paper music forest island doctor '
  + 'village mountain kitchen station teacher morning evening harbor castle silver copper violin orchard tunnel '
  + 'lantern meadow pepper candle saddle ribbon compass harvest thunder pebble velvet marble canyon glacier').split(' ');

/** Deterministic filler documents, each unlike the others. */
function filler(n) {
  let seed = 12345;
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  return Array.from({ length: n }, (_, i) => ({
    id: `doc-${String(i).padStart(3, '0')}`,
    text: Array.from({ length: 30 }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(' '),
    metadata: { n: i, source: i % 2 ? 'forum' : 'mail' },
  }));
}

// An article, and texts inside it: an excerpt (its first paragraphs) and a
// quote (two sentences from its middle).
const ARTICLE_PARAS = [
  'The river authority confirmed on Tuesday that the old weir below the paper mill will be removed before the spring floods, '
    + 'ending a dispute that has divided the valley for almost a decade. Engineers said the concrete structure had cracked in two places '
    + 'during the storms of last November and could no longer be repaired at a reasonable cost.',
  'Anglers welcomed the decision. For years they have argued that the weir blocks salmon and sea trout from the spawning gravels upstream, '
    + 'and a survey published by the county wildlife trust found fewer than forty adult fish above the mill last autumn. '
    + 'Farmers downstream were more cautious and asked who would pay if the lower meadows flooded more often once the water ran freely.',
  'The authority plans to lower the weir in three stages over six weeks, starting with the eastern sluice, so that the silt trapped behind it '
    + 'is released slowly rather than in a single surge. A temporary footbridge will carry walkers across the channel while the work goes on, '
    + 'and the towpath between the mill and the church will be closed on weekdays.',
  'Local historians asked for the iron gearing of the eastern sluice to be saved and shown in the village museum, and the contractor agreed '
    + 'to lift it out in one piece. The parish council will hold a public meeting in the school hall next month to answer questions about '
    + 'the timetable, the footbridge and the compensation scheme for the meadow owners.',
];
const ARTICLE = ARTICLE_PARAS.join('\n\n');
const EXCERPT = ARTICLE_PARAS.slice(0, 2).join('\n\n');
const QUOTE = 'A temporary footbridge will carry walkers across the channel while the work goes on, '
  + 'and the towpath between the mill and the church will be closed on weekdays. Local historians asked for the iron gearing of the eastern sluice to be saved';

// A footer on more stored documents than the passage index reads
// (index.common_fingerprint_docs = 4 on that server): boilerplate.
const FOOTER = 'This notice was sent to every member of the allotment society. Replies go to the secretary, who reads them on the first '
  + 'Monday of each month and answers in the newsletter; please do not reply to this address, which nobody watches.';
const NOTICES = filler(125).slice(120).map((d, i) => ({ id: `notice-${i}`, text: `${d.text}. ${FOOTER}` }));

// A site's footer on short posts (boilerplate: held by every post), with
// markup that must stay inert wherever the console shows it.
const SITE_FOOTER = 'You are reading the Valley Courier, the independent paper of the upper valley since 1921. '
  + 'Subscribe for the weekly digest <img src=x onerror="window.__pwned = \'footer\'"> and follow the courier on the radio '
  + 'every Sunday morning; letters to the editor go to the office on Mill Street, and corrections are printed on page two '
  + 'of the next edition.';
const POST_WORDS = ('otter ferry bakery choir quarry barn kite ladder tractor parcel mural hedge beacon puddle '
  + 'scarf trumpet pony wagon chapel dairy').split(' ');
/** Short unrelated posts (20 words), each ending with the site footer. */
const POSTS = Array.from({ length: 12 }, (_, i) => {
  let seed = 977 + i * 31;
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const body = Array.from({ length: 20 }, () => POST_WORDS[Math.floor(rand() * POST_WORDS.length)]).join(' ');
  return { id: `post-${String(i).padStart(2, '0')}`, body, text: `${body}.\n\n${SITE_FOOTER}` };
});
// The first post reprinted under another site's footer: the same content.
// (Its footer is on no other document: registered as a template, it is boilerplate too.)
const GAZETTE_FOOTER = 'Reprinted with permission from the Hill Gazette, whose reporters cover the farms, schools and councils '
  + 'of the hill country every week; its archive is open to readers in the county library.';
const REPRINT = { id: 'reprint-00', text: `${POSTS[0].body}.\n\n${GAZETTE_FOOTER}` };
const HOSTILE_TEMPLATE = 'Sent from the newsroom <img src=x onerror="window.__pwned = \'template\'"> '
  + '<script>window.__pwned = "template-script"</script> with kind regards from the night desk of the courier';

const PLANTED = [
  ...filler(120),
  { id: 'twin-a', text: TWIN_A, metadata: { source: 'harbour', lang: 'en+ru+ja' } },
  { id: 'twin-b', text: TWIN_B, metadata: { source: 'harbour copy' } },
  { id: 'twin-c', text: TWIN_C, metadata: { source: 'harbour, combining marks' } },
  ...HOSTILE,
];

// ---------------------------------------------------------------------------
// Servers and the browser
// ---------------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function startServer(env = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'neardup-ui-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  // The working directory holds no config/default.toml: compiled-in defaults plus env.
  const child = spawn(BIN, ['serve'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      NEARDUP_SERVER__BIND: `127.0.0.1:${port}`,
      NEARDUP_STORAGE__DATA_DIR: join(dir, 'data'),
      NEARDUP_LOG__LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const r = await fetch(`${base}/readyz`);
      if (r.ok) break;
    } catch { /* not listening yet */ }
    if (child.exitCode !== null) throw new Error(`neardup exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error('neardup never became ready');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    base,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function plant(base, key, documents = PLANTED) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = `Bearer ${key}`;
  const r = await fetch(`${base}/documents/batch`, { method: 'POST', headers, body: JSON.stringify({ documents }) });
  const body = await r.json();
  assert.equal(r.status, 200, JSON.stringify(body));
  assert.equal(body.created, documents.length, JSON.stringify(body.results.filter((x) => x.status !== 201)));
}

let open; // a server without keys
let textsStored; // /explain by id works (the collection stores texts)
let keyed; // a server with a full and a read-only key
let passaged; // a server whose default collection keeps the passage index (and stores texts)
let bp; // a server whose default collection counts boilerplate (and stores texts, keeps the passage index)
let hooked; // a server whose webhooks may reach 127.0.0.1, with two quick attempts per delivery
let browser;

before(async () => {
  [open, keyed, passaged, bp, hooked] = await Promise.all([
    startServer({ NEARDUP_STORAGE__STORE_TEXT: 'true' }),
    startServer({
      NEARDUP_AUTH__API_KEYS: '["full-key-u"]', NEARDUP_AUTH__READ_ONLY_KEYS: '["reader-key"]',
      // A moderator's key with a name: the review desk's decided_by.
      NEARDUP_AUTH__KEYS: '[{key="moderator-key",name="Zoë Brontë"}]',
    }),
    startServer({ NEARDUP_STORAGE__STORE_TEXT: 'true', NEARDUP_INDEX__PASSAGE_INDEX: 'true', NEARDUP_INDEX__COMMON_FINGERPRINT_DOCS: '4' }),
    startServer({
      // Tuned for 0.5, so a raw query at 0.5 finds posts that share only the footer.
      NEARDUP_STORAGE__STORE_TEXT: 'true', NEARDUP_INDEX__PASSAGE_INDEX: 'true', NEARDUP_INDEX__THRESHOLD: '0.5',
      NEARDUP_INDEX__BOILERPLATE__ENABLED: 'true', NEARDUP_INDEX__BOILERPLATE__SHARE: '0.2',
      NEARDUP_INDEX__BOILERPLATE__MIN_DOCS: '3', NEARDUP_INDEX__BOILERPLATE__MIN_COLLECTION_DOCS: '10',
    }),
    startServer({
      // Receivers in the tests listen on loopback; a failing delivery gives up after two quick attempts.
      NEARDUP_WEBHOOKS__ALLOWED_HOSTS: '["127.0.0.1"]', NEARDUP_WEBHOOKS__MAX_ATTEMPTS: '2',
      NEARDUP_WEBHOOKS__BACKOFF_BASE_MS: '20', NEARDUP_WEBHOOKS__BACKOFF_MAX_MS: '50', NEARDUP_WEBHOOKS__TIMEOUT_MS: '2000',
    }),
  ]);
  await Promise.all([plant(open.base), plant(keyed.base, 'full-key-u'),
    plant(passaged.base, null, [...PLANTED, ...NOTICES, { id: 'article', text: ARTICLE, metadata: { source: 'river news' } }]),
    plant(bp.base, null, [...filler(20), ...POSTS.map(({ id, text }) => ({ id, text, metadata: { site: 'courier' } })), REPRINT])]);
  textsStored = (await fetch(`${open.base}/explain`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ a: { id: 'twin-a' }, b: { id: 'twin-b' } }),
  })).status === 200;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  if (browser) await browser.close();
  await Promise.all([open && open.stop(), keyed && keyed.stop(), passaged && passaged.stop(), bp && bp.stop(), hooked && hooked.stop()]);
});

/**
 * A fresh page on `server` that records console errors, page errors and
 * every request to another origin. `allowed`: regexes of console errors
 * this test provokes on purpose.
 */
async function session(server, allowed = [], viewport = { width: 1280, height: 900 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const problems = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !allowed.some((re) => re.test(msg.text()))) problems.push(`console: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('request', (req) => {
    const url = req.url();
    if (!url.startsWith(`${server.base}/`) && !url.startsWith('data:')) problems.push(`request to another host: ${url}`);
  });
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()} ${req.failure() && req.failure().errorText}`));
  return {
    page,
    problems,
    async view(name) {
      await page.goto(`${server.base}/ui/#/${name}`);
      await page.waitForSelector(`body[data-ready="${name}"]`);
    },
    async ready(name) {
      await page.waitForSelector(`body[data-ready="${name}"]`);
    },
    async shot(name) {
      if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
    },
    async close() {
      await context.close();
      assert.deepEqual(problems, [], 'no console error, page error or foreign request');
    },
  };
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

test('/ui redirects to /ui/ and every view loads with no error and no foreign request', async () => {
  const s = await session(open);
  await s.page.goto(`${open.base}/ui`);
  assert.equal(new URL(s.page.url()).pathname, '/ui/');
  await s.ready('search');
  for (const name of ['search', 'passages', 'compare', 'groups', 'review', 'boilerplate', 'webhooks', 'tune', 'overview']) {
    await s.view(name);
    assert.equal(await s.page.locator('main .error').count(), 0, `${name} shows no error`);
  }
  const options = await s.page.locator('[data-testid="collection-select"] option').allTextContents();
  assert.deepEqual(options, ['default']);
  await s.close();
});

/** Compare opened on stored ids calls /explain: without it (404), or
 * without stored texts (409 text-not-stored), the view falls back to GET
 * /compare's scores, and the browser logs that status. */
function explainFallback() {
  return textsStored ? [] : [/status of 409/];
}

test('search finds the planted near-duplicate of a pasted text, with its metadata, and a row opens Compare', async () => {
  const s = await session(open, explainFallback());
  await s.view('search');
  const slider = s.page.getByTestId('threshold-input');
  const stats = await (await fetch(`${open.base}/stats`)).json();
  assert.equal(Number(await slider.inputValue()), stats.index.threshold, 'starts at the collection threshold');
  assert.equal(Number(await slider.getAttribute('min')), Math.ceil(stats.index.min_query_threshold * 100) / 100,
    'bounded by the tuned minimum');
  await s.page.getByTestId('search-text').fill(TWIN_B.replace('young deckhand', 'new deckhand'));
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  const ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.ok(ids.includes('twin-a') && ids.includes('twin-b'), `found the planted twins: ${ids}`);
  assert.ok(!ids.some((id) => id.startsWith('doc-')), `no filler: ${ids}`);
  const row = s.page.getByTestId('result-row').filter({ hasText: 'twin-a' });
  await row.getByText('"source":"harbour"').waitFor();
  await s.shot('search');
  await row.click();
  await s.ready('compare');
  assert.match(s.page.url(), /#\/compare\?b=twin-a$/);
  await s.close();
});

test('search by id uses the threshold chosen; a higher threshold drops the looser twin', async () => {
  const s = await session(open);
  await s.page.goto(`${open.base}/ui/#/search?id=twin-a`);
  await s.ready('search');
  let ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.deepEqual(ids.sort(), ['twin-b', 'twin-c']);
  const scores = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => Number(r.children[1].textContent)));
  const highest = Math.max(...scores);
  await s.page.getByTestId('threshold-input').fill(String(Math.min(1, Math.ceil(highest * 100) / 100 - 0.01)));
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.equal(ids.length, 1, `only the closest twin is left: ${ids}`);
  await s.close();
});

test('search narrows by a metadata filter and exclusion; a malformed filter is explained before anything is sent', async () => {
  const s = await session(open);
  await s.page.goto(`${open.base}/ui/#/search?id=twin-a`);
  await s.ready('search');
  const ids = () => s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id).sort());
  assert.deepEqual(await ids(), ['twin-b', 'twin-c']);
  await s.page.getByTestId('search-filter').fill('{"source": ["harbour copy", "elsewhere"]}');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  await s.page.waitForFunction(() => document.querySelectorAll('[data-testid="result-row"]').length === 1);
  assert.deepEqual(await ids(), ['twin-b'], 'only the document whose source is one of those');
  await s.page.getByTestId('search-filter').fill('');
  await s.page.getByTestId('search-exclude-same').fill('source');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  await s.page.waitForFunction(() => document.querySelectorAll('[data-testid="result-row"]').length === 2);
  assert.deepEqual(await ids(), ['twin-b', 'twin-c'], 'no twin shares twin-a\'s source');
  let sent = 0;
  s.page.on('request', (req) => { if (req.url().includes('/similar')) sent += 1; });
  for (const [bad, says] of [['{"source": {"a": 1}}', 'filter.source'], ['["source"]', 'must be a JSON object'],
    ['{"source": <img src=x onerror="window.__pwned = 1">}', 'not valid JSON']]) {
    await s.page.getByTestId('search-filter').fill(bad);
    await s.page.getByTestId('search-submit').click();
    await s.page.waitForFunction((text) => document.querySelector('[data-testid="search-filter-note"]').textContent.includes(text), says);
  }
  assert.equal(sent, 0, 'a malformed filter is not sent');
  assert.equal(await s.page.evaluate(() => window.__pwned), undefined);
  await s.close();
});

test('compare marks the shared passages on both sides in matching colours; a click scrolls to the partner', async () => {
  const s = await session(open);
  await s.view('compare');
  const inputs = s.page.locator('form.compare-in textarea');
  await inputs.nth(0).fill(TWIN_A);
  await inputs.nth(1).fill(`Unrelated opening words about ${'a tram timetable '.repeat(3)}. ${TWIN_C}`);
  await s.page.getByTestId('compare-submit').click();
  await s.ready('compare');
  const a = s.page.getByTestId('compare-a');
  const b = s.page.getByTestId('compare-b');
  const matchesA = await a.getByTestId('passage').evaluateAll((m) => m.map((x) => x.dataset.match));
  const matchesB = await b.getByTestId('passage').evaluateAll((m) => m.map((x) => x.dataset.match));
  assert.ok(matchesA.length > 0 && matchesB.length > 0, 'passages on both sides');
  assert.deepEqual([...new Set(matchesA)].sort(), [...new Set(matchesB)].sort(), 'the same passage numbers on both sides');
  // The panes hold exactly the texts sent (segments concatenate to them).
  assert.equal(await a.evaluate((el) => el.textContent), TWIN_A);
  const colourA = await a.getByTestId('passage').first().evaluate((m) => getComputedStyle(m).backgroundColor);
  const partner = b.locator(`mark[data-match="${matchesA[0]}"]`).first();
  assert.equal(await partner.evaluate((m) => getComputedStyle(m).backgroundColor), colourA, 'partners share a colour');
  await a.getByTestId('passage').first().click();
  await partner.waitFor();
  assert.ok(await partner.evaluate((m) => m.classList.contains('flash')), 'the partner is marked');
  const scores = await s.page.getByTestId('compare-scores').textContent();
  assert.match(scores, /jaccard/);
  assert.match(scores, /A in B/);
  await s.shot('compare');
  await s.page.getByTestId('tab-diff').click();
  const diff = s.page.getByTestId('word-diff');
  assert.ok(await diff.locator('ins').count() > 0, 'insertions shown');
  assert.ok(await diff.locator('del').count() > 0, 'deletions shown');
  await s.shot('compare-diff');
  await s.close();
});

test('groups lists the planted group; a member opens Compare with its best match', async () => {
  const s = await session(open, explainFallback());
  await s.view('groups');
  const row = s.page.getByTestId('groups-row').filter({ hasText: 'twin-a' });
  assert.equal(await row.count(), 1);
  assert.equal(await row.getAttribute('data-size'), '3');
  const members = await row.getByTestId('group-member').allTextContents();
  assert.deepEqual(members, ['twin-a', 'twin-b', 'twin-c']);
  // Its original (the earliest stored; ties: the smaller id) is marked, once.
  assert.equal(await row.getByTestId('group-original').count(), 1);
  const marked = row.locator('li').filter({ has: s.page.getByTestId('group-original') });
  assert.equal(await marked.getByTestId('group-member').textContent(), 'twin-a');
  // The drop list keeps it (keep=oldest) and lists the two others.
  await s.page.getByTestId('drop-list-submit').click();
  await s.page.getByTestId('drop-list-total').waitFor();
  const drops = s.page.getByTestId('drop-row').filter({ hasText: 'twin-' });
  assert.deepEqual((await drops.allTextContents()).length, 2);
  for (const d of await drops.all()) assert.equal(await d.getAttribute('data-kept'), 'twin-a');
  assert.ok(await s.page.getByTestId('drop-list-download').count() === 1, 'an NDJSON download');
  await s.shot('groups');
  await row.getByTestId('group-member').first().click();
  await s.ready('compare');
  assert.match(s.page.url(), /#\/compare\?a=twin-a&b=twin-[bc]$/);
  // Both ids are stored: the scores are shown either way.
  assert.match(await s.page.getByTestId('compare-scores').textContent(), /jaccard/);
  await s.close();
});

test('tune draws the S-curve, and moving the threshold changes the recall shown', async () => {
  const s = await session(open);
  await s.view('tune');
  await s.page.locator('[data-testid="scurve"] canvas').waitFor();
  const recallAt = async () => s.page.getByTestId('recall').textContent();
  const before = await recallAt();
  await s.page.getByTestId('threshold-input').fill('0.5');
  const after = await recallAt();
  assert.notEqual(after, before, `recall moved from ${before}`);
  const stats = await (await fetch(`${open.base}/stats`)).json();
  const { bands: b, rows: r } = stats.index;
  assert.equal(Number(after), Number((1 - (1 - 0.5 ** r) ** b).toFixed(4)));
  // Dragging on the plot moves the line too.
  const over = s.page.locator('[data-testid="scurve"] .u-over');
  const box = await over.boundingBox();
  await s.page.mouse.move(box.x + box.width * 0.9, box.y + box.height / 2);
  await s.page.mouse.down();
  await s.page.mouse.up();
  const dragged = Number(await s.page.getByTestId('tune-threshold').textContent());
  assert.ok(Math.abs(dragged - 0.9) <= 0.02, `dragged to ${dragged}`);
  await s.shot('tune-scurve');
  await s.close();
});

test('tune draws the Jaccard histogram per k, the suggested thresholds and the estimate error, from a sample and from pasted texts', async () => {
  const s = await session(open);
  await s.view('tune');
  // No texts pasted: a sample of the stored texts (this server stores them).
  await s.page.getByTestId('tune-k').fill('2,3');
  await s.page.getByTestId('tune-submit').click();
  await s.ready('tune');
  await s.page.locator('[data-testid="histogram"] canvas').waitFor();
  assert.equal(await s.page.getByTestId('advice-row').count(), 2, 'one row per k');
  const pairs = PLANTED.length * (PLANTED.length - 1) / 2;
  const first = await s.page.getByTestId('advice-row').first().locator('td').allTextContents();
  assert.equal(first[1].replace(/,/g, ''), String(pairs), `every pair of the ${PLANTED.length} stored texts`);
  assert.notEqual(first[2], 'none', 'the planted near-duplicates make a valley');
  assert.equal(await s.page.getByTestId('accuracy-row').count(), 10, '5 num_perm × 2 k');
  // Pasted texts are analysed instead.
  const texts = [TWIN_A, TWIN_B, TWIN_C, ...filler(30).map((d) => d.text)];
  await s.page.getByTestId('tune-texts').fill(texts.join('\n'));
  await s.page.getByTestId('tune-k').fill('1,2,3,4');
  await s.page.getByTestId('tune-submit').click();
  await s.ready('tune');
  await s.page.locator('[data-testid="histogram"] canvas').waitFor();
  assert.equal(await s.page.getByTestId('advice-row').count(), 4, 'one row per k');
  const row = await s.page.getByTestId('advice-row').first().locator('td').allTextContents();
  assert.equal(row[1].replace(/,/g, ''), String(texts.length * (texts.length - 1) / 2));
  await s.page.locator('[data-testid="accuracy"] canvas').waitFor();
  assert.equal(await s.page.getByTestId('accuracy-row').count(), 20);
  assert.equal(await s.page.locator('main .error').count(), 0);
  // The same texts on content scores: drawn, every pair still counted.
  await s.page.getByTestId('tune-score').selectOption('content');
  await s.page.getByTestId('tune-submit').click();
  await s.ready('tune');
  await s.page.locator('[data-testid="histogram"] canvas').waitFor();
  const content = await s.page.getByTestId('advice-row').first().locator('td').allTextContents();
  assert.equal(content[1].replace(/,/g, ''), String(texts.length * (texts.length - 1) / 2));
  assert.equal(await s.page.locator('main .error').count(), 0);
  await s.page.getByTestId('tune-score').selectOption('raw');
  await s.shot('tune');
  await s.close();
});

test('overview lists the collections with documents, memory per document, (b, r), recall and retention', async () => {
  await fetch(`${open.base}/collections/titles`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ shingle: { kind: 'char', k: 5 }, normalize: { fold_accents: true }, index: { threshold: 0.9 }, retention: { ttl_secs: 86400 } }),
  }).then((r) => assert.ok(r.status === 201 || r.status === 200, `PUT /collections/titles: ${r.status}`));
  const s = await session(open);
  await s.view('overview');
  const rows = s.page.getByTestId('overview-row');
  assert.equal(await rows.count(), 2);
  const def = await rows.filter({ hasText: 'default' }).locator('td').allTextContents();
  assert.equal(def[2], String(PLANTED.length));
  assert.match(def[3], /\d+(\.\d)? (B|KiB)/);
  assert.match(def[6], /^\(\d+, \d+\)$/);
  const titles = await rows.filter({ hasText: 'titles' }).locator('td').allTextContents();
  assert.equal(titles[9], '1 d');
  assert.match(titles[8], /char 5-shingles, 128 hashes, text v2 \+ accents folded$/);
  assert.match(def[8], /word 3-shingles, 128 hashes, text v2$/);
  await s.shot('overview');
  // A row picks the collection; Search then starts at its threshold.
  await rows.filter({ hasText: 'titles' }).click();
  await s.ready('overview');
  assert.equal(await s.page.getByTestId('collection-select').inputValue(), 'titles');
  await s.page.goto(`${open.base}/ui/#/search`);
  await s.ready('search');
  await s.close();
});

test('with keys: the prompt refuses a wrong key, a full key opens every view', async () => {
  // The refused key's 401 is logged by the browser: the one error allowed.
  const s = await session(keyed, [/status of 401/]);
  await s.page.goto(`${keyed.base}/ui/#/search`);
  await s.ready('key');
  const input = s.page.getByTestId('api-key-input');
  assert.ok(await input.isVisible(), 'the key prompt is shown');
  await s.shot('key-prompt');
  await input.fill('not-a-key');
  await s.page.getByTestId('api-key-submit').click();
  await s.ready('key');
  assert.match(await s.page.getByTestId('api-key-error').textContent(), /refused/);
  await input.fill('full-key-u');
  await s.page.getByTestId('api-key-submit').click();
  await s.ready('search');
  assert.ok(await s.page.locator('#keyprompt').isHidden());
  assert.ok(await s.page.getByTestId('store-submit').isEnabled(), 'a full key may write');
  await s.page.getByTestId('search-id').fill('twin-a');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  assert.equal(await s.page.getByTestId('result-row').count(), 2);
  // The key is in memory only: no storage, no URL, no cookie.
  const stored = await s.page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie + location.href);
  assert.ok(!stored.includes('full-key-u'), stored);
  for (const name of ['groups', 'overview', 'tune']) {
    await s.page.goto(`${keyed.base}/ui/#/${name}`); // same document: the key stays
    await s.ready(name);
  }
  await s.page.reload();
  await s.ready('key');
  await s.close();
});

test('with a read-only key the write controls are disabled and reads work', async () => {
  // Learning the key is read-only costs one refused write (403).
  const s = await session(keyed, [/status of 403/]);
  await s.page.goto(`${keyed.base}/ui/#/search`);
  await s.ready('key');
  await s.page.getByTestId('api-key-input').fill('reader-key');
  await s.page.getByTestId('api-key-submit').click();
  await s.ready('search');
  assert.ok(await s.page.getByTestId('store-submit').isDisabled(), 'storing is disabled');
  assert.ok(await s.page.getByTestId('read-only-note').isVisible());
  await s.page.getByTestId('search-id').fill('twin-b');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  assert.equal(await s.page.getByTestId('result-row').count(), 2);
  // A text search is a read too (POST /similar).
  await s.page.getByTestId('search-id').fill('');
  await s.page.getByTestId('search-text').fill(TWIN_C);
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  assert.equal(await s.page.getByTestId('result-row').count(), 3);
  // Templates and the counting settings are writes.
  await s.view('boilerplate');
  assert.ok(await s.page.getByTestId('template-add').isDisabled(), 'adding a template is disabled');
  assert.ok(await s.page.getByTestId('bp-enabled').isDisabled());
  // Subscriptions are writes; their list and the event feed are reads.
  await s.view('webhooks');
  assert.ok(await s.page.getByTestId('wh-create').isDisabled(), 'creating a subscription is disabled');
  assert.ok(await s.page.getByTestId('read-only-note').isVisible());
  await s.page.getByTestId('wh-none').waitFor();
  await s.page.getByTestId('wh-feed-none').waitFor();
  await s.close();
});

test('hostile documents render as inert text in results, metadata and compare', async () => {
  const s = await session(open);
  await s.page.goto(`${open.base}/ui/#/search?id=hostile-script`);
  await s.ready('search');
  const rows = s.page.getByTestId('result-row');
  const ids = await rows.evaluateAll((r) => r.map((x) => x.dataset.id));
  assert.deepEqual(ids.sort(), ['hostile-img', 'hostile-link']);
  const text = await s.page.locator('main').textContent();
  assert.ok(text.includes('<img src=x onerror=alert(1)>'), 'metadata shown as text');
  assert.ok(text.includes('javascript:alert(1)'));
  {
    await s.page.goto(`${open.base}/ui/#/compare`);
    await s.ready('compare');
    const inputs = s.page.locator('form.compare-in textarea');
    await inputs.nth(0).fill(HOSTILE[0].text);
    await inputs.nth(1).fill(`${HOSTILE[1].text} ${HOSTILE[2].text}`);
    await s.page.getByTestId('compare-submit').click();
    await s.ready('compare');
    assert.equal(await s.page.getByTestId('compare-a').textContent(), HOSTILE[0].text);
    assert.equal(await s.page.getByTestId('compare-b').textContent(), `${HOSTILE[1].text} ${HOSTILE[2].text}`);
    await s.shot('compare-hostile');
  }
  const live = await s.page.evaluate(() => ({
    pwned: window.__pwned,
    scripts: document.querySelectorAll('main script').length,
    images: document.querySelectorAll('main img').length,
    links: document.querySelectorAll('main a').length,
  }));
  assert.deepEqual(live, { pwned: undefined, scripts: 0, images: 0, links: 0 });
  await s.close();
});

// ---------------------------------------------------------------------------
// Containment and passages (a server with the passage index)
// ---------------------------------------------------------------------------

test('search by "query inside a stored document" finds the article from its excerpt and shows both containments', async () => {
  const s = await session(passaged);
  await s.view('search');
  // Jaccard first: the excerpt is too short a part of the article.
  await s.page.getByTestId('search-text').fill(EXCERPT);
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  let ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.ok(!ids.includes('article'), `Jaccard does not find the article from an excerpt: ${ids}`);
  await s.page.getByTestId('search-measure').selectOption('query_in_stored');
  assert.equal(await s.page.getByTestId('threshold-input').getAttribute('min'), '0.01', 'a containment may be low');
  await s.page.getByTestId('threshold-input').fill('0.9');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.deepEqual(ids, ['article']);
  const table = s.page.getByTestId('search-results');
  assert.equal(await table.getAttribute('data-measure'), 'query_in_stored');
  const headers = await table.locator('th').allTextContents();
  assert.deepEqual(headers.slice(0, 4), ['id', 'this text in it', 'Jaccard', 'it in this text'], 'the measure asked comes first');
  const row = s.page.getByTestId('result-row').first();
  const score = async (k) => Number(await row.locator(`td[data-score="${k}"]`).textContent());
  assert.equal(await score('query_in_stored'), 1, 'all of the excerpt is in the article');
  const inQuery = await score('stored_in_query');
  assert.ok(inQuery > 0.3 && inQuery < 0.7, `about half of the article is in the excerpt: ${inQuery}`);
  assert.ok(await score('jaccard') < 0.7);
  assert.match(await s.page.getByTestId('score-legend').textContent(), /containment of this text in the stored document/);
  // The other direction: the article holds the excerpt.
  await s.page.getByTestId('search-text').fill(ARTICLE);
  await s.page.getByTestId('search-measure').selectOption('containment');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.ok(ids.includes('article'), `${ids}`);
  await s.shot('search-containment');
  // Compare: the excerpt against the article says which is inside which.
  await s.page.goto(`${passaged.base}/ui/#/compare`);
  await s.ready('compare');
  const inputs = s.page.locator('form.compare-in textarea');
  await inputs.nth(0).fill(EXCERPT);
  await s.page.locator('form.compare-in input').nth(1).fill('article');
  await s.page.getByTestId('compare-submit').click();
  await s.ready('compare');
  const note = await s.page.getByTestId('compare-excerpt').textContent();
  assert.match(note, /^A is an excerpt of B: 100% of A is in B; B is \d\.\d× longer\./);
  await s.page.getByTestId('show-excerpt').click();
  assert.ok(await s.page.getByTestId('compare-b').locator('mark.flash').count() === 1, 'the excerpt is marked in the longer text');
  await s.shot('compare-excerpt');
  await s.close();
});

test('a containment search says how many common passages (boilerplate) it skipped', async () => {
  const s = await session(passaged);
  await s.view('search');
  await s.page.getByTestId('search-text').fill(`${ARTICLE}\n\n${FOOTER}`);
  await s.page.getByTestId('search-measure').selectOption('stored_in_query');
  await s.page.getByTestId('threshold-input').fill('0.9');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  const ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.deepEqual(ids, ['article'], 'the article is inside the query; the notices only share their footer');
  assert.match(await s.page.getByTestId('common-passages').textContent(),
    /^\d+ common passages? skipped \(held by up to 5 documents\)/);
  assert.deepEqual(await s.page.getByTestId('search-results').locator('th').allTextContents().then((h) => h.slice(1, 4)),
    ['it in this text', 'Jaccard', 'this text in it']);
  await s.close();
});

test('the passages view finds a quote, shows where it sits, and opens Compare and the document', async () => {
  const s = await session(passaged);
  await s.view('passages');
  await s.page.getByTestId('passages-text').fill(QUOTE);
  await s.page.getByTestId('passages-submit').click();
  await s.ready('passages');
  const rows = s.page.getByTestId('passage-row');
  assert.deepEqual(await rows.evaluateAll((r) => r.map((x) => x.dataset.id)), ['article']);
  const row = rows.first();
  assert.ok(Number(await row.locator('td[data-score="longest_run"]').textContent()) >= 20);
  const span = row.getByTestId('passage-span').first();
  const marked = await span.locator('mark').textContent();
  assert.ok(marked.startsWith('A temporary footbridge'), marked);
  assert.ok(ARTICLE.includes(await span.textContent().then((t) => t.replace(/^…|…$/g, ''))), 'the snippet is the stored text around the span');
  await s.shot('passages');
  await row.getByTestId('passage-open').click();
  await s.ready('passages');
  const doc = s.page.getByTestId('passage-document');
  assert.equal(await doc.textContent(), ARTICLE);
  assert.ok((await doc.locator('mark').first().textContent()).startsWith('A temporary footbridge'));
  await row.getByTestId('passage-compare').click();
  await s.ready('compare');
  assert.match(s.page.url(), /#\/compare\?b=article$/);
  assert.ok(await s.page.getByTestId('compare-b').getByTestId('passage').count() > 0);
  await s.close();
});

test('a containment search on a collection without the passage index says so and how to turn it on', async () => {
  const s = await session(open, [/status of 409/]);
  await s.view('search');
  await s.page.getByTestId('search-measure').selectOption('query_in_stored');
  assert.match(await s.page.getByTestId('passage-index-note').textContent(), /no passage index/);
  await s.page.getByTestId('search-text').fill(TWIN_A);
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  const box = s.page.getByTestId('passage-index-off');
  assert.match(await box.textContent(), /keeps no passage index.*NEARDUP_INDEX__PASSAGE_INDEX=true/s);
  await s.view('passages');
  await s.page.getByTestId('passages-text').fill(TWIN_A);
  await s.page.getByTestId('passages-submit').click();
  await s.ready('passages');
  assert.equal(await s.page.getByTestId('passage-index-off').count(), 1);
  await s.shot('passage-index-off');
  // A named collection: the box offers to turn it on, and the search then runs.
  const put = await fetch(`${open.base}/collections/clips`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: '{}' });
  assert.ok(put.status === 201 || put.status === 200, `PUT /collections/clips: ${put.status}`);
  await fetch(`${open.base}/collections/clips/documents/article`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: ARTICLE }) });
  await s.page.reload();
  await s.ready('passages');
  await s.page.getByTestId('collection-select').selectOption('clips');
  await s.ready('passages');
  await s.page.getByTestId('passages-text').fill(QUOTE);
  await s.page.getByTestId('passages-submit').click();
  await s.ready('passages');
  assert.match(await s.page.getByTestId('passage-index-off').textContent(), /PATCH \/collections\/clips/);
  await s.page.getByTestId('enable-passage-index').click();
  await s.page.getByTestId('passage-row').first().waitFor();
  await s.ready('passages');
  assert.deepEqual(await s.page.getByTestId('passage-row').evaluateAll((r) => r.map((x) => x.dataset.id)), ['article']);
  await s.view('overview');
  const flags = await s.page.getByTestId('overview-passage-index').allTextContents();
  const names = await s.page.getByTestId('overview-row').evaluateAll((r) => r.map((x) => x.dataset.name));
  assert.equal(flags[names.indexOf('clips')], 'on');
  assert.equal(flags[names.indexOf('default')], 'off');
  await s.close();
});

test('groups by containment show the member containment', async () => {
  const s = await session(passaged);
  await fetch(`${passaged.base}/documents/excerpt`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: EXCERPT }) });
  await s.view('groups');
  await s.page.getByTestId('groups-measure').selectOption('containment');
  await s.page.getByTestId('threshold-input').fill('0.9');
  await s.page.getByTestId('groups-submit').click();
  await s.ready('groups');
  const row = s.page.getByTestId('groups-row').filter({ hasText: 'article' });
  assert.equal(await row.count(), 1);
  assert.match(await row.textContent(), /containment 1(\.000)?, Jaccard 0\.\d+/);
  await fetch(`${passaged.base}/documents/excerpt`, { method: 'DELETE' });
  await s.close();
});

test('hostile documents stay inert in the passages view, and it fits a 420-px window', async () => {
  const s = await session(passaged, [], { width: 420, height: 800 });
  await s.view('passages');
  await s.page.getByTestId('passages-text').fill(COMMON);
  await s.page.getByTestId('passages-submit').click();
  await s.ready('passages');
  const ids = await s.page.getByTestId('passage-row').evaluateAll((r) => r.map((x) => x.dataset.id));
  assert.deepEqual(ids.sort(), HOSTILE.map((d) => d.id).sort());
  const text = await s.page.locator('main').textContent();
  assert.ok(text.includes('<script>window.__pwned = "script"</script>'), 'markup around the span shown as text');
  await s.page.getByTestId('passage-open').first().click();
  await s.ready('passages');
  const shown = await s.page.getByTestId('passage-document').textContent();
  assert.ok(HOSTILE.map((d) => d.text).includes(shown), `the whole document as text: ${shown}`);
  assert.ok(await s.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), 'no page-wide horizontal scroll at 420 px');
  await s.shot('passages-narrow');
  // Keyboard: the row's buttons are reachable and work with Enter.
  await s.page.getByTestId('passage-compare').first().focus();
  await s.page.keyboard.press('Enter');
  await s.ready('compare');
  assert.equal(await s.page.locator('main').evaluate((m) => m.textContent.includes('null')), false, 'no stray null');
  assert.ok(await s.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), 'compare fits 420 px too');
  const live = await s.page.evaluate(() => ({
    pwned: window.__pwned,
    scripts: document.querySelectorAll('main script').length,
    images: document.querySelectorAll('main img').length,
    links: document.querySelectorAll('main a').length,
  }));
  assert.deepEqual(live, { pwned: undefined, scripts: 0, images: 0, links: 0 });
  // The other views fit too, with their measure choices.
  for (const name of ['search', 'groups', 'boilerplate', 'webhooks', 'overview']) {
    await s.view(name);
    assert.ok(await s.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), `${name} fits 420 px`);
  }
  await s.close();
});

// ---------------------------------------------------------------------------
// Boilerplate (a server whose default collection counts document frequency)
// ---------------------------------------------------------------------------

/** What markup in the page could have run or rendered. */
async function inert(page) {
  return page.evaluate(() => ({
    pwned: window.__pwned,
    scripts: document.querySelectorAll('main script').length,
    images: document.querySelectorAll('main img').length,
  }));
}

test('the boilerplate view lists the shared site footer with its document count, as inert text', async () => {
  const s = await session(bp);
  await s.view('boilerplate');
  const rows = s.page.getByTestId('bp-passage');
  assert.ok(await rows.count() >= 1, 'a common passage is listed');
  const first = rows.first();
  const text = await first.getByTestId('bp-passage-text').textContent();
  assert.ok(SITE_FOOTER.includes(text) || text.includes('Valley Courier'), `the footer: ${text}`);
  assert.ok(text.includes('Subscribe for the weekly digest <img src=x'), `the markup shown as text: ${text}`);
  assert.equal(await first.getAttribute('data-documents'), String(POSTS.length), 'held by every post');
  assert.match(await first.locator('td[data-score="documents"]').textContent(), new RegExp(`^≤ ${POSTS.length}`));
  assert.equal(await s.page.getByTestId('bp-summary').locator('[data-key="applies"]').textContent(), 'yes');
  // The default collection's settings come from the configuration.
  assert.match(await s.page.getByTestId('bp-default-note').textContent(), /index\.boilerplate\.enabled/);
  assert.ok(await s.page.getByTestId('bp-enabled').isDisabled());
  assert.ok(await s.page.getByTestId('bp-enabled').isChecked());
  assert.deepEqual(await inert(s.page), { pwned: undefined, scripts: 0, images: 0 });
  await s.shot('boilerplate');
  await s.page.setViewportSize({ width: 420, height: 800 });
  assert.ok(await s.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), 'fits a 420-px window');
  await s.shot('boilerplate-narrow');
  await s.close();
});

test('a template (hostile markup in it stays inert) can be added, viewed and deleted', async () => {
  const s = await session(bp);
  await s.view('boilerplate');
  assert.equal(await s.page.getByTestId('template-row').count(), 0);
  await s.page.getByTestId('template-id').fill('night-desk');
  await s.page.getByTestId('template-text').fill(HOSTILE_TEMPLATE);
  await s.page.getByTestId('template-add').click();
  await s.ready('boilerplate');
  assert.match(await s.page.getByTestId('template-status').textContent(), /night-desk registered \(\d+ shingles\)/);
  const row = s.page.getByTestId('template-row');
  assert.deepEqual(await row.evaluateAll((r) => r.map((x) => x.dataset.id)), ['night-desk']);
  assert.equal(await s.page.getByTestId('bp-summary').locator('dd').nth(5).textContent(), '1', 'the summary counts it');
  const listed = await (await fetch(`${bp.base}/templates`)).json();
  assert.deepEqual(listed.templates.map((t) => t.id), ['night-desk']);
  await row.getByTestId('template-view').click();
  await s.ready('boilerplate');
  assert.equal(await s.page.getByTestId('template-full-text').textContent(), HOSTILE_TEMPLATE);
  assert.deepEqual(await inert(s.page), { pwned: undefined, scripts: 0, images: 0 });
  await s.shot('boilerplate-template');
  // Delete asks for a second click.
  await row.getByTestId('template-delete').click();
  assert.equal(await s.page.getByTestId('template-row').count(), 1, 'one click only arms it');
  await row.getByTestId('template-delete').click();
  await s.ready('boilerplate');
  assert.equal(await s.page.getByTestId('template-row').count(), 0);
  assert.match(await s.page.getByTestId('template-status').textContent(), /Deleted the template night-desk/);
  assert.deepEqual((await (await fetch(`${bp.base}/templates`)).json()).templates, []);
  await s.close();
});

test('search on content scores leaves the shared footer out; both scores are shown', async () => {
  const s = await session(bp);
  await s.view('search');
  const query = `${POSTS[3].body}.\n\n${SITE_FOOTER}`;
  // Raw Jaccard: the footer makes unrelated posts near-duplicates.
  await s.page.getByTestId('search-text').fill(query);
  await s.page.getByTestId('threshold-input').fill('0.5');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  let ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.ok(ids.length > 1 && ids.includes(POSTS[3].id), `raw Jaccard finds other posts by their footer: ${ids}`);
  assert.match(await s.page.locator('main p.muted[data-score]').textContent(), /at Jaccard ≥ 0\.50 \(the threshold applied to the raw score/);
  // Content: only the post itself.
  await s.page.getByTestId('search-score').selectOption('content');
  assert.equal(await s.page.getByTestId('threshold-input').getAttribute('min'), '0.01', 'a content score may be low');
  await s.page.getByTestId('threshold-input').fill('0.5');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  ids = await s.page.getByTestId('result-row').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.deepEqual(ids, [POSTS[3].id]);
  assert.match(await s.page.locator('main p.muted[data-score="content"]').textContent(),
    /^1 result at content Jaccard ≥ 0\.50 \(the threshold applied to the content score/);
  const headers = await s.page.getByTestId('search-results').locator('th').allTextContents();
  assert.deepEqual(headers.slice(0, 5), ['id', 'content Jaccard', 'content: this text in it', 'content: it in this text', 'weighted Jaccard']);
  assert.ok(headers.includes('Jaccard') && headers.includes('shared'), `raw scores too: ${headers}`);
  const row = s.page.getByTestId('result-row').first();
  const score = async (k) => Number(await row.locator(`td[data-score="${k}"]`).textContent());
  assert.equal(await score('content_jaccard'), 1);
  assert.equal(await score('jaccard'), 1);
  assert.match(await row.locator('td[data-score="shared"]').textContent(), /^\d+ \+ \d+ boilerplate$/);
  // A raw search on this collection shows the content scores beside the raw ones.
  await s.page.getByTestId('search-score').selectOption('raw');
  await s.page.getByTestId('search-text').fill(`${POSTS[5].body}.\n\n${SITE_FOOTER}`);
  await s.page.getByTestId('threshold-input').fill('0.5');
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  const other = s.page.locator(`[data-testid="result-row"]:not([data-id="${POSTS[5].id}"])`).first();
  assert.ok(Number(await other.locator('td[data-score="jaccard"]').textContent()) >= 0.5);
  assert.ok(Number(await other.locator('td[data-score="content_jaccard"]').textContent()) < 0.5, 'the footer alone makes it a match');
  await s.shot('search-content');
  await s.close();
});

test('compare greys the footer on both sides, apart from shared content, with both scores', async () => {
  const s = await session(bp);
  await s.page.goto(`${bp.base}/ui/#/compare?a=${POSTS[0].id}&b=${POSTS[1].id}`);
  await s.ready('compare');
  for (const side of ['a', 'b']) {
    const pane = s.page.getByTestId(`compare-${side}`);
    const grey = pane.locator('.bp');
    assert.ok(await grey.count() > 0, `boilerplate marked on ${side}`);
    const text = (await grey.allTextContents()).join(' ');
    assert.ok(text.includes('independent paper of the upper valley'), `the footer is greyed on ${side}: ${text}`);
    assert.ok(!text.includes(POSTS[side === 'a' ? 0 : 1].body.split(' ').slice(0, 5).join(' ')), 'the post itself is not');
    assert.equal(await pane.textContent(), POSTS[side === 'a' ? 0 : 1].text, 'the pane holds the text as sent');
  }
  assert.match(await s.page.getByTestId('compare-legend').textContent(), /shared content.*boilerplate/s);
  const contentScores = s.page.getByTestId('content-scores');
  const cj = Number(await contentScores.locator('dd[data-score="content jaccard"]').textContent());
  const raw = Number(await s.page.getByTestId('compare-scores').locator('dd[data-score="jaccard"]').textContent());
  assert.ok(raw > 0.4 && cj < 0.2, `raw ${raw}, content ${cj}`);
  assert.ok(await contentScores.locator('dd[data-score="weighted jaccard"]').count() === 1);
  assert.ok(Number(await contentScores.locator('dd[data-score="shared boilerplate"]').textContent()) > 20);
  // Boilerplate looks unlike a shared content passage.
  const greyColour = await s.page.getByTestId('compare-a').locator('.bp').first().evaluate((m) => getComputedStyle(m).backgroundColor);
  const keyColour = await s.page.getByTestId('compare-legend').locator('mark.p0').evaluate((m) => getComputedStyle(m).backgroundColor);
  assert.notEqual(greyColour, keyColour);
  assert.deepEqual(await inert(s.page), { pwned: undefined, scripts: 0, images: 0 });
  await s.shot('compare-boilerplate');
  await s.close();
});

test('groups and pairs on content scores; overview flags the collections that count boilerplate', async () => {
  const s = await session(bp);
  await s.view('groups');
  await s.page.getByTestId('threshold-input').fill('0.5');
  await s.page.getByTestId('groups-submit').click();
  await s.ready('groups');
  const rawRow = s.page.getByTestId('groups-row').filter({ hasText: POSTS[0].id });
  assert.equal(await rawRow.getAttribute('data-size'), String(POSTS.length), 'raw: the footer groups every post');
  // The reprint's footer is on it alone: registered as a template, it is boilerplate too.
  const put = await fetch(`${bp.base}/templates/gazette-footer`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: GAZETTE_FOOTER }),
  });
  assert.equal(put.status, 201);
  await s.page.getByTestId('groups-score').selectOption('content');
  await s.page.getByTestId('threshold-input').fill('0.5');
  await s.page.getByTestId('groups-submit').click();
  await s.ready('groups');
  assert.match(await s.page.getByTestId('groups-total').textContent(), /^1 group, 2 documents in them, at content Jaccard ≥ 0\.50/);
  assert.deepEqual(await s.page.getByTestId('group-member').allTextContents(), [POSTS[0].id, REPRINT.id], 'content: only the reprint');
  const scores = await s.page.getByTestId('groups-row').first().locator('li span').first().textContent();
  assert.match(scores, /content Jaccard 0\.\d+; raw Jaccard 0\.\d+/, `members show content then raw scores: ${scores}`);
  // Pairs: the reprint with its content scores, its raw Jaccard low.
  await s.page.getByTestId('pairs-submit').click();
  await s.ready('groups');
  assert.match(await s.page.getByTestId('pairs-total').textContent(), /^1 pair at content Jaccard ≥ 0\.50/);
  const pair = s.page.getByTestId('pair-row');
  assert.deepEqual(await pair.evaluateAll((r) => r.map((x) => [x.dataset.a, x.dataset.b])), [[POSTS[0].id, REPRINT.id]]);
  assert.ok(Number(await pair.locator('td[data-score="content_jaccard"]').textContent()) >= 0.5);
  assert.ok(Number(await pair.locator('td[data-score="jaccard"]').textContent()) < 0.5, 'the other footer hides it from raw Jaccard');
  assert.ok(Number(await pair.locator('td[data-score="weighted_jaccard"]').textContent()) > 0);
  await s.shot('groups-pairs');
  await s.view('overview');
  assert.deepEqual(await s.page.getByTestId('overview-boilerplate').evaluateAll((c) => c.map((x) => x.dataset.enabled)), ['true']);
  assert.match(await s.page.getByTestId('overview-boilerplate').textContent(), /^counted: ≥ 20% and ≥ 3 documents, from 10\d+ template shingles$/);
  assert.equal((await fetch(`${bp.base}/templates/gazette-footer`, { method: 'DELETE' })).status, 204);
  await s.close();
});

test('the boilerplate view turns counting on for a named collection (PATCH), which then lists its footer', async () => {
  const put = await fetch(`${bp.base}/collections/letters`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ store_text: true, index: { passage_index: true, boilerplate: { enabled: false } } }),
  });
  assert.ok(put.status === 201 || put.status === 200, `PUT /collections/letters: ${put.status}`);
  const docs = [...filler(6), ...POSTS.slice(0, 6)].map(({ id, text }) => ({ id, text }));
  const r = await fetch(`${bp.base}/collections/letters/documents/batch`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ documents: docs }),
  });
  assert.equal(r.status, 200);
  const s = await session(bp);
  await s.view('boilerplate');
  await s.page.getByTestId('collection-select').selectOption('letters');
  await s.ready('boilerplate');
  // Off: the view says so without asking the server for passages.
  assert.match(await s.page.getByTestId('boilerplate-off').textContent(), /counts no document frequency.*PATCH \/collections\/letters/s);
  assert.ok(await s.page.getByTestId('bp-enabled').isEnabled());
  await s.page.getByTestId('bp-enabled').check();
  await s.page.getByTestId('bp-share').fill('0.3');
  await s.page.getByTestId('bp-min-docs').fill('3');
  await s.page.getByTestId('bp-min-collection-docs').fill('10');
  await s.page.getByTestId('bp-save').click();
  await s.ready('boilerplate');
  assert.match(await s.page.getByTestId('bp-settings-status').textContent(), /Saved: document frequency is counted/);
  const info = await (await fetch(`${bp.base}/collections/letters`)).json();
  assert.deepEqual(info.stats.index.boilerplate && [info.stats.index.boilerplate.enabled, info.stats.index.boilerplate.share,
    info.stats.index.boilerplate.min_docs, info.stats.index.boilerplate.min_collection_docs], [true, 0.3, 3, 10]);
  const rows = s.page.getByTestId('bp-passage');
  assert.ok(await rows.count() >= 1);
  assert.equal(await rows.first().getAttribute('data-documents'), '6');
  assert.ok((await rows.first().getByTestId('bp-passage-text').textContent()).includes('Valley Courier'));
  await s.close();
});

test('a content-score search on a collection that counts no document frequency says so and how to turn it on', async () => {
  const s = await session(passaged, [/status of 409/]);
  await s.view('search');
  await s.page.getByTestId('search-score').selectOption('content');
  assert.match(await s.page.getByTestId('score-note').textContent(), /counts no document frequency/);
  await s.page.getByTestId('search-text').fill(TWIN_A);
  await s.page.getByTestId('search-submit').click();
  await s.ready('search');
  assert.match(await s.page.getByTestId('boilerplate-off').textContent(),
    /counts no document frequency.*NEARDUP_INDEX__BOILERPLATE__ENABLED=true/s);
  // The boilerplate view says the same without a failing request.
  await s.view('boilerplate');
  assert.equal(await s.page.getByTestId('boilerplate-off').count(), 1);
  assert.equal(await s.page.getByTestId('bp-passage').count(), 0);
  await s.close();
});

// ---------------------------------------------------------------------------
// Webhooks (a server whose subscriptions may reach 127.0.0.1)
// ---------------------------------------------------------------------------

/** A receiver on a free loopback port: answers 200, keeps each request. */
async function receiver() {
  const got = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    got,
    url: `http://127.0.0.1:${server.address().port}/hook`,
    // The server keeps its connection alive: end it, or close would wait for it.
    close: () => new Promise((r) => { server.close(r); server.closeAllConnections(); }),
  };
}

/** Poll `fn` until it returns something truthy (the suite's timeout bounds it). */
async function until(fn, what) {
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function putDocument(base, id, text) {
  const r = await fetch(`${base}/documents/${encodeURIComponent(id)}`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text }),
  });
  assert.ok(r.status === 201 || r.status === 200, `stored ${id}: ${r.status} ${await r.text()}`);
}

// A document id that is markup: it travels in the event, the feed and the delivery.
const HOSTILE_ID = 'reprint <img src=x onerror="window.__pwned = \'event\'"> “Genève”';

test('webhooks: a subscription made in the view shows its secret once, receives a signed delivery, and the feed shows the event as inert text', async () => {
  const rcv = await receiver();
  // The creation refused for a host outside webhooks.allowed_hosts logs its 422.
  const s = await session(hooked, [/status of 422/]);
  try {
    await s.view('webhooks');
    await s.page.getByTestId('wh-none').waitFor();
    await s.page.getByTestId('wh-feed-none').waitFor();

    // A URL the server may not reach: the problem, readably, and what to do.
    await s.page.getByTestId('wh-url').fill('http://example.com/hook');
    await s.page.getByTestId('wh-create').click();
    await s.ready('webhooks');
    const refused = await s.page.getByTestId('wh-create-status').textContent();
    assert.match(refused, /^422: /, refused);
    assert.match(refused, /example\.com/, refused);
    assert.ok(await s.page.getByTestId('wh-url-help').isVisible());
    assert.equal(await s.page.getByTestId('wh-secret').count(), 0);

    // The receiver: duplicates only, at 0.85.
    await s.page.getByTestId('wh-url').fill(rcv.url);
    await s.page.getByTestId('wh-kind-refused').uncheck();
    await s.page.getByTestId('wh-threshold').fill('0.85');
    await s.page.getByTestId('wh-id').fill('ingest-hook');
    await s.page.getByTestId('wh-create').click();
    await s.ready('webhooks');
    const secret = await s.page.getByTestId('wh-secret-value').textContent();
    assert.match(secret, /^whsec_[A-Za-z0-9+/=]+$/);
    assert.match(await s.page.getByTestId('wh-secret').textContent(), /only time it is shown/);
    await s.page.getByTestId('wh-secret-copy').click();
    await s.page.getByTestId('wh-secret-copied').filter({ hasText: /Copied|Selected/ }).waitFor();
    const row = s.page.getByTestId('wh-row').filter({ hasText: 'ingest-hook' });
    assert.equal(await row.count(), 1);
    assert.match(await row.textContent(), /document\.duplicate/);
    assert.doesNotMatch(await row.textContent(), /document\.refused/);
    assert.match(await row.textContent(), /jaccard \/ raw ≥ 0\.850/);

    // The list never carries the secret: leaving the view forgets it.
    await s.view('search');
    await s.view('webhooks');
    assert.equal(await s.page.getByTestId('wh-secret').count(), 0);
    assert.ok(!(await s.page.locator('main').textContent()).includes(secret), 'the secret is not shown again');

    // Two near-duplicates written through the API: the second is an event.
    await putDocument(hooked.base, 'harbour-original', TWIN_A);
    await putDocument(hooked.base, HOSTILE_ID, TWIN_B);
    await s.page.getByTestId('wh-feed-newer').click();
    await s.ready('webhooks');
    const event = s.page.getByTestId('wh-event');
    assert.equal(await event.count(), 1);
    assert.equal(await event.getAttribute('data-type'), 'document.duplicate');
    assert.equal(await event.getByTestId('wh-event-document').textContent(), HOSTILE_ID);
    assert.deepEqual(await event.getByTestId('wh-event-match').evaluateAll((m) => m.map((x) => x.dataset.id)), ['harbour-original']);
    assert.match(await event.getByTestId('wh-event-match').textContent(), /jaccard 0\.\d{3}/);
    assert.deepEqual(await inert(s.page), { pwned: undefined, scripts: 0, images: 0 });
    await s.shot('webhooks');

    // The receiver got it, signed with the secret shown once (Standard Webhooks).
    const [delivery] = await until(() => rcv.got.length && rcv.got, 'a delivery to the receiver');
    assert.equal(delivery.method, 'POST');
    const body = JSON.parse(delivery.body);
    assert.equal(body.type, 'document.duplicate');
    assert.equal(body.data.document, HOSTILE_ID);
    assert.equal(body.data.event, await event.getAttribute('data-id'));
    assert.equal(delivery.headers['webhook-id'], `${body.data.event}_ingest-hook`);
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const signed = createHmac('sha256', key)
      .update(`${delivery.headers['webhook-id']}.${delivery.headers['webhook-timestamp']}.${delivery.body}`).digest('base64');
    assert.ok(delivery.headers['webhook-signature'].split(' ').includes(`v1,${signed}`), 'signed with the secret shown');
    await s.close();
  } finally {
    await rcv.close();
  }
});

test('webhooks: a subscription to a closed port lists its failed delivery, which can be retried; deleting it asks twice', async () => {
  const closed = await freePort(); // nothing listens there
  const s = await session(hooked);
  await s.view('webhooks');
  await s.page.getByTestId('wh-url').fill(`http://127.0.0.1:${closed}/nobody`);
  await s.page.getByTestId('wh-id').fill('dead-end');
  await s.page.getByTestId('wh-create').click();
  await s.ready('webhooks');
  await s.page.getByTestId('wh-secret').waitFor();
  // Another reprint: the event goes to the closed port, twice, then is listed as failed.
  await putDocument(hooked.base, 'harbour-third', TWIN_C);
  await until(async () => {
    const r = await fetch(`${hooked.base}/webhooks/dead-end/failed`);
    return (await r.json()).failed.length === 1;
  }, 'the failed delivery is listed');
  await s.page.getByTestId('wh-refresh').click();
  await s.ready('webhooks');
  const row = s.page.locator('[data-testid="wh-row"][data-id="dead-end"]');
  assert.equal(await row.locator('[data-key="failed"]').textContent(), '1');
  await row.getByTestId('wh-failed-open').click();
  await s.ready('webhooks');
  const failed = s.page.getByTestId('wh-failed-row');
  assert.equal(await failed.count(), 1);
  assert.match(await failed.textContent(), /harbour-third/);
  assert.equal(await failed.locator('td[data-label="attempts"]').textContent(), '2');
  assert.ok((await failed.getByTestId('wh-failed-error').textContent()).length > 0, 'the last error is shown');
  await failed.getByTestId('wh-retry').click();
  await s.ready('webhooks');
  await s.page.getByTestId('wh-failed-status').filter({ hasText: '1 delivery put back into delivery' }).waitFor();

  // Deleting asks for a second click, then the row and its deliveries go.
  const del = s.page.locator('[data-testid="wh-row"][data-id="dead-end"]').getByTestId('wh-delete');
  await del.click();
  assert.equal(await s.page.locator('[data-testid="wh-row"][data-id="dead-end"]').count(), 1, 'one click does not delete');
  await del.click();
  await s.ready('webhooks');
  await s.page.getByTestId('wh-list-status').filter({ hasText: 'Deleted the subscription dead-end' }).waitFor();
  assert.equal(await s.page.locator('[data-testid="wh-row"][data-id="dead-end"]').count(), 0);
  assert.equal((await fetch(`${hooked.base}/webhooks/dead-end`)).status, 404);
  assert.equal(await s.page.locator('[data-testid="wh-row"][data-id="ingest-hook"]').count(), 1, 'the other subscription stays');
  await s.close();
});

test('webhooks: the view works on the selected collection: a named collection\'s subscription gets only its events', async () => {
  const put = await fetch(`${hooked.base}/collections/alerts`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({}),
  });
  assert.ok(put.status === 201 || put.status === 200, `PUT /collections/alerts: ${put.status}`);
  const rcv = await receiver();
  const s = await session(hooked);
  try {
    await s.view('webhooks');
    await s.page.getByTestId('collection-select').selectOption('alerts');
    await s.ready('webhooks');
    await s.page.getByTestId('wh-none').waitFor();
    await s.page.getByTestId('wh-feed-none').waitFor();
    await s.page.getByTestId('wh-url').fill(rcv.url);
    await s.page.getByTestId('wh-id').fill('alerts-hook');
    await s.page.getByTestId('wh-create').click();
    await s.ready('webhooks');
    await s.page.getByTestId('wh-secret').waitFor();
    assert.deepEqual(await s.page.getByTestId('wh-row').evaluateAll((r) => r.map((x) => x.dataset.id)), ['alerts-hook']);
    const text = 'Der Hafenmeister berichtet: Im Morgengrauen verließen die Fischerboote Saint-Étienne mit Eis für 40 £, '
      + 'die Möwen kreisten über den Netzen, der Koch zählte die Brote und die Bohnendosen, und der Kapitän fluchte über den Nebel '
      + 'auf dem Wasser, bis der Leuchtturm hinter dem grauen Café am Pier verschwand';
    for (const [id, t] of [['hafen-1', `${text}.`], ['hafen-2', `${text.replace('zählte', 'prüfte')}.`]]) {
      const r = await fetch(`${hooked.base}/collections/alerts/documents/${id}`, {
        method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: t }),
      });
      assert.equal(r.status, 201, await r.text());
    }
    await s.page.getByTestId('wh-feed-newer').click();
    await s.ready('webhooks');
    assert.deepEqual(await s.page.getByTestId('wh-event-document').allTextContents(), ['hafen-2']);
    const [delivery] = await until(() => rcv.got.length && rcv.got, 'a delivery from the named collection');
    assert.equal(JSON.parse(delivery.body).data.collection, 'alerts');
    const ids = (await (await fetch(`${hooked.base}/webhooks`)).json()).webhooks.map((w) => w.id);
    assert.ok(!ids.includes('alerts-hook'), `the default collection's subscriptions do not include it: ${ids}`);
    await s.close();
  } finally {
    await rcv.close();
  }
});

test('webhooks: the view fits a 420-px window, its event feed included', async () => {
  const s = await session(hooked, [], { width: 420, height: 800 });
  await s.view('webhooks');
  assert.ok(await s.page.getByTestId('wh-event').count() >= 1, 'events to show');
  assert.ok(await s.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), 'no page-wide horizontal scroll at 420 px');
  await s.shot('webhooks-narrow');
  assert.deepEqual(await inert(s.page), { pwned: undefined, scripts: 0, images: 0 });
  await s.close();
});

// ---------------------------------------------------------------------------
// Review desk (the open server; each test on its own named collection)
// ---------------------------------------------------------------------------

/** A named collection that stores texts, with `documents` planted. */
async function deskCollection(server, name, documents) {
  const put = await fetch(`${server.base}/collections/${name}`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ store_text: true }),
  });
  assert.ok(put.status === 201 || put.status === 200, `PUT /collections/${name}: ${put.status}`);
  const r = await fetch(`${server.base}/collections/${name}/documents/batch`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ documents }),
  });
  assert.equal(r.status, 200, await r.text());
}

/** Open the Review view on collection `name`. */
async function reviewOn(s, server, name) {
  await s.view('review');
  await s.page.getByTestId('collection-select').selectOption(name);
  await s.ready('review');
}

/** The pair the view shows now: its queue item's ids, in the order
 * decisions name them (a < b). */
async function currentPair(page) {
  return (await page.locator('[data-testid="queue-item"].current').evaluate((li) => [li.dataset.a, li.dataset.b])).sort();
}

/** Every decision of a collection, as the API lists it. */
async function decisionsOf(server, name) {
  const r = await fetch(`${server.base}/collections/${name}/review/decisions?limit=1000`);
  assert.equal(r.status, 200);
  return (await r.json()).decisions;
}

// A German pair (one word changed) beside the planted twins and the hostile trio.
const MEER = 'Der Hafenmeister berichtet: Im Morgengrauen verließen die Fischerboote Saint-Étienne mit Eis für 40 £, '
  + 'die Möwen kreisten über den Netzen, der Koch zählte die Brote und die Bohnendosen, der junge Matrose aus Kraków las '
  + 'den Wetterbericht vor, und der Kapitän fluchte über den Nebel auf dem Wasser, bis der Leuchtturm hinter dem grauen Café am Pier verschwand';
const DESK = [
  ...filler(30),
  { id: 'twin-a', text: TWIN_A }, { id: 'twin-b', text: TWIN_B }, { id: 'twin-c', text: TWIN_C },
  ...HOSTILE,
  { id: 'meer-1', text: `${MEER}.` }, { id: 'meer-2', text: `${MEER.replace('zählte', 'prüfte')}.` },
];
const DESK_TEXT = Object.fromEntries(DESK.map((d) => [d.id, d.text]));

test('review: the queue lists pairs with both documents\' snippets, and the current pair is shown side by side with its shared passages', async () => {
  await deskCollection(open, 'desk-queue', DESK);
  const s = await session(open, [/status of 409/]);
  await reviewOn(s, open, 'desk-queue');
  const items = s.page.getByTestId('queue-item');
  assert.ok(await items.count() >= 3, `pairs to review: ${await items.count()}`);
  const shown = await items.evaluateAll((lis) => lis.map((li) => ({
    a: li.dataset.a, b: li.dataset.b, source: li.dataset.source,
    docs: Array.from(li.querySelectorAll('[data-testid="review-doc"]'), (d) => ({
      id: d.dataset.id, text: (d.querySelector('[data-testid="snippet-text"]') || { textContent: '' }).textContent,
    })),
  })));
  for (const item of shown) {
    assert.deepEqual(item.docs.map((d) => d.id), [item.a, item.b]);
    for (const d of item.docs) {
      const firstWords = DESK_TEXT[d.id].split(/\s+/).slice(0, 3).join(' ');
      assert.ok(d.text.startsWith(firstWords), `the snippet of ${d.id} starts with its first words: ${d.text}`);
    }
  }
  const twins = shown.find((x) => x.a === 'twin-a' && x.b === 'twin-b');
  assert.ok(twins, `the planted twins are queued: ${JSON.stringify(shown.map((x) => [x.a, x.b]))}`);
  assert.equal(twins.source, 'detected');
  assert.match(await s.page.getByTestId('queue-status').textContent(), /pairs? to review/);
  assert.equal(await s.page.locator('main').evaluate((m) => m.textContent.includes('null')), false, 'no stray null');
  // The first item is the current pair, side by side as Compare shows it.
  const [a, b] = await currentPair(s.page);
  assert.deepEqual([a, b], [shown[0].a, shown[0].b].sort());
  assert.equal(await s.page.getByTestId('compare-a').textContent(), DESK_TEXT[shown[0].a]);
  assert.equal(await s.page.getByTestId('compare-b').textContent(), DESK_TEXT[shown[0].b]);
  assert.ok(await s.page.locator('[data-testid="compare-a"] mark[data-testid="passage"]').count() >= 1, 'shared passages marked');
  assert.match(await s.page.getByTestId('review-position').textContent(), /^Pair 1 of \d+$/);
  // Another item opens on a click.
  await items.nth(1).getByTestId('queue-open').click();
  await s.ready('review');
  assert.deepEqual(await currentPair(s.page), [shown[1].a, shown[1].b].sort());
  assert.equal(await s.page.getByTestId('compare-a').textContent(), DESK_TEXT[shown[1].a]);
  await s.shot('review');
  // By containment: content scores do not go with it, and without the
  // passage index (409, logged by the browser) the view says how to turn it on.
  await s.page.getByTestId('review-score').selectOption('content');
  await s.page.getByTestId('review-measure').selectOption('containment');
  assert.equal(await s.page.getByTestId('review-score').inputValue(), 'raw');
  assert.ok(await s.page.locator('[data-testid="review-score"] option[value="content"]').isDisabled());
  await s.page.getByTestId('review-load').click();
  await s.ready('review');
  assert.match(s.page.url(), /#\/review\?measure=containment&score=raw&from=0\.5&width=0\.05$/);
  await s.page.getByTestId('passage-index-off').waitFor();
  await s.page.getByTestId('enable-passage-index').click();
  await s.ready('review');
  await s.page.getByTestId('queue-item').first().waitFor();
  assert.match(await s.page.getByTestId('queue-status').textContent(), /^\d+ pairs? to review: containment scores from 0\.50/);
  await s.close();
});

test('review: decide by mouse and by keyboard (not while typing the note); the next pair follows; the decisions are listed, edited, exported as NDJSON and deleted; the precision chart follows', async () => {
  await deskCollection(open, 'desk-decide', DESK);
  const s = await session(open);
  await reviewOn(s, open, 'desk-decide');
  const chart = s.page.getByTestId('precision-chart');
  assert.equal(await chart.getAttribute('data-labels'), '0');
  assert.equal(await s.page.getByTestId('decisions-total').getAttribute('data-total'), '0');

  // By mouse.
  const first = await currentPair(s.page);
  await s.page.getByTestId('decide-duplicate').click();
  await s.ready('review');
  assert.match(await s.page.getByTestId('review-status').textContent(), /^Recorded: .* are duplicates\.$/);
  const second = await currentPair(s.page);
  assert.notDeepEqual(second, first, 'the next pair is shown');
  assert.ok([second[0], second[1]].map((id) => DESK_TEXT[id]).includes(await s.page.getByTestId('compare-a').textContent()));
  assert.equal(await s.page.locator('[data-testid="queue-item"][data-state="duplicate"]').count(), 1);
  assert.equal(await chart.getAttribute('data-labels'), '1');
  assert.equal(await s.page.getByTestId('decisions-total').getAttribute('data-total'), '1');

  // By keyboard: keys typed into the note are text, not decisions.
  const NOTE = 'même gabarit, autre annonce — “Zitat” £40 ключ 模板';
  const note = s.page.getByTestId('review-note');
  await note.click();
  await note.pressSequentially('d n r s ');
  await note.fill(NOTE);
  assert.equal(await s.page.getByTestId('decisions-total').getAttribute('data-total'), '1', 'typing decides nothing');
  assert.deepEqual(await currentPair(s.page), second);
  await note.press('Escape');
  await s.page.keyboard.press('n');
  await s.ready('review');
  const third = await currentPair(s.page);
  assert.notDeepEqual(third, second);
  assert.equal(await chart.getAttribute('data-labels'), '2');
  assert.equal(await note.inputValue(), '', 'the note is cleared after a decision');
  // Skip: the next pair, no decision.
  await s.page.keyboard.press('s');
  await s.ready('review');
  assert.notDeepEqual(await currentPair(s.page), third);
  assert.equal(await s.page.locator('[data-testid="queue-item"][data-state="skipped"]').count(), 1);

  // Listed, with the note as written, and stored so.
  const rows = s.page.getByTestId('decision-row');
  assert.equal(await s.page.getByTestId('decisions-total').getAttribute('data-total'), '2');
  const listed = await rows.evaluateAll((r) => r.map((x) => [x.dataset.a, x.dataset.b, x.dataset.verdict]));
  const byPair = (x, y) => (x[0] !== y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] < y[1] ? -1 : 1);
  assert.deepEqual(listed, [[...first, 'duplicate'], [...second, 'not_duplicate']].sort(byPair), 'ordered by pair');
  const noted = s.page.locator('[data-testid="decision-row"][data-verdict="not_duplicate"]');
  assert.equal(await noted.locator('[data-key="note"]').textContent(), NOTE);
  let stored = await decisionsOf(open, 'desk-decide');
  assert.deepEqual(stored.map((d) => [d.a, d.b, d.verdict, d.note]).sort(),
    [[...first, 'duplicate', null], [...second, 'not_duplicate', NOTE]].sort());

  // Edited: the duplicate becomes related (revision 2).
  const dupRow = s.page.locator('[data-testid="decision-row"][data-verdict="duplicate"]');
  await dupRow.getByTestId('decision-edit').click();
  await s.page.getByTestId('decision-verdict').selectOption('related');
  await s.page.getByTestId('decision-save').click();
  await s.ready('review');
  const edited = s.page.locator(`[data-testid="decision-row"][data-a="${first[0]}"][data-b="${first[1]}"]`);
  assert.equal(await edited.getAttribute('data-verdict'), 'related');
  assert.equal(await edited.getAttribute('data-revision'), '2');
  assert.equal(await chart.getAttribute('data-labels'), '2');
  // Filtered by verdict.
  await s.page.getByTestId('decisions-filter').selectOption('related');
  await s.ready('review');
  assert.deepEqual(await rows.evaluateAll((r) => r.map((x) => x.dataset.verdict)), ['related']);
  await s.page.getByTestId('decisions-filter').selectOption('');
  await s.ready('review');

  // Exported: every decision as NDJSON, fetched with the page's key header and saved from a Blob.
  const [download] = await Promise.all([s.page.waitForEvent('download'), s.page.getByTestId('decisions-export').click()]);
  await s.ready('review');
  assert.equal(download.suggestedFilename(), 'decisions-desk-decide.ndjson');
  const lines = readFileSync(await download.path(), 'utf8').split('\n').filter((l) => l.trim());
  const exported = lines.map((l) => JSON.parse(l));
  assert.deepEqual(exported.map((d) => [d.a, d.b, d.verdict, d.note, d.revision]).sort(),
    [[...first, 'related', null, 2], [...second, 'not_duplicate', NOTE, 1]].sort());
  assert.equal(await s.page.getByTestId('decisions-exported').getAttribute('data-lines'), '2');

  // Deleted after a confirming second click.
  const del = s.page.locator('[data-testid="decision-row"][data-verdict="not_duplicate"]').getByTestId('decision-delete');
  await del.click();
  assert.equal(await s.page.getByTestId('decisions-total').getAttribute('data-total'), '2', 'one click deletes nothing');
  await del.click();
  await s.ready('review');
  assert.equal(await s.page.getByTestId('decisions-total').getAttribute('data-total'), '1');
  assert.equal(await chart.getAttribute('data-labels'), '1');
  stored = await decisionsOf(open, 'desk-decide');
  assert.deepEqual(stored.map((d) => [d.a, d.b, d.verdict]), [[...first, 'related']]);
  await s.shot('review-decided');
  await s.close();
});

test('review: the precision chart draws a point per labelled band and the suggestion line once enough labels exist', async () => {
  // Eight pairs that differ by one word (duplicates) and 22 unrelated pairs (not duplicates): 30 labels.
  const base = filler(60).slice(30);
  const copies = base.slice(0, 8).map((d) => ({ id: `${d.id}-copy`, text: d.text.replace(/^\S+/, 'Grüße') }));
  await deskCollection(open, 'desk-labels', [...base, ...copies]);
  const put = async (a, b, verdict) => {
    const r = await fetch(`${open.base}/collections/desk-labels/review/decisions`, {
      method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ a, b, verdict }),
    });
    assert.equal(r.status, 201, await r.text());
  };
  for (const c of copies) await put(c.id.replace(/-copy$/, ''), c.id, 'duplicate');
  for (let i = 8; i < 30; i += 1) await put(base[i].id, base[(i + 1) % 30].id, 'not_duplicate');
  const s = await session(open);
  await reviewOn(s, open, 'desk-labels');
  const chart = s.page.getByTestId('precision-chart');
  assert.equal(await chart.getAttribute('data-labels'), '30');
  assert.ok(Number(await chart.getAttribute('data-points')) >= 2, 'a point per labelled band');
  assert.equal(await chart.locator('canvas').count(), 1, 'the chart is drawn');
  const bands = await s.page.getByTestId('precision-band').evaluateAll((r) => r.map((x) => Number(x.dataset.labels)));
  assert.equal(bands.reduce((x, y) => x + y, 0), 30, `every label in a band: ${bands}`);
  // At the default target (0.95), eight duplicates cannot show it (Wilson); at 0.6 they do.
  assert.match(await s.page.getByTestId('precision-suggestion').textContent(), /^No threshold reaches precision 0\.95 with these 30 labels\.$/);
  await s.page.getByTestId('precision-target').fill('0.6');
  await s.page.getByTestId('precision-refresh').click();
  await s.ready('review');
  assert.match(await s.page.getByTestId('precision-suggestion').textContent(), /^at 0\.\d+, precision \d\.\d+ ± 0\.\d+ from \d+ labels$/);
  assert.notEqual(await s.page.getByTestId('precision-suggestion').getAttribute('data-threshold'), '');
  // The 30 decisions in pages of 20, by pair.
  const rows = s.page.getByTestId('decision-row');
  const page1 = await rows.evaluateAll((r) => r.map((x) => `${x.dataset.a} ${x.dataset.b}`));
  assert.equal(page1.length, 20);
  assert.ok(await s.page.getByTestId('decisions-prev').isDisabled());
  await s.page.getByTestId('decisions-next').click();
  await s.ready('review');
  const page2 = await rows.evaluateAll((r) => r.map((x) => `${x.dataset.a} ${x.dataset.b}`));
  assert.equal(page2.length, 10);
  assert.ok(await s.page.getByTestId('decisions-next').isDisabled());
  const stored = (await decisionsOf(open, 'desk-labels')).map((d) => `${d.a} ${d.b}`);
  assert.deepEqual([...page1, ...page2], stored, 'every decision once, in the API\'s order');
  await s.page.getByTestId('decisions-prev').click();
  await s.ready('review');
  assert.deepEqual(await rows.evaluateAll((r) => r.map((x) => `${x.dataset.a} ${x.dataset.b}`)), page1);
  await s.shot('review-precision');
  await s.close();
});

test('review: hostile snippets and texts stay inert, and the view fits a 420-px window', async () => {
  await deskCollection(open, 'desk-hostile', [...HOSTILE, ...filler(10)]);
  const s = await session(open, [], { width: 420, height: 800 });
  await reviewOn(s, open, 'desk-hostile');
  const snippets = await s.page.locator('[data-testid="queue-item"] [data-testid="review-doc"]').evaluateAll((ds) => ds.map((d) => [
    d.dataset.id, (d.querySelector('[data-testid="snippet-text"]') || { textContent: '' }).textContent]));
  assert.ok(snippets.length >= 2, 'hostile pairs queued');
  for (const [id, text] of snippets) {
    const planted = HOSTILE.find((d) => d.id === id).text;
    assert.ok(planted.startsWith(text.replace(/…$/, '')) || text.startsWith(planted.split(' ').slice(0, 4).join(' ')), `${id}: ${text}`);
  }
  assert.ok(snippets.some(([id, text]) => id === 'hostile-script' && text.includes('<script>window.__pwned = "script"</script>')), 'markup shown as text');
  assert.ok(await s.page.getByTestId('decide-duplicate').isVisible());
  assert.ok(await s.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), 'no page-wide horizontal scroll at 420 px');
  await s.page.getByTestId('decide-related').click();
  await s.ready('review');
  assert.ok(await s.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), 'still none with a decision listed and the chart drawn');
  await s.shot('review-narrow');
  assert.deepEqual(await inert(s.page), { pwned: undefined, scripts: 0, images: 0 });
  assert.equal(await s.page.locator('main a').count(), 0, 'no link made from the texts');
  await s.close();
});

test('review: without stored texts the snippets are the titles of the collection\'s snippet field, hostile ones inert, and the pair shows its scores', async () => {
  const put = await fetch(`${open.base}/collections/desk-titles`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ store_text: false, review: { snippet_field: 'headline' } }),
  });
  assert.ok(put.status === 201 || put.status === 200, `PUT /collections/desk-titles: ${put.status} ${await put.text()}`);
  const headline = {
    'twin-a': 'Hafen: „Ruhiger“ Bericht <img src=x onerror="window.__pwned = \'title\'">',
    'twin-b': 'Порт: тихий отчёт <script>window.__pwned = "title"</script>',
  };
  const docs = [{ id: 'twin-a', text: TWIN_A, metadata: { headline: headline['twin-a'] } },
    { id: 'twin-b', text: TWIN_B, metadata: { headline: headline['twin-b'] } }, ...filler(8)];
  const r = await fetch(`${open.base}/collections/desk-titles/documents/batch`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ documents: docs }),
  });
  assert.equal(r.status, 200);
  // /explain needs the texts: 409, logged by the browser; the pair falls back to GET /compare.
  const s = await session(open, [/status of 409/]);
  await reviewOn(s, open, 'desk-titles');
  const item = s.page.locator('[data-testid="queue-item"][data-a="twin-a"][data-b="twin-b"]');
  const titles = await item.getByTestId('snippet-title').allTextContents();
  assert.deepEqual(titles, [headline['twin-a'], headline['twin-b']]);
  assert.equal(await item.getByTestId('snippet-text').count(), 0, 'no text stored, none shown');
  assert.ok(await s.page.getByTestId('compare-scores').isVisible(), 'the pair\'s scores without its texts');
  assert.deepEqual(await inert(s.page), { pwned: undefined, scripts: 0, images: 0 });
  await s.close();
});

test('review: a named key\'s decision says who decided it', async () => {
  // The collection stores no texts: /explain answers 409 (logged) and the pair shows its scores.
  const s = await session(keyed, [/status of 409/]);
  await s.page.goto(`${keyed.base}/ui/#/review`);
  await s.ready('key');
  await s.page.getByTestId('api-key-input').fill('moderator-key');
  await s.page.getByTestId('api-key-submit').click();
  await s.ready('review');
  const pair = await currentPair(s.page);
  await s.page.getByTestId('decide-related').click();
  await s.ready('review');
  const row = s.page.locator(`[data-testid="decision-row"][data-a="${pair[0]}"][data-b="${pair[1]}"]`);
  assert.equal(await row.getAttribute('data-verdict'), 'related');
  assert.equal(await row.locator('[data-key="decided_by"]').textContent(), 'Zoë Brontë');
  const stored = await fetch(`${keyed.base}/review/decision?a=${encodeURIComponent(pair[0])}&b=${encodeURIComponent(pair[1])}`,
    { headers: { Authorization: 'Bearer reader-key' } });
  assert.equal((await stored.json()).decided_by, 'Zoë Brontë');
  await s.close();
});

test('review: a read-only key sees the queue and the precision, and cannot decide (buttons disabled, keys ignored, said why)', async () => {
  // Learning the key is read-only costs one refused write (403); the
  // collection stores no texts, so /explain answers 409 and the pair shows its scores.
  const s = await session(keyed, [/status of 403/, /status of 409/]);
  const writes = [];
  s.page.on('request', (req) => { if (req.method() !== 'GET' && req.url().includes('/review/')) writes.push(req.url()); });
  await s.page.goto(`${keyed.base}/ui/#/review`);
  await s.ready('key');
  await s.page.getByTestId('api-key-input').fill('reader-key');
  await s.page.getByTestId('api-key-submit').click();
  await s.ready('review');
  assert.ok(await s.page.getByTestId('queue-item').count() >= 1, 'the queue is a read');
  assert.match(await s.page.getByTestId('review-read-only').textContent(), /may only read/);
  for (const v of ['duplicate', 'not_duplicate', 'related']) assert.ok(await s.page.getByTestId(`decide-${v}`).isDisabled(), v);
  assert.ok(await s.page.getByTestId('review-note').isDisabled());
  assert.match(await s.page.getByTestId('precision-chart').getAttribute('data-labels'), /^\d+$/, 'the precision is a read');
  await s.page.keyboard.press('d');
  await s.page.keyboard.press('n');
  assert.deepEqual(writes, [], 'no decision sent');
  assert.ok(await s.page.getByTestId('compare-scores').isVisible(), 'the pair\'s scores without its texts');
  await s.close();
});

// ---------------------------------------------------------------------------
// Snippets under listed ids, and Tune's plots in a narrow window
// ---------------------------------------------------------------------------

/** The snippets shown in `scope` (a locator): [{ id, text }]. */
async function snippetsIn(scope) {
  return scope.getByTestId('snippet').evaluateAll((els) => els.map((e) => ({ id: e.dataset.id, text: e.textContent })));
}

/** A snippet's text is the start of the document's stored text, with "…" when it goes on. */
function assertSnippetOf(snippet, full) {
  const shown = snippet.text.endsWith('…') ? snippet.text.slice(0, -1) : snippet.text;
  assert.ok(shown.length > 10, `a snippet of ${snippet.id}: ${JSON.stringify(snippet.text)}`);
  assert.ok(full.trim().startsWith(shown), `${snippet.id}: ${JSON.stringify(shown)} starts its text`);
  assert.equal(snippet.text.endsWith('…'), shown.length < full.trim().length, `${snippet.id}: "…" exactly when the text goes on`);
}

/** Only text in the snippets: no element but the title's and the text's. */
async function snippetMarkup(page) {
  return page.evaluate(() => [...document.querySelectorAll('[data-testid="snippet"] *')]
    .map((e) => e.tagName).filter((t) => t !== 'STRONG' && t !== 'SPAN'));
}

test('search, groups and pairs show each listed document\'s snippet, hostile text inert, one request per list', async () => {
  const s = await session(open, explainFallback());
  const asked = [];
  s.page.on('request', (req) => { if (req.url().endsWith('/snippets')) asked.push(JSON.parse(req.postData()).ids); });
  const byId = new Map(PLANTED.map((d) => [d.id, d.text]));
  // Search: every result row has its snippet, from one POST /snippets.
  await s.page.goto(`${open.base}/ui/#/search?id=hostile-script`);
  await s.ready('search');
  const found = await snippetsIn(s.page.getByTestId('search-results'));
  assert.deepEqual(found.map((x) => x.id).sort(), ['hostile-img', 'hostile-link']);
  for (const x of found) assertSnippetOf(x, byId.get(x.id));
  assert.equal(asked.length, 1, 'one request for the page');
  assert.deepEqual(asked[0].sort(), ['hostile-img', 'hostile-link']);
  const rtl = await s.page.locator('[data-testid="snippet"][data-id="hostile-link"] [data-testid="snippet-text"]').evaluate((e) => ({
    text: e.textContent, bidi: getComputedStyle(e).unicodeBidi,
  }));
  assert.ok(rtl.text.includes('\u202E<a href="javascript:'), `the override and the markup as characters: ${JSON.stringify(rtl.text)}`);
  assert.equal(rtl.bidi, 'isolate', 'isolated from the text around it');
  // Groups: a snippet under every member of the page, from one request.
  asked.length = 0;
  await s.view('groups');
  const row = s.page.getByTestId('groups-row').filter({ hasText: 'twin-a' });
  const members = await snippetsIn(row);
  assert.deepEqual(members.map((x) => x.id), ['twin-a', 'twin-b', 'twin-c']);
  for (const x of members) assertSnippetOf(x, byId.get(x.id));
  const hostileRow = s.page.getByTestId('groups-row').filter({ hasText: 'hostile-img' });
  for (const x of await snippetsIn(hostileRow)) assertSnippetOf(x, byId.get(x.id));
  assert.equal(asked.length, 1, 'one request for the page of groups');
  // Pairs: both sides of each pair.
  asked.length = 0;
  await s.page.getByTestId('pairs-submit').click();
  await s.ready('groups');
  const pair = s.page.getByTestId('pair-row').filter({ has: s.page.locator('[data-id="twin-a"]') }).first();
  const sides = await snippetsIn(pair);
  assert.equal(sides.length, 2);
  for (const x of sides) assertSnippetOf(x, byId.get(x.id));
  assert.equal(asked.length, 1, 'one request for the pairs listed');
  assert.match(await s.page.getByTestId('a-in-b-note').textContent(), /^A in B: containment, the share of A’s shingles that are also in B/);
  // Nothing in any snippet became markup, and nothing ran.
  assert.deepEqual(await snippetMarkup(s.page), []);
  assert.deepEqual(await inert(s.page), { pwned: undefined, scripts: 0, images: 0 });
  assert.equal(await s.page.locator('main a[href^="javascript:"]').count(), 0);
  await s.shot('groups-snippets');
  await s.close();
});

/** Record every text a canvas draws, with where it starts and ends in the
 * canvas's pixels (after the context's transform: a rotated label too). */
function recordCanvasText() {
  const fill = CanvasRenderingContext2D.prototype.fillText;
  window.__drawn = [];
  CanvasRenderingContext2D.prototype.fillText = function record(text, x, y, ...rest) {
    const w = this.measureText(String(text)).width;
    const a = this.textAlign;
    const x0 = a === 'center' ? x - w / 2 : a === 'right' || a === 'end' ? x - w : x;
    const m = this.getTransform();
    const p0 = m.transformPoint(new DOMPoint(x0, y));
    const p1 = m.transformPoint(new DOMPoint(x0 + w, y));
    window.__drawn.push({ canvas: this.canvas, text: String(text), from: [p0.x, p0.y], to: [p1.x, p1.y] });
    return fill.call(this, text, x, y, ...rest);
  };
}

/** The texts drawn on the canvas of the plot `testid` (its last drawing). */
async function drawnIn(page, testid) {
  return page.evaluate((id) => {
    const canvas = document.querySelector(`[data-testid="${id}"] canvas`);
    const all = window.__drawn.filter((d) => d.canvas === canvas);
    return { width: canvas.width, height: canvas.height, texts: all.map(({ text, from, to }) => ({ text, from, to })) };
  }, testid);
}

async function fits(page) {
  return page.evaluate(() => document.documentElement.scrollWidth <= 420);
}

test('tune at 420 px: no horizontal overflow, plots sized from their box, no negative count tick, the S-curve label whole; wider, the plots grow', async () => {
  const s = await session(open, [], { width: 420, height: 900 });
  await s.page.addInitScript(recordCanvasText);
  await s.view('tune');
  assert.ok(await fits(s.page), 'Tune fits 420 px before an analysis');
  assert.match(await s.page.getByTestId('precision-empty').textContent(), /^No reviews yet/);
  await s.page.getByTestId('tune-k').fill('2,3');
  await s.page.getByTestId('tune-submit').click();
  await s.ready('tune');
  await s.page.locator('[data-testid="histogram"] canvas').waitFor();
  await s.page.locator('[data-testid="accuracy"] canvas').waitFor();
  assert.ok(await fits(s.page), `no page-wide horizontal scroll at 420 px: ${await s.page.evaluate(() => document.documentElement.scrollWidth)}`);
  // The histogram's count axis: 0, 1, 10…, never a negative tick.
  const hist = await drawnIn(s.page, 'histogram');
  const ticks = hist.texts.map((t) => t.text);
  assert.ok(ticks.includes('0') && ticks.includes('10'), `count ticks drawn: ${ticks}`);
  assert.deepEqual(ticks.filter((t) => /^[-−]/.test(t)), [], 'no negative tick');
  // The S-curve's y label is drawn whole inside its canvas.
  const curve = await drawnIn(s.page, 'scurve');
  const label = curve.texts.filter((t) => t.text === 'probability of being a candidate').at(-1);
  assert.ok(label, `the label is drawn: ${curve.texts.map((t) => t.text)}`);
  for (const [x, y] of [label.from, label.to]) {
    assert.ok(x >= 0 && x <= curve.width && y >= 0 && y <= curve.height, `label end (${x}, ${y}) inside ${curve.width}×${curve.height}`);
  }
  // Each plot is as wide as its box.
  const widths = await s.page.evaluate(() => ['histogram', 'scurve', 'accuracy'].map((id) => {
    const box = document.querySelector(`[data-testid="${id}"]`);
    return [box.clientWidth, box.querySelector('canvas').getBoundingClientRect().width];
  }));
  for (const [box, plot] of widths) assert.ok(plot <= box + 1 && plot >= box - 24, `plot ${plot} px in a ${box} px box`);
  await s.shot('tune-narrow');
  // Every other view fits too, with snippets under the listed ids.
  await s.page.goto(`${open.base}/ui/#/search?id=twin-a`);
  await s.ready('search');
  assert.equal(await s.page.getByTestId('snippet').count(), 2);
  assert.ok(await fits(s.page), 'search with results fits');
  await s.view('groups');
  await s.page.getByTestId('pairs-submit').click();
  await s.ready('groups');
  assert.ok(await s.page.getByTestId('snippet').count() > 0);
  assert.ok(await fits(s.page), 'groups and pairs fit');
  for (const name of ['compare', 'passages', 'boilerplate', 'webhooks', 'overview']) {
    await s.view(name);
    assert.ok(await fits(s.page), `${name} fits 420 px`);
  }
  // Wider, the plots follow their boxes past the old 560 × 260.
  await s.view('tune');
  await s.page.setViewportSize({ width: 1400, height: 900 });
  await s.page.waitForFunction(() => document.querySelector('[data-testid="scurve"] canvas').getBoundingClientRect().width > 560);
  const big = await s.page.locator('[data-testid="scurve"] canvas').boundingBox();
  assert.ok(big.width > 560 && big.height > 260, `S-curve ${big.width} × ${big.height}`);
  await s.shot('tune-wide');
  await s.close();
});

/** GET /review/precision as the review desk's design shapes it (issue 46):
 * two bands with labels, one without, and the measured threshold. */
test('tune draws the precision measured from reviews per band, and the advisor row of its threshold', async () => {
  // A collection with stored texts (for the histogram) and 100 labels on the
  // real server: 80 duplicates at Jaccard 0.9 and 20 false alarms at 0.55.
  // Their documents were refused writes (never stored), so the decisions
  // carry the scores the refusals reported.
  await deskCollection(open, 'tune-labels', filler(24));
  const put = async (a, b, verdict, jaccard) => {
    const r = await fetch(`${open.base}/collections/tune-labels/review/decisions`, {
      method: 'PUT', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ a, b, verdict, scores: { jaccard, containment: jaccard } }),
    });
    assert.equal(r.status, 201, await r.text());
  };
  for (let i = 0; i < 80; i += 1) await put(`annonce-${i}`, `annonce-${i}-copie`, 'duplicate', 0.9);
  for (let i = 0; i < 20; i += 1) await put(`offre-${i}`, `offre-${i}-modèle`, 'not_duplicate', 0.55);
  const truth = await (await fetch(`${open.base}/collections/tune-labels/review/precision?measure=jaccard&score=raw`)).json();
  assert.equal(truth.labels, 100);
  assert.ok(truth.suggested, 'the labels support a threshold');
  const s = await session(open, [], { width: 1280, height: 900 });
  await s.page.addInitScript(recordCanvasText);
  const asked = [];
  s.page.on('request', (req) => {
    const url = new URL(req.url());
    if (url.pathname.endsWith('/review/precision')) asked.push(`${url.pathname.split('/')[2]}:${url.searchParams.get('measure')}/${url.searchParams.get('score')}`);
  });
  await s.view('tune');
  await s.page.getByTestId('collection-select').selectOption('tune-labels');
  await s.ready('tune');
  await s.page.locator('[data-testid="precision"] canvas').waitFor();
  assert.equal(asked.at(-1), 'tune-labels:jaccard/raw');
  assert.equal(await s.page.getByTestId('precision-advice').textContent(), `Measured: ${truth.suggested.why}.`);
  assert.match(await s.page.locator('[data-testid="precision"] .u-title').textContent(), /^Precision from 100 reviewed pairs/);
  const drawn = await drawnIn(s.page, 'precision');
  assert.ok(drawn.texts.some((t) => t.text === 'share judged duplicates'), 'the y axis is labelled');
  // The advisor's table has the measured row beside each k's valley.
  await s.page.getByTestId('tune-k').fill('2');
  await s.page.getByTestId('tune-submit').click();
  await s.ready('tune');
  const row = await s.page.getByTestId('advice-measured').locator('td').allTextContents();
  assert.deepEqual([row[1], row[2], row[4]], [String(truth.suggested.labels), truth.suggested.threshold.toFixed(2), truth.suggested.why]);
  // Another score asks again on that score: no label has a content score.
  await s.page.getByTestId('tune-score').selectOption('content');
  await s.ready('tune');
  assert.equal(asked.at(-1), 'tune-labels:jaccard/content');
  await s.shot('tune-precision');
  await s.close();
});
