#!/usr/bin/env python3
"""summarize.py RAW_DIR OUT_DIR: read the fragments scripts/bench.sh wrote to
RAW_DIR, compute the side-by-side ratios, print the table and write
OUT_DIR/summary.json and OUT_DIR/summary.md. Reports only: a ratio short of
its target is shown as such, never turned into a failure."""
from __future__ import annotations

import json
import sys
from pathlib import Path

raw, out = Path(sys.argv[1]), Path(sys.argv[2])


def load(name: str) -> dict:
    p = raw / f"{name}.json"
    if not p.exists():
        sys.exit(f"summarize: {p} is missing (a phase of scripts/bench.sh did not finish)")
    return json.loads(p.read_text())


def rounds(name: str, rate=lambda r: r["docs_per_s"]) -> dict:
    """Every round of a repeated measurement (one JSON object a line); the
    best one, with the others' rates kept beside it."""
    p = raw / f"{name}.jsonl"
    if not p.exists():
        sys.exit(f"summarize: {p} is missing (a phase of scripts/bench.sh did not finish)")
    runs = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    best = dict(max(runs, key=rate))
    best["rounds_docs_per_s"] = [rate(r) for r in runs]
    return best


env = load("env")
sign_n, sign_r = rounds("sign_neardup"), rounds("sign_rensa")
ds, rp = load("peer_datasketch"), load("peer_rensa")
ing_rate = lambda r: r["ingest"]["docs_per_s"]  # noqa: E731
ing_never, ing_always = rounds("ingest_never", ing_rate), rounds("ingest_always", ing_rate)
ing_index = rounds("ingest_index", ing_rate)
qprof = load("query_profile")
mem, stats = load("memory"), load("stats_index")
wrk_sim, wrk_hz = load("wrk_similar"), load("wrk_healthz")
snap, restore, stats_r = load("snapshot"), load("restore"), load("stats_restored")
rmem = load("rensa_memory")


def rate(w: dict) -> float:
    return w["requests"] / (w["duration_us"] / 1e6)


def ms(us: float) -> str:
    return f"{us / 1000:.2f}"


rec = stats_r["storage"]["recovery"]
rec_docs = rec.get("documents", 0)
rec_rate = rec.get("docs_per_s") or (rec_docs / rec["seconds"] if rec.get("seconds") else 0.0)
mem_stats = stats["memory"]
rss_growth_per_doc = (mem["rss_kb_after"] - mem["rss_kb_before"]) * 1024 / mem["docs"]

rows = [
    # key, what, neardup, peer, ratio, target, higher_is_better
    ("signing", "engine signing, 1 thread (docs/s): neardup raw text → MinHash-128 vs rensa "
     "from_token_sets on pre-built shingles",
     sign_n["docs_per_s"], sign_r["docs_per_s"], 1.0, True),
    ("ingest_never", "HTTP batch ingest, fsync=never (docs/s) vs datasketch full pipeline",
     ing_never["ingest"]["docs_per_s"], ds["docs_per_s"], 20.0, True),
    ("ingest_always", "HTTP batch ingest, fsync=always (docs/s) vs datasketch full pipeline",
     ing_always["ingest"]["docs_per_s"], ds["docs_per_s"], 20.0, True),
    ("query", f"GET /similar vs GET /healthz, same wrk config, {mem['docs']:,} docs (req/s)",
     rate(wrk_sim), rate(wrk_hz), 0.7, True),
    ("memory", f"RSS growth per document at {mem['docs']:,} docs (bytes) vs rensa signatures + LSH "
     f"at {rmem['docs']:,}", rss_growth_per_doc, rmem["bytes_per_doc"], 1.0, False),
    ("restore", f"restore {rec_docs:,} docs from snapshot (recovery report, docs/s) vs target",
     rec_rate, None, 200_000.0, True),
]

table = []
for key, what, ours, peer, target, higher in rows:
    if peer is None:
        ratio, meets = None, ours >= target if higher else ours <= target
    else:
        ratio = ours / peer if peer else float("nan")
        meets = ratio >= target if higher else ratio <= target
    table.append({"key": key, "what": what, "neardup": ours, "peer": peer, "ratio": ratio,
                  "target": ("≥ " if higher else "≤ ") + (f"{target:,.0f} docs/s" if peer is None else f"{target:g}×"),
                  "meets_target": meets})


def fmt(x):
    if x is None:
        return "—"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}"


lines = [
    f"neardup side-by-side benchmark, {env['date_utc']}, {env['machine']}, git {env['git_rev']}"
    + (" (dirty)" if env.get("git_dirty") else ""),
    f"load average at start: {env['loadavg_start']}; at end: {open('/proc/loadavg').read().split()[:3]}",
    "",
    "| figure | neardup | peer | ratio | target | meets |",
    "|---|---:|---:|---:|---|---|",
]
for r in table:
    ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}×"
    meets = "yes" if r["meets_target"] else "no"
    lines.append(f"| {r['what']} | {fmt(r['neardup'])} | {fmt(r['peer'])} | {ratio} | {r['target']} | {meets} |")

