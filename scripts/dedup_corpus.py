#!/usr/bin/env python3
"""Write a deterministic JSON Lines corpus with planted near-duplicate groups.

    scripts/dedup_corpus.py N OUT.jsonl [--seed S] [--dup-fraction F]

Documents are 100-160 words drawn from a 30,000-word made-up vocabulary
(Zipf-like weights, so common words repeat as in real text). A fraction F
(default 0.1) of the documents belong to planted families of 2-5 members;
each member is the family base with 0-3 words substituted (exact Jaccard
on word 3-shingles ~0.9-1.0), so the expected groups are known roughly,
while exact answers come from neardup itself. Ids are "d<n>" in file order.
"""

import argparse
import json
import random


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dup-fraction", type=float, default=0.1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    syllables = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "va", "ze", "bo", "du", "fi", "gu", "ho", "ju"]
    vocab = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) + str(i % 7) for i in range(40000)})[:30000]
    rng.shuffle(vocab)
    weights = [1.0 / (i + 10) for i in range(len(vocab))]
    cum = []
    total = 0.0
    for w in weights:
        total += w
        cum.append(total)

    def words(k: int) -> list:
        return rng.choices(vocab, cum_weights=cum, k=k)

    written = 0
    with open(args.out, "w") as f:
        while written < args.n:
            base = words(rng.randint(100, 160))
            if rng.random() < args.dup_fraction / 3.5:
                size = min(rng.randint(2, 5), args.n - written)
            else:
                size = 1
            for m in range(size):
                doc = list(base)
                if m:
                    for _ in range(rng.randint(0, 3)):
                        doc[rng.randrange(len(doc))] = rng.choice(vocab)
                f.write(json.dumps({"id": f"d{written}", "text": " ".join(doc)}) + "\n")
                written += 1


if __name__ == "__main__":
    main()
