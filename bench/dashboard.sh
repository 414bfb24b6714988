#!/bin/sh
# The dashboard (issue 17; docs/benchmarks.md, "Dashboard"). Needs root (real systemd+sshd test hosts)
# and Debian's chromium (headless); each benchmark skips, saying why, without them. Prints:
# - BenchmarkDashboardPageLoad: the real daemon on a store of 100 finished sweeps and 100,000 runs, the
#   page opened afresh 10 times in Chromium: median and max of first contentful paint (target < 1 s) and
#   of the time until the Finished table shows all 100 sweeps, where that time goes (the HTML, the
#   scripts, the event stream, GET /api/sweeps), and GET /api/sweeps timed directly with the token.
# - BenchmarkDashboardCPU: the daemon's CPU (% of one core, /proc/PID/stat) during a sweep on 2 test
#   hosts, 30 s with no page open, 30 s with 10 pages open, 30 s with none again, side by side in one
#   run, with the runs recorded, Chromium's and the machine's CPU and the pages' API requests.
# About 2.5 minutes in all.
set -eu
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'Dashboard' -benchtime 1x -timeout 20m ./internal/e2e | grep -Ev '^(goos|goarch|pkg|cpu|PASS|ok)'
