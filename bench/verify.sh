#!/bin/sh
# `specsweep verify` on the simulator (issue 28): a sweep of the falling-steps profile (best steps 7 at
# one stream, 3 at 16, the baseline at 64; sim/testdata/profiles/falling-steps.json, SGLang main's
# adaptive mode), then its verification under phases c=1, c=64, c=1 of PHASE seconds each (default 20,
# at SGLANGSIM_TIME_SCALE 0.1: 200 s of modelled time), with the fitted schedule and, side by side in
# the same sweep, the same schedule keyed at the levels themselves (1, 16, 64: --schedule). Prints the
# verification's table: each adaptive schedule against the best fixed configuration of each phase and
# of the whole run. About 6 minutes.
set -eu
cd "$(dirname "$0")/.."
PHASE=${1:-20}
make build >/dev/null
root=$(pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$dir/falling.yaml" <<SPEC
version: 1
name: falling
hosts: [{name: here, driver: local, gpus: 1}]
server:
  command: [$root/bin/sglangsim]
  args: [--model-path, /models/falling, --host, 127.0.0.1, --port, "$port", --enable-metrics]
  env: {SGLANGSIM_PROFILE: $root/sim/testdata/profiles/falling-steps.json, SGLANGSIM_VERSION: main,
    SGLANGSIM_TIME_SCALE: "0.1", SGLANGSIM_LOAD_SECONDS: "5", SGLANGSIM_WARMUP_SECONDS: "1", SGL_FORCE_SHUTDOWN: "1"}
  port: $port
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/falling-eagle3]
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3, 4, 5, 6, 7, 8], topk: [1], tp: [1]}
workload: {input_tokens: 128, output_tokens: 128, concurrency: [1, 16, 64], requests: 64, warmup_requests: 4, output_check: false}
SPEC
db="$dir/bench.db"
bin/specsweep run --db "$db" "$dir/falling.yaml" >"$dir/run.log" 2>&1 || { cat "$dir/run.log"; exit 1; }
bin/specsweep adaptive --db "$db" -o "$dir/fitted.json" falling
# The same candidates keyed at the levels (the fit keys them where each level's batches begin).
sed -e 's/"4": /"16": /' -e 's/"32": /"64": /' "$dir/fitted.json" >"$dir/at-levels.json"
echo "== the schedule keyed at the levels (adaptive-given):"
cat "$dir/at-levels.json"
bin/specsweep verify --db "$db" --phases "c=1:${PHASE}s,c=64:${PHASE}s,c=1:${PHASE}s" --schedule "$dir/at-levels.json" \
	-o "$dir/verify.yaml" falling 2>"$dir/verify.log"
bin/specsweep report --db "$db" --format md -o "$dir/report" falling-verify >/dev/null
echo "== phases (steps and settling)"
sed -n '/^## Phases/,/^Each phase/p' "$dir/report/report.md" | grep '^|'
