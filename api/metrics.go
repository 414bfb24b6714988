package api

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
)

// Metrics are the daemon's Prometheus metrics: sweeps by state and points by state and failure
// class (read from the store at each scrape), point durations, time to ready, hosts up, and the Go
// runtime's and the process's own. They are written in Prometheus's text format (version 0.0.4)
// here rather than through client_golang: a handful of series did not justify its dependency tree
// (protobuf among it: about a tenth of a cold build). The tests parse the output with Prometheus's
// own parser (prometheus/common/expfmt), so the format stays what a scraper reads.
type Metrics struct {
	st    APIStore
	start time.Time

	mu       sync.Mutex
	duration map[string]*histogram // by outcome: done, failed
	ready    *histogram
	hostUp   map[string]float64
}

// The buckets: point durations from 5 s doubling to about 2.8 h, ready times from 1 s to about 34 min.
var (
	durationBuckets = exponentialBuckets(5, 2, 12)
	readyBuckets    = exponentialBuckets(1, 2, 12)
)

func exponentialBuckets(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start * math.Pow(factor, float64(i))
	}
	return b
}

type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	h.sum += v
	h.n++
	if i, _ := slices.BinarySearch(h.bounds, v); i < len(h.bounds) {
		h.counts[i]++
	}
}

// NewMetrics makes the metrics of a daemon whose store is st.
func NewMetrics(st APIStore) *Metrics {
	return &Metrics{st: st, start: time.Now(), duration: map[string]*histogram{},
		ready: newHistogram(readyBuckets), hostUp: map[string]float64{}}
}

// Observe feeds a sweep's update into the metrics.
func (m *Metrics) Observe(_ int64, u orchestrator.Update) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch u.Phase {
	case orchestrator.PhaseReady:
		m.ready.observe(u.Duration.Seconds())
		m.hostUp[u.Host] = 1
	case orchestrator.PhaseDone, orchestrator.PhaseFailed:
		out := string(u.Phase)
		if m.duration[out] == nil {
			m.duration[out] = newHistogram(durationBuckets)
		}
		m.duration[out].observe(u.Duration.Seconds())
	case orchestrator.PhaseRetry:
		m.hostUp[u.Host] = 0
	case orchestrator.PhaseStarting:
		// Listed on first sight (0 until its server is ready), so every host of a running sweep has a series.
		if _, ok := m.hostUp[u.Host]; !ok {
			m.hostUp[u.Host] = 0
		}
	}
}

// ServeHTTP writes the metrics in Prometheus's text format.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriter(w)
	m.write(r.Context(), &expo{w: bw})
	bw.Flush()
}

func (m *Metrics) write(ctx context.Context, e *expo) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The store is the truth, also for sweeps run by `specsweep run` beside the daemon.
	counts, err := m.st.StateCounts(ctx)
	if err != nil {
		counts = store.StateCounts{Sweeps: map[store.SweepState]int{}}
	}
	e.family("specsweep_sweeps", "gauge", "Sweeps in the store by state.")
	for _, s := range []store.SweepState{store.SweepScheduled, store.SweepQueued, store.SweepRunning,
		store.SweepInterrupted, store.SweepDone, store.SweepFailed, store.SweepCancelled} {
		e.sample("specsweep_sweeps", labels{{"state", string(s)}}, float64(counts.Sweeps[s]))
	}
	e.family("specsweep_points", "gauge", "Points in the store by state and failure class.")
	for _, p := range counts.Points {
		e.sample("specsweep_points", labels{{"failure_class", string(p.FailureClass)}, {"state", string(p.State)}}, float64(p.N))
	}

	// The latest watch of each host (issue 29): 1 per measure that regressed, 0 for the others.
	if watches, err := m.st.LatestWatches(ctx); err == nil && len(watches) > 0 {
		e.family("specsweep_regression", "gauge", "1 when the host's latest watch found the measure below the deployment's decision, else 0.")
		for _, w := range watches {
			for _, measure := range store.Measures() {
				v := 0.0
				if w.Regressions[measure] > 0 {
					v = 1
				}
				e.sample("specsweep_regression", labels{{"host", w.Host}, {"measure", measure}}, v)
			}
		}
	}

	m.mu.Lock()
	e.family("specsweep_point_duration_seconds", "histogram", "Time a point held its host, from claim to done or failed.")
	for _, out := range sortedKeys(m.duration) {
		e.histogram("specsweep_point_duration_seconds", labels{{"outcome", out}}, m.duration[out])
	}
	e.family("specsweep_ready_seconds", "histogram", "Time from a server's start to its readiness (load time plus detection lag).")
	e.histogram("specsweep_ready_seconds", nil, m.ready)
	e.family("specsweep_host_up", "gauge", "1 while the host answers, 0 after host trouble (until it answers again).")
	for _, h := range sortedKeys(m.hostUp) {
		e.sample("specsweep_host_up", labels{{"host", h}}, m.hostUp[h])
	}
	m.mu.Unlock()

	writeRuntime(e)
	writeProcess(e, m.start)
}

