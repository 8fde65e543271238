#!/usr/bin/env python3
"""query_profile.py URL IDS_FILE [--n 2000] [--seed 1]: what the wrk run's
/similar queries return, from a sample of the same kind of ids (uniform over
IDS_FILE, already percent-encoded): results and LSH candidates per query,
share of queries with any result, truncated answers. One JSON line. The
query figures depend on the corpus as much as on the engine: a corpus with
large near-duplicate clusters gives many candidates and results per query."""
import argparse
import json
import random
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("ids")
ap.add_argument("--n", type=int, default=2000)
ap.add_argument("--seed", type=int, default=1)
args = ap.parse_args()

with open(args.ids, encoding="ascii") as f:
    ids = [line.strip() for line in f if line.strip()]
rng = random.Random(args.seed)
results = candidates = with_results = truncated = 0
for _ in range(args.n):
    with urllib.request.urlopen(f"{args.url}/similar?id={rng.choice(ids)}") as r:
        body = json.load(r)
    results += len(body["results"])
    candidates += body["candidates"]
    with_results += bool(body["results"])
    truncated += bool(body["truncated"])
print(json.dumps({
    "queries": args.n,
    "results_per_query": results / args.n,
    "candidates_per_query": candidates / args.n,
    "share_with_results": with_results / args.n,
    "truncated": truncated,
}))
