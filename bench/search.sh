#!/bin/sh
# Grid against climb on the same specs (num_steps 1..10, topk 1 and one tree shape, concurrency 1, 16
# and 64) for every built-in simulator profile and three synthetic ones (sim/testdata/profiles):
# points run, GPU time (the sum of the points' time on hosts) and whether climb's best configuration
# per level is the grid's or within min_gain of it. First from the simulator's model (seconds), then
# with real sweeps of local sglangsim processes (about 15 minutes).
set -eu
cd "$(dirname "$0")/.."
echo "== model (the simulator's scheduler in virtual time, 90 s start-up per point)"
go run ./bench/search
echo
echo "== real sweeps (specsweep run on local sglangsim, SGLANGSIM_TIME_SCALE=0.02, SGLANGSIM_LOAD_SECONDS=90)"
go run ./bench/search -real
