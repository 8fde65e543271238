// Tune: the histogram of pairwise Jaccard per k (asinh scale, which shows
// zero counts a log scale cannot) from POST /analysis/histogram on a
// sample of stored texts or pasted ones; the collection's LSH S-curve
// with a draggable threshold line showing the recall there, and each k's
// suggested threshold; the MinHash estimate's error from POST
// /analysis/accuracy; the precision measured from reviewers' labels per
// score band with Wilson intervals (GET /review/precision) and the
// threshold it suggests. Every plot takes its width from its box and
// follows it (ResizeObserver), so the page fits a phone's width.

import { api, collectionBase, serves } from '../api.js';
import { h, fill, num, errorBox } from '../dom.js';
import { ctx, action, thresholds, recall } from '../shell.js';

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf'];
/** A plot's width bounds (px): its box's width, within these. */
const MIN_WIDTH = 260;
const MAX_WIDTH = 900;
/** Height over width, and the height's bounds (px). */
const ASPECT = 0.6;
const MIN_HEIGHT = 280;
const MAX_HEIGHT = 480;
/** The axes' label font (uPlot's default, named so it can be measured). */
const LABEL_FONT = 'bold 12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';
/** The x axis's height and the room around the plot area (px): what a
 * rotated y label cannot use. */
const X_AXIS = 50;
const LABEL_ROOM = 24;
/** The threshold measured from reviews, and the precision points. */
const MEASURED_COLOUR = '#2ca02c';
/** The S-curve's y axis. */
const SCURVE_Y = 'probability of being a candidate';

/** A label's width in px, in the axes' font. */
function textWidth(text) {
  const c = textWidth.canvas || (textWidth.canvas = document.createElement('canvas'));
  const g = c.getContext('2d');
  g.font = LABEL_FONT;
  return Math.ceil(g.measureText(text).width);
}

/** The size of a plot in `box`: as wide as the box (bounded), tall enough
 * for `yLabel` drawn along its y axis. */
function sizeIn(box, yLabel) {
  const width = Math.max(MIN_WIDTH, Math.min(MAX_WIDTH, Math.floor(box.clientWidth || MIN_WIDTH)));
  const needed = yLabel ? textWidth(yLabel) + X_AXIS + LABEL_ROOM : 0;
  const height = Math.max(needed, Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, Math.round(width * ASPECT))));
  return { width, height };
}

/** Ticks of an asinh count axis: 0, then 1, 10, 100… up to the top; never
 * a negative count. */
function countSplits(_u, _axis, min, max) {
  const out = [0];
  for (let v = 1; v <= max; v *= 10) if (v >= min) out.push(v);
  return out;
}

