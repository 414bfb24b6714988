#!/bin/sh
# The output check's cost per point and its detection and false-alarm rates (docs/benchmarks.md).
set -eu
cd "$(dirname "$0")/.."
go run ./bench/outcheck "$@"
