#!/bin/sh
# Benchmark of `specsweep runs --where "concurrency = 16"` sorted by
# output_tok_s: 100k runs (2000 points x 5 concurrency levels x 10 repeats)
# in a real SQLite file; prints the time per query. Target: < 100 ms.
set -eu
cd "$(dirname "$0")/.."
out=$(go test -run '^$' -bench 'RunsQuery$' -count "${COUNT:-3}" ./store)
echo "$out" | grep -E '^(goos|goarch|cpu|Benchmark)'
echo "$out" | awk '/^BenchmarkRunsQuery/ { for (i = 1; i < NF; i++) if ($(i+1) == "ms/op") { s += $i; n++ } }
	END { if (n) printf "runs query (20000 of 100000 runs, concurrency = 16, ORDER BY output_tok_s DESC): %.1f ms/op (mean of %d)\n", s / n, n }'
