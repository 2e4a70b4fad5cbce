#!/usr/bin/env bash
# Refresh the dashboard's charting library (uPlot, MIT) from npm into the package, so that the
# dashboard and its HTML reports need no CDN and no JavaScript build step at run time.
#   bash scripts/vendor_uplot.sh [VERSION]
set -euo pipefail
version="${1:-1.6.32}"
dest="$(cd "$(dirname "$0")/.." && pwd)/tracerl/runs/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "uplot@$version" >/dev/null && tar xzf "uplot-$version.tgz")
cp "$work/package/dist/uPlot.iife.min.js" "$work/package/dist/uPlot.min.css" "$dest/"
cp "$work/package/LICENSE" "$dest/uPlot.LICENSE"
echo "uPlot $version -> $dest"
