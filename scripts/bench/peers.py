#!/usr/bin/env python3
"""Peer measurements that ../shared/bench/peerrun.py does not make, run in the
bench venv (datasketch, rensa pinned by ../shared/bench/requirements.txt).

  peers.py rensa-sign FILE [--reps 3]
      rensa's signing alone: RMinHash.from_token_sets on token sets built
      before the clock with the kit's shingle recipe (exact_pairs.shingles,
      the same one peerrun.py uses), num_perm=128. Best of --reps. Threads
      are rayon's: run with RAYON_NUM_THREADS=1 for one core.

  peers.py rensa-memory FILE [--chunk 20000]
      rensa's bytes per document for what a service must keep to answer
      queries by id: the RMinHash signatures and an RMinHashLSH(0.8, 128, 16)
      holding them. RSS growth (/proc/self/statm) from before the first
      signature to after the last insert; token sets are built and dropped a
      chunk at a time so Python's garbage does not count as rensa's memory.

Each prints one JSON line.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

SHARED_BENCH = Path(os.environ.get("SHARED_BENCH", Path(__file__).resolve().parents[3] / "shared" / "bench"))
sys.path.insert(0, str(SHARED_BENCH))
from exact_pairs import shingles  # noqa: E402  (the kit's recipe, shared with peerrun.py)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def texts(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def rensa_sign(args) -> dict:
    from rensa import RMinHash

    docs = texts(args.file)
    token_sets = [shingles(t) for t in docs]
    runs, cpu = [], []
    for _ in range(args.reps):
        c0, t0 = time.process_time(), time.perf_counter()
        sigs = RMinHash.from_token_sets(token_sets, num_perm=128, seed=42)
        runs.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        assert len(sigs) == len(docs)
        del sigs
    best = min(runs)
    return {
        "peer": "rensa", "what": "sign", "docs": len(docs),
        "threads": os.environ.get("RAYON_NUM_THREADS", "all"),
        "seconds": best, "runs_seconds": runs,
        # CPU seconds per wall second: ~1.0 confirms one thread.
        "cpu_per_wall": sum(cpu) / sum(runs),
        "docs_per_s": len(docs) / best, "ns_per_doc": best * 1e9 / len(docs),
    }


def rensa_memory(args) -> dict:
    from rensa import RMinHash, RMinHashLSH

    docs = texts(args.file)
    gc.collect()
    base = rss()
    t0 = time.perf_counter()
    sigs = []
    for i in range(0, len(docs), args.chunk):
        chunk = [shingles(t) for t in docs[i:i + args.chunk]]
        sigs.extend(RMinHash.from_token_sets(chunk, num_perm=128, seed=42))
        del chunk
    gc.collect()
    after_sigs = rss()
    lsh = RMinHashLSH(0.8, 128, 16)
    lsh.insert_many(sigs)
    gc.collect()
    after_lsh = rss()
    dt = time.perf_counter() - t0
    n = len(docs)
    return {
        "peer": "rensa", "what": "memory", "docs": n, "seconds": dt,
        "signatures_bytes": after_sigs - base, "lsh_bytes": after_lsh - after_sigs,
        "rss_growth_bytes": after_lsh - base,
        "bytes_per_doc": (after_lsh - base) / n,
        "signatures_bytes_per_doc": (after_sigs - base) / n,
        "lsh_bytes_per_doc": (after_lsh - after_sigs) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("rensa-sign")
    s.add_argument("file")
    s.add_argument("--reps", type=int, default=3)
    m = sub.add_parser("rensa-memory")
    m.add_argument("file")
    m.add_argument("--chunk", type=int, default=20000)
    args = ap.parse_args()
    out = {"rensa-sign": rensa_sign, "rensa-memory": rensa_memory}[args.cmd](args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