ws, wh = wrk_sim["latency_us"], wrk_hz["latency_us"]
comp = {k: v for k, v in mem_stats.items() if k.endswith("_bytes") and k != "total_bytes"}
lines += [
    "",
    f"Query latency ({env['knobs']['WRK_THREADS']} wrk thread(s), {env['knobs']['WRK_CONNECTIONS']} connections, "
    f"{env['knobs']['WRK_DURATION']}), ms:",
    "",
    "| route | req/s | p50 | p99 | p99.9 | max | requests | errors |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    f"| GET /similar?id= | {rate(wrk_sim):,.0f} | {ms(ws['p50'])} | {ms(ws['p99'])} | {ms(ws['p99_9'])} | "
    f"{ms(ws['max'])} | {wrk_sim['requests']:,} | {sum(wrk_sim['errors'].values())} |",
    f"| GET /healthz | {rate(wrk_hz):,.0f} | {ms(wh['p50'])} | {ms(wh['p99'])} | {ms(wh['p99_9'])} | "
    f"{ms(wh['max'])} | {wrk_hz['requests']:,} | {sum(wrk_hz['errors'].values())} |",
    "",
    f"The /similar queries (a sample of {qprof['queries']:,}): {qprof['results_per_query']:.2f} results and "
    f"{qprof['candidates_per_query']:.2f} LSH candidates per query, {qprof['share_with_results']:.0%} with any "
    f"result, {qprof['truncated']} truncated.",
    "",
    f"Memory at {mem['docs']:,} docs: RSS {mem['rss_kb_before'] / 1024:,.0f} MiB → {mem['rss_kb_after'] / 1024:,.0f} MiB "
    f"(peak {mem['hwm_kb'] / 1024:,.0f} MiB) = {rss_growth_per_doc:,.0f} bytes/doc; "
    f"/stats estimate {mem_stats['bytes_per_document']:,.0f} bytes/doc = "
    + ", ".join(f"{k[:-6]} {v / mem['docs']:,.0f}" for k, v in comp.items())
    + f". rensa at {rmem['docs']:,}: {rmem['bytes_per_doc']:,.0f} bytes/doc (signatures "
    f"{rmem['signatures_bytes_per_doc']:,.0f}, LSH {rmem['lsh_bytes_per_doc']:,.0f}); "
    f"peerrun.py rensa at {rp['docs']:,}: {rp['rss_growth_bytes'] / rp['docs']:,.0f} bytes/doc.",
    "",
    f"Ingest: {ing_index['ingest']['docs']:,} docs (fsync=never) at {ing_index['ingest']['docs_per_s']:,.0f} docs/s; "
    f"{ing_never['ingest']['docs']:,}-doc slice: fsync=never {ing_never['ingest']['docs_per_s']:,.0f}, "
    f"fsync=always {ing_always['ingest']['docs_per_s']:,.0f} docs/s (best of "
    f"{', '.join(f'{x:,.0f}' for x in ing_never['rounds_docs_per_s'])} and "
    f"{', '.join(f'{x:,.0f}' for x in ing_always['rounds_docs_per_s'])}); datasketch {ds['docs_per_s']:,.0f}, "
    f"rensa (peerrun.py, Python shingling included, all cores) {rp['docs_per_s']:,.0f} docs/s.",
    "",
    f"Signing, best of {len(sign_n['rounds_docs_per_s'])} alternating rounds: neardup "
    f"{', '.join(f'{x:,.0f}' for x in sign_n['rounds_docs_per_s'])}; rensa "
    f"{', '.join(f'{x:,.0f}' for x in sign_r['rounds_docs_per_s'])} docs/s "
    f"(rensa CPU/wall {sign_r.get('cpu_per_wall', float('nan')):.2f}, i.e. one thread).",
    "",
    f"Restore: snapshot {snap['seconds']:.2f} s ({snap['response'].get('bytes', 0) / 2**20:,.0f} MiB); "
    f"graceful stop {restore['stop_seconds']:.2f} s; restart to /readyz 200 in {restore['ready_seconds']:.2f} s "
    f"= {rec_docs / restore['ready_seconds']:,.0f} docs/s wall; recovery report {rec['seconds']:.2f} s "
    f"= {rec_rate:,.0f} docs/s ({rec.get('replayed_records', 0)} log records replayed).",
]
text = "\n".join(lines)
print(text)
out.mkdir(parents=True, exist_ok=True)
(out / "summary.md").write_text(text + "\n")
(out / "summary.json").write_text(json.dumps({
    "env": env, "table": table,
    "query": {"similar": wrk_sim, "healthz": wrk_hz, "profile": qprof},
    "memory": {"rss": mem, "rss_growth_bytes_per_doc": rss_growth_per_doc, "stats": mem_stats,
               "rensa": rmem, "rensa_peerrun": rp},
    "ingest": {"slice_never": ing_never, "slice_always": ing_always, "index": ing_index},
    "peers": {"datasketch": ds, "rensa": rp, "rensa_sign": sign_r},
    "signing": {"neardup": sign_n, "rensa": sign_r},
    "restore": {"snapshot": snap, "restart": restore, "recovery": rec},
}, indent=2) + "\n")
