#!/usr/bin/env bash
# The web console's vendored library, and its check.
#
#   scripts/ui-vendor.sh          check: ui/vendor/ matches SHA256SUMS, and
#                                 (when tests/browser/node_modules is there,
#                                 i.e. after `npm ci`) is byte for byte the
#                                 file of the package the lockfile pins with
#                                 its sha512 integrity
#   scripts/ui-vendor.sh update   re-copy it from that package and rewrite SHA256SUMS
#
# The version is pinned once, in tests/browser/package.json (exact) and its
# package-lock.json; bump it there, `npm ci` in tests/browser, then `update`.
set -euo pipefail
cd "$(dirname "$0")/.."

vendor=ui/vendor
pkg=tests/browser/node_modules/uplot
# vendored file <- file in the npm package
files=(
  "uPlot.iife.min.js:dist/uPlot.iife.min.js"
  "uPlot.min.css:dist/uPlot.min.css"
  "uPlot.LICENSE:LICENSE"
)

if [[ "${1:-check}" == update ]]; then
  [[ -d "$pkg" ]] || { echo "run npm ci in tests/browser first" >&2; exit 1; }
  for f in "${files[@]}"; do cp "$pkg/${f#*:}" "$vendor/${f%%:*}"; done
  version=$(node -p "require('./$pkg/package.json').version")
  (cd "$vendor" && sha256sum "${files[@]%%:*}" > SHA256SUMS)
  echo "ui/vendor: uPlot $version"
  exit 0
fi

(cd "$vendor" && sha256sum --quiet -c SHA256SUMS)
listed=$(awk '{print $2}' "$vendor/SHA256SUMS" | sort | tr '\n' ' ')
present=$(cd "$vendor" && ls | grep -v '^SHA256SUMS$' | sort | tr '\n' ' ')
if [[ "$listed" != "$present" ]]; then
  echo "ui/vendor holds files SHA256SUMS does not list: [$present] vs [$listed]" >&2
  exit 1
fi
if [[ -d "$pkg" ]]; then
  for f in "${files[@]}"; do
    cmp "$pkg/${f#*:}" "$vendor/${f%%:*}" || {
      echo "ui/vendor/${f%%:*} is not the pinned package's ${f#*:}" >&2
      exit 1
    }
  done
fi
echo "ui/vendor: checksums match"
