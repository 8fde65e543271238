#!/usr/bin/env python3
"""containment_study.py: measure candidate-generation designs for containment
and passage search (issue 43) on real Debian prose, against brute force.

    python3 scripts/containment_study.py [--docs 2000] [--queries 300] [--seed 43]
        [--out target/study43] [--ws 8,12,16,20,23,24] [--caps 20,100] [--cap-ws 20,23] [--no-ensemble]

Standard library only; the LSH Ensemble rows need datasketch (run it with the bench kit's
venv: python3 -m venv V && V/bin/pip install -r /work/shared/bench/requirements.txt).

Corpus ("articles" of 200-600 words, split into paragraphs), from text already
on a Debian machine, no download: English man pages (/usr/share/man/man{1,3,5,7,8},
at most 40 of one family such as gcloud_*,
rendered with groff as scripts/bench/make_realtext.py does, cached in --out),
/usr/share/doc/*/copyright and /usr/share/common-licenses/* (licence texts are
cut into consecutive 200-600 word articles). Copyright files and man pages
share licence and boilerplate passages: realistic common fingerprints.
Articles: a length L ~ U[200, 600] is drawn, whole paragraphs are taken from
the start of the source until L words (the last one cut). Identical articles
are kept once.

Planted queries (from --queries source articles each, not stored):
  excerpt   a contiguous run of 30-60% of the words starting at a paragraph start;
  abridged  ~2/3 of the paragraphs (random, in order), then 1-2% of the words
            edited (substitute / delete / insert, words from the corpus);
  quote     two consecutive sentences of one paragraph, 25-60 words;
  quote25   exactly 25 consecutive tokens (the guarantee's edge: 23 shingles).

Tokens as the service does: lowercase, punctuation to spaces, split on
whitespace; word 3-shingles, each hashed to 32 bits (blake2b).

Ground truth, brute force over every stored document D (exact overlap counts
from a full shingle inverted index): excerpt |Q∩D|/|Q| >= 0.9; abridged >= 0.8;
quotes: D holds a run of >= 23 consecutive query shingles.

Candidates: stored documents sharing >= 1 indexed fingerprint with the query's
fingerprints (winnowed / sampled the same way); for quotes the query looks up
ALL its shingles. Designs: winnowing (window w, min hash, rightmost on ties,
each selected position once) and order-free sampling at the same density
2/(w+1) (keep h when mix(h) mod 2^32 < 2^32*2/(w+1), i.e. "mix(h) mod p == 0"
with p = (w+1)/2 allowed to be fractional); datasketch MinHashLSHEnsemble
(num_perm 128, num_part 8 and 16) for excerpts (threshold 0.9) and abridged
copies (0.8). Writes results.md in --out and prints it.
"""
from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
K = 3
EMPTY: frozenset = frozenset()
PER_FAMILY = 40

# ------------------------------------------------------------------ corpus --


