#!/usr/bin/env bash
# Move a collection's documents from one neardup to another (e.g. from a
# node on the memory backend to nodes on the redis backend): GET /export
# from FROM, then POST /import to TO in parts of PART documents, each part
# starting with the export's header line (so each stays under the target's
# server.max_body_bytes). Texts move too when both collections store them.
#
#   scripts/move-collection.sh http://old:8080 http://new:8080
#   scripts/move-collection.sh http://old:8080/collections/news http://new:8080/collections/news 5000
#
# The target collection must exist with the same recipe (shingle, normalize,
# index.seed); num_perm, the threshold and retention may differ. Writes made
# to FROM during the move may or may not be in it: stop them first, or move
# again (an import replaces documents of the same id). Env: NEARDUP_KEY (a
# bearer key for both, if keys are configured).
set -euo pipefail
FROM=${1:?usage: move-collection.sh FROM_URL TO_URL [PART]}
TO=${2:?usage: move-collection.sh FROM_URL TO_URL [PART]}
PART=${3:-5000}
auth=()
if [ -n "${NEARDUP_KEY:-}" ]; then auth=(-H "Authorization: Bearer $NEARDUP_KEY"); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsS "${auth[@]}" "$FROM/export" -o "$work/export.ndjson"
head -n 1 "$work/export.ndjson" >"$work/header"
tail -n +2 "$work/export.ndjson" | split -l "$PART" - "$work/part."
total=0
for p in "$work"/part.*; do
    [ -e "$p" ] || continue
    out=$(cat "$work/header" "$p" | curl -fsS "${auth[@]}" -X POST "$TO/import" \
        -H 'Content-Type: application/x-ndjson' --data-binary @-)
    n=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["imported"])')
    total=$((total + n))
    echo "$(basename "$p"): $out" >&2
done
echo "moved $total documents from $FROM to $TO"
