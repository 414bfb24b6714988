#!/bin/bash
# The load generator's cost per output token against sglangsim over loopback: CPU time (perf
# stat's task-clock, every thread) and system calls (its count of raw_syscalls:sys_enter; strace -f
# slows the client enough that more events share a read, and counts too few) of the whole client
# process, at c=16 and c=64, 128 in / 256 out, closed loop. Each figure is the difference between
# a level of 8c requests and one of 2c requests, divided by the difference in output tokens, so
# the process's start-up, the first connections and (for Python) the imports are taken out.
# With -before COMMIT the same runs measure that commit's client (built from git archive), and with
# -bench-serving 'CMD' a bench_serving command (anything that takes bench_serving's flags, e.g.
# '/usr/bin/python3 /tmp/bs/run_bs.py'; docs/benchmarks.md says how it was set up), interleaved
# with ours, -backends naming its backends (run with OPENBLAS_NUM_THREADS=1: numpy's idle BLAS
# threads only add start-up noise). The server must be slower than every client (the default time
# scale 0.2 is): a client that falls behind reads many events per system call and its figures
# fall with it. With -floor, also bench/floor/floor.c (built with cc): a C reader that reads each
# event as it arrives and parses nothing, what the kernel charges any client that stamps every
# event when it comes. Prints a Markdown table; asserts nothing.
# Usage: bench/client.sh [-before COMMIT] [-bench-serving CMD] [-backends sglang,...] [-floor]
#        [-scale S] [-rounds N] [-concurrency 16,64]
set -eu
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:--tags=libsqlite3}"
before="" bs="" floor="" backends="sglang" scale="0.2" rounds=1 levels="16,64" in=128 out=256
while [ $# -gt 0 ]; do
	case "$1" in
	-before) before=$2; shift 2 ;;
	-bench-serving) bs=$2; shift 2 ;;
	-backends) backends=$2; shift 2 ;;
	-floor) floor=1; shift ;;
	-scale) scale=$2; shift 2 ;;
	-rounds) rounds=$2; shift 2 ;;
	-concurrency) levels=$2; shift 2 ;;
	*) echo "usage: $0 [-before COMMIT] [-bench-serving CMD] [-backends LIST] [-floor] [-scale S] [-rounds N] [-concurrency LIST]" >&2; exit 2 ;;
	esac
done
for tool in perf curl; do
	command -v "$tool" >/dev/null || { echo "client.sh: needs $tool" >&2; exit 1; }
done
tmp=$(mktemp -d)
simpid=""
cleanup() {
	if [ -n "$simpid" ]; then kill "$simpid" 2>/dev/null || true; wait "$simpid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/sglangsim" ./cmd/sglangsim
go build -o "$tmp/ours" ./cmd/specsweep
clients="ours"
if [ -n "$before" ]; then
	mkdir "$tmp/src"
	git archive "$before" | tar -x -C "$tmp/src"
	(cd "$tmp/src" && go build -o "$tmp/before" ./cmd/specsweep)
	clients="before ours"
fi
if [ -n "$floor" ]; then
	"${CC:-cc}" -O2 -o "$tmp/floor" bench/floor/floor.c
	clients="floor $clients"
fi
if [ -n "$bs" ]; then
	for b in ${backends//,/ }; do clients="$clients bs:$b"; done
fi

# A port below the ephemeral range that nothing listens on (never SGLang's default 30000).
low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
for _ in $(seq 100); do
	port=$((10000 + RANDOM % (low - 10000)))
	[ "$port" = 30000 ] || [ "$port" = 8377 ] && continue
	ss -Htln "sport = :$port" | grep -q . || break
done
url="http://127.0.0.1:$port"
SGLANGSIM_LOAD_SECONDS=0 SGLANGSIM_WARMUP_SECONDS=0 SGLANGSIM_TIME_SCALE=$scale \
	"$tmp/sglangsim" --model-path /models/Qwen3.5-122B-A10B --tp-size 4 --host 127.0.0.1 --port "$port" \
	--log-level warning --max-running-requests 256 >"$tmp/sim.log" 2>&1 &
simpid=$!
for _ in $(seq 200); do
	curl -fs "$url/health" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fs "$url/health" >/dev/null || { cat "$tmp/sim.log" >&2; exit 1; }

# client NAME C N: the command line of one level of N requests at concurrency C.
client() {
	case "$1" in
	ours | before)
		echo "$tmp/$1 bench --url $url --concurrency $2 --requests $3 --input-tokens $in --output-tokens $out --warmup 0 --format json"
		;;
	floor)
		echo "$tmp/floor $port $2 $3 $in $out"
		;;
	bs:*)
		echo "$bs --backend ${1#bs:} --host 127.0.0.1 --port $port --model m --tokenizer m --dataset-name random-ids --random-input-len $in --random-output-len $out --random-range-ratio 1 --num-prompts $3 --max-concurrency $2 --request-rate inf --disable-tqdm --warmup-requests 0"
		;;
	esac
}
# measure NAME C N: "CPU-seconds syscalls" of one level, every thread of the client. It runs in
# $tmp (bench_serving writes a results file into its working directory).
measure() {
	# shellcheck disable=SC2046
	OPENBLAS_NUM_THREADS=1 perf stat -x, -e task-clock,raw_syscalls:sys_enter -o "$tmp/perf" $(client "$@") \
		>"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }
	awk -F, '$3 == "task-clock" { cpu = $1 / 1000 } $3 == "raw_syscalls:sys_enter" { n = $1 }
		END { printf "%.3f %d", cpu, n }' "$tmp/perf"
}

cd "$tmp"
echo "| client | concurrency | round | CPU us / output token | syscalls / output token | CPU s (2c, 8c requests) | syscalls (2c, 8c) |"
echo "|---|---|---|---|---|---|---|"
for c in ${levels//,/ }; do
	n1=$((2 * c)) n2=$((8 * c))
	tokens=$(((n2 - n1) * out))
	for r in $(seq "$rounds"); do
		for name in $clients; do
			m1=$(measure "$name" "$c" "$n1") m2=$(measure "$name" "$c" "$n2")
			awk -v n="$name" -v c="$c" -v r="$r" -v m1="$m1" -v m2="$m2" -v t="$tokens" 'BEGIN {
				split(m1, a, " "); split(m2, b, " ")
				printf "| %s | %d | %d | %.2f | %.2f | %s, %s | %s, %s |\n", n, c, r, (b[1]-a[1])*1e6/t, (b[2]-a[2])/t, a[1], b[1], a[2], b[2] }'
		done
	done
done
