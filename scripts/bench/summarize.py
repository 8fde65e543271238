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


def lower_median(items, key=lambda x: x):
    """The median of `items` by `key`: the lower middle of an even count."""
    return sorted(items, key=key)[(len(items) - 1) // 2]


def rounds(name: str, rate=lambda r: r["docs_per_s"]) -> dict:
    """Every round of a repeated measurement (one JSON object a line); the
    median one (the lower middle of an even count), with every round's rate
    kept beside it."""
    p = raw / f"{name}.jsonl"
    if not p.exists():
        sys.exit(f"summarize: {p} is missing (a phase of scripts/bench.sh did not finish)")
    runs = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    median = dict(lower_median(runs, key=rate))
    median["rounds_docs_per_s"] = [rate(r) for r in runs]
    return median


def text_stage() -> dict:
    """text_bench's lines: {file stem: {group: words ns/byte (median round)}}."""
    p = raw / "text_stage.jsonl"
    if not p.exists():
        sys.exit(f"summarize: {p} is missing (a phase of scripts/bench.sh did not finish)")
    out = {}
    for line in p.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            stem = Path(d["file"]).name
            out[stem] = {g: v["phases"]["words"]["ns_per_byte"] for g, v in d["groups"].items()}
            out[stem]["_shingles"] = d["groups"]["all"]["phases"]["shingles"]["ns_per_byte"]
    return out


env = load("env")
huge = load("huge_pages")
sign_n, sign_r = rounds("sign_neardup"), rounds("sign_rensa")
sign_rn, sign_rr = rounds("sign_real_neardup"), rounds("sign_real_rensa")
ds, rp = load("peer_datasketch"), load("peer_rensa")
ds_short = load("peer_datasketch_short")
ing_rate = lambda r: r["ingest"]["docs_per_s"]  # noqa: E731
ing_never, ing_always = rounds("ingest_never", ing_rate), rounds("ingest_always", ing_rate)
ing_s_never, ing_s_always = rounds("ingest_short_never", ing_rate), rounds("ingest_short_always", ing_rate)
txt = text_stage()
_stems = list(txt)
# text_bench's files, in bench.sh's order: ASCII articles, one ’ and its
# twin, news-like typography and its twin, the man pages (groups by language),
# the fr/de/es man pages and their ASCII-folded twins.
t_ascii, t_apos, t_apos_twin, t_news, t_news_twin, t_real, t_latin, t_latin_twin = (txt[k] for k in _stems[:8])
ing_index = rounds("ingest_index", ing_rate)
qprof = load("query_profile")
mem, stats = load("memory"), load("stats_index")
snap, restore, stats_r = load("snapshot"), load("restore"), load("stats_restored")
rmem = load("rensa_memory")


def rate(w: dict) -> float:
    return w["requests"] / (w["duration_us"] / 1e6)


def ms(us: float) -> str:
    return f"{us / 1000:.2f}"

def wrk_rounds() -> tuple[dict, dict, list[float], dict]:
    """The query rounds (`/similar` and `/healthz` alternating): the median
    round by its ratio (the lower middle of an even count), as its two wrk
    summaries, every round's ratio in order, and every round's summaries."""
    runs = {}
    for route in ("similar", "healthz"):
        p = raw / f"wrk_{route}.jsonl"
        if not p.exists():
            sys.exit(f"summarize: {p} is missing (a phase of scripts/bench.sh did not finish)")
        runs[route] = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    if not runs["similar"] or len(runs["similar"]) != len(runs["healthz"]):
        sys.exit("summarize: the query rounds of /similar and /healthz do not pair up")
    ratios = [rate(s) / rate(h) for s, h in zip(runs["similar"], runs["healthz"])]
    mid = lower_median(range(len(ratios)), key=lambda i: ratios[i])
    return runs["similar"][mid], runs["healthz"][mid], ratios, runs


wrk_sim, wrk_hz, wrk_ratios, wrk_runs = wrk_rounds()


def cpu_us(w: dict) -> float:
    """The server's CPU (user + system) per request of one wrk run, in µs."""
    return w["server_cpu_s"] * 1e6 / w["requests"]


# Runs recorded before bench.sh measured the server's CPU lack it.
cpu_lines = []
if all("server_cpu_s" in w for ws in wrk_runs.values() for w in ws):
    cpu_ratios = [cpu_us(h) / cpu_us(s) for s, h in zip(wrk_runs["similar"], wrk_runs["healthz"])]
    cpu_lines = [
        "",
        "The server's CPU a request (user + system, µs), every round in order: /similar "
        + ", ".join(f"{cpu_us(w):.1f}" for w in wrk_runs["similar"])
        + "; /healthz " + ", ".join(f"{cpu_us(w):.1f}" for w in wrk_runs["healthz"])
        + "; /healthz ÷ /similar " + ", ".join(f"{r:.3f}" for r in cpu_ratios)
        + f" (median {lower_median(cpu_ratios):.3f}). wrk takes CPU from the same two"
        " cores, so this is the server's own cost of the route; the target is the req/s ratio above.",
    ]


rec = stats_r["storage"]["recovery"]
rec_docs = rec.get("documents", 0)
rec_rate = rec.get("docs_per_s") or (rec_docs / rec["seconds"] if rec.get("seconds") else 0.0)
mem_stats = stats["memory"]
rss_growth_per_doc = (mem["rss_kb_after"] - mem["rss_kb_before"]) * 1024 / mem["docs"]

rows = [
    # key, what, neardup, peer (None: absolute target), target, higher_is_better
    ("text_apos", "text stage, one ’ per ~130-word article: normalize + word hashes (ns/byte) vs its ASCII twin",
     t_apos["all"], t_apos_twin["all"], 1.5, False),
    ("text_news", "text stage, English typography (’ “ ” – é £, 1–6 a doc) (ns/byte) vs its ASCII twin",
     t_news["all"], t_news_twin["all"], 1.5, False),
]
for lang in ("fr", "de", "es"):
    if lang in t_latin and lang in t_latin_twin:
        rows.append((f"text_{lang}_twin", f"text stage, man pages ({lang}) (ns/byte) vs their ASCII-folded twins",
                     t_latin[lang], t_latin_twin[lang], 1.5, False))
for lang, target in (("fr", 1.5), ("de", 1.5), ("es", 1.5), ("ru", 2.0), ("zh", 2.0), ("ja", 2.0)):
    if lang in t_real:
        rows.append((f"text_{lang}", f"text stage, man pages ({lang}) (ns/byte) vs the ASCII articles",
                     t_real[lang], t_ascii["all"], target, False))
rows += [
    ("signing", "engine signing, 1 thread, articles (docs/s): neardup raw text → MinHash-128 vs rensa "
     "from_token_sets on pre-built shingles",
     sign_n["docs_per_s"], sign_r["docs_per_s"], 2.0, True),
    ("signing_real", "engine signing, 1 thread, man pages fr/de/ru/es/zh/ja (docs/s) vs rensa likewise",
     sign_rn["docs_per_s"], sign_rr["docs_per_s"], 1.5, True),
    ("ingest_never", "HTTP batch ingest, articles, fsync=never (docs/s) vs datasketch full pipeline",
     ing_never["ingest"]["docs_per_s"], ds["docs_per_s"], 25.0, True),
    ("ingest_always", "HTTP batch ingest, articles, fsync=always (docs/s) vs datasketch full pipeline",
     ing_always["ingest"]["docs_per_s"], ds["docs_per_s"], 25.0, True),
    ("ingest_short_never", "HTTP batch ingest, short gcide documents, fsync=never (docs/s) vs datasketch",
     ing_s_never["ingest"]["docs_per_s"], ds_short["docs_per_s"], 20.0, True),
    ("ingest_short_always", "HTTP batch ingest, short gcide documents, fsync=always (docs/s) vs datasketch",
     ing_s_always["ingest"]["docs_per_s"], ds_short["docs_per_s"], 20.0, True),
    ("query", f"GET /similar vs GET /healthz, same wrk config, {mem['docs']:,} docs (req/s)",
     rate(wrk_sim), rate(wrk_hz), 0.8, True),
    ("memory", f"RSS growth per document at {mem['docs']:,} docs (bytes; rensa signatures + LSH at "
     f"{rmem['docs']:,}: {rmem['bytes_per_doc']:,.0f})", rss_growth_per_doc, None, 1600.0, False),
    ("restore", f"restore {rec_docs:,} docs from snapshot (recovery report, docs/s) vs target",
     rec_rate, None, 400_000.0, True),
]

table = []
for key, what, ours, peer, target, higher in rows:
    if peer is None:
        ratio, meets = None, ours >= target if higher else ours <= target
    else:
        ratio = ours / peer if peer else float("nan")
        meets = ratio >= target if higher else ratio <= target
    table.append({"key": key, "what": what, "neardup": ours, "peer": peer, "ratio": ratio,
                  "target": ("≥ " if higher else "≤ ") + (f"{target:,.0f}" if peer is None else f"{target:g}×"),
                  "meets_target": meets})


def fmt(x):
    if x is None:
        return "—"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.3f}" if abs(x) < 10 else f"{x:,.2f}"


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
    f"{env['knobs']['WRK_DURATION']} a route and round; the median of {len(wrk_ratios)} alternating rounds by "
    f"their /similar ÷ /healthz ratio), ms:",
    "",
    "| route | req/s | p50 | p99 | p99.9 | max | requests | errors |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    f"| GET /similar?id= | {rate(wrk_sim):,.0f} | {ms(ws['p50'])} | {ms(ws['p99'])} | {ms(ws['p99_9'])} | "
    f"{ms(ws['max'])} | {wrk_sim['requests']:,} | {sum(wrk_sim['errors'].values())} |",
    f"| GET /healthz | {rate(wrk_hz):,.0f} | {ms(wh['p50'])} | {ms(wh['p99'])} | {ms(wh['p99_9'])} | "
    f"{ms(wh['max'])} | {wrk_hz['requests']:,} | {sum(wrk_hz['errors'].values())} |",
    "",
    f"The index in huge pages before the rounds: {huge['anon_huge_kb'] / 1024:,.0f} MiB of RSS "
    f"{huge['rss_kb'] / 1024:,.0f} MiB (AnonHugePages, after {huge['waited_s']} s; src/hugepages.rs).",
    "",
    "Every query round, in order: ratio " + ", ".join(f"{r:.3f}" for r in wrk_ratios)
    + "; /similar req/s " + ", ".join(f"{rate(w):,.0f}" for w in wrk_runs["similar"])
    + ", p99.9 " + ", ".join(f"{ms(w['latency_us']['p99_9'])}" for w in wrk_runs["similar"])
    + " ms; /healthz req/s " + ", ".join(f"{rate(w):,.0f}" for w in wrk_runs["healthz"]) + ".",
    *cpu_lines,
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
    f"fsync=always {ing_always['ingest']['docs_per_s']:,.0f} docs/s (rounds "
    f"{', '.join(f'{x:,.0f}' for x in ing_never['rounds_docs_per_s'])} and "
    f"{', '.join(f'{x:,.0f}' for x in ing_always['rounds_docs_per_s'])}, median counts); datasketch {ds['docs_per_s']:,.0f}, "
    f"rensa (peerrun.py, Python shingling included, all cores) {rp['docs_per_s']:,.0f} docs/s. "
    f"Short documents ({ing_s_never['ingest']['docs']:,}): fsync=never rounds "
    f"{', '.join(f'{x:,.0f}' for x in ing_s_never['rounds_docs_per_s'])}, fsync=always "
    f"{', '.join(f'{x:,.0f}' for x in ing_s_always['rounds_docs_per_s'])}; datasketch {ds_short['docs_per_s']:,.0f} docs/s.",
    "",
    f"Signing, median of {len(sign_n['rounds_docs_per_s'])} alternating rounds: neardup "
    f"{', '.join(f'{x:,.0f}' for x in sign_n['rounds_docs_per_s'])}; rensa "
    f"{', '.join(f'{x:,.0f}' for x in sign_r['rounds_docs_per_s'])} docs/s "
    f"(rensa CPU/wall {sign_r.get('cpu_per_wall', float('nan')):.2f}, i.e. one thread). "
    f"Man pages: neardup {', '.join(f'{x:,.0f}' for x in sign_rn['rounds_docs_per_s'])}; rensa "
    f"{', '.join(f'{x:,.0f}' for x in sign_rr['rounds_docs_per_s'])} docs/s.",
    "",
    "Text stage (normalize + word hashes, ns per input byte, median of rounds; shingles = the sorted "
    "distinct word 3-shingle hashes): "
    + "; ".join(f"{k.split('-n')[0] + ('.twin' if 'twin' in k else '')} {v['all']:.3f} (shingles {v['_shingles']:.3f})"
                for k, v in txt.items())
    + "; man pages by language: "
    + ", ".join(f"{g} {v:.3f}" for g, v in t_real.items() if g not in ("all", "_shingles")) + ".",
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
    "query": {"similar": wrk_sim, "healthz": wrk_hz, "ratios": wrk_ratios,
              "rounds": wrk_runs, "profile": qprof},
    "memory": {"rss": mem, "rss_growth_bytes_per_doc": rss_growth_per_doc, "stats": mem_stats,
               "rensa": rmem, "rensa_peerrun": rp},
    "ingest": {"slice_never": ing_never, "slice_always": ing_always, "index": ing_index,
               "short_never": ing_s_never, "short_always": ing_s_always},
    "peers": {"datasketch": ds, "datasketch_short": ds_short, "rensa": rp, "rensa_sign": sign_r},
    "signing": {"neardup": sign_n, "rensa": sign_r, "real_neardup": sign_rn, "real_rensa": sign_rr},
    "text_stage_ns_per_byte": txt,
    "restore": {"snapshot": snap, "restart": restore, "recovery": rec},
}, indent=2) + "\n")
