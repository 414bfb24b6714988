#!/bin/sh
# The same 16-point TP 1 sweep on one 8-GPU local host, unpacked and packed: speedup and the
# per-point throughput difference (docs/benchmarks.md). About 10 minutes.
set -eu
cd "$(dirname "$0")/.."
go run ./bench/pack "$@"
