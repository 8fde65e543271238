// Tune: the histogram of pairwise Jaccard per k (asinh scale, which shows
// zero counts a log scale cannot) from POST /analysis/histogram on a
// sample of stored texts or pasted ones; the collection's LSH S-curve
// with a draggable threshold line showing the recall there, and each k's
// suggested threshold; the MinHash estimate's error from POST
// /analysis/accuracy.

import { api, collectionBase } from '../api.js';
import { h, fill, num, errorBox } from '../dom.js';
import { ctx, action, thresholds, recall } from '../shell.js';

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf'];
const WIDTH = 560;
const HEIGHT = 260;

export default async function tune(root) {
  const t = thresholds();
  const state = { threshold: t.threshold, suggested: [] };
  const uPlot = window.uPlot;

  const sample = h('input', { type: 'number', min: '2', max: '2000', value: '300', class: 'narrow', testid: 'tune-sample' });
  const texts = h('textarea', { rows: 4, testid: 'tune-texts', placeholder: 'or paste texts, one per line (these are analysed instead of a sample)' });
  const ks = h('input', { value: '1,2,3,4', class: 'narrow', testid: 'tune-k', spellcheck: 'false' });
  // Raw Jaccard, or content Jaccard: boilerplate (text common among the
  // analysed texts by the collection's rule, and its templates) left out.
  const score = h('select', { testid: 'tune-score' },
    h('option', { value: 'raw' }, 'raw'),
    h('option', { value: 'content' }, 'content (boilerplate left out)'));
  const histBox = h('div', { class: 'plot', testid: 'histogram' });
  const curveBox = h('div', { class: 'plot', testid: 'scurve' });
  const accBox = h('div', { class: 'plot', testid: 'accuracy' });
  const advice = h('div', { class: 'advice', testid: 'advice' });
  const slider = h('input', {
    type: 'range', testid: 'threshold-input', min: '0', max: '1', step: '0.01', value: String(state.threshold),
    oninput: () => setThreshold(Number(slider.value)),
  });
  const shownT = h('output', { testid: 'tune-threshold' });
  const shownR = h('output', { testid: 'recall' });
  const plots = [];

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

  function plot(box, opts, data) {
    const u = new uPlot({ width: WIDTH, height: HEIGHT, hooks: { draw: [lines] }, ...opts }, data, box);
    draggable(u);
    plots.push(u);
    return u;
  }

  function drawCurve(sCurve) {
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
      axes: [{ label: 'Jaccard' }, { label: 'probability of being a candidate' }],
      series: [{}, { label: 'P(candidate)', stroke: '#444', width: 2 }],
    }, [s, p]);
  }

  async function analyse(ev) {
    if (ev) ev.preventDefault();
    const kList = ks.value.split(/[\s,]+/).map(Number).filter((k) => Number.isInteger(k) && k > 0);
    const pasted = texts.value.split('\n').map((x) => x.trim()).filter(Boolean);
    const source = pasted.length ? { texts: pasted } : { sample: Number(sample.value) || 300 };
    await action('tune', async () => {
      fill(histBox);
      fill(advice);
      fill(accBox);
      for (const p of plots.splice(0)) p.destroy();
      const base = collectionBase(ctx.collection);
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
      axes: [{ label: 'Jaccard' }, { label: 'pairs (asinh scale)' }],
      series: [{}].concat(histograms.map((x, i) => ({
        label: `k = ${x.k}`, stroke: PALETTE[i % PALETTE.length], width: 2,
        paths: window.uPlot.paths.stepped({ align: 1 }),
      }))),
    }, [edges, ...series]);
    advice.append(h('table', {},
      h('thead', {}, h('tr', {}, ['k', 'pairs', 'suggested threshold', 'recall there', 'why'].map((c) => h('th', {}, c)))),
      h('tbody', {}, histograms.map((x, i) => h('tr', { testid: 'advice-row' },
        h('td', { class: 'n' }, h('span', { class: `swatch c${i % PALETTE.length}` }), ` ${x.k}`),
        h('td', { class: 'n' }, num(x.pairs)),
        h('td', { class: 'n' }, x.suggested_threshold === null ? 'none' : num(x.suggested_threshold, 2)),
        h('td', { class: 'n' }, num(x.recall_at_suggested, 4)),
        h('td', {}, x.why))))));
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
    const u = new uPlot({
      width: WIDTH, height: HEIGHT, title: 'MinHash estimate: absolute error against exact Jaccard',
      scales: { x: { time: false, distr: 3, log: 2 }, y: { range: (_u, _min, max) => [0, Math.max(max || 0, 0.01)] } },
      axes: [{ label: 'num_perm (hash functions)' }, { label: 'absolute error' }],
      series: [{}].concat(series),
    }, data, accBox);
    plots.push(u);
    accBox.append(h('table', {},
      h('caption', {}, `LSH misses counted at threshold ${answer.threshold}; ${num(answer.texts)} texts`),
      h('thead', {}, h('tr', {}, ['num_perm', 'k', 'mean error', 'p95 error', '(b, r)', 'pairs at the threshold', 'of which LSH would miss'].map((c) => h('th', {}, c)))),
      h('tbody', {}, rows.map((r) => h('tr', { testid: 'accuracy-row' },
        h('td', { class: 'n' }, num(r.num_perm)), h('td', { class: 'n' }, num(r.k)),
        h('td', { class: 'n' }, num(mean(r), 4)), h('td', { class: 'n' }, num(p95(r), 4)),
        h('td', { class: 'n' }, r.bands ? `(${r.bands}, ${r.rows})` : 'none'),
        h('td', { class: 'n' }, num(r.pairs_at_threshold)),
        h('td', { class: 'n' }, num(missed(r))))))));
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
      h('section', {}, h('h2', {}, 'S-curve'), curveBox)),
    h('section', {}, h('h2', {}, 'Estimate accuracy'), accBox));
  setThreshold(state.threshold);
  if (!uPlot) {
    root.append(errorBox(new Error('the charting library did not load')));
    return;
  }
  // The analyses read texts and take a moment: they run on request.
  histBox.append(h('p', { class: 'muted' }, 'Analyse a sample of stored texts, or pasted ones, to draw the histogram per k and the suggested thresholds.'));
  drawCurve(null);
}