def render_man(path: str):
    """One man page -> its paragraphs (None for an alias page); as make_realtext.py."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw.lstrip().startswith(b".so "):
        return None
    r = subprocess.run(
        ["groff", "-k", "-Tutf8", "-mandoc", "-rHY=0", "-rLL=5000n", "-P-c", "-P-b", "-P-o", "-P-u"],
        input=raw, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    lines = r.stdout.decode("utf-8", "replace").split("\n")
    nonempty = [i for i, l in enumerate(lines) if l.strip()]
    if len(nonempty) < 3:
        return None
    return paragraphs("\n".join(lines[nonempty[0] + 1:nonempty[-1]]))


def paragraphs(text: str) -> list[str]:
    paras, cur = [], []
    for line in text.split("\n"):
        line = line.strip()
        if line:
            cur.append(line)
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    paras = [re.sub(r"\s+", " ", p) for p in paras]
    return [p for p in paras if len(p.split()) >= 3 and "\ufffd" not in p]


def sources(cache: Path, rng: random.Random, n_man: int, seed: int) -> list[tuple[str, list[str]]]:
    """[(name, paragraphs)] of the machine's prose; man pages rendered once."""
    out = []
    for p in sorted(Path("/usr/share/common-licenses").iterdir()):
        if p.is_file():
            out.append(("licence/" + p.name, paragraphs(p.read_text(errors="replace"))))
    for p in sorted(Path("/usr/share/doc").glob("*/copyright")):
        try:
            out.append(("copyright/" + p.parent.name, paragraphs(p.read_text(errors="replace"))))
        except OSError:
            pass
    cfile = cache / f"man-{n_man}-s{seed}-f{PER_FAMILY}.jsonl"
    if not cfile.exists():
        pages = []
        for sec in ("man1", "man3", "man5", "man7", "man8"):
            pages += sorted(str(p) for p in Path("/usr/share/man", sec).glob("*.gz"))
        rng.shuffle(pages)
        # at most PER_FAMILY pages of one family (name up to the first _ . -):
        # this machine's man1 is 92% gcloud_* pages, one generator's template.
        fam = collections.Counter()
        kept = []
        for p in pages:
            f = re.split(r"[_.-]", os.path.basename(p))[0]
            if fam[f] < PER_FAMILY:
                fam[f] += 1
                kept.append(p)
        pages = kept[:n_man]
        print(f"[corpus] rendering {len(pages)} man pages with groff ...", file=sys.stderr)
        with ProcessPoolExecutor(2) as ex:
            rendered = list(ex.map(render_man, pages, chunksize=16))
        with open(cfile, "w") as f:
            for page, paras in zip(pages, rendered):
                if paras:
                    f.write(json.dumps({"page": page, "paras": paras}) + "\n")
    with open(cfile) as f:
        for line in f:
            rec = json.loads(line)
            out.append(("man/" + os.path.basename(rec["page"]), rec["paras"]))
    return out


def take(paras: list[str], start: int, L: int) -> list[str]:
    """Whole paragraphs from `start` until L words as the service counts them
    (words_of), the last paragraph cut."""
    got, have = [], 0
    for p in paras[start:]:
        n = len(words_of(p))
        if have + n >= L:
            ws = p.split()
            lo, hi = 0, len(ws)  # the fewest raw words giving L - have tokens
            while lo < hi:
                mid = (lo + hi) // 2
                if len(words_of(" ".join(ws[:mid]))) >= L - have:
                    hi = mid
                else:
                    lo = mid + 1
            if L - have >= 3:
                got.append(" ".join(ws[:lo]))
            have = L
            break
        got.append(p)
        have += n
    return got if have >= L else []


def build_corpus(srcs, rng: random.Random, n_docs: int):
    """Articles [(name, paragraphs)]: licences cut into consecutive articles,
    other sources give their first 200-600 words; copyright files at most a quarter."""
    arts, seen = [], set()

    def add(name, ps):
        key = "\n".join(ps)
        if ps and key not in seen:
            seen.add(key)
            arts.append((name, ps))

    lic = [s for s in srcs if s[0].startswith("licence/")]
    cop = [s for s in srcs if s[0].startswith("copyright/")]
    man = [s for s in srcs if s[0].startswith("man/")]
    for name, ps in lic:
        # a licence is cut into consecutive articles of 200-600 words
        i, part = 0, 0
        while i < len(ps):
            L = rng.randint(200, 600)
            got = take(ps[i:], 0, L) or ps[i:]
            i += len(got)
            have = len(words_of(" ".join(got)))
            if have >= 200:
                add(f"{name}#{part}", got)
                part += 1
    rng.shuffle(cop)
    n_cop = 0
    for name, ps in cop:
        if n_cop >= n_docs // 4:
            break
        got = take(ps, 0, rng.randint(200, 600))
        if got:
            n_cop += 1
            add(name, got)
    rng.shuffle(man)
    for name, ps in man:
        if len(arts) >= n_docs:
            break
        got = take(ps, 0, rng.randint(200, 600))
        if len(got) >= 2:
            add(name, got)
    return arts[:n_docs]


# -------------------------------------------------------------- shingling --

_PUNCT = re.compile(r"[^\w\s]|_")


def words_of(text: str) -> list[str]:
    return _PUNCT.sub(" ", text.lower()).split()


_HCACHE: dict[str, int] = {}


