#!/usr/bin/env python3
"""What one document-frequency change costs Redis, by the command that makes it.

The redis backend counts a shingle's documents with one `HINCRBY` per
distinct shingle of a write, in `df_add.lua` (docs/redis-layout.md,
"Document frequency and templates"). This measures the Redis CPU (primary
plus its replica, both with AOF on, as the backend's durability wants) of
the same counts made four ways, so a new layout is chosen from figures:

- `lua`: the backend's own script, `df_add.lua`, on hashes of ~140 fields
  (4,096 of them, 64 slot tags, as `Keys::df_key` spreads them);
- `hincrby`: the same `HINCRBY`s sent as plain commands, pipelined;
- `bitfield`: a counting sketch instead, one `BITFIELD ... INCRBY u16`
  command per slot tag over a string of 2^23 counters (approximate: keys
  that share a counter add up);
- `log`: one `XADD` per batch of the batch's shingles packed 4 bytes each,
  as a log that every node would read to count in its own memory.

Random 32-bit shingles: DOCS documents of PER distinct shingles, written
BATCH documents a batch. Needs Debian's redis-server and `pip install
redis`; starts its own primary and replica on free loopback ports in a
temporary directory, and stops them at the end.

    python3 scripts/bench/redis_count_commands.py [--rounds 2]
"""

import argparse
import random
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
TAGS, GROUP_BITS = 64, 12
MASK = (1 << 64) - 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mix(x: int) -> int:
    return ((x ^ 0x6466_7265_7175_656E) * 0x9E37_79B9_7F4A_7C15) & MASK


def cpu(c: redis.Redis) -> float:
    info = c.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def send(kind, pipe, add, delta):
    """Queue on `pipe` the commands that apply `delta` (shingle -> change)."""
    if kind == "lua":
        per_tag = {}
        for x, d in delta.items():
            g = mix(x) >> (64 - GROUP_BITS)
            per_tag.setdefault(g % TAGS, {}).setdefault(g, {}).setdefault(d, []).append(x)
        for t, groups in per_tag.items():
            keys, args = [], []
            for i, (g, by_delta) in enumerate(groups.items()):
                keys.append(f"d:{{d.{t}}}:{g}")
                for d, xs in by_delta.items():
                    args += [i + 1, d, b"".join(struct.pack("<I", x) for x in xs)]
            add(keys=keys, args=args, client=pipe)
    elif kind == "hincrby":
        for x, d in delta.items():
            g = mix(x) >> (64 - GROUP_BITS)
            pipe.hincrby(f"d:{{d.{g % TAGS}}}:{g}", struct.pack("<I", x), d)
    elif kind == "bitfield":
        per_tag = {}
        for x, d in delta.items():
            m = mix(x)
            per_tag.setdefault(m % TAGS, []).append(((m >> 32) % (1 << 17), d))
        for t, ops in per_tag.items():
            args = ["OVERFLOW", "SAT"]
            for at, d in ops:
                args += ["INCRBY", "u16", f"#{at}", d]
            pipe.execute_command("BITFIELD", f"b:{{d.{t}}}", *args)
    elif kind == "log":
        packed = b"".join(struct.pack("<I", x) for x, d in delta.items() if d > 0)
        pipe.xadd("{d}:log", {"+": packed})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--per", type=int, default=290, help="distinct shingles a document")
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    script = (ROOT / "src/backend/redis/scripts/df_add.lua").read_text()
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        ports = [free_port(), free_port()]
        for i, port in enumerate(ports):
            d = Path(tmp) / str(i)
            d.mkdir()
            argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                    "--dir", str(d), "--appendonly", "yes", "--save", ""]
            if i == 1:
                argv += ["--replicaof", "127.0.0.1", str(ports[0])]
            procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
        try:
            primary, replica = (redis.Redis(port=p) for p in ports)
            for _ in range(100):
                try:
                    if replica.info("replication").get("master_link_status") == "up":
                        break
                except redis.ConnectionError:
                    pass
                time.sleep(0.1)
            add = primary.register_script(script)
            rng = random.Random(44)
            docs = [[rng.getrandbits(32) for _ in range(a.per)] for _ in range(a.docs)]
            batches = []
            for b in range(0, a.docs, a.batch):
                delta = {}
                for doc in docs[b:b + a.batch]:
                    for x in doc:
                        delta[x] = delta.get(x, 0) + 1
                batches.append(delta)
            fields = a.docs * a.per
            for r in range(a.rounds):
                for kind in ["lua", "hincrby", "bitfield", "log"]:
                    primary.flushall()
                    primary.wait(1, 10_000)
                    before = cpu(primary) + cpu(replica)
                    for delta in batches:
                        pipe = primary.pipeline(transaction=False)
                        send(kind, pipe, add, delta)
                        pipe.execute()
                    primary.wait(1, 10_000)
                    spent = cpu(primary) + cpu(replica) - before
                    print(f"round {r} {kind:8s} Redis CPU {spent:.2f} s, "
                          f"{spent / fields * 1e6:.2f} µs a counted shingle", flush=True)
        finally:
            for p in procs:
                p.terminate()
                p.wait()


if __name__ == "__main__":
    main()
