#!/usr/bin/env bash
# Replays README.md's walkthrough (its "```sh check" blocks) against a server
# started here on an empty data directory and a free loopback port, and
# compares every output with what the README shows, byte for byte except
# timestamps, UUIDs and durations (the rules: scripts/readme_check.py).
# Exits 1 with a diff on a difference. Needs python3, curl and jq.
#
#   scripts/readme-check.sh            build (cargo build, cheap when fresh), then check
#   README_CHECK_BIN=path scripts/readme-check.sh   check that binary, no build
#   scripts/readme-check.sh --print    print what each command answers, "#> " form
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in python3 curl jq; do
    command -v "$tool" >/dev/null || { echo "readme-check: $tool is needed (the README's commands use it)" >&2; exit 2; }
done
bin=${README_CHECK_BIN:-}
if [[ -z "$bin" ]]; then
    cargo build --quiet --locked --bin neardup
    bin=${CARGO_TARGET_DIR:-target}/debug/neardup
fi
exec python3 scripts/readme_check.py --binary "$bin" README.md "$@"
