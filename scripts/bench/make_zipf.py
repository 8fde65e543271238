#!/usr/bin/env python3
"""Articles of words drawn independently from a Zipf vocabulary: the
"distinct" corpus of docs/benchmarks.md (few shared passages, only the
common 3-grams of frequent words).

    make_zipf.py --entries gcide-natural.jsonl --n 100000 --seed 43 --out zipf-100k.jsonl

The vocabulary is the --vocab (50,000) most frequent lowercase words of the
--entries file (the kit's natural gcide corpus), ranked by frequency; word
rank r is drawn with weight 1 / r^--s (1.0). Each article has a length drawn
uniformly from [--min-words, --max-words] (300-500), --line (40) words a
line. The output is a function of (--entries, --seed, the options) alone.
"""
import argparse
import collections
import json
import re

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--s", type=float, default=1.0)
    ap.add_argument("--min-words", type=int, default=300)
    ap.add_argument("--max-words", type=int, default=500)
    ap.add_argument("--line", type=int, default=40)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    counts = collections.Counter()
    word = re.compile(r"[^\W\d_]+")
    with open(a.entries, encoding="utf-8") as f:
        for line in f:
            counts.update(w.lower() for w in word.findall(json.loads(line)["text"]))
    vocab = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: a.vocab]]
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** a.s
    cdf = np.cumsum(weights / weights.sum())
    rng = np.random.default_rng(a.seed)
    with open(a.out, "w", encoding="utf-8") as out:
        for i in range(a.n):
            n = int(rng.integers(a.min_words, a.max_words + 1))
            ranks = np.searchsorted(cdf, rng.random(n), side="right").clip(0, len(vocab) - 1)
            words = [vocab[r] for r in ranks]
            lines = [" ".join(words[j : j + a.line]) for j in range(0, n, a.line)]
            out.write(json.dumps({"id": f"zipf/{i}", "text": "\n".join(lines)}, ensure_ascii=False) + "\n")
    print(json.dumps({"out": a.out, "docs": a.n, "vocab": len(vocab), "seed": a.seed}))


if __name__ == "__main__":
    main()
