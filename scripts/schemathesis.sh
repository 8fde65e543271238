#!/usr/bin/env bash
# Contract fuzzing: schemathesis (pinned in scripts/requirements-schemathesis.txt),
# every check and every phase, against the OpenAPI document a live server
# serves itself (GET /openapi.json, with the deployment's own bounds).
#
# Runs, each against a fresh server:
#   1. the shipped configuration with the CI seed (ST_SEED; random when unset,
#      and printed so a failure can be replayed) and the fixed seeds 7 and 42;
#   2. a tuned deployment (index.threshold 0.9, query.max_limit 50,
#      server.max_batch 100, limits.max_text_bytes 4096) with seed 5, which
#      shows the served document follows the configuration.
# No hook rewrites generated data; scripts/schemathesis.toml holds the only
# configuration, each line explained there.
#
# Usage:  scripts/schemathesis.sh [extra `st run` options...]
# Env:    ST_SEED (CI seed), ST_MAX_EXAMPLES (50 per operation), ST_TIMEOUT (280 s
#         wall-clock cap per run), ST_VENV (target/st-venv), ST_SKIP_BUILD=1 (reuse
#         target/debug/neardup), ST_READY_TIMEOUT (60 s).
# Needs:  python3 (with venv), cargo, curl. Only talks to 127.0.0.1.
# Exits non-zero on any schemathesis failure; reports go to target/schemathesis-report.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${ST_VENV:-target/st-venv}
REQ=scripts/requirements-schemathesis.txt
CONFIG=scripts/schemathesis.toml
MAX_EXAMPLES=${ST_MAX_EXAMPLES:-50}
TIMEOUT=${ST_TIMEOUT:-280}
READY_TIMEOUT=${ST_READY_TIMEOUT:-60}
REPORT_DIR=target/schemathesis-report
CI_SEED=${ST_SEED:-$((RANDOM * 32768 + RANDOM))}

log() { echo "== $*"; }

# 1. schemathesis, pinned, in a venv under target/.
if ! "$VENV/bin/st" --version >/dev/null 2>&1 \
   || ! "$VENV/bin/pip" freeze 2>/dev/null | grep -qxF "$(grep -v '^#' "$REQ" | head -1)"; then
  log "installing $(grep -v '^#' "$REQ" | head -1) into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
fi
log "$("$VENV/bin/st" --version 2>&1 | head -1)"

# 2. the binary (a debug build shares its dependencies with `cargo test`).
if [ "${ST_SKIP_BUILD:-0}" != 1 ]; then
  log "cargo build"
  cargo build --quiet
fi
BIN=target/debug/neardup
[ -x "$BIN" ] || { echo "missing $BIN" >&2; exit 1; }

SERVER_PID=
DATA_DIR=
LOG_FILE=
stop_server() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID"
    for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=
  [ -n "$DATA_DIR" ] && rm -rf "$DATA_DIR"
  DATA_DIR=
}
cleanup() {
  local rc=$?
  set +e
  if [ "$rc" -ne 0 ] && [ -n "$LOG_FILE" ]; then
    echo "---- last server log lines ----" >&2
    tail -n 30 "$LOG_FILE" >&2
  fi
  stop_server
  [ -n "$LOG_FILE" ] && rm -f "$LOG_FILE"
  exit "$rc"
}
trap cleanup EXIT INT TERM

# Start a server with extra NEARDUP_* settings ("KEY=VALUE" ...); sets BASE.
SERVER_ENV=()
start_server() {
  SERVER_ENV=("$@")
  stop_server
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
  DATA_DIR=$(mktemp -d)
  LOG_FILE=${LOG_FILE:-$(mktemp)}
  env NEARDUP_SERVER__BIND="127.0.0.1:$port" NEARDUP_STORAGE__DATA_DIR="$DATA_DIR" \
    NEARDUP_LOG__LEVEL=warn "$@" "$BIN" >"$LOG_FILE" 2>&1 &
  SERVER_PID=$!
  BASE="http://127.0.0.1:$port"
  local deadline=$((SECONDS + READY_TIMEOUT))
  until curl -fsS --max-time 2 "$BASE/readyz" >/dev/null 2>&1; do
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited early" >&2; exit 1; }
    [ "$SECONDS" -lt "$deadline" ] || { echo "server not ready after ${READY_TIMEOUT}s" >&2; exit 1; }
    sleep 0.2
  done
  # The collection the spec's examples name (`titles`), so the examples
  # phase reaches a real collection through the /collections/{name} routes.
  curl -fsS --max-time 5 -X PUT -H 'content-type: application/json' \
    -d '{"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.7}}' \
    "$BASE/collections/titles" >/dev/null
}

FAILED=()
# One schemathesis run with `seed` against $BASE's served document.
run_seed() {
  local what=$1 seed=$2; shift 2
  log "$what: st run $BASE/openapi.json --checks all --seed $seed (cap ${TIMEOUT}s)"
  local out rc attempt
  out=$(mktemp)
  for attempt in 1 2; do
    set +e
    SCHEMATHESIS_HOOKS=schemathesis_hooks PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" \
    timeout --kill-after=10 "$TIMEOUT" "$VENV/bin/st" --config-file "$CONFIG" --no-color \
      run "$BASE/openapi.json" \
      --url "$BASE" \
      --checks all \
      --max-examples "$MAX_EXAMPLES" \
      --workers 1 \
      --request-timeout 10 \
      --generation-database none \
      --report junit --report-dir "$REPORT_DIR/$what-$seed" \
      --seed "$seed" \
      "$@" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    set -e
    # CPython 3.11 sometimes aborts schemathesis with this interpreter bug
    # (nothing to do with the server: hypothesis describing a lambda calls
    # ast.parse, and 3.11 keeps the AST constructor's recursion depth in
    # state the interpreter's threads share; reported in threaded programs,
    # CPython gh-106905). So one worker thread (`--workers 1`; until
    # 2026-11-24 two, when a run and its retry both failed this way; the four
    # runs took 119 s on one worker against ~110 s on two). If it comes
    # anyway, run the same seed once more.
    if [ "$rc" -ne 0 ] && [ "$attempt" -eq 1 ] \
       && grep -q 'SystemError: AST constructor recursion depth mismatch' "$out"; then
      log "$what seed $seed: CPython AST SystemError in schemathesis; retrying once"
      start_server "${SERVER_ENV[@]}"
      continue
    fi
    break
  done
  rm -f "$out"
  if [ "$rc" -eq 0 ]; then log "$what seed $seed: PASS"
  else
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && log "$what seed $seed: timed out after ${TIMEOUT}s"
    log "$what seed $seed: FAIL (st exit $rc)"
    FAILED+=("$what seed $seed")
  fi
}

log "CI seed: $CI_SEED"
for seed in "$CI_SEED" 7 42; do
  start_server
  run_seed shipped "$seed" "$@"
done
start_server NEARDUP_INDEX__THRESHOLD=0.9 NEARDUP_QUERY__MAX_LIMIT=50 \
  NEARDUP_SERVER__MAX_BATCH=100 NEARDUP_LIMITS__MAX_TEXT_BYTES=4096
run_seed tuned 5 "$@"

if [ "${#FAILED[@]}" -eq 0 ]; then
  log "RESULT: PASS (4 runs)"
else
  log "RESULT: FAIL: ${FAILED[*]}"
  exit 1
fi
