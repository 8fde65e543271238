#!/usr/bin/env bash
# A generated client must work: starts a server with index.threshold = 0.9
# (not the shipped 0.8, so a client that sent a default threshold would be
# refused), generates a Python client from the document the server serves
# (GET /openapi.json, as served, with no generator configuration) with
# openapi-python-client (pinned in scripts/requirements-client.txt), fails
# if generation prints any warning (--fail-on-warning, and any output line
# but the progress line),
# then drives the server through that client (scripts/client_check.py):
# create, replace, query by id and by text, compare, groups, pairs, metrics,
# a collection with its own recipe and retention (create, conflict, write,
# query with since, patch, list, delete),
# delete, and documented errors, with raise_on_unexpected_status on.
#
# Usage:  scripts/client-check.sh
# Env:    CLIENT_VENV (target/client-venv), CLIENT_SKIP_BUILD=1 (reuse target/debug/neardup)
# Needs:  python3 (with venv), cargo, curl. Only talks to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${CLIENT_VENV:-target/client-venv}
REQ=scripts/requirements-client.txt
OUT=target/client-check
log() { echo "== $*"; }

if ! "$VENV/bin/openapi-python-client" --version >/dev/null 2>&1 \
   || [ "$("$VENV/bin/pip" freeze 2>/dev/null | grep -cxF -f <(grep -v '^#' "$REQ"))" != "$(grep -vc '^#' "$REQ")" ]; then
  log "installing $(grep -v '^#' "$REQ" | tr '\n' ' ')into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
fi
if [ "${CLIENT_SKIP_BUILD:-0}" != 1 ]; then
  log "cargo build"
  cargo build --quiet
fi

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
DATA_DIR=$(mktemp -d)
LOG_FILE=$(mktemp)
SERVER_PID=
cleanup() {
  local rc=$?
  set +e
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
  [ "$rc" -ne 0 ] && { echo "---- last server log lines ----" >&2; tail -n 30 "$LOG_FILE" >&2; }
  rm -rf "$DATA_DIR" "$LOG_FILE"
  exit "$rc"
}
trap cleanup EXIT INT TERM
NEARDUP_SERVER__BIND="127.0.0.1:$PORT" NEARDUP_STORAGE__DATA_DIR="$DATA_DIR" \
NEARDUP_INDEX__THRESHOLD=0.9 NEARDUP_LOG__LEVEL=warn target/debug/neardup >"$LOG_FILE" 2>&1 &
SERVER_PID=$!
BASE="http://127.0.0.1:$PORT"
for _ in $(seq 1 300); do
  curl -fsS --max-time 2 "$BASE/readyz" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited early" >&2; exit 1; }
  sleep 0.2
done

rm -rf "$OUT" && mkdir -p "$OUT"
curl -fsS "$BASE/openapi.json" -o "$OUT/openapi.json"
log "generating a client from $BASE/openapi.json"
set +e
PATH="$PWD/$VENV/bin:$PATH" "$VENV/bin/openapi-python-client" generate \
  --path "$OUT/openapi.json" --fail-on-warning \
  --meta none --output-path "$OUT/neardup_client" >"$OUT/generate.log" 2>&1
rc=$?
set -e
cat "$OUT/generate.log"
[ "$rc" -eq 0 ] || { echo "client generation failed (exit $rc)" >&2; exit 1; }
# Anything but the progress line is a warning about the document.
if grep -v -x -e "Generating $OUT/neardup_client" -e 'Generating neardup_client' "$OUT/generate.log" | grep -q .; then
  echo "client generation printed warnings (above)" >&2
  exit 1
fi
log "driving the server through the generated client"
PYTHONPATH="$OUT" "$VENV/bin/python" scripts/client_check.py "$BASE"
log "RESULT: PASS"
