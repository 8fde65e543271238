#!/usr/bin/env python3
"""ids.py CORPUS.jsonl OUT: write every document id of a JSONL corpus, one a
line, percent-encoded for a query string (ids such as "gcide/12/Abbey#v3.0"
hold '/', '#' and non-ASCII letters), for scripts/bench/similar.lua."""
import json
import sys
from urllib.parse import quote

src, dst = sys.argv[1], sys.argv[2]
n = 0
with open(src, encoding="utf-8") as f, open(dst, "w", encoding="ascii") as out:
    for line in f:
        if line.strip():
            out.write(quote(json.loads(line)["id"], safe="") + "\n")
            n += 1
if n == 0:
    sys.exit(f"no documents in {src}")
print(f"{n} ids -> {dst}", file=sys.stderr)
