#!/bin/sh
# Whole-sweep figures on real test hosts (needs root): a 12-point sweep on 1 and on 4 hosts side by
# side (speedup), dead time per point from sglangsim's ready instant to the first measured request,
# and the orchestration overhead per point outside server start-up and measurement.
# Usage: bench/sweep.sh [REV [ROUNDS]]
#   With REV (a commit), the same benchmark runs alternately on REV (a copy from git archive, in a
#   temporary directory) and on this tree, ROUNDS times each (default 2), so that before and after
#   are measured side by side on a noisy machine; each run is headed "== REV" or "== this tree".
set -eu
cd "$(dirname "$0")/.."
run() {
	(cd "$1" && go test -run '^$' -bench 'BenchmarkSweep$' -benchtime 1x -timeout 20m ./internal/e2e) | grep -Ev '^(goos|goarch|pkg|cpu|PASS|ok)'
}
if [ $# -eq 0 ]; then
	run .
	exit 0
fi
old=$(mktemp -d)
trap 'rm -rf "$old"' EXIT
git archive "$1" | tar -x -C "$old"
i=0
while [ "$i" -lt "${2:-2}" ]; do
	echo "== $1"
	run "$old"
	echo "== this tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', modified'))"
	run .
	i=$((i + 1))
done
