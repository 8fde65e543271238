#!/usr/bin/env bash
# Contract fuzzing: runs schemathesis (pinned in scripts/requirements-schemathesis.txt)
# with every check against a live release server, using openapi.yaml.
#
# Usage:  scripts/schemathesis.sh [extra `st run` options...]
# Env:    ST_MAX_EXAMPLES (50 per operation), ST_TIMEOUT (280 s wall-clock cap on the run;
#         `st --max-time` is not used: it repeats fuzzing until the budget is spent),
#         ST_PORT (a free loopback port), ST_SEED (random), ST_VENV (target/st-venv),
#         ST_SKIP_BUILD=1 (reuse target/release/neardup), ST_READY_TIMEOUT (60 s).
# Needs:  python3 (with venv), cargo, curl. Only talks to 127.0.0.1.
# Hooks:  scripts/schemathesis_hooks.py keeps positive cases clear of refusals JSON
#         Schema cannot express (threshold below tuning, text empty after
#         normalization, PUT body id != path id) and of one known server deviation.
# Exits non-zero on any schemathesis failure; reports go to target/schemathesis-report.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${ST_VENV:-target/st-venv}
REQ=scripts/requirements-schemathesis.txt
MAX_EXAMPLES=${ST_MAX_EXAMPLES:-50}
TIMEOUT=${ST_TIMEOUT:-280}
READY_TIMEOUT=${ST_READY_TIMEOUT:-60}
REPORT_DIR=target/schemathesis-report

log() { echo "== $*"; }

# 1. schemathesis, pinned, in a venv under target/.
if ! "$VENV/bin/st" --version >/dev/null 2>&1 \
   || ! "$VENV/bin/pip" freeze 2>/dev/null | grep -qxF "$(grep -v '^#' "$REQ" | head -1)"; then
  log "installing $(grep -v '^#' "$REQ" | head -1) into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
fi
log "$("$VENV/bin/st" --version 2>&1 | head -1)"

# 2. the release binary.
if [ "${ST_SKIP_BUILD:-0}" != 1 ]; then
  log "cargo build --release"
  cargo build --release --quiet
fi
BIN=target/release/neardup
[ -x "$BIN" ] || { echo "missing $BIN" >&2; exit 1; }

# 3. a free loopback port and a temp data dir.
PORT=${ST_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')}
DATA_DIR=$(mktemp -d)
LOG_FILE=$(mktemp)
SERVER_PID=
cleanup() {
  local rc=$?
  set +e
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID"
    for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  if [ "$rc" -ne 0 ]; then
    echo "---- last server log lines ----" >&2
    tail -n 30 "$LOG_FILE" >&2
  fi
  rm -rf "$DATA_DIR" "$LOG_FILE"
  exit "$rc"
}
trap cleanup EXIT INT TERM

log "starting neardup on 127.0.0.1:$PORT"
NEARDUP_SERVER__BIND="127.0.0.1:$PORT" \
NEARDUP_STORAGE__DATA_DIR="$DATA_DIR" \
NEARDUP_LOG__LEVEL=warn \
  "$BIN" >"$LOG_FILE" 2>&1 &
SERVER_PID=$!

BASE="http://127.0.0.1:$PORT"
deadline=$((SECONDS + READY_TIMEOUT))
until curl -fsS --max-time 2 "$BASE/readyz" >/dev/null 2>&1; do
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited early" >&2; exit 1; }
  [ "$SECONDS" -lt "$deadline" ] || { echo "server not ready after ${READY_TIMEOUT}s" >&2; exit 1; }
  sleep 0.2
done
log "ready"

# 4. schemathesis, every check, bounded.
SEED_ARGS=()
[ -n "${ST_SEED:-}" ] && SEED_ARGS=(--seed "$ST_SEED")
log "st run openapi.yaml --checks all --max-examples $MAX_EXAMPLES (cap ${TIMEOUT}s)"
set +e
PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" SCHEMATHESIS_HOOKS=schemathesis_hooks \
  timeout --kill-after=10 "$TIMEOUT" "$VENV/bin/st" run openapi.yaml \
  --url "$BASE" \
  --checks all \
  --max-examples "$MAX_EXAMPLES" \
  --workers 2 \
  --request-timeout 10 \
  --generation-database none \
  --no-color \
  --report junit --report-dir "$REPORT_DIR" \
  "${SEED_ARGS[@]+"${SEED_ARGS[@]}"}" \
  "$@"
rc=$?
set -e
if [ "$rc" -eq 0 ]; then log "RESULT: PASS"
elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then log "RESULT: FAIL (timed out after ${TIMEOUT}s)"
else log "RESULT: FAIL (st exit $rc)"; fi
exit "$rc"
