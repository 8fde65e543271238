#!/usr/bin/env bash
# Regenerate tests/fixtures/release-2026-11-data: a data directory written by
# the release before text recipes had versions (commit 0c57aa9, 2026-11-28),
# for tests/api/upgrade.rs. Not run by CI: the fixture is committed.
#
#   scripts/make-upgrade-fixture.sh PATH/TO/neardup-built-at-0c57aa9
#
# (git worktree add /tmp/old 0c57aa9 && cd /tmp/old && cargo build --bin neardup)
# The server writes documents to the `default` collection and to a named
# collection `news` that stores texts, takes a snapshot of both, writes more
# (in the logs only) and is killed with SIGKILL, as a crash would leave it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: $0 NEARDUP_BINARY_OF_0c57aa9}
out=tests/fixtures/release-2026-11-data
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# From an empty directory: the old release on its embedded defaults, not
# this checkout's config/default.toml (which it cannot read).
bin=$(realpath "$bin")
data=$(realpath "$out.tmp")
empty=$(mktemp -d)
(cd "$empty" && NEARDUP_SERVER__BIND=127.0.0.1:$port NEARDUP_STORAGE__DATA_DIR=$data \
    NEARDUP_STORAGE__SNAPSHOT_INTERVAL_SECS=0 NEARDUP_LOG__LEVEL=warn exec "$bin") &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
base=http://127.0.0.1:$port
for _ in $(seq 100); do curl -sf "$base/readyz" >/dev/null && break; sleep 0.1; done
curl -sf -X PUT "$base/collections/news" -H 'content-type: application/json' \
    -d '{"store_text": true}' >/dev/null
python3 - "$base" <<'PY'
import json, sys, urllib.request
base = sys.argv[1]
docs = json.load(open("tests/fixtures/release-2026-11-texts.json"))
def post(path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request(base + path, data, {"content-type": "application/json"}, method="POST")
    urllib.request.urlopen(req).read()
first, rest = docs[: len(docs) // 2], docs[len(docs) // 2 :]
for prefix in ("", "/collections/news"):
    for d in first:
        post(prefix + "/documents", d)
post("/admin/snapshot")
for prefix in ("", "/collections/news"):
    for d in rest:
        post(prefix + "/documents", d)
PY
kill -9 $pid
wait $pid 2>/dev/null || true
rm -rf "$out" && mv "$out.tmp" "$out"
find "$out" -name LOCK -delete -o -name '*.lock' -delete
ls -lR "$out"
