// A word edit diff (Myers' O((N+M)D) algorithm over word and whitespace
// tokens), for Compare's second tab. Shingle highlighting stays the
// primary view: it ignores order and matches the Jaccard shown; this
// one shows edits in order.

// Scripts written without spaces: each character, with the marks attached
// to it, is a word of its own (as the server's recipe version 2 has it), so
// a one-character edit in Chinese or Thai shows as one, not as the sentence.
const SOLO = '\\p{Script=Han}\\p{Script=Hiragana}\\p{Script=Katakana}\\p{Script=Thai}\\p{Script=Lao}\\p{Script=Khmer}\\p{Script=Myanmar}\\u30FC';
const TOKEN = new RegExp(`\\s+|[${SOLO}][\\p{M}\\u200D]*|[^\\s${SOLO}]+`, 'gu');

/** Split a text into words and the whitespace between them (joined they are the text). */
export function tokens(text) {
  return text.match(TOKEN) || [];
}

/**
 * The edit script from a to b as runs of {op: '=', '-', '+', text}, or
 * null when more than maxEdits token edits separate them.
 */
export function diffWords(a, b, maxEdits = 4000) {
  const x = tokens(a);
  const y = tokens(b);
  const n = x.length;
  const m = y.length;
  const max = Math.min(n + m, maxEdits);
  const off = max + 1;
  let v = new Int32Array(2 * max + 3);
  const trace = [];
  for (let d = 0; d <= max; d += 1) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let i;
      if (k === -d || (k !== d && v[off + k - 1] < v[off + k + 1])) i = v[off + k + 1];
      else i = v[off + k - 1] + 1;
      let j = i - k;
      while (i < n && j < m && x[i] === y[j]) { i += 1; j += 1; }
      v[off + k] = i;
      if (i >= n && j >= m) return backtrack(trace, x, y, d, off);
    }
  }
  return null;
}

function backtrack(trace, x, y, dEnd, off) {
  const ops = [];
  let i = x.length;
  let j = y.length;
  for (let d = dEnd; d > 0; d -= 1) {
    const v = trace[d];
    const k = i - j;
    const prevK = (k === -d || (k !== d && v[off + k - 1] < v[off + k + 1])) ? k + 1 : k - 1;
    const pi = v[off + prevK];
    const pj = pi - prevK;
    while (i > pi && j > pj) { i -= 1; j -= 1; ops.push(['=', x[i]]); }
    if (i === pi) { j -= 1; ops.push(['+', y[j]]); } else { i -= 1; ops.push(['-', x[i]]); }
  }
  while (i > 0 && j > 0) { i -= 1; j -= 1; ops.push(['=', x[i]]); }
  ops.reverse();
  // Join runs of one kind.
  const runs = [];
  for (const [op, text] of ops) {
    const tail = runs[runs.length - 1];
    if (tail && tail.op === op) tail.text += text;
    else runs.push({ op, text });
  }
  return runs;
}