def shingle_hashes(text: str) -> list[int]:
    """The ordered 32-bit hashes of the word 3-shingles (one for a shorter text)."""
    ws = words_of(text)
    if len(ws) < K:
        ws = [" ".join(ws)] if ws else []
        grams = ws
    else:
        grams = [" ".join(ws[i:i + K]) for i in range(len(ws) - K + 1)]
    out = []
    for g in grams:
        h = _HCACHE.get(g)
        if h is None:
            h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=4).digest(), "little")
            _HCACHE[g] = h
        out.append(h)
    return out


def winnow(seq: list[int], w: int) -> set[int]:
    """Robust winnowing (Schleimer et al. 2003): in each window of w consecutive
    hashes the minimum, rightmost on ties; each selected position once. A
    sequence shorter than w is one window. Returns the selected hash values."""
    n = len(seq)
    if n == 0:
        return set()
    if n <= w:
        m = min(seq)
        return {m}
    out = set()
    dq = collections.deque()  # positions, values increasing (strictly from the right)
    for i, h in enumerate(seq):
        while dq and seq[dq[-1]] >= h:  # >= : the rightmost minimum wins ties
            dq.pop()
        dq.append(i)
        if dq[0] <= i - w:
            dq.popleft()
        if i >= w - 1:
            out.add(seq[dq[0]])
    return out


M64 = (1 << 64) - 1