export default async function tune(root) {
  const t = thresholds();
  // suggested: each k's valley; measured: the threshold the reviews suggest (GET /review/precision).
  const state = { threshold: t.threshold, suggested: [], measured: null };
  const uPlot = window.uPlot;

  const sample = h('input', { type: 'number', min: '2', max: '2000', value: '300', class: 'narrow', testid: 'tune-sample' });
  const texts = h('textarea', { rows: 4, testid: 'tune-texts', placeholder: 'or paste texts, one per line (these are analysed instead of a sample)' });
  const ks = h('input', { value: '1,2,3,4', class: 'narrow', testid: 'tune-k', spellcheck: 'false' });
  // Raw Jaccard, or content Jaccard: boilerplate (text common among the
  // analysed texts by the collection's rule, and its templates) left out.
  const score = h('select', { testid: 'tune-score', onchange: () => action('tune', () => loadPrecision()) },
    h('option', { value: 'raw' }, 'raw'),
    h('option', { value: 'content' }, 'content (boilerplate left out)'));
  const histBox = h('div', { class: 'plot', testid: 'histogram' });
  const curveBox = h('div', { class: 'plot', testid: 'scurve' });
  const accBox = h('div', { class: 'plot', testid: 'accuracy' });
  const precBox = h('div', { class: 'plot', testid: 'precision' });
  const measured = h('p', { class: 'muted', testid: 'precision-advice' });
  const advice = h('div', { class: 'advice table-wrap', testid: 'advice' });
  const slider = h('input', {
    type: 'range', testid: 'threshold-input', min: '0', max: '1', step: '0.01', value: String(state.threshold),
    oninput: () => setThreshold(Number(slider.value)),
  });
  const shownT = h('output', { testid: 'tune-threshold' });
  const shownR = h('output', { testid: 'recall' });
  const plots = [];
  /** Each plot's box follows its container's width. */
  const resizer = new ResizeObserver((entries) => {
    for (const e of entries) {
      const u = plots.find((p) => p.root.parentNode === e.target);
      if (!u) continue;
      const size = sizeIn(e.target, u.yLabel);
      if (size.width !== u.width || size.height !== u.height) u.setSize(size);
    }
  });

  function setThreshold(x) {
    state.threshold = Math.min(1, Math.max(0, Math.round(x * 100) / 100));
    slider.value = String(state.threshold);
    shownT.textContent = num(state.threshold, 2);
    shownR.textContent = t.bands ? num(recall(state.threshold, t.bands, t.rows), 4) : '–';
    for (const p of plots) p.redraw(false, false);
  }

  /** Draw the threshold (solid) and each suggested threshold (dashed). */
  function lines(u) {
    const ctx2 = u.ctx;
    const { top, height } = u.bbox;
    const at = (x, colour, dash) => {
      const px = Math.round(u.valToPos(x, 'x', true));
      ctx2.save();
      ctx2.strokeStyle = colour;
      ctx2.lineWidth = 2 * devicePixelRatio;
      ctx2.setLineDash(dash);
      ctx2.beginPath();
      ctx2.moveTo(px, top);
      ctx2.lineTo(px, top + height);
      ctx2.stroke();
      ctx2.restore();
    };
    state.suggested.forEach((s, i) => { if (s !== null) at(s, PALETTE[i % PALETTE.length], [6, 4]); });
    if (state.measured) at(state.measured.threshold, MEASURED_COLOUR, [2, 3]);
    at(state.threshold, '#111', []);
  }

  /** Dragging on a plot moves the threshold line. */
  function draggable(u) {
    let dragging = false;
    const move = (ev) => {
      const rect = u.over.getBoundingClientRect();
      setThreshold(u.posToVal(ev.clientX - rect.left, 'x'));
    };
    u.over.addEventListener('pointerdown', (ev) => { dragging = true; u.over.setPointerCapture(ev.pointerId); move(ev); });
    u.over.addEventListener('pointermove', (ev) => { if (dragging) move(ev); });
    u.over.addEventListener('pointerup', () => { dragging = false; });
    u.over.classList.add('drag');
  }

  /** A uPlot in `box`, sized from it; `opts.axes[1].label` is its y label. */
  function plot(box, opts, data, { drag = true, hooks = {} } = {}) {
    const axes = (opts.axes || []).map((a) => ({ labelFont: LABEL_FONT, ...a }));
    const yLabel = axes[1] && axes[1].label;
    const draw = [drag ? lines : null, ...(hooks.draw || [])].filter(Boolean);
    const u = new uPlot({ ...sizeIn(box, yLabel), ...opts, axes, hooks: { ...hooks, draw } }, data, box);
    u.yLabel = yLabel;
    if (drag) draggable(u);
    plots.push(u);
    resizer.observe(box);
    return u;
  }

  function unplot(box) {
    for (let i = plots.length - 1; i >= 0; i -= 1) {
      if (plots[i].root.parentNode === box) {
        plots[i].destroy();
        plots.splice(i, 1);
      }
    }
    resizer.unobserve(box);
  }

  function drawCurve(sCurve) {
    unplot(curveBox);
    fill(curveBox);
    if (!t.bands) {
      curveBox.append(h('p', { class: 'muted' }, 'The collection has no banding to draw.'));
      return;
    }
    const s = sCurve ? sCurve.map((p) => p.s) : Array.from({ length: 101 }, (_, i) => i / 100);
    const p = sCurve ? sCurve.map((q) => q.p) : s.map((x) => recall(x, t.bands, t.rows));
    plot(curveBox, {
      title: `LSH S-curve: b = ${t.bands}, r = ${t.rows}`,
      scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
      axes: [{ label: 'Jaccard' }, { label: SCURVE_Y, size: 56 }],
      series: [{}, { label: 'P(candidate)', stroke: '#444', width: 2 }],
    }, [s, p]);
  }

  async function analyse(ev) {
    if (ev) ev.preventDefault();
    const kList = ks.value.split(/[\s,]+/).map(Number).filter((k) => Number.isInteger(k) && k > 0);
    const pasted = texts.value.split('\n').map((x) => x.trim()).filter(Boolean);
    const source = pasted.length ? { texts: pasted } : { sample: Number(sample.value) || 300 };
    await action('tune', async () => {
      for (const box of [histBox, accBox]) unplot(box);
      fill(histBox);
      fill(advice);
      fill(accBox);
      const base = collectionBase(ctx.collection);
      await loadPrecision();
      let sCurve = null;
      try {
        const answer = await api(`${base}/analysis/histogram`, { method: 'POST', body: { ...source, k: kList, bins: 20, score: score.value } });
        sCurve = drawHistogram(answer.histograms);
      } catch (e) {
        histBox.append(errorBox(e));
      }
      drawCurve(sCurve);
      try {
        const answer = await api(`${base}/analysis/accuracy`, { method: 'POST', body: { ...source, k: kList, num_perm: [16, 32, 64, 128, 256] } });
        drawAccuracy(answer);
      } catch (e) {
        accBox.append(errorBox(e));
      }
      setThreshold(state.threshold);
    });
  }

  /** The precision measured from reviews (GET /review/precision) on the
   * score chosen: a point per band with its Wilson interval, and the
   * threshold it suggests. "No reviews yet" when there are no labels, or
   * the server has no review desk. */
  async function loadPrecision() {
    unplot(precBox);
    fill(precBox);
    fill(measured);
    state.measured = null;
    let answer = null;
    if (serves('/review/precision')) {
      const q = new URLSearchParams({ measure: 'jaccard', score: score.value });
      try {
        answer = await api(`${collectionBase(ctx.collection)}/review/precision?${q}`);
      } catch (e) {
        if (e.status !== 404) {
          precBox.append(errorBox(e));
          return;
        }
      }
    }
    const bands = answer && Array.isArray(answer.bands) ? answer.bands.filter((b) => b.labels > 0 && b.precision !== null) : [];
    state.measured = bands.length && answer.suggested ? answer.suggested : null;
    const row = advice.querySelector('[data-testid="advice-measured"]');
    const fresh = measuredRow();
    if (row && fresh) row.replaceWith(fresh);
    else if (row) row.remove();
    else if (fresh && advice.querySelector('tbody')) advice.querySelector('tbody').append(fresh);
    if (!answer || !answer.labels || !bands.length) {
      precBox.append(h('p', { class: 'muted', testid: 'precision-empty' }, 'No reviews yet: precision is measured from the pairs reviewers judge (Review).'));
      return;
    }
    const mid = bands.map((b) => (b.lo + b.hi) / 2);
    const whiskers = (u) => {
      const g = u.ctx;
      g.save();
      g.strokeStyle = MEASURED_COLOUR;
      g.lineWidth = 1.5 * devicePixelRatio;
      bands.forEach((b, i) => {
        if (b.low === null || b.high === null) return;
        const x = Math.round(u.valToPos(mid[i], 'x', true));
        const y0 = Math.round(u.valToPos(b.low, 'y', true));
        const y1 = Math.round(u.valToPos(b.high, 'y', true));
        const cap = 4 * devicePixelRatio;
        g.beginPath();
        g.moveTo(x, y0); g.lineTo(x, y1);
        g.moveTo(x - cap, y0); g.lineTo(x + cap, y0);
        g.moveTo(x - cap, y1); g.lineTo(x + cap, y1);
        g.stroke();
      });
      g.restore();
    };
    plot(precBox, {
      title: `Precision from ${num(answer.labels)} reviewed pair${answer.labels === 1 ? '' : 's'} (${answer.score === 'content' ? 'content ' : ''}Jaccard)`,
      scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
      axes: [{ label: 'Jaccard (band)' }, { label: 'share judged duplicates', size: 56 }],
      series: [{}, {
        label: 'precision (Wilson 95%)', stroke: MEASURED_COLOUR, width: 0,
        paths: () => null, points: { show: true, size: 8, fill: MEASURED_COLOUR },
      }],
    }, [mid, bands.map((b) => b.precision)], { hooks: { draw: [whiskers] } });
    const s = answer.suggested;
    measured.textContent = s
      ? `Measured: ${s.why || `at ${num(s.threshold, 2)}, precision ${num(s.precision, 2)} from ${num(s.labels)} labels`}.`
      : `Measured: ${num(answer.labels)} labels, not yet enough to suggest a threshold at precision ${num(answer.target, 2)}.`;
  }

  /** The advisor's row for the threshold measured from reviews (null without one). */
  function measuredRow() {
    const m = state.measured;
    if (!m) return null;
    return h('tr', { testid: 'advice-measured' },
      h('td', { 'data-label': 'k' }, h('span', { class: 'swatch measured' }), ' reviews'),
      h('td', { class: 'n', 'data-label': 'labels' }, num(m.labels)),
      h('td', { class: 'n', 'data-label': 'suggested threshold' }, num(m.threshold, 2)),
      h('td', { class: 'n', 'data-label': 'recall there' }, t.bands ? num(recall(m.threshold, t.bands, t.rows), 4) : '–'),
      h('td', { 'data-label': 'why' }, m.why || `at ${num(m.threshold, 2)}, precision ${num(m.precision, 2)} from ${num(m.labels)} labels`));
  }

  function drawHistogram(histograms) {
    if (!histograms || !histograms.length) {
      histBox.append(h('p', { class: 'muted' }, 'No pairs to count.'));
      return null;
    }
    state.suggested = histograms.map((x) => x.suggested_threshold);
    const edges = histograms[0].bins.map((b) => b.lo).concat([histograms[0].bins[histograms[0].bins.length - 1].hi]);
    // Stepped series: each bin's count holds from its lo to its hi.
    const series = histograms.map((x) => x.bins.map((b) => b.count).concat([x.bins[x.bins.length - 1].count]));
    plot(histBox, {
      title: `Pairwise ${score.value === 'content' ? 'content ' : ''}Jaccard (${histograms[0].pairs.toLocaleString('en')} pairs)`,
      scales: { x: { time: false, range: [0, 1] }, y: { distr: 4, asinh: 1, range: (_u, _min, max) => [0, Math.max(max, 10)] } },
      // Explicit ticks: uPlot's own asinh splits can reach below 0 ("-1").
      axes: [{ label: 'Jaccard' }, {
        label: 'pairs (asinh scale)', size: 56,
        splits: countSplits, values: (_u, splits) => splits.map((v) => v.toLocaleString('en')),
      }],
      series: [{}].concat(histograms.map((x, i) => ({
        label: `k = ${x.k}`, stroke: PALETTE[i % PALETTE.length], width: 2,
        paths: window.uPlot.paths.stepped({ align: 1 }),
      }))),
    }, [edges, ...series]);
    advice.append(h('table', { class: 'stack' },
      h('thead', {}, h('tr', {}, ['k', 'pairs', 'suggested threshold', 'recall there', 'why'].map((c) => h('th', {}, c)))),
      h('tbody', {}, histograms.map((x, i) => h('tr', { testid: 'advice-row' },
        h('td', { class: 'n', 'data-label': 'k' }, h('span', { class: `swatch c${i % PALETTE.length}` }), ` ${x.k}`),
        h('td', { class: 'n', 'data-label': 'pairs' }, num(x.pairs)),
        h('td', { class: 'n', 'data-label': 'suggested threshold' }, x.suggested_threshold === null ? 'none' : num(x.suggested_threshold, 2)),
        h('td', { class: 'n', 'data-label': 'recall there' }, num(x.recall_at_suggested, 4)),
        h('td', { 'data-label': 'why' }, x.why))), measuredRow())));
    return histograms[0].s_curve || null;
  }

  function drawAccuracy(answer) {
    const rows = answer.accuracy || [];
    if (!rows.length) {
      accBox.append(h('p', { class: 'muted' }, 'No pairs to measure.'));
      return;
    }
    const perms = [...new Set(rows.map((r) => r.num_perm))].sort((a, b) => a - b);
    const kValues = [...new Set(rows.map((r) => r.k))].sort((a, b) => a - b);
    const mean = (r) => r.mean_abs_error;
    const p95 = (r) => r.p95_abs_error;
    const missed = (r) => r.missed;
    const series = [];
    const data = [perms];
    kValues.forEach((k, i) => {
      const at = (f) => perms.map((n) => { const r = rows.find((x) => x.k === k && x.num_perm === n); return r ? f(r) : null; });
      series.push({ label: `mean, k = ${k}`, stroke: PALETTE[i % PALETTE.length], width: 2 });
      data.push(at(mean));
      series.push({ label: `p95, k = ${k}`, stroke: PALETTE[i % PALETTE.length], width: 1, dash: [4, 4] });
      data.push(at(p95));
    });
    plot(accBox, {
      title: 'MinHash estimate: absolute error against exact Jaccard',
      scales: { x: { time: false, distr: 3, log: 2 }, y: { range: (_u, _min, max) => [0, Math.max(max || 0, 0.01)] } },
      axes: [{ label: 'num_perm (hash functions)' }, { label: 'absolute error', size: 56 }],
      series: [{}].concat(series),
    }, data, { drag: false });
    accBox.append(h('div', { class: 'table-wrap' }, h('table', {},
      h('caption', {}, `LSH misses counted at threshold ${answer.threshold}; ${num(answer.texts)} texts`),
      h('thead', {}, h('tr', {}, ['num_perm', 'k', 'mean error', 'p95 error', '(b, r)', 'pairs at the threshold', 'of which LSH would miss'].map((c) => h('th', {}, c)))),
      h('tbody', {}, rows.map((r) => h('tr', { testid: 'accuracy-row' },
        h('td', { class: 'n' }, num(r.num_perm)), h('td', { class: 'n' }, num(r.k)),
        h('td', { class: 'n' }, num(mean(r), 4)), h('td', { class: 'n' }, num(p95(r), 4)),
        h('td', { class: 'n' }, r.bands ? `(${r.bands}, ${r.rows})` : 'none'),
        h('td', { class: 'n' }, num(r.pairs_at_threshold)),
        h('td', { class: 'n' }, num(missed(r)))))))));
  }

  fill(root,
    h('h1', {}, 'Tune'),
    h('form', { class: 'row', onsubmit: analyse },
      h('label', {}, 'sample of stored texts ', sample),
      h('label', {}, 'k ', ks),
      h('label', {}, 'score ', score),
      h('button', { type: 'submit', testid: 'tune-submit' }, 'Analyse')),
    texts,
    h('div', { class: 'row' },
      h('label', {}, 'threshold ', slider, ' ', shownT),
      h('span', {}, 'recall at this threshold: ', shownR),
      h('span', { class: 'muted' }, `(the collection's threshold is ${num(t.threshold, 2)}; drag on a plot to move the line)`)),
    h('div', { class: 'plots' },
      h('section', {}, h('h2', {}, 'Histogram'), histBox, advice),
      h('section', {}, h('h2', {}, 'S-curve'), curveBox),
      h('section', {}, h('h2', {}, 'Precision from reviews'), precBox, measured)),
    h('section', {}, h('h2', {}, 'Estimate accuracy'), accBox));
  setThreshold(state.threshold);
  if (!uPlot) {
    root.append(errorBox(new Error('the charting library did not load')));
    return;
  }
  // The analyses read texts and take a moment: they run on request.
  histBox.append(h('p', { class: 'muted' }, 'Analyse a sample of stored texts, or pasted ones, to draw the histogram per k and the suggested thresholds.'));
  drawCurve(null);
  await loadPrecision();
  setThreshold(state.threshold);
}
