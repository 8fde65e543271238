#!/usr/bin/env bash
# Container smoke test: builds the image with podman, runs it on a named volume,
# ingests documents, checks near-duplicate search, the HEALTHCHECK, the non-root
# user, graceful SIGTERM shutdown with a final snapshot, and that the data
# survives into a fresh container on the same volume. Cleans up its containers
# and volume (not the image: it keeps the build cache warm).
#
# Usage:  scripts/container-smoke.sh
#         (sources ../shared/container/setup.sh first when podman is not set up
#         in this shell: it installs podman and runc and makes the base images)
# Env:    SMOKE_IMAGE (neardup:smoke), SMOKE_PORT (a free loopback port),
#         SMOKE_SKIP_BUILD=1 (reuse an existing image), SMOKE_BUILD_TIMEOUT (3600 s),
#         SMOKE_READY_TIMEOUT (60 s).
# Needs:  podman, curl, jq. Only talks to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${SMOKE_IMAGE:-neardup:smoke}
RUN_ID="$$"
NAME1="neardup-smoke-a-$RUN_ID"
NAME2="neardup-smoke-b-$RUN_ID"
VOLUME="neardup-smoke-data-$RUN_ID"
BUILD_TIMEOUT=${SMOKE_BUILD_TIMEOUT:-3600}
READY_TIMEOUT=${SMOKE_READY_TIMEOUT:-60}
CURL=(curl -sS --max-time 10)

PASSED=()
FAILED=()
pass() { PASSED+=("$1"); echo "  ok    $1"; }
fail() { FAILED+=("$1"); echo "  FAIL  $1" >&2; }
log() { echo "== $*"; }

summary() {
  echo
  echo "==================== container smoke summary ===================="
  for c in "${PASSED[@]+"${PASSED[@]}"}"; do echo "PASS  $c"; done
  for c in "${FAILED[@]+"${FAILED[@]}"}"; do echo "FAIL  $c"; done
  if [ "${#FAILED[@]}" -eq 0 ] && [ "${ABORTED:-0}" -eq 0 ]; then
    echo "RESULT: PASS (${#PASSED[@]} checks)"
  else
    echo "RESULT: FAIL (${#FAILED[@]} failed, ${#PASSED[@]} passed${ABORTED:+, aborted})"
  fi
}