def mix(h: int) -> int:
    """splitmix64 finaliser: the sampling hash, independent of h's order."""
    z = (h + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def sampler(w: int):
    cut = int((1 << 32) * 2 / (w + 1))
    memo: dict[int, bool] = {}

    def keep(h: int) -> bool:
        k = memo.get(h)
        if k is None:
            k = memo[h] = (mix(h) & 0xFFFFFFFF) < cut
        return k

    return keep


# ---------------------------------------------------------------- queries --

SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")


def edit_words(ws: list[str], rate: float, vocab: list[str], rng: random.Random) -> list[str]:
    """Each word edited with probability `rate`: substitute, delete or insert after."""
    out = []
    for w in ws:
        if rng.random() >= rate:
            out.append(w)
            continue
        op = rng.choice(("substitute", "delete", "insert"))
        if op == "substitute":
            out.append(rng.choice(vocab))
        elif op == "insert":
            out += [w, rng.choice(vocab)]
    return out


def plant(arts, rng: random.Random, nq: int, vocab):
    """{kind: [(source index, text)]}."""
    q = {"excerpt": [], "abridged": [], "quote": [], "quote25": []}
    order = list(range(len(arts)))
    rng.shuffle(order)
    for ai in order[:nq]:
        ps = arts[ai][1]
        n = sum(len(p.split()) for p in ps)
        # excerpt: start at a paragraph start that leaves enough words
        frac = rng.uniform(0.3, 0.6)
        L = max(1, round(frac * n))
        starts, acc = [], 0
        for i, p in enumerate(ps):
            if n - acc >= L:
                starts.append(acc)
            acc += len(p.split())
        s = rng.choice(starts)
        allw = " ".join(ps).split()
        q["excerpt"].append((ai, " ".join(allw[s:s + L])))
        toks = words_of(" ".join(ps))  # exactly 25 tokens as the service sees them
        t = rng.randrange(0, len(toks) - 25 + 1)
        q["quote25"].append((ai, " ".join(toks[t:t + 25])))
    # abridged: needs >= 3 paragraphs
    for ai in [a for a in order if len(arts[a][1]) >= 3][:nq]:
        ps = arts[ai][1]
        keep = sorted(rng.sample(range(len(ps)), max(2, round(len(ps) * 2 / 3))))
        kept = [ps[i] for i in keep]
        rate = rng.uniform(0.01, 0.02)
        q["abridged"].append((ai, "\n\n".join(" ".join(edit_words(p.split(), rate, vocab, rng)) for p in kept)))
    # quote: two consecutive sentences of one paragraph, 25..60 words
    for ai in order:
        if len(q["quote"]) >= nq:
            break
        pairs = []
        for p in arts[ai][1]:
            ss = SENT.split(p)
            for a, b in zip(ss, ss[1:]):
                if 25 <= len((a + " " + b).split()) <= 60:
                    pairs.append(a + " " + b)
        if pairs:
            q["quote"].append((ai, rng.choice(pairs)))
    return q


# ------------------------------------------------------------ ground truth --


def truth(kind: str, qseq: list[int], full_index, docsets, qtoks=None, doctoks=None):
    qset = set(qseq)
    if kind in ("excerpt", "abridged"):
        t = 0.9 if kind == "excerpt" else 0.8
        cnt = collections.Counter()
        for h in qset:
            for d in full_index.get(h, ()):
                cnt[d] += 1
        r = {d for d, c in cnt.items() if c / len(qset) >= t - 1e-12}
        return r, r
    # quotes: a run of >= 23 consecutive query shingles all in D's set (the
    # brief's definition); `strict` also asks that run's tokens be contiguous
    # in D (a shared passage), which is what a passage lookup promises.
    need = min(23, len(qseq))
    cand = set()
    for h in qset:
        cand.update(full_index.get(h, ()))
    loose, strict = set(), set()
    for d in cand:
        s, run = docsets[d], 0
        for i, h in enumerate(qseq):
            run = run + 1 if h in s else 0
            if run >= need:
                loose.add(d)
                if qtoks is None:
                    strict.add(d)
                    break
                j = i - need + 1  # shingles j..i, tokens j..i+K-1
                if " " + " ".join(qtoks[j:i + K]) + " " in doctoks[d]:
                    strict.add(d)
                    break
    return strict, loose


# ------------------------------------------------------------------- main --


def check_winnowing(trials: int = 3000) -> None:
    """The guarantee the design rests on: a run of >= w hashes shared by two
    sequences yields a shared selected hash from the run (ties forced with
    small alphabets); and the deque winnowing equals the windowed minimum."""
    rng = random.Random(7)
    for _ in range(trials):
        w = rng.choice([8, 12, 16, 20, 23, 24])
        alph = rng.choice([4, 50, 1 << 32])
        run = [rng.randrange(alph) for _ in range(w + rng.randrange(10))]
        a = [rng.randrange(alph) for _ in range(rng.randrange(40))] + run + [rng.randrange(alph) for _ in range(rng.randrange(40))]
        b = [rng.randrange(alph) for _ in range(rng.randrange(40))] + run + [rng.randrange(alph) for _ in range(rng.randrange(40))]
        fa = winnow(a, w)
        assert fa & winnow(b, w) & set(run), ("winnowing guarantee broken", w, a, b)
        assert len(a) <= w or fa == {min(a[i:i + w]) for i in range(len(a) - w + 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--out", default=str(ROOT / "target/study43"))
    ap.add_argument("--ws", default="8,12,16,20,23,24")
    ap.add_argument("--caps", default="20,100", help="posting-list caps for the capped winnowing rows ('' for none)")
    ap.add_argument("--cap-ws", default="20,23", help="windows of the capped winnowing rows")
    ap.add_argument("--man-pages", type=int, default=6000, help="man pages to render (sample)")
    ap.add_argument("--no-ensemble", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    ws_list = [int(x) for x in args.ws.split(",")]
    args.caps = [int(x) for x in args.caps.split(",") if x]


    t0 = time.time()
    check_winnowing()
    arts = build_corpus(sources(out, random.Random(args.seed), args.man_pages, args.seed), rng, args.docs)
    texts = ["\n\n".join(ps) for _, ps in arts]
    seqs = [shingle_hashes(t) for t in texts]
    docsets = [set(s) for s in seqs]
    nwords = [len(words_of(t)) for t in texts]
    kinds = collections.Counter(name.split("/")[0] for name, _ in arts)
    full_index = collections.defaultdict(list)
    for d, s in enumerate(docsets):
        for h in s:
            full_index[h].append(d)
    vocab = sorted({w for t in texts[:500] for w in words_of(t)})
    queries = plant(arts, rng, args.queries, vocab)
    qseqs = {k: [shingle_hashes(t) for _, t in v] for k, v in queries.items()}
    doctoks = [" " + " ".join(words_of(t)) + " " for t in texts]
    both = {k: [truth(k, s, full_index, docsets, words_of(t), doctoks) for s, (_, t) in zip(qseqs[k], queries[k])]
            for k in queries}
    gt = {k: [b[0] for b in v] for k, v in both.items()}
    loose_only = {k: sum(len(b[1] - b[0]) for b in v) for k, v in both.items()}
    with open(out / "corpus.jsonl", "w") as f:
        for (name, _), t in zip(arts, texts):
            f.write(json.dumps({"id": name, "text": t}) + "\n")
    with open(out / "queries.jsonl", "w") as f:
        for k, v in queries.items():
            for (ai, t), g in zip(v, gt[k]):
                f.write(json.dumps({"kind": k, "source": arts[ai][0], "text": t, "truth": sorted(arts[d][0] for d in g)}) + "\n")
    mean_sh = statistics.mean(len(s) for s in docsets)
    stats = [
        f"- docs: {len(arts)} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); "
        f"words/doc mean {statistics.mean(nwords):.0f} (min {min(nwords)}, max {max(nwords)}); "
        f"paragraphs/doc mean {statistics.mean(len(ps) for _, ps in arts):.1f}; "
        f"distinct shingles/doc mean {mean_sh:.0f}",
        f"- shingles held by >= 10 docs: {sum(1 for v in full_index.values() if len(v) >= 10)}; "
        f"by >= 100 docs: {sum(1 for v in full_index.values() if len(v) >= 100)}; "
        f"largest posting list of the full shingle index: {max(len(v) for v in full_index.values())} docs",
    ]
    for k, v in queries.items():
        ql = [len(words_of(t)) for _, t in v]
        g = gt[k]
        stats.append(f"- {k}: {len(v)} queries, words mean {statistics.mean(ql):.0f} (min {min(ql)}, max {max(ql)}); "
                     f"truth pairs {sum(len(x) for x in g)} (mean {statistics.mean(len(x) for x in g):.2f} docs/query; "
                     f"source in truth {sum(ai in x for (ai, _), x in zip(v, g))}/{len(v)})"
                     + (f"; {loose_only[k]} more pairs share a run of >= 23 query shingles that is NOT contiguous in D "
                        "(scattered shingles; not counted)" if loose_only[k] else ""))
    print(f"[corpus+truth] {time.time() - t0:.1f}s", file=sys.stderr)
    print("\n".join(stats), file=sys.stderr)

    rows = []
    KINDS = ["excerpt", "abridged", "quote", "quote25"]

    def evaluate(name, fp_of, extra_bytes, cap=None):
        t1 = time.time()
        fps = [fp_of(s) for s in seqs]
        index = collections.defaultdict(set)
        for d, f in enumerate(fps):
            for h in f:
                index[h].add(d)
        per_doc = statistics.mean(len(f) for f in fps)
        per_sh = sum(len(f) for f in fps) / sum(len(x) for x in docsets)
        sh400 = 400 - K + 1
        row = {"design": name, "fp/doc": per_doc, "B/400w": 12 * per_sh * sh400 + (sh400 / 8 if extra_bytes else 0),
               "B/doc": 12 * per_doc + extra_bytes, "max posting": max(len(v) for v in index.values())}
        for k in KINDS:
            found = total = src = 0
            ncand = []
            for (ai, _), qs, g in zip(queries[k], qseqs[k], gt[k]):
                qf = set(qs) if k.startswith("quote") else fp_of(qs)
                cand = set()
                for h in qf:
                    post = index.get(h, EMPTY)
                    if cap is None or len(post) <= cap:
                        cand |= post
                src += ai in cand
                ncand.append(len(cand))
                total += len(g)
                found += len(g & cand)
            row[k] = (found / total if total else float("nan"), statistics.mean(ncand), total - found,
                      statistics.median(ncand), src / len(qseqs[k]))
        row["secs"] = time.time() - t1
        rows.append(row)
        print(f"[{name}] {row['secs']:.1f}s", file=sys.stderr)

    bitmap = mean_sh / 8
    for w in ws_list:
        evaluate(f"winnow w={w} (+n/8 bitmap)", lambda s, w=w: winnow(s, w), bitmap)
    for w in [int(x) for x in args.cap_ws.split(",") if x]:
        for cap in args.caps:
            evaluate(f"winnow w={w}, skip postings > {cap}", lambda s, w=w: winnow(s, w), bitmap, cap)
    for w in ws_list:
        keep = sampler(w)
        evaluate(f"sample 2/(w+1), w={w}", lambda s, keep=keep: {h for h in s if keep(h)}, 0)

    ens_rows = []
    if not args.no_ensemble:
        try:
            from datasketch import MinHash, MinHashLSHEnsemble
        except ImportError:
            print("[ensemble] datasketch not installed: skipped", file=sys.stderr)
        else:
            def mh(seq):
                m = MinHash(num_perm=128, seed=1, hashfunc=lambda x: x)
                m.update_batch(list(set(seq)))
                return m
            t1 = time.time()
            dmh = [mh(s) for s in seqs]
            sketch_secs = time.time() - t1
            qmh = {k: [mh(s) for s in qseqs[k]] for k in ("excerpt", "abridged")}
            for weights in ((0.5, 0.5), (0.05, 0.95)):
                for part in (8, 16):
                    for k, thr in (("excerpt", 0.9), ("abridged", 0.8)):
                        t1 = time.time()
                        ens = MinHashLSHEnsemble(threshold=thr, num_perm=128, num_part=part, weights=weights)
                        ens.index((d, m, len(docsets[d])) for d, m in enumerate(dmh))
                        build = time.time() - t1
                        # band keys each document adds: every band of every r it is inserted under
                        bands = sum(128 // int(r) for r in {int(r) for _, r in ens.params})
                        found = total = 0
                        ncand = []
                        t1 = time.time()
                        for qs, m, g in zip(qseqs[k], qmh[k], gt[k]):
                            cand = set(ens.query(m, len(set(qs))))
                            ncand.append(len(cand))
                            total += len(g)
                            found += len(g & cand)
                        qsecs = time.time() - t1
                        ens_rows.append((weights, part, k, thr, found / total, statistics.mean(ncand), total - found,
                                         build, qsecs, bands))
                        print(f"[ensemble w={weights} part={part} {k} t={thr}] build {build:.1f}s", file=sys.stderr)

    def cell(v):
        r, c, miss, med, src = v
        return f"{r:.4f} / {src:.3f} / {c:.0f} ({med:.0f})" + (f" **{miss} missed**" if miss else "")

    md = ["# Containment study (issue 43)", "",
          f"Command: `python3 scripts/containment_study.py --docs {args.docs} --queries {args.queries} --seed {args.seed}`", "",
          "## Corpus", "", *stats, "",
          "## Candidate recall / mean candidates per query", "",
          "Cells: pair recall against brute force / share of queries whose source article is a candidate / "
          "mean (median) candidate documents per query; missed pairs. Capped rows skip, at query time, "
          "fingerprints held by more than C documents (bounded work; the skipped ones would be reported). "
          "B/doc: 12 bytes per posting (+ n/8 bytes selection bitmap for winnowing, n = shingles/doc; "
          "sampling needs no bitmap: selection is a function of the hash). B/400w: the same for a 400-word "
          "article (398 shingles) at this corpus's fingerprints per shingle.", "",
          "| design | fp/doc | B/doc | B/400w | max posting | excerpt ≥0.9 | abridged ≥0.8 | quote (all shingles) | quote25 (all shingles) |",
          "|---|---:|---:|---:|---:|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['design']} | {r['fp/doc']:.1f} | {r['B/doc']:.0f} | {r['B/400w']:.0f} | {r['max posting']} | "
                  + " | ".join(cell(r[k]) for k in KINDS) + " |")
    if ens_rows:
        md += ["", "## datasketch MinHashLSHEnsemble (num_perm 128)", "",
               f"Sketching {len(seqs)} docs: {sketch_secs:.1f}s. Index is one-shot: `index()` once, no insert "
               "or delete after it (a write means rebuilding). Each doc is put in one bucket per band of every r "
               "the index keeps (bands/doc column; x12 B per posting, before the 128x8 B sketch). It answers "
               "containment of a whole set, not passages: no quote rows. weights = (false positive, false "
               "negative) weights of its parameter optimisation; (0.5, 0.5) is the default.", "",
               "| weights | num_part | query kind | threshold | recall | cand/query | misses | bands/doc | B/doc | build s | query s (all) |",
               "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for wts, part, k, thr, rec, c, miss, b, qs, bands in ens_rows:
            md.append(f"| {wts} | {part} | {k} | {thr} | {rec:.4f} | {c:.1f} | {miss} | {bands} | {12 * bands} | {b:.2f} | {qs:.2f} |")
    md.append("")
    text = "\n".join(md)
    (out / "results.md").write_text(text)
    print(text)
    print(f"[total] {time.time() - t0:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
