#!/bin/sh
# hostctl on a real test host (systemd + sshd in a network namespace, needs root): readiness
# detection lag (sglangsim's truth "ready" instant to WaitReady returning), failure detection lag
# for bad_args and oom (systemd's ExecMainExitTimestamp to the classification), and the per-point
# host operations over one reused SSH connection. docs/hostctl.md quotes the figures.
# Usage: bench/hostctl_bench.sh [ITERATIONS]   (default 20)
set -eu
cd "$(dirname "$0")/.."
n=${1:-20}
go test -run '^$' -bench 'ReadyLag|FailLag|PointOverhead' -benchtime "${n}x" -count 1 ./hostctl | grep -E '^(cpu|Benchmark)'