// writeRuntime writes the Go runtime's figures under client_golang's names, so dashboards built on
// them keep working.
func writeRuntime(e *expo) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.family("go_goroutines", "gauge", "Number of goroutines that currently exist.")
	e.sample("go_goroutines", nil, float64(runtime.NumGoroutine()))
	e.family("go_info", "gauge", "Information about the Go environment.")
	e.sample("go_info", labels{{"version", runtime.Version()}}, 1)
	e.family("go_memstats_alloc_bytes", "gauge", "Number of bytes allocated in heap and currently in use.")
	e.sample("go_memstats_alloc_bytes", nil, float64(ms.HeapAlloc))
	e.family("go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system.")
	e.sample("go_memstats_sys_bytes", nil, float64(ms.Sys))
	e.family("go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.")
	e.sample("go_memstats_heap_inuse_bytes", nil, float64(ms.HeapInuse))
	e.family("go_gc_cycles_total", "counter", "Number of completed GC cycles.")
	e.sample("go_gc_cycles_total", nil, float64(ms.NumGC))
	e.family("go_threads", "gauge", "Number of OS threads created.")
	n, _ := runtime.ThreadCreateProfile(nil)
	e.sample("go_threads", nil, float64(n))
}

// writeProcess writes the process's figures from /proc (Linux), under client_golang's names; a
// figure that cannot be read is left out.
func writeProcess(e *expo, start time.Time) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		// Fields after the command's closing parenthesis: utime and stime are the 12th and 13th
		// (in clock ticks, 100 a second on Linux).
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseFloat(f[11], 64)
				s, _ := strconv.ParseFloat(f[12], 64)
				e.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
				e.sample("process_cpu_seconds_total", nil, (u+s)/100)
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseFloat(f[1], 64)
			e.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
			e.sample("process_resident_memory_bytes", nil, pages*float64(os.Getpagesize()))
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.family("process_open_fds", "gauge", "Number of open file descriptors.")
		e.sample("process_open_fds", nil, float64(len(fds)))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		e.family("process_max_fds", "gauge", "Maximum number of open file descriptors.")
		e.sample("process_max_fds", nil, float64(rl.Cur))
	}
	e.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
	e.sample("process_start_time_seconds", nil, float64(start.UnixNano())/1e9)
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}

// labels are a sample's label pairs, in the order written.
type labels [][2]string

// expo writes Prometheus's text exposition format.
type expo struct{ w *bufio.Writer }

func (e *expo) family(name, typ, help string) {
	fmt.Fprintf(e.w, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

func (e *expo) sample(name string, ls labels, v float64) {
	e.w.WriteString(name)
	if len(ls) > 0 {
		e.w.WriteByte('{')
		for i, l := range ls {
			if i > 0 {
				e.w.WriteByte(',')
			}
			fmt.Fprintf(e.w, "%s=\"%s\"", l[0], escapeLabel(l[1]))
		}
		e.w.WriteByte('}')
	}
	e.w.WriteByte(' ')
	e.w.WriteString(formatValue(v))
	e.w.WriteByte('\n')
}

func (e *expo) histogram(name string, ls labels, h *histogram) {
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		e.sample(name+"_bucket", append(slices.Clone(ls), [2]string{"le", formatValue(b)}), float64(cum))
	}
	e.sample(name+"_bucket", append(slices.Clone(ls), [2]string{"le", "+Inf"}), float64(h.n))
	e.sample(name+"_sum", ls, h.sum)
	e.sample(name+"_count", ls, float64(h.n))
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// escapeLabel escapes a label value as the format requires: backslash, double quote, newline.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// escapeHelp escapes a help text: backslash and newline.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}
