#!/usr/bin/env bash
# Side-by-side benchmark of neardup against the libraries users would pick
# instead (datasketch, rensa; pinned in ../shared/bench/requirements.txt), in
# ONE run on ONE machine, so the ratios hold on a noisy machine even when the
# absolute figures do not. See docs/benchmarks.md for what each figure means.
#
#   scripts/bench.sh                       # 1,000,000-doc index, 100,000-doc peer slice
#   N=200000 PEER_N=50000 scripts/bench.sh # quicker
#
# Needs: the Rust toolchain, python3 (with venv), curl, wrk, groff and
# dpkg-deb (apt-get update && apt-get install -y wrk groff-base), ../shared/bench
# beside the checkout, and examples/sign_bench.rs and examples/text_bench.rs. Python packages go into a venv under
# target/bench/venv; the gcide source is fetched once (apt-get download, sha256
# checked) into ../shared/bench/data/src; corpora are cached in
# target/bench/corpus. Results: $OUT/summary.{md,json}, raw fragments in
# $OUT/raw, server logs in $OUT/logs. Reports only; never asserts a timing.
#
# Knobs (environment):
#   N               documents in the index for query, memory and restore (1000000)
#   PEER_N          documents in the slice for signing and ingest ratios (100000)
#   SEED            corpus seed (6)
#   CORPUS          articles: ~130-word articles of gcide text, 15% variants
#                   (scripts/bench/make_articles.py); gcide: the kit's
#                   synthetic corpus of single gcide entries (articles)
#   PORT            loopback port for the server (18090)
#   OUT             results directory (target/bench/latest)
#   CONCURRENCY     connections posting batches of BATCH=1000 documents (4)
#   ROUNDS          rounds of the text, signing, slice-ingest and query
#                   measurements; the median round of each side counts (5)
#   TEXT_N          documents per file of the text-stage measurement (5000)
#   REAL_N          documents of the real-text corpus (Debian's translated
#                   man pages, fr/de/ru/es/zh/ja; ~5.5 kB each) for signing (20000)
#   WRK_THREADS, WRK_CONNECTIONS, WRK_DURATION, WRK_WARMUP   query load (1, 8,
#                   10s a route and round, 3s)
#   SHARED          the shared kit (../shared)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

N="${N:-1000000}"
PEER_N="${PEER_N:-100000}"
SEED="${SEED:-6}"
CORPUS="${CORPUS:-articles}"
PORT="${PORT:-18090}"
OUT="${OUT:-target/bench/latest}"
BATCH="${BATCH:-1000}"
CONCURRENCY="${CONCURRENCY:-4}"
ROUNDS="${ROUNDS:-5}"
TEXT_N="${TEXT_N:-5000}"
REAL_N="${REAL_N:-20000}"
WRK_THREADS="${WRK_THREADS:-1}"
WRK_CONNECTIONS="${WRK_CONNECTIONS:-8}"
WRK_DURATION="${WRK_DURATION:-10s}"
WRK_WARMUP="${WRK_WARMUP:-3s}"
SHARED="${SHARED:-../shared}"

KIT="$(cd "$SHARED/bench" 2>/dev/null && pwd)" ||
    { echo "bench.sh: $SHARED/bench not found: check out the shared kit beside this repository (or set SHARED)" >&2; exit 1; }
VENV="$ROOT/target/bench/venv"
PY="$VENV/bin/python"
CORPUS_DIR="$ROOT/target/bench/corpus"
RAW="$OUT/raw"
LOGS="$OUT/logs"
URL="http://127.0.0.1:$PORT"
started_at=$(date +%s)

