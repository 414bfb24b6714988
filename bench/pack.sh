#!/bin/sh
# The same 16-point TP 1 sweep on one 8-GPU host, unpacked and packed: speedup and the per-point
# throughput difference (docs/benchmarks.md). About 10 minutes each.
#   bench/pack.sh        a local host (child processes)
#   bench/pack.sh -ssh   a real test host over SSH, a systemd unit per slot (root: internal/testhost)
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" = "-ssh" ]; then
	exec go test -run '^$' -bench PackedSweepOverSSH -benchtime 1x -timeout 40m ./internal/e2e
fi
go run ./bench/pack "$@"
