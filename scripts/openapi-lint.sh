#!/usr/bin/env bash
# Spectral, the most used OpenAPI linter, with its `spectral:oas` ruleset
# (scripts/spectral/.spectral.yaml), on the document a server serves
# (GET /openapi.json): fails on any error or warning. Spectral comes from
# the npm registry, pinned by scripts/spectral/package-lock.json.
#
# Usage:  scripts/openapi-lint.sh
# Env:    LINT_SKIP_BUILD=1 (reuse target/debug/neardup)
# Needs:  node and npm, cargo, curl, python3. Only talks to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

(cd scripts/spectral && npm ci --no-audit --no-fund --loglevel=error)
if [ "${LINT_SKIP_BUILD:-0}" != 1 ]; then
  cargo build --quiet --bin neardup
fi

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
DATA_DIR=$(mktemp -d)
OUT=$(mktemp -d)
SERVER_PID=
cleanup() {
  local rc=$?
  set +e
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
  rm -rf "$DATA_DIR" "$OUT"
  exit "$rc"
}
trap cleanup EXIT INT TERM
NEARDUP_SERVER__BIND="127.0.0.1:$PORT" NEARDUP_STORAGE__DATA_DIR="$DATA_DIR" \
NEARDUP_LOG__LEVEL=warn target/debug/neardup >/dev/null 2>&1 &
SERVER_PID=$!
BASE="http://127.0.0.1:$PORT"
for _ in $(seq 1 300); do
  curl -fsS --max-time 2 "$BASE/readyz" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited early" >&2; exit 1; }
  sleep 0.2
done
curl -fsS "$BASE/openapi.json" -o "$OUT/openapi.json"

echo "== spectral lint (spectral:oas) on $BASE/openapi.json"
# --fail-severity=warn: a warning fails the check as an error does.
scripts/spectral/node_modules/.bin/spectral lint "$OUT/openapi.json" \
  --ruleset scripts/spectral/.spectral.yaml --fail-severity=warn
echo "== RESULT: PASS"