die() {
    echo "bench.sh: $*" >&2
    exit 1
}
phase() { echo; echo "== [$(date -u +%H:%M:%S)] $*"; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"; }

# ------------------------------------------------------------ preflight --
phase "preflight"
need cargo "install the Rust toolchain (rustup)"
need python3 "install python3 with the venv module"
need curl "apt-get install -y curl"
need wrk "apt-get update && apt-get install -y wrk"
need groff "apt-get update && apt-get install -y groff-base (renders the man-page corpus)"
need dpkg-deb "a Debian-based system (unpacks the man-page packages)"
[[ -f "$KIT/make_corpus.py" && -f "$KIT/peerrun.py" && -f "$KIT/requirements.txt" ]] ||
    die "$KIT/{make_corpus,peerrun}.py not found: check out the shared kit beside this repository (or set SHARED)"
[[ -f examples/sign_bench.rs ]] ||
    die "examples/sign_bench.rs is missing: the engine signing figure runs" \
        "'cargo run --release --example sign_bench -- FILE.jsonl' (a JSON line with \"docs_per_s\")"
[[ "$N" =~ ^[0-9]+$ && "$PEER_N" =~ ^[0-9]+$ && "$N" -ge 1000 && "$PEER_N" -ge 1000 ]] ||
    die "N and PEER_N must be whole numbers of at least 1000 (N=$N PEER_N=$PEER_N)"
[[ "$TEXT_N" =~ ^[0-9]+$ && "$REAL_N" =~ ^[0-9]+$ && "$TEXT_N" -ge 100 && "$REAL_N" -ge "$TEXT_N" ]] ||
    die "TEXT_N (at least 100) and REAL_N (at least TEXT_N) must be whole numbers (TEXT_N=$TEXT_N REAL_N=$REAL_N)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive whole number (ROUNDS=$ROUNDS)"
if curl -s -o /dev/null "$URL/healthz"; then
    die "something already answers on $URL; set PORT to a free port"
fi
rm -rf "$RAW" "$LOGS"
mkdir -p "$RAW" "$LOGS" "$CORPUS_DIR"

# ---------------------------------------------------- server lifecycle --
server_pid=""
data_dirs=()
cleanup() {
    local rc=$?
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if ((${#data_dirs[@]})); then
        rm -rf "${data_dirs[@]}"
    fi
    if ((rc != 0)); then
        echo "bench.sh: FAILED (exit $rc); logs in $LOGS" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# new_data_dir: a fresh temporary data directory in $data_dir (removed on exit).
new_data_dir() {
    data_dir="$(mktemp -d "${TMPDIR:-/tmp}/neardup-bench.XXXXXX")"
    data_dirs+=("$data_dir")
}

# start_server DATA_DIR FSYNC LOG_NAME: starts in the background, sets
# server_pid and server_t0 (when it was started, for time-to-ready).
start_server() {
    server_t0=$(date +%s.%N)
    NEARDUP_SERVER__BIND="127.0.0.1:$PORT" \
    NEARDUP_LOG__FORMAT=json \
    NEARDUP_STORAGE__DATA_DIR="$1" \
    NEARDUP_STORAGE__WAL_FSYNC="$2" \
    NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 \
        target/release/neardup >"$LOGS/$3.log" 2>&1 &
    server_pid=$!
}

# wait_ready TIMEOUT_S: poll /readyz every 20 ms until 200; prints seconds
# since start_server.
wait_ready() {
    local deadline=$(($(date +%s) + $1))
    while :; do
        kill -0 "$server_pid" 2>/dev/null || {
            tail -20 "$LOGS"/*.log >&2
            die "neardup (pid $server_pid) exited before it was ready"
        }
        if [[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz" 2>/dev/null)" == 200 ]]; then
            awk -v a="$server_t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", b - a }'
            return
        fi
        (($(date +%s) < deadline)) || die "neardup not ready after $1 s"
        sleep 0.02
    done
}

# stop_server: SIGTERM (drain, final snapshot), wait; seconds in $stop_seconds.
stop_server() {
    local t0 rc=0
    t0=$(date +%s.%N)
    kill -TERM "$server_pid"
    wait "$server_pid" || rc=$?
    server_pid=""
    ((rc == 0)) || die "neardup exited with status $rc on SIGTERM"
    stop_seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
}

status_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$server_pid/status"; }

# ingest NAME CORPUS: POST the corpus in batches; appends loadgen's JSON
# summary as one line to $RAW/NAME.jsonl.
ingest() {
    target/release/examples/loadgen --url "$URL" --corpus "$2" --batch "$BATCH" \
        --concurrency "$CONCURRENCY" --phase ingest | tee "$LOGS/loadgen-$1.txt" |
        sed '/^summary: /d'
    grep -q '^summary: ' "$LOGS/loadgen-$1.txt" || die "loadgen printed no summary for $1"
    sed -n 's/^summary: //p' "$LOGS/loadgen-$1.txt" >>"$RAW/$1.jsonl"
}

# ------------------------------------------------------- python + data --
phase "python venv ($VENV) with $KIT/requirements.txt"
if ! cmp -s "$KIT/requirements.txt" "$VENV/requirements.txt" 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$KIT/requirements.txt"
    cp "$KIT/requirements.txt" "$VENV/requirements.txt"
fi
"$PY" -c 'import datasketch, rensa' || die "peer packages did not import"

# CORPUS=articles (default): scripts/bench/make_articles.py, ~130-word
# articles of gcide text (entries from the kit's natural corpus, drawn at
# random with replacement) with 15% planted near-duplicate variants; the
# generator is sequential, so the PEER_N slice is exactly the first PEER_N
# documents of the N-document index corpus (same seed).
# CORPUS=gcide (the earlier corpus): make_corpus.py synthetic on the gcide
# entries themselves (median ~27 words); gcide has 97,705 entries, so past
# ~120,000 documents the variant share grows (for 1,000,000: 90.5% variants
# of 95,000 bases, ~10 per base).
corpus_gcide() { # N -> path (generated once, cached)
    local n=$1 path="$CORPUS_DIR/syn-gcide-n$1-s$SEED.jsonl"
    if [[ ! -s "$path" ]]; then
        local dup
        dup=$(awk -v n="$n" 'BEGIN { d = 1 - 95000 / n; printf "%.4f", (d > 0.2 ? d : 0.2) }')
        echo "generating $path (dup fraction $dup) ..." >&2
        (cd "$KIT" && "$PY" make_corpus.py synthetic --sources gcide --n "$n" --seed "$SEED" \
            --dup-fraction "$dup" --min-base-words 10 --out "$path.tmp") >&2 ||
            die "make_corpus.py failed for $n documents"
        mv "$path.tmp" "$path"
    fi
    echo "$path"
}
corpus_articles() { # N -> path (generated once, cached)
    local n=$1 path="$CORPUS_DIR/articles-n$1-s$SEED.jsonl" entries="$CORPUS_DIR/gcide-natural.jsonl"
    if [[ ! -s "$entries" ]]; then
        echo "extracting the gcide entries into $entries ..." >&2
        (cd "$KIT" && "$PY" make_corpus.py natural --sources gcide --out "$entries.tmp.jsonl") >&2 ||
            die "make_corpus.py natural failed"
        mv "$entries.tmp.jsonl" "$entries"
    fi
    if [[ ! -s "$path" ]]; then
        echo "generating $path ..." >&2
        "$PY" scripts/bench/make_articles.py --entries "$entries" --n "$n" --seed "$SEED" \
            --out "$path" >&2 || die "make_articles.py failed for $n documents"
    fi
    echo "$path"
}
# The non-ASCII corpora (scripts/bench/make_realtext.py): Debian's translated
# man pages (pinned packages, sha256-checked, rendered with groff), and the
# articles with English typography set in (’ “ ” – é £) beside their ASCII
# twins: "newslike" (1..6 marks a document) and "oneapos" (exactly one ’).
corpus_realtext() { # N -> path
    local n=$1 path="$CORPUS_DIR/realtext-n$1-s$SEED.jsonl"
    if [[ ! -s "$path" ]]; then
        echo "generating $path (man pages into $CORPUS_DIR/src) ..." >&2
        "$PY" scripts/bench/make_realtext.py manpages --src "$CORPUS_DIR/src" --n "$n" --seed "$SEED" \
            --out "$path.tmp" >&2 || die "make_realtext.py manpages failed (apt-get update first?)"
        mv "$path.tmp.variants.jsonl" "$path.variants.jsonl" 2>/dev/null || true
        mv "$path.tmp" "$path"
    fi
    echo "$path"
}
corpus_typo() { # NAME N ARTICLES EXTRA_ARGS... -> path (its twin is path with .twin.jsonl)
    local name=$1 n=$2 articles=$3
    shift 3
    local path="$CORPUS_DIR/$name-n$n-s$SEED.jsonl"
    if [[ ! -s "$path" || ! -s "${path%.jsonl}.twin.jsonl" ]]; then
        "$PY" scripts/bench/make_realtext.py newslike --articles "$articles" --n "$n" --seed "$SEED" \
            --out "$path.tmp" --twin "${path%.jsonl}.twin.jsonl" "$@" >&2 ||
            die "make_realtext.py newslike failed"
        mv "$path.tmp" "$path"
    fi
    echo "$path"
}
case "$CORPUS" in
    articles) corpus() { corpus_articles "$@"; } ;;
    gcide) corpus() { corpus_gcide "$@"; } ;;
    *) die "CORPUS must be articles or gcide (CORPUS=$CORPUS)" ;;
esac
phase "corpora (CORPUS=$CORPUS, seed $SEED)"
(cd "$KIT" && "$PY" make_corpus.py fetch) || die "make_corpus.py fetch failed (apt-get update first?)"
peer_corpus=$(corpus "$PEER_N")
index_corpus=$(corpus "$N")
[[ "$(wc -l <"$index_corpus")" -eq "$N" ]] || die "$index_corpus does not have $N lines"
echo "peer slice: $peer_corpus; index: $index_corpus"
# Shorter real documents (the kit's synthetic corpus of single gcide
# entries, median ~27 words) for the second ingest ratio.
short_corpus=$(corpus_gcide "$PEER_N")
text_ascii=$(corpus_articles "$TEXT_N")
real_corpus=$(corpus_realtext "$REAL_N")
text_real="$CORPUS_DIR/realtext-n$REAL_N-s$SEED.head$TEXT_N.jsonl"
[[ -s "$text_real" ]] || head -n "$TEXT_N" "$real_corpus" >"$text_real"
# The fr/de/es documents of that file beside their ASCII-folded twins (é → e,
# ’ → ', « → "): the cost of the non-ASCII characters apart from the genre's.
text_latin="$CORPUS_DIR/latin-n$REAL_N-s$SEED.head$TEXT_N.jsonl"
if [[ ! -s "$text_latin" || ! -s "${text_latin%.jsonl}.twin.jsonl" ]]; then
    "$PY" scripts/bench/make_realtext.py fold --in "$text_real" --out "$text_latin" \
        --twin "${text_latin%.jsonl}.twin.jsonl" >&2 || die "make_realtext.py fold failed"
fi
text_news=$(corpus_typo newslike "$TEXT_N" "$text_ascii")
text_apos=$(corpus_typo oneapos "$TEXT_N" "$text_ascii" --marks 1 --kinds apostrophe)
echo "short documents: $short_corpus; real text: $real_corpus; text stage: $text_ascii $text_apos $text_news $text_real $text_latin"

phase "cargo build --release (neardup, loadgen, sign_bench, text_bench)"
cargo build --release --quiet --bin neardup --example loadgen --example sign_bench --example text_bench

cpu_model=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
# A VM's model name can stay "AMD EPYC" across CPU generations whose SIMD
# differs (round 9 in docs/benchmarks.md); family and model tell them apart.
cpu_family=$(awk -F': ' '/^cpu family/ { print $2; exit }' /proc/cpuinfo)
cpu_model_no=$(awk -F': ' '/^model\t/ { print $2; exit }' /proc/cpuinfo)
cpu_model="$cpu_model (family ${cpu_family:-?} model ${cpu_model_no:-?})"
mem_gib=$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
git_rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git_dirty=false
[[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || git_dirty=true
"$PY" - "$RAW/env.json" <<EOF
import json, sys
json.dump({
    "date_utc": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
    "machine": "$(nproc) cores, $cpu_model, $mem_gib GiB",
    "git_rev": "$git_rev", "git_dirty": $([[ $git_dirty == true ]] && echo True || echo False),
    "loadavg_start": "$(cut -d' ' -f1-3 /proc/loadavg)",
    "knobs": {"N": $N, "PEER_N": $PEER_N, "SEED": $SEED, "CORPUS": "$CORPUS", "BATCH": $BATCH,
              "ROUNDS": $ROUNDS, "TEXT_N": $TEXT_N, "REAL_N": $REAL_N,
              "CONCURRENCY": $CONCURRENCY, "WRK_THREADS": $WRK_THREADS,
              "WRK_CONNECTIONS": $WRK_CONNECTIONS, "WRK_DURATION": "$WRK_DURATION"},
    "corpus": {"index": "$index_corpus", "peer_slice": "$peer_corpus", "short": "$short_corpus",
               "realtext": "$real_corpus",
               "text_stage": ["$text_ascii", "$text_apos", "${text_apos%.jsonl}.twin.jsonl",
                              "$text_news", "${text_news%.jsonl}.twin.jsonl", "$text_real",
                              "$text_latin", "${text_latin%.jsonl}.twin.jsonl"]},
}, open(sys.argv[1], "w"), indent=2)
EOF

# ---------------------------------------------------------- text stage --
# Normalize + hash words per byte (examples/text_bench), one thread: the
# ASCII articles, a ’ set into each (and its ASCII twin), English typography
# (and its twin), the man pages by language, the Latin-script ones beside
# their ASCII-folded twins. The files' rounds alternate in
# one process; each figure is the median round.
phase "0. text stage, one thread: normalize + word hashes per byte ($TEXT_N docs a file, $ROUNDS rounds)"
taskset -c 0 target/release/examples/text_bench --rounds "$ROUNDS" --phases words,shingles \
    "$text_ascii" "$text_apos" "${text_apos%.jsonl}.twin.jsonl" \
    "$text_news" "${text_news%.jsonl}.twin.jsonl" "$text_real" \
    "$text_latin" "${text_latin%.jsonl}.twin.jsonl" | tee "$RAW/text_stage.jsonl" |
    "$PY" -c 'import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print(d["file"], {g: round(v["phases"]["words"]["ns_per_byte"], 3) for g, v in d["groups"].items()})'

# ------------------------------------------------------------- signing --
# Rounds alternate between the two sides so a burst of load from elsewhere
# on the machine hits both alike; each side's median round counts.
for round in $(seq 1 "$ROUNDS"); do
    phase "1. signing, one thread, round $round/$ROUNDS: neardup sign_bench vs rensa from_token_sets ($PEER_N docs)"
    # Both sides pinned to one core (taskset), so neither gets a second one.
    taskset -c 0 target/release/examples/sign_bench --no-peer "$peer_corpus" | tee "$LOGS/sign_bench-$round.txt"
    grep '"docs_per_s"' "$LOGS/sign_bench-$round.txt" | tail -1 >>"$RAW/sign_neardup.jsonl" ||
        die "sign_bench printed no JSON line with \"docs_per_s\" (see $LOGS/sign_bench-$round.txt)"
    RAYON_NUM_THREADS=1 SHARED_BENCH="$KIT" taskset -c 0 "$PY" scripts/bench/peers.py rensa-sign --reps 5 "$peer_corpus" |
        tee -a "$RAW/sign_rensa.jsonl"
done
for round in $(seq 1 "$ROUNDS"); do
    phase "1. signing on real text (man pages), one thread, round $round/$ROUNDS ($REAL_N docs)"
    taskset -c 0 target/release/examples/sign_bench --no-peer "$real_corpus" | tee "$LOGS/sign_bench_real-$round.txt"
    grep '"docs_per_s"' "$LOGS/sign_bench_real-$round.txt" | tail -1 >>"$RAW/sign_real_neardup.jsonl" ||
        die "sign_bench printed no JSON line with \"docs_per_s\" (see $LOGS/sign_bench_real-$round.txt)"
    RAYON_NUM_THREADS=1 SHARED_BENCH="$KIT" taskset -c 0 "$PY" scripts/bench/peers.py rensa-sign --reps 5 "$real_corpus" |
        tee -a "$RAW/sign_real_rensa.jsonl"
done

# --------------------------------------------------------------- peers --
phase "2. peers, full pipeline (peerrun.py, $PEER_N docs): datasketch"
"$PY" "$KIT/peerrun.py" datasketch "$peer_corpus" | tee "$RAW/peer_datasketch.json"
phase "2. peers, full pipeline (peerrun.py, $PEER_N docs): rensa"
"$PY" "$KIT/peerrun.py" rensa "$peer_corpus" | tee "$RAW/peer_rensa.json"
phase "2. peers, full pipeline (peerrun.py, $PEER_N short docs): datasketch"
"$PY" "$KIT/peerrun.py" datasketch "$short_corpus" | tee "$RAW/peer_datasketch_short.json"

# -------------------------------------------------------- HTTP ingest --
for round in $(seq 1 "$ROUNDS"); do
    for fsync in never always; do
        phase "2. neardup HTTP ingest, round $round/$ROUNDS, fsync=$fsync ($PEER_N docs, batch $BATCH, $CONCURRENCY connections)"
        new_data_dir
        start_server "$data_dir" "$fsync" "server-ingest-$fsync-$round"
        wait_ready 60 >/dev/null
        ingest "ingest_$fsync" "$peer_corpus"
        stop_server
        rm -rf "$data_dir"
        phase "2. neardup HTTP ingest of short documents, round $round/$ROUNDS, fsync=$fsync ($PEER_N docs)"
        new_data_dir
        start_server "$data_dir" "$fsync" "server-ingest-short-$fsync-$round"
        wait_ready 60 >/dev/null
        ingest "ingest_short_$fsync" "$short_corpus"
        stop_server
        rm -rf "$data_dir"
    done
done

# ------------------------------------------- the index: memory, query --
phase "4. neardup index of $N docs (fsync=never): RSS before and after ingest"
new_data_dir
index_dir=$data_dir
start_server "$index_dir" never server-index
wait_ready 60 >/dev/null
sleep 1 # let the runtime settle before the baseline
rss0=$(status_kb VmRSS)
ingest ingest_index "$index_corpus"
sleep 1
rss1=$(status_kb VmRSS)
hwm1=$(status_kb VmHWM)
curl -fsS "$URL/stats" >"$RAW/stats_index.json" || die "GET /stats failed"
printf '{"docs":%s,"rss_kb_before":%s,"rss_kb_after":%s,"hwm_kb":%s}\n' \
    "$N" "$rss0" "$rss1" "$hwm1" | tee "$RAW/memory.json"
indexed=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["documents"])' "$RAW/stats_index.json")
[[ "$indexed" -eq "$N" ]] || die "/stats counts $indexed documents after ingesting $N"

# The server collapses its resident memory into huge pages after the
# restore and every storage.huge_pages_interval_secs (src/hugepages.rs): let
# the pass after the ingest finish before the query rounds, as it has on a
# server that has been up a while. AnonHugePages is polled each second
# until it covers 80% of RSS, the log says the kernel cannot collapse, or
# 40 s have passed; what it reached is recorded.
huge_t0=$(date +%s)
while :; do
    huge_kb=$(awk '$1 == "AnonHugePages:" { print $2 }' "/proc/$server_pid/smaps_rollup")
    rss_kb=$(status_kb VmRSS)
    ((huge_kb * 10 >= rss_kb * 8)) && break
    grep -q "stays in 4 KiB pages" "$LOGS/server-index.log" && break
    (($(date +%s) - huge_t0 >= 40)) && break
    sleep 1
done
printf '{"anon_huge_kb":%s,"rss_kb":%s,"waited_s":%s}\n' \
    "$huge_kb" "$rss_kb" "$(($(date +%s) - huge_t0))" | tee "$RAW/huge_pages.json"

phase "3. query: wrk -t$WRK_THREADS -c$WRK_CONNECTIONS -d$WRK_DURATION, GET /similar?id=<random> vs GET /healthz, $ROUNDS alternating rounds"
ids="$CORPUS_DIR/$(basename "$index_corpus" .jsonl).ids"
[[ -s "$ids" ]] || "$PY" scripts/bench/ids.py "$index_corpus" "$ids"
lua=scripts/bench/similar.lua
clk_tck=$(getconf CLK_TCK)
# The server's user + system CPU so far, in clock ticks (/proc/PID/stat
# fields 14 and 15; the command name in field 2 has no spaces here).
server_ticks() { awk '{ print $14 + $15 }' "/proc/$server_pid/stat"; }
# Also writes the server's CPU seconds during the run to $LOGS/wrk-NAME.cpu:
# wrk formats its requests before its clock starts, while the server idles,
# so that CPU is the server's for the run's requests.
run_wrk() { # NAME DURATION ARGS... (after --)
    local name=$1 duration=$2 t0
    shift 2
    t0=$(server_ticks)
    wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$duration" --timeout 10s --latency \
        -s "$lua" "$URL" -- "$@" >"$LOGS/wrk-$name.txt" 2>&1 || {
        cat "$LOGS/wrk-$name.txt" >&2
        die "wrk failed ($name)"
    }
    awk -v a="$t0" -v b="$(server_ticks)" -v hz="$clk_tck" 'BEGIN { printf "%.2f\n", (b - a) / hz }' \
        >"$LOGS/wrk-$name.cpu"
}
# One summary line of run NAME appended to $RAW/wrk_ROUTE.jsonl (its log
# echoed), with the server's CPU seconds during the run added.
keep_wrk() { # NAME ROUTE
    local name=$1 route=$2 line
    sed '/^WRK_JSON /d' "$LOGS/wrk-$name.txt"
    line=$(sed -n 's/^WRK_JSON //p' "$LOGS/wrk-$name.txt")
    [[ -n "$line" ]] || die "wrk printed no summary for $name (see $LOGS/wrk-$name.txt)"
    if grep -q 'Non-2xx' "$LOGS/wrk-$name.txt"; then
        die "wrk saw non-2xx answers for $name: see $LOGS/wrk-$name.txt"
    fi
    echo "{\"server_cpu_s\":$(cat "$LOGS/wrk-$name.cpu"),${line#\{}" >>"$RAW/wrk_$route.jsonl"
}
run_wrk similar-warmup "$WRK_WARMUP" "$ids" "$SEED"
run_wrk healthz-warmup "$WRK_WARMUP" --path /healthz
# The two routes alternate, round by round, so each round's ratio compares
# runs seconds apart; the summary reports the median round.
rm -f "$RAW/wrk_similar.jsonl" "$RAW/wrk_healthz.jsonl"
for round in $(seq 1 "$ROUNDS"); do
    echo "-- round $round/$ROUNDS"
    run_wrk "similar-$round" "$WRK_DURATION" "$ids" "$SEED"
    keep_wrk "similar-$round" similar
    run_wrk "healthz-$round" "$WRK_DURATION" --path /healthz
    keep_wrk "healthz-$round" healthz
done
echo "what those queries return (a sample of 2000 of the same kind):"
"$PY" scripts/bench/query_profile.py "$URL" "$ids" --seed "$SEED" | tee "$RAW/query_profile.json"

# ------------------------------------------------------------- restore --
phase "5. restore: POST /admin/snapshot, graceful stop, restart on the same data dir"
t0=$(date +%s.%N)
snap=$(curl -fsS -X POST "$URL/admin/snapshot") || die "POST /admin/snapshot failed"
snap_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
printf '{"seconds":%s,"response":%s}\n' "$snap_s" "$snap" | tee "$RAW/snapshot.json"
stop_server
stop_s=$stop_seconds
disk_kb=$(du -sk "$index_dir" | cut -f1)
start_server "$index_dir" never server-restore
ready_s=$(wait_ready 600)
curl -fsS "$URL/stats" >"$RAW/stats_restored.json" || die "GET /stats failed after restore"
rss_restored=$(status_kb VmRSS)
printf '{"stop_seconds":%s,"ready_seconds":%s,"data_dir_kb":%s,"rss_kb_after_restore":%s}\n' \
    "$stop_s" "$ready_s" "$disk_kb" "$rss_restored" | tee "$RAW/restore.json"
stop_server
rm -rf "$index_dir"

# ------------------------------------------------------- rensa memory --
phase "4. rensa memory: signatures + RMinHashLSH over the same $N docs"
SHARED_BENCH="$KIT" "$PY" scripts/bench/peers.py rensa-memory "$index_corpus" | tee "$RAW/rensa_memory.json"

# ------------------------------------------------------------- summary --
phase "summary ($(($(date +%s) - started_at)) s in all)"
"$PY" scripts/bench/summarize.py "$RAW" "$OUT"
echo
echo "(written: $OUT/summary.md, $OUT/summary.json; raw: $RAW; logs: $LOGS)"
