#!/usr/bin/env python3
"""POST a JSON Lines corpus to a running neardup in batches, from a few threads.

    scripts/ingest_jsonl.py URL FILE [--batch 1000] [--threads 2]

Prints one JSON line: {"docs", "seconds", "docs_per_s", "failed"}. Standard
library only, so it runs anywhere python3 does.
"""

import argparse
import json
import queue
import threading
import time
import urllib.request


def batches(path: str, size: int):
    batch = []
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                batch.append(line.rstrip(b"\n"))
            if len(batch) == size:
                yield batch
                batch = []
    if batch:
        yield batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("file")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    work: "queue.Queue" = queue.Queue(maxsize=args.threads * 2)
    totals = {"docs": 0, "failed": 0}
    lock = threading.Lock()

    def worker() -> None:
        while True:
            body = work.get()
            if body is None:
                return
            req = urllib.request.Request(
                args.url + "/documents/batch?mode=upsert",
                data=body,
                headers={"content-type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=300) as resp:
                out = json.load(resp)
            with lock:
                totals["docs"] += out["created"] + out["replaced"]
                totals["failed"] += out["failed"]

    threads = [threading.Thread(target=worker) for _ in range(args.threads)]
    for t in threads:
        t.start()
    start = time.monotonic()
    for batch in batches(args.file, args.batch):
        work.put(b'{"documents":[' + b",".join(batch) + b"]}")
    for _ in threads:
        work.put(None)
    for t in threads:
        t.join()
    secs = time.monotonic() - start
    totals.update(seconds=round(secs, 2), docs_per_s=round(totals["docs"] / secs))
    print(json.dumps(totals))


if __name__ == "__main__":
    main()
