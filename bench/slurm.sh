#!/bin/sh
# Slurm against SSH hosts (issue 18; docs/benchmarks.md, "Slurm against SSH hosts"): BenchmarkSweep's
# 12-point sweep (baseline + EAGLE-3 steps 1..11, tp 4, concurrency 1 and 8, sglangsim at 5x real
# time) on 3 SSH test hosts of 4 GPUs, then on a real Slurm cluster of 3 compute nodes of 4 GPUs (and a
# login/controller host; slurm.max_jobs 3), one after the other in one run. Prints:
# - both wall times and their ratio, and each sweep's phases per point (claim -> started -> ready ->
#   levels -> stopped, medians);
# - side by side, median (max): the orchestration overhead per point (claim to the end of the stop,
#   minus start-up and the measured levels), the stop (systemctl stop against scancel until the job is
#   gone), sglangsim's ready instant to the first request, the stops recorded not clean;
# - what Slurm adds per point: submission to start (provenance's slurm_queued_s in whole seconds, and
#   slurmctld's log to the millisecond), slurmd's launch of the batch job, the stop split at scancel,
#   slurmstepd's signal, the server's exit and slurmd's end of the job, and the scancels per job.
# Needs root (internal/testhost) and Debian's slurmctld, slurmd, slurm-client and munge, which .ci/run
# installs (apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge); the
# benchmark skips, saying why, without them. About 1.5 minutes.
set -eu
cd "$(dirname "$0")/.."
go test -run '^$' -bench SlurmAgainstSSH -benchtime 1x -timeout 30m ./internal/e2e | grep -Ev '^(goos|goarch|pkg|cpu|PASS|ok)'
