package workload_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/workload"
)

// cpuTime is this process's user+system CPU time so far (getrusage RUSAGE_SELF): the simulator
// runs in a child process, so only the load generator (and the test binary's idle goroutines)
// count; and its context switches (voluntary and involuntary, every thread's), each one a thread
// that slept or was preempted.
func cpuTime(tb testing.TB) (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw + ru.Nivcsw)
}

// BenchmarkClientPerToken runs the real load generator (Run, closed loop) against sglangsim in a
// child process over loopback, 128 in / 256 out, at c=16 and c=64, and reports this process's CPU
// time per output token (cpu-ns/token) and context switches per output token (ctxsw/token). Its
// syscalls per token are counted
// outside, by bench/client.sh (perf stat on the whole process). An op is one level of 4c requests.
// Each level runs on either of the event loop's readers (SPECSWEEP_EVLOOP), side by side;
// -bench 'ClientPerToken/c=16/loop=epoll' picks one.
func BenchmarkClientPerToken(b *testing.B) {
	for _, c := range []int{16, 64} {
		for _, loop := range []string{"epoll", "io_uring"} {
			b.Run(fmt.Sprintf("c=%d/loop=%s", c, loop), func(b *testing.B) {
				b.Setenv("SPECSWEEP_EVLOOP", loop)
				benchClientPerToken(b, c)
			})
		}
	}
}

func benchClientPerToken(b *testing.B, c int) {
	sim := startSim(b, simOpts{scale: "0.05", args: []string{"--max-running-requests", "256"}})
	cfg := workload.Config{URL: sim.URL, Concurrency: c, Requests: 4 * c, InputTokens: 128, OutputTokens: 256,
		StallTimeout: time.Minute}
	var tokens, switches int64
	var cpu time.Duration
	for b.Loop() {
		cpu0, sw0 := cpuTime(b)
		res, err := workload.Run(context.Background(), cfg)
		cpu1, sw1 := cpuTime(b)
		cpu, switches = cpu+cpu1-cpu0, switches+sw1-sw0
		if err != nil {
			b.Fatal(err)
		}
		if res.Failed > 0 {
			b.Fatalf("%d requests failed", res.Failed)
		}
		tokens += res.TotalOutputTokens
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(tokens), "cpu-ns/token")
	b.ReportMetric(float64(switches)/float64(tokens), "ctxsw/token")
}
