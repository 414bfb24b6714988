#!/bin/sh
# Precision-targeted levels against fixed counts (issue 31): on every simulator profile (built-in and
# sim/testdata/profiles, speed noise 0.1), the best configuration per level and the measurement time
# of levels that stop at ±2% (95%) against fixed counts of 800 and 200 requests, in the simulator's
# virtual time (no clock: the method's figures, the same on every machine). About 10 s.
set -eu
cd "$(dirname "$0")/.."
go test -run '^$' -bench PrecisionAgainstFixedCounts -benchtime 1x -v ./workload | sed -n '/^ *fixed [0-9]* and/,/^ *precision: same best/p' | sed 's/^        //'
