package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
)

// TestMetricsParseAsPrometheusText: what /metrics writes is read by Prometheus's own text parser,
// with the values the updates fed in: histogram buckets cumulative with +Inf, sum and count, a host
// name that needs escaping kept whole, the runtime's and the process's series present.
func TestMetricsParseAsPrometheusText(t *testing.T) {
	t.Parallel()
	a := newAPIHarness(t, APIConfig{})
	m := a.metrics
	odd := "gpu\"box\\1\nb"
	m.Observe(1, orchestrator.Update{Host: odd, Phase: orchestrator.PhaseStarting})
	m.Observe(1, orchestrator.Update{Host: odd, Phase: orchestrator.PhaseReady, Duration: 3 * time.Second})
	m.Observe(1, orchestrator.Update{Host: "h2", Phase: orchestrator.PhaseRetry})
	m.Observe(1, orchestrator.Update{Phase: orchestrator.PhaseDone, Duration: 7 * time.Second})
	m.Observe(1, orchestrator.Update{Phase: orchestrator.PhaseDone, Duration: 700 * time.Second})
	m.Observe(1, orchestrator.Update{Phase: orchestrator.PhaseFailed, Duration: 1e6 * time.Second})

	w := a.do("GET", "/metrics", "", nil)
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("Prometheus's parser refuses /metrics: %v\n%s", err, w.Body)
	}
	for _, name := range []string{"specsweep_sweeps", "specsweep_point_duration_seconds",
		"specsweep_ready_seconds", "specsweep_host_up", "go_goroutines", "go_memstats_alloc_bytes",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	hist := map[string][3]float64{} // outcome: count, sum, bucket le=10
	for _, mm := range fams["specsweep_point_duration_seconds"].GetMetric() {
		h := mm.GetHistogram()
		var le10 float64
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == 10 {
				le10 = float64(b.GetCumulativeCount())
			}
		}
		hist[mm.GetLabel()[0].GetValue()] = [3]float64{float64(h.GetSampleCount()), h.GetSampleSum(), le10}
	}
	if hist["done"] != [3]float64{2, 707, 1} || hist["failed"] != [3]float64{1, 1e6, 0} {
		t.Errorf("point durations: %v", hist)
	}
	if r := fams["specsweep_ready_seconds"].GetMetric(); len(r) != 1 || r[0].GetHistogram().GetSampleCount() != 1 || r[0].GetHistogram().GetSampleSum() != 3 {
		t.Errorf("ready: %v", r)
	}
	up := map[string]float64{}
	for _, mm := range fams["specsweep_host_up"].GetMetric() {
		up[mm.GetLabel()[0].GetValue()] = mm.GetGauge().GetValue()
	}
	if len(up) != 2 || up[odd] != 1 || up["h2"] != 0 {
		t.Errorf("host_up: %v", up)
	}
}

// TestMetricsShowRegressions: each host's latest watch gives a gauge per measure, 1 where that watch
// found a regression.
func TestMetricsShowRegressions(t *testing.T) {
	t.Parallel()
	a := newAPIHarness(t, APIConfig{})
	ctx := t.Context()
	id, err := a.db.CreateSweep(ctx, store.NewSweep{Name: "w", SpecHash: "h", SpecText: "name: w"}, []store.NewHost{{Name: "gpu1", Driver: "ssh", GPUs: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []store.Event{
		{SweepID: id, Host: "gpu1", Kind: store.EventRegression, Data: []byte(`{"measure":"accept_length"}`)},
		{SweepID: id, Host: "gpu1", Kind: store.EventWatch, Detail: "1 regression(s)"},
	} {
		if err := a.db.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	w := a.do("GET", "/metrics", "", nil)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("Prometheus's parser refuses /metrics: %v", err)
	}
	got := map[string]float64{}
	for _, mm := range fams["specsweep_regression"].GetMetric() {
		lb := map[string]string{}
		for _, l := range mm.GetLabel() {
			lb[l.GetName()] = l.GetValue()
		}
		got[lb["host"]+"/"+lb["measure"]] = mm.GetGauge().GetValue()
	}
	want := map[string]float64{"gpu1/tok_s": 0, "gpu1/speedup": 0, "gpu1/accept_length": 1, "gpu1/output_check": 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("specsweep_regression %v, want %v", got, want)
	}
}
