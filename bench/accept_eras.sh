#!/bin/sh
# Per-level accept length that specsweep records, against sglangsim's ground truth, on every SGLang
# release profile (SGLANGSIM_VERSION=list). Prints Markdown tables (docs/sglang-versions.md quotes
# them); asserts nothing. Usage: bench/accept_eras.sh [-quick]
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/sglangsim" ./cmd/sglangsim
go build -o "$tmp/accept_eras" ./bench/accept_eras
"$tmp/accept_eras" -sim "$tmp/sglangsim" "$@"
echo
echo "## Flag-table coverage per release profile"
go run ./bench/sim_speed -flags