cleanup() {
  local rc=$?
  set +e
  if [ "$rc" -ne 0 ] || [ "${#FAILED[@]}" -ne 0 ]; then
    for n in "$NAME1" "$NAME2"; do
      if podman container exists "$n" 2>/dev/null; then
        echo "---- last log lines of $n ----" >&2
        podman logs --tail 30 "$n" >&2 2>&1
      fi
    done
  fi
  podman rm -f -t 0 "$NAME1" "$NAME2" >/dev/null 2>&1
  podman volume rm -f "$VOLUME" >/dev/null 2>&1
  summary
  if [ "$rc" -eq 0 ] && [ "${#FAILED[@]}" -ne 0 ]; then rc=1; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Aborts the run: later steps depend on this one.
die() { fail "$1"; ABORTED=1; exit 1; }

# Podman here needs the harness settings (runc, rlimits, docker image format).
if [ -z "${CONTAINERS_CONF:-}" ] && [ -f ../shared/container/setup.sh ]; then
  # shellcheck disable=SC1091
  source ../shared/container/setup.sh
fi
# The OCI image format drops HEALTHCHECK; the docker format keeps it.
export BUILDAH_FORMAT=docker

for tool in podman curl jq; do
  command -v "$tool" >/dev/null || die "required tool missing: $tool"
done

# ---------------------------------------------------------------- build
if [ "${SMOKE_SKIP_BUILD:-0}" = 1 ] && podman image exists "$IMAGE"; then
  log "reusing image $IMAGE (SMOKE_SKIP_BUILD=1)"
else
  log "building $IMAGE (timeout ${BUILD_TIMEOUT}s)"
  start=$(date +%s)
  if ! timeout "$BUILD_TIMEOUT" podman build --format docker --pull=never --network host -t "$IMAGE" .; then
    die "podman build"
  fi
  BUILD_SECS=$(( $(date +%s) - start ))
  pass "podman build (${BUILD_SECS}s)"
fi
SIZE=$(podman image inspect "$IMAGE" --format '{{.Size}}')
log "image $IMAGE: $SIZE bytes ($(( SIZE / 1024 / 1024 )) MiB)"

# ---------------------------------------------------------------- helpers
if [ -z "${SMOKE_PORT:-}" ]; then
  SMOKE_PORT=""
  for _ in $(seq 1 50); do
    p=$(( 20000 + RANDOM % 20000 ))
    if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then SMOKE_PORT=$p; break; fi
  done
  [ -n "$SMOKE_PORT" ] || die "no free loopback port found"
fi
BASE="http://127.0.0.1:$SMOKE_PORT"

# Without systemd, podman logs "unable to get systemd connection ... healthchecks" on
# run/stop: it cannot schedule the image's HEALTHCHECK. Harmless; the check is run
# explicitly with `podman healthcheck run` below.
run_container() { # name
  podman run -d --name "$1" -v "$VOLUME:/data" -p "127.0.0.1:$SMOKE_PORT:8080" "$IMAGE" >/dev/null
}

wait_ready() { # name
  local deadline=$(( $(date +%s) + READY_TIMEOUT ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if [ "$(podman inspect "$1" --format '{{.State.Running}}' 2>/dev/null)" != true ]; then
      return 1
    fi
    if "${CURL[@]}" -o /dev/null -f "$BASE/readyz" 2>/dev/null; then return 0; fi
    sleep 0.5
  done
  return 1
}

post() { # path json -> body; fails on non-2xx
  "${CURL[@]}" -f -X POST "$BASE$1" -H 'Content-Type: application/json' -d "$2"
}

# Planted pair: with the default recipe q1 has 12 shingles and q2 10, all of them
# shared with q1, so the exact Jaccard is 10/12 (cross-checked with /compare below).
Q1='What is the step by step guide to invest in share market in india?'
Q2='What is the step by step guide to invest in share market?'
EXPECTED_JACCARD='0.8333333333333334'

# Documents' shingle counts and q1's near-duplicates, as compact JSON.
snapshot_state() {
  local out="" id v
  for id in q1 q2 g1 g2; do
    v=$("${CURL[@]}" -f "$BASE/documents/$id" | jq -ec '.shingles') || return 1
    out+="$id=$v "
  done
  v=$("${CURL[@]}" -f "$BASE/similar?id=q1&limit=10" | jq -ec '[.results[] | {id, jaccard}]') || return 1
  echo "${out}similar=$v"
}

# ---------------------------------------------------------------- first container
log "starting $NAME1 on 127.0.0.1:$SMOKE_PORT with volume $VOLUME"
podman volume create "$VOLUME" >/dev/null
run_container "$NAME1" || die "podman run $NAME1"
wait_ready "$NAME1" || die "$NAME1 ready within ${READY_TIMEOUT}s (/readyz)"
pass "$NAME1 answers /readyz"

log "ingesting documents"
body=$(post /documents "$(jq -nc --arg t "$Q1" '{id:"q1", text:$t, metadata:{source:"smoke"}}')") \
  && [ "$(jq -r '.id' <<<"$body")" = q1 ] \
  && pass "POST /documents q1 -> $body" || fail "POST /documents q1 (${body:-no body})"

batch=$(jq -nc --arg q2 "$Q2" '{documents:[
  {id:"q2", text:$q2},
  {id:"g1", text:"An unrelated question about gardening in spring"},
  {id:"g2", text:"the night is dark and the moon is red"}]}')
body=$(post /documents/batch "$batch") \
  && [ "$(jq -r '.created' <<<"$body")" = 3 ] && [ "$(jq -r '.failed' <<<"$body")" = 0 ] \
  && pass "POST /documents/batch created 3" || fail "POST /documents/batch (${body:-no body})"

body=$("${CURL[@]}" -f "$BASE/similar?id=q1&limit=10" || true)
got=$(jq -r '[.results[] | select(.id == "q2") | .jaccard][0] // empty' <<<"$body" 2>/dev/null || true)
if [ "$got" = "$EXPECTED_JACCARD" ]; then
  pass "GET /similar?id=q1 finds q2 with jaccard $got"
else
  fail "GET /similar?id=q1 expected q2 with jaccard $EXPECTED_JACCARD, got: ${body:-no body}"
fi
cmp=$("${CURL[@]}" -f "$BASE/compare?a=q1&b=q2" || true)
if [ "$(jq -r '"\(.intersection)/\(.union) \(.jaccard)"' <<<"$cmp" 2>/dev/null)" = "10/12 $EXPECTED_JACCARD" ]; then
  pass "GET /compare?a=q1&b=q2 -> intersection 10, union 12"
else
  fail "GET /compare?a=q1&b=q2 expected 10/12, got: ${cmp:-no body}"
fi
others=$(jq -r '[.results[].id | select(. != "q2")] | join(",")' <<<"$body" 2>/dev/null || echo '?')
[ -z "$others" ] && pass "GET /similar?id=q1 returns no unrelated documents" \
  || fail "GET /similar?id=q1 returned unexpected ids: $others"

BEFORE=$(snapshot_state) || die "read back documents from $NAME1"
log "state before restart: $BEFORE"

log "healthcheck"
hc_ok=0
for _ in $(seq 1 10); do
  if podman healthcheck run "$NAME1" >/dev/null 2>&1; then hc_ok=1; break; fi
  sleep 1
done
[ "$hc_ok" = 1 ] && pass "podman healthcheck run $NAME1 (image HEALTHCHECK: neardup healthcheck)" \
  || fail "podman healthcheck run $NAME1 did not succeed within 10 tries"

log "user"
uid=$(podman exec "$NAME1" id -u 2>/dev/null || podman top "$NAME1" uid 2>/dev/null | tail -n1 | tr -d ' ' || true)
if [ -n "$uid" ] && [ "$uid" != 0 ]; then
  pass "process runs as non-root (uid $uid)"
else
  fail "process runs as non-root (uid '${uid:-unknown}')"
fi

# ---------------------------------------------------------------- graceful stop
log "stopping $NAME1 with SIGTERM (podman stop -t 20)"
start=$(date +%s)
podman stop -t 20 "$NAME1" >/dev/null || fail "podman stop $NAME1"
STOP_SECS=$(( $(date +%s) - start ))
code=$(podman inspect "$NAME1" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] && pass "$NAME1 exited 0 on SIGTERM after ${STOP_SECS}s" \
  || fail "$NAME1 exit code $code on SIGTERM after ${STOP_SECS}s (137 = killed after the timeout)"
line=$(podman logs "$NAME1" 2>&1 | grep -F 'final snapshot written' | tail -n1 || true)
if [ -n "$line" ]; then
  pass "logs show the final snapshot: $line"
else
  fail "logs show \"final snapshot written\""
fi

# ---------------------------------------------------------------- restart on the same volume
log "starting $NAME2 on the same volume"
run_container "$NAME2" || die "podman run $NAME2"
wait_ready "$NAME2" || die "$NAME2 ready within ${READY_TIMEOUT}s (/readyz)"
pass "$NAME2 answers /readyz on the same volume"
AFTER=$(snapshot_state || true)
log "state after restart:  $AFTER"
[ "$AFTER" = "$BEFORE" ] && pass "documents survived the restart (shingle counts and /similar identical)" \
  || fail "documents survived the restart: before [$BEFORE] after [$AFTER]"

podman stop -t 20 "$NAME2" >/dev/null || fail "podman stop $NAME2"
