#!/usr/bin/env bash
# The web console in a real browser: Debian's headless Chromium driven by
# playwright-core (tests/browser/, pinned by its package-lock.json; no
# browser download) against real servers on free loopback ports with
# planted data. Fails on any console error, page error or request to
# another host (tests/browser/console.test.mjs).
#
#   scripts/browser-check.sh                 run the suite
#   scripts/browser-check.sh --screenshots   also save a screenshot of each
#                                            view under docs/console/ (with
#                                            CJK and emoji fonts installed)
set -euo pipefail
cd "$(dirname "$0")/.."

shots=""
[[ "${1:-}" == "--screenshots" ]] && shots="$PWD/docs/console"

apt_install() {
  local run=()
  [[ $(id -u) -eq 0 ]] || run=(sudo)
  "${run[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${run[@]}" apt-get install -y -qq "$@"
}
packages=()
[[ -x /usr/bin/chromium ]] || packages+=(chromium fonts-dejavu-core)
if [[ -n "$shots" ]]; then
  dpkg -s fonts-noto-cjk >/dev/null 2>&1 || packages+=(fonts-noto-cjk)
  dpkg -s fonts-noto-color-emoji >/dev/null 2>&1 || packages+=(fonts-noto-color-emoji)
fi
if ((${#packages[@]})); then apt_install "${packages[@]}"; fi

(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
# The vendored library: the pinned checksums, and byte for byte the npm package.
scripts/ui-vendor.sh
cargo build --quiet --bin neardup

start=$(date +%s)
# The binary cargo just built: under CARGO_TARGET_DIR when it is set.
bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/neardup"
(
  cd tests/browser
  NEARDUP_BIN="$bin" SCREENSHOTS="$shots" npm test --silent
)
echo "browser suite: $(($(date +%s) - start)) s"
