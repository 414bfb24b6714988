#!/bin/sh
# Soak of the daemon on real test hosts (needs root): 200 queued one-point sweeps on 4 hosts, the
# daemon's RSS at the start, every 50 sweeps and at the end.
set -eu
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'BenchmarkDaemonSoak$' -benchtime 1x -timeout 30m ./internal/e2e | grep -Ev '^(goos|goarch|pkg|cpu|PASS|ok)'
