#!/bin/sh
# Peak RSS of the load generator on a level of 4096 streams with 32k-token prompts against a real
# sglangsim over loopback, for this tree and for the commit before request bodies were streamed, side
# by side; with -worst also a level held at the spec's bounds (4096 x 4M-token prompts). Prints
# Markdown tables (docs/benchmarks.md quotes them); asserts nothing. Run from a git checkout.
# Usage: bench/loadmem.sh [-worst] [-concurrency N] [-input TOKENS] [-before COMMIT]
set -eu
cd "$(dirname "$0")/.."
echo "## Prompt body, 32768 tokens (go test -bench PromptBody ./workload)"
go test -run '^$' -bench PromptBody -benchmem -count 1 ./workload | grep -E '^Benchmark'
echo
go run ./bench/loadmem "$@"
