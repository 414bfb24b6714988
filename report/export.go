package report

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/specsweep/specsweep/store"
)

// exportFields are bench_serving's JSON names (docs/bench.md, `bench --json`, in its order) with
// the run_detail figure each holds, then the point's configuration and the run's place in the sweep.
var exportFields = []struct {
	name  string
	value func(r *store.RunDetail) any
}{
	{"max_concurrency", func(r *store.RunDetail) any { return r.Concurrency }},
	{"completed", func(r *store.RunDetail) any { return r.Completed }},
	{"failed", func(r *store.RunDetail) any { return r.Failed }},
	{"duration", func(r *store.RunDetail) any { return r.DurationS }},
	{"total_input_tokens", func(r *store.RunDetail) any { return r.TotalInputTokens }},
	{"total_output_tokens", func(r *store.RunDetail) any { return r.TotalOutputTokens }},
	{"request_throughput", func(r *store.RunDetail) any { return r.RequestS }},
	{"input_throughput", func(r *store.RunDetail) any { return r.InputTokS }},
	{"output_throughput", func(r *store.RunDetail) any { return r.OutputTokS }},
	{"mean_ttft_ms", func(r *store.RunDetail) any { return r.TTFTMeanMs }},
	{"median_ttft_ms", func(r *store.RunDetail) any { return r.TTFTP50Ms }},
	{"p99_ttft_ms", func(r *store.RunDetail) any { return r.TTFTP99Ms }},
	{"mean_itl_ms", func(r *store.RunDetail) any { return r.ITLMeanMs }},
	{"median_itl_ms", func(r *store.RunDetail) any { return r.ITLP50Ms }},
	{"p99_itl_ms", func(r *store.RunDetail) any { return r.ITLP99Ms }},
	{"mean_tpot_ms", func(r *store.RunDetail) any { return r.TPOTMeanMs }},
	{"median_tpot_ms", func(r *store.RunDetail) any { return r.TPOTP50Ms }},
	{"mean_e2e_latency_ms", func(r *store.RunDetail) any { return r.E2EMeanMs }},
	{"median_e2e_latency_ms", func(r *store.RunDetail) any { return r.E2EP50Ms }},
	{"accept_length", func(r *store.RunDetail) any { return r.AcceptLength }},
	// The point's configuration and the run's identity.
	{"sweep", func(r *store.RunDetail) any { return r.Sweep }},
	{"sweep_id", func(r *store.RunDetail) any { return r.SweepID }},
	{"point_id", func(r *store.RunDetail) any { return r.PointID }},
	{"host", func(r *store.RunDetail) any { return r.Host }},
	{"method", func(r *store.RunDetail) any { return r.Method }},
	{"num_steps", func(r *store.RunDetail) any { return r.NumSteps }},
	{"topk", func(r *store.RunDetail) any { return r.TopK }},
	{"num_draft_tokens", func(r *store.RunDetail) any { return r.NumDraftTokens }},
	{"tp", func(r *store.RunDetail) any { return r.TP }},
	{"repeat", func(r *store.RunDetail) any { return r.Repeat }},
	{"speedup", func(r *store.RunDetail) any { return r.Speedup }},
	{"started_at", func(r *store.RunDetail) any { return r.StartedAt.UnixMilli() }},
	{"finished_at", func(r *store.RunDetail) any { return r.FinishedAt.UnixMilli() }},
}

// ExportFields are the keys of each exported line, in order.
func ExportFields() []string {
	out := make([]string, len(exportFields))
	for i, f := range exportFields {
		out[i] = f.name
	}
	return out
}

// ExportJSONL writes one JSON object per ok run of the sweep (a point at one level and repeat), in
// plan order, with bench_serving's field names and the point's configuration, and returns the
// number of lines written.
func ExportJSONL(ctx context.Context, db *store.DB, sweepID int64, w io.Writer) (int, error) {
	runs, err := db.RunDetails(ctx, store.RunsQuery{SweepID: sweepID, OK: true})
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriter(w)
	for i := range runs {
		bw.WriteByte('{')
		for j, f := range exportFields {
			if j > 0 {
				bw.WriteString(", ")
			}
			k, _ := json.Marshal(f.name)
			v, err := json.Marshal(f.value(&runs[i]))
			if err != nil {
				return 0, fmt.Errorf("report: export %s: %w", f.name, err)
			}
			bw.Write(k)
			bw.WriteString(": ")
			bw.Write(v)
		}
		bw.WriteString("}\n")
	}
	return len(runs), bw.Flush()
}
