#!/bin/sh
# Accuracy and cost of specsweep's load generator against sglangsim's ground truth, on random
# prompts and on a prompt set (generated, or -set FILE), plus the SSE reader's Go benchmark. Prints
# Markdown tables (docs/bench.md quotes them); asserts nothing.
# Usage: bench/workload_accuracy.sh [-quick] [-prompts random,set] [-set FILE] [-pad N] [-cost=false]
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/sglangsim" ./cmd/sglangsim
go build -o "$tmp/workload_accuracy" ./bench/workload_accuracy
echo "## SSE reader + chunk parser (go test -bench SSEChunks ./workload)"
go test -run '^$' -bench SSEChunks -benchmem -count 1 ./workload | grep -E '^Benchmark'
echo
"$tmp/workload_accuracy" -sim "$tmp/sglangsim" "$@"
