#!/usr/bin/env python3
"""make_articles.py: a benchmark corpus of ~130-word "articles" of real text
with a realistic share of planted near-duplicates. Standard library only;
the output is a function of (--entries file, --seed, the options) alone.

    make_articles.py --entries gcide-natural.jsonl --n 1000000 --seed 6 --out articles.jsonl

--entries is the kit's natural gcide corpus (one dictionary entry per line):
    ../shared/bench/make_corpus.py natural --sources gcide --out gcide-natural.jsonl

Base articles: a length L is drawn uniformly from [--min-words, --max-words]
(100..160, mean 130; words = whitespace-separated tokens), then entries are
drawn uniformly at random with replacement and appended, one per line, until
the article has L words (the last piece is cut to fit). An entry longer than
--max-piece (60) words contributes a random window of 30..60 of its words, so
no single long entry can fill an article: two unrelated articles share at
most one piece, well under any near-duplicate threshold. Every base article
is a different random sequence, so the texts differ.

Near-duplicates: after each base article is written, with probability
q = f / (2 (1 - f)) it is chosen for 1..--max-variants (uniform, mean 2)
variants, which makes a fraction f = --dup-fraction (0.15) of the output
variants. Each variant is scheduled 1..--max-delay (2000) positions later in
the output, so a variant always comes after its base and near it. Variants use
the edit model of the kit's make_corpus.py (make_variant, reformat): a per-word
edit rate drawn from --edit-rates (0, 0.01, 0.02, 0.04, 0.08); each word is
edited with that probability by delete / insert / substitute / swap-with-next
(inserted and substituted words from a vocabulary of entry words); rate 0 is
reformatting only (case, commas, whitespace).

The generator is sequential, so the first K lines of an --n N file are exactly
the file made with --n K (same seed and options): a smaller corpus is a prefix
of the larger one. Output: JSONL {"id", "text"}; ids are "art/<k>" for base
articles and "art/<k>#v<j>" for variants (distinct). Sidecar
<out>.variants.jsonl: {"id", "base_id", "edit_rate", "ops"} per variant, as
make_corpus.py writes. Summary statistics as one JSON line on stdout.
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import sys


# ------------------------------------------ edit model (make_corpus.py) --
# The same model as ../shared/bench/make_corpus.py make_variant / reformat,
# copied so this script needs nothing beside the standard library.

OPS = ("delete", "insert", "substitute", "swap")


def make_variant(words, rate, vocab, rng):
    counts = dict.fromkeys(OPS, 0)
    out = []
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        if rng.random() < rate:
            op = rng.choice(OPS)
            counts[op] += 1
            if op == "delete":
                i += 1
                continue
            if op == "insert":
                out.append(rng.choice(vocab))
                out.append(w)
            elif op == "substitute":
                out.append(rng.choice(vocab))
            elif op == "swap" and i + 1 < n:
                out.append(words[i + 1])
                out.append(w)
                i += 2
                continue
            else:
                out.append(w)
        else:
            out.append(w)
        i += 1
    return out, counts


def reformat(text, rng):
    out = []
    for w in text.split():
        r = rng.random()
        if r < 0.1:
            w = w.upper()
        elif r < 0.2:
            w = w + ","
        out.append(w)
    return "  ".join(out)


# ------------------------------------------------------------ articles --

def load_entries(path):
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                words = json.loads(line)["text"].split()
                if words:
                    entries.append(words)
    if not entries:
        sys.exit(f"make_articles.py: no entries in {path}")
    return entries


def make_article(entries, rng, lo, hi, max_piece):
    target = rng.randint(lo, hi)
    lines, have = [], 0
    while have < target:
        words = entries[rng.randrange(len(entries))]
        if len(words) > max_piece:
            k = rng.randint(max_piece // 2, max_piece)
            start = rng.randrange(len(words) - k + 1)
            words = words[start:start + k]
        words = words[:target - have]
        lines.append(" ".join(words))
        have += len(words)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", required=True, help="natural gcide corpus (JSONL, one entry a line)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, required=True, help="documents to write")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--min-words", type=int, default=100)
    ap.add_argument("--max-words", type=int, default=160)
    ap.add_argument("--max-piece", type=int, default=60, help="longest piece of one entry in an article")
    ap.add_argument("--dup-fraction", type=float, default=0.15, help="share of output docs that are variants")
    ap.add_argument("--max-variants", type=int, default=3, help="variants per chosen base (1..k, uniform)")
    ap.add_argument("--max-delay", type=int, default=2000, help="a variant comes 1..this many docs after its base")
    ap.add_argument("--edit-rates", default="0,0.01,0.02,0.04,0.08",
                    help="per-word edit rates, one drawn uniformly per variant (0 = reformatting only)")
    ap.add_argument("--vocab-entries", type=int, default=2000, help="entries whose words make the edit vocabulary")
    args = ap.parse_args()
    if not (0 <= args.dup_fraction < 1):
        sys.exit("--dup-fraction must be in [0, 1)")
    if not (1 <= args.min_words <= args.max_words) or args.max_piece < 2 or args.max_variants < 1:
        sys.exit("need 1 <= --min-words <= --max-words, --max-piece >= 2, --max-variants >= 1")

    rng = random.Random(args.seed)
    entries = load_entries(args.entries)
    vocab = [w for i in rng.sample(range(len(entries)), min(len(entries), args.vocab_entries))
             for w in entries[i]]
    rates = [float(x) for x in args.edit_rates.split(",")]
    mean_k = (1 + args.max_variants) / 2
    f = args.dup_fraction
    q = min(1.0, f / (mean_k * (1 - f)))

    pending = []  # heap of (due position, tie-breaker, id, base id, rate, ops, text)
    seq = 0
    n_base = n_var = words_total = 0
    lens = []
    tmp = args.out + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as out, open(tmp + ".variants", "w", encoding="utf-8") as side:
        for pos in range(args.n):
            if pending and pending[0][0] <= pos:
                _, _, vid, bid, rate, ops, text = heapq.heappop(pending)
                side.write(json.dumps({"id": vid, "base_id": bid, "edit_rate": rate, "ops": ops}) + "\n")
                n_var += 1
            else:
                bid = f"art/{n_base}"
                text = make_article(entries, rng, args.min_words, args.max_words, args.max_piece)
                n_base += 1
                if rng.random() < q:
                    for j in range(rng.randint(1, args.max_variants)):
                        rate = rng.choice(rates)
                        if rate == 0:
                            vtext, ops = reformat(text, rng), {}
                        else:
                            vwords, ops = make_variant(text.split(), rate, vocab, rng)
                            vtext = " ".join(vwords)
                        seq += 1
                        due = pos + rng.randint(1, args.max_delay)
                        heapq.heappush(pending, (due, seq, f"{bid}#v{j}", bid, rate, ops, vtext))
                vid = bid
            out.write(json.dumps({"id": vid, "text": text}, ensure_ascii=False) + "\n")
            nw = len(text.split())
            words_total += nw
            if pos % 100 == 0:
                lens.append(nw)
    os.replace(tmp, args.out)
    os.replace(tmp + ".variants", args.out + ".variants.jsonl")
    lens.sort()
    m = len(lens)
    print(json.dumps({
        "out": args.out, "docs": args.n, "base_articles": n_base, "variants": n_var,
        "variant_share": round(n_var / args.n, 4) if args.n else 0,
        "variants_dropped_past_end": len(pending), "seed": args.seed,
        "words_mean": round(words_total / args.n, 1) if args.n else 0,
        "words_median_sampled": lens[m // 2] if m else 0,
        "words_p10_p90_sampled": [lens[m // 10], lens[m * 9 // 10]] if m else [],
        "mbytes": round(os.path.getsize(args.out) / 1e6, 1),
    }))


if __name__ == "__main__":
    main()
