#!/bin/sh
# Whole-sweep figures on real test hosts (needs root): a 12-point sweep on 1 and on 4 hosts side by
# side (speedup), dead time per point from sglangsim's ready instant to the first measured request,
# and the orchestration overhead per point outside server start-up and measurement.
set -eu
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'BenchmarkSweep$' -benchtime 1x -timeout 20m ./internal/e2e | grep -Ev '^(goos|goarch|pkg|cpu|PASS|ok)'
