package report

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/specsweep/specsweep/store"
)

// exportFields maps bench_serving's JSON names (ARCHITECTURE.md, `bench --json`, in its order) to
// run_detail columns, then the point's configuration and the run's place in the sweep.
var exportFields = [][2]string{
	{"max_concurrency", "concurrency"},
	{"completed", "completed"},
	{"failed", "failed"},
	{"duration", "duration_s"},
	{"total_input_tokens", "total_input_tokens"},
	{"total_output_tokens", "total_output_tokens"},
	{"request_throughput", "request_s"},
	{"input_throughput", "input_tok_s"},
	{"output_throughput", "output_tok_s"},
	{"mean_ttft_ms", "ttft_mean_ms"},
	{"median_ttft_ms", "ttft_p50_ms"},
	{"p99_ttft_ms", "ttft_p99_ms"},
	{"mean_itl_ms", "itl_mean_ms"},
	{"median_itl_ms", "itl_p50_ms"},
	{"p99_itl_ms", "itl_p99_ms"},
	{"mean_tpot_ms", "tpot_mean_ms"},
	{"median_tpot_ms", "tpot_p50_ms"},
	{"mean_e2e_latency_ms", "e2e_mean_ms"},
	{"median_e2e_latency_ms", "e2e_p50_ms"},
	{"accept_length", "accept_length"},
	// The point's configuration and the run's identity.
	{"sweep", "sweep"},
	{"sweep_id", "sweep_id"},
	{"point_id", "point_id"},
	{"host", "host"},
	{"method", "method"},
	{"num_steps", "num_steps"},
	{"topk", "topk"},
	{"num_draft_tokens", "num_draft_tokens"},
	{"tp", "tp"},
	{"repeat", "repeat"},
	{"speedup", "speedup"},
	{"started_at", "started_at"},
	{"finished_at", "finished_at"},
}

// ExportFields are the keys of each exported line, in order.
func ExportFields() []string {
	out := make([]string, len(exportFields))
	for i, f := range exportFields {
		out[i] = f[0]
	}
	return out
}

// ExportJSONL writes one JSON object per ok run of the sweep (a point at one level and repeat), in
// plan order, with bench_serving's field names and the point's configuration, and returns the
// number of lines written.
func ExportJSONL(ctx context.Context, db *store.DB, sweepID int64, w io.Writer) (int, error) {
	cols := make([]string, len(exportFields))
	for i, f := range exportFields {
		cols[i] = f[1]
	}
	rows, err := db.Query(ctx, "SELECT "+strings.Join(cols, ", ")+` FROM run_detail
		WHERE sweep_id = ? AND status = 'ok' ORDER BY plan_order, concurrency, repeat`, sweepID)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriter(w)
	for _, r := range rows.Values {
		bw.WriteByte('{')
		for i, f := range exportFields {
			if i > 0 {
				bw.WriteString(", ")
			}
			k, _ := json.Marshal(f[0])
			v, err := json.Marshal(r[i])
			if err != nil {
				return 0, fmt.Errorf("report: export %s: %w", f[0], err)
			}
			bw.Write(k)
			bw.WriteString(": ")
			bw.Write(v)
		}
		bw.WriteString("}\n")
	}
	return len(rows.Values), bw.Flush()
}
