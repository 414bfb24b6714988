package store

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The typed readers of the public views (docs/schema.md): each is one query on the read-only
// connection and decodes the columns it names itself, so no other package writes SQL.

// RunSummary is one row of run_summary. A figure the run did not measure (a failed run, a baseline's
// accept length, a speedup without a baseline run) is nil.
type RunSummary struct {
	Sweep   string
	SweepID int64
	PointID string
	Host    string
	Method  string
	// NumSteps, TopK and NumDraftTokens are nil for a baseline, and may be nil for a speculative
	// point that leaves them to the server (NGRAM's steps, DFLASH's auto block size).
	NumSteps, TopK, NumDraftTokens *int
	TP                             int
	Concurrency                    int
	Repeat                         int
	Status                         RunStatus
	Requests, Completed, Failed    *int
	OutputTokS, RequestS           *float64
	TTFTP50Ms, TTFTP99Ms           *float64
	ITLP50Ms, ITLP99Ms             *float64
	TPOTP50Ms, E2EP50Ms            *float64
	AcceptLength                   *float64
	Speedup                        *float64
	StartedAt, FinishedAt          time.Time
	AcceptLengthSource             string
	// IsBaseline: the run's point runs without speculative decoding (run_detail.baseline; a
	// speculative point may have NULL speculative parameters).
	IsBaseline bool
}

// Baseline reports whether the run's point runs without speculative decoding.
func (r RunSummary) Baseline() bool { return r.IsBaseline }

// RunDetail is one row of run_detail: run_summary and the run's other bench_serving figures.
type RunDetail struct {
	RunSummary
	RunID                               int64
	PlanOrder                           int
	Baseline                            bool
	Attempt                             int
	DurationS                           *float64
	TotalInputTokens, TotalOutputTokens *int
	InputTokS                           *float64
	TTFTMeanMs, ITLMeanMs               *float64
	TPOTMeanMs, TPOTP99Ms               *float64
	E2EMeanMs, E2EP99Ms                 *float64
	Error                               string
}

// runDetailColumns are run_detail's columns beyond run_summary's, in the order RunDetails decodes them.
var runDetailColumns = []string{"run_id", "plan_order", "baseline", "attempt", "duration_s", "total_input_tokens",
	"total_output_tokens", "input_tok_s", "ttft_mean_ms", "itl_mean_ms", "tpot_mean_ms", "tpot_p99_ms",
	"e2e_mean_ms", "e2e_p99_ms", "error"}

// RunSummaries reads the run_summary rows q selects (Where and OrderBy are the user's SQL, as for
// QueryRuns), in one query.
func (db *DB) RunSummaries(ctx context.Context, q RunsQuery) ([]RunSummary, error) {
	var out []RunSummary
	err := db.EachRunSummary(ctx, q, func(r *RunSummary) { out = append(out, *r) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EachRunSummary is RunSummaries handing each row to fn as it is read, for callers that aggregate
// many runs without keeping them (r is reused: copy what is kept).
func (db *DB) EachRunSummary(ctx context.Context, q RunsQuery, fn func(r *RunSummary)) error {
	var r RunSummary
	cols := append(append([]string(nil), runSummaryColumns...), "baseline")
	return db.runsQuery(ctx, q, cols, func(v []driver.Value) {
		decodeRunSummary(&r, v)
		r.IsBaseline = vInt64(v[len(runSummaryColumns)]) != 0
		fn(&r)
	})
}

// RunDetails reads the run_detail rows q selects, in one query.
func (db *DB) RunDetails(ctx context.Context, q RunsQuery) ([]RunDetail, error) {
	cols := append(append([]string(nil), runSummaryColumns...), runDetailColumns...)
	var out []RunDetail
	n := len(runSummaryColumns)
	err := db.runsQuery(ctx, q, cols, func(v []driver.Value) {
		var r RunDetail
		decodeRunSummary(&r.RunSummary, v)
		d := v[n:]
		r.RunID, r.PlanOrder, r.Baseline, r.Attempt = vInt64(d[0]), int(vInt64(d[1])), vInt64(d[2]) != 0, int(vInt64(d[3]))
		r.IsBaseline = r.Baseline
		f := make([]float64, 9) // one allocation for the row's figures
		r.DurationS = vFloat(d[4], &f[0])
		r.TotalInputTokens, r.TotalOutputTokens = vIntPtr(d[5]), vIntPtr(d[6])
		r.InputTokS, r.TTFTMeanMs, r.ITLMeanMs = vFloat(d[7], &f[1]), vFloat(d[8], &f[2]), vFloat(d[9], &f[3])
		r.TPOTMeanMs, r.TPOTP99Ms = vFloat(d[10], &f[4]), vFloat(d[11], &f[5])
		r.E2EMeanMs, r.E2EP99Ms = vFloat(d[12], &f[6]), vFloat(d[13], &f[7])
		r.Error = vString(d[14])
		out = append(out, r)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decodeRunSummary fills r from values in runSummaryColumns' order.
func decodeRunSummary(r *RunSummary, v []driver.Value) {
	r.Sweep, r.SweepID, r.PointID, r.Host, r.Method = vString(v[0]), vInt64(v[1]), vString(v[2]), vString(v[3]), vString(v[4])
	r.NumSteps, r.TopK, r.NumDraftTokens = vIntPtr(v[5]), vIntPtr(v[6]), vIntPtr(v[7])
	r.TP, r.Concurrency, r.Repeat = int(vInt64(v[8])), int(vInt64(v[9])), int(vInt64(v[10]))
	r.Status = RunStatus(vString(v[11]))
	r.Requests, r.Completed, r.Failed = vIntPtr(v[12]), vIntPtr(v[13]), vIntPtr(v[14])
	f := make([]float64, 10) // one allocation for the row's figures
	r.OutputTokS, r.RequestS = vFloat(v[15], &f[0]), vFloat(v[16], &f[1])
	r.TTFTP50Ms, r.TTFTP99Ms = vFloat(v[17], &f[2]), vFloat(v[18], &f[3])
	r.ITLP50Ms, r.ITLP99Ms = vFloat(v[19], &f[4]), vFloat(v[20], &f[5])
	r.TPOTP50Ms, r.E2EP50Ms = vFloat(v[21], &f[6]), vFloat(v[22], &f[7])
	r.AcceptLength, r.Speedup = vFloat(v[23], &f[8]), vFloat(v[24], &f[9])
	r.StartedAt, r.FinishedAt = vTime(v[25]), vTime(v[26])
	r.AcceptLengthSource = vString(v[27])
}

// runsQuery builds the SELECT of cols from run_detail for q and hands each row to fn.
func (db *DB) runsQuery(ctx context.Context, q RunsQuery, cols []string, fn func([]driver.Value)) error {
	var b strings.Builder
	b.WriteString("SELECT " + strings.Join(cols, ", ") + " FROM run_detail WHERE 1")
	var args []any
	switch {
	case q.SweepID != 0:
		b.WriteString(" AND sweep_id = ?")
		args = append(args, q.SweepID)
	case q.Sweep != "":
		s, err := db.FindSweep(ctx, q.Sweep)
		if err != nil {
			return fmt.Errorf("store: query runs: %w", err)
		}
		b.WriteString(" AND sweep_id = ?")
		args = append(args, s.ID)
	}
	if q.OK {
		b.WriteString(" AND status = 'ok'")
	}
	if strings.TrimSpace(q.Where) != "" {
		if err := singleStatement(q.Where); err != nil {
			return fmt.Errorf("store: query runs: where %q: %w", q.Where, err)
		}
		// The newline ends a trailing "--" comment of the user's text.
		b.WriteString(" AND (\n" + q.Where + "\n)")
	}
	b.WriteString(" ORDER BY ")
	if strings.TrimSpace(q.OrderBy) != "" {
		if err := singleStatement(q.OrderBy); err != nil {
			return fmt.Errorf("store: query runs: order by %q: %w", q.OrderBy, err)
		}
		b.WriteString(q.OrderBy + "\n, ")
	}
	b.WriteString("sweep_id, plan_order, concurrency, repeat, attempt")
	if q.Limit > 0 {
		b.WriteString(" LIMIT " + strconv.Itoa(q.Limit))
	}
	err := db.scan(ctx, b.String(), args, func(_ []string, v []driver.Value) error { fn(v); return nil })
	if err != nil {
		if errors.Is(err, ErrBadQuery) {
			return fmt.Errorf("store: query runs: %w", err)
		}
		return fmt.Errorf("store: query runs (where %q, order by %q): %w: %w", q.Where, q.OrderBy, ErrBadQuery, err)
	}
	return nil
}

// PointSummary is one row of point_summary.
type PointSummary struct {
	Sweep   string
	SweepID int64
	PointID string
	Host    string // of the latest attempt; "" if never started
	Method  string
	// NumSteps, TopK and NumDraftTokens are nil for a baseline.
	NumSteps, TopK, NumDraftTokens *int
	TP                             int
	State                          PointState
	Attempts                       int
	FailureClass                   FailureClass // "" when none
	FailureDetail                  string
	LoadS                          float64 // 0 when never ready
	ExecStart                      string
	EffectiveArgs, Provenance      json.RawMessage // nil when not recorded
	StartedAt, FinishedAt          time.Time
	// EffectiveNumSteps, EffectiveTopK and EffectiveNumDraftTokens are what the server reports it
	// runs with; nil when it did not say.
	EffectiveNumSteps, EffectiveTopK, EffectiveNumDraftTokens *int
	// IsBaseline: the point runs without speculative decoding.
	IsBaseline bool
	// Reason is the search's reason for releasing or pruning the point; "" when it gave none.
	Reason string
	// OutputCheck is the verdict of the output check on the current attempt's outputs
	// (OutputCheckReference, OutputCheckOK, OutputCheckMismatch); "" when not checked.
	OutputCheck string
	// OutputAgreement is the check's agreement in [0, 1]; nil when not measured.
	OutputAgreement *float64
}

// Baseline reports whether the point runs without speculative decoding.
func (p PointSummary) Baseline() bool { return p.IsBaseline }

// PointSummaries reads a sweep's point_summary rows, in plan order, in one query.
func (db *DB) PointSummaries(ctx context.Context, sweepID int64) ([]PointSummary, error) {
	var out []PointSummary
	err := db.scan(ctx, `SELECT sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp,
		state, attempts, failure_class, failure_detail, load_s, exec_start, effective_args, provenance,
		started_at, finished_at, effective_num_steps, effective_topk, effective_num_draft_tokens, baseline, reason,
		output_check, output_agreement
		FROM point_summary WHERE sweep_id = ?`, []any{sweepID}, func(_ []string, v []driver.Value) error {
		p := PointSummary{Sweep: vString(v[0]), SweepID: vInt64(v[1]), PointID: vString(v[2]), Host: vString(v[3]),
			Method: vString(v[4]), NumSteps: vIntPtr(v[5]), TopK: vIntPtr(v[6]), NumDraftTokens: vIntPtr(v[7]),
			TP: int(vInt64(v[8])), State: PointState(vString(v[9])), Attempts: int(vInt64(v[10])),
			FailureClass: FailureClass(vString(v[11])), FailureDetail: vString(v[12]), ExecStart: vString(v[14]),
			StartedAt: vTime(v[17]), FinishedAt: vTime(v[18]),
			EffectiveNumSteps: vIntPtr(v[19]), EffectiveTopK: vIntPtr(v[20]), EffectiveNumDraftTokens: vIntPtr(v[21]),
			IsBaseline: vInt64(v[22]) != 0, Reason: vString(v[23]), OutputCheck: vString(v[24])}
		f := make([]float64, 2) // one allocation for the row's figures
		p.OutputAgreement = vFloat(v[25], &f[1])
		if vFloat(v[13], &f[0]) != nil {
			p.LoadS = f[0]
		}
		if s := vString(v[15]); s != "" {
			p.EffectiveArgs = json.RawMessage(s)
		}
		if s := vString(v[16]); s != "" {
			p.Provenance = json.RawMessage(s)
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: point summaries of sweep %d: %w", sweepID, err)
	}
	return out, nil
}

// PointStateCount is the number of points in one state with one failure class.
type PointStateCount struct {
	State        PointState
	FailureClass FailureClass // "" when none
	N            int
}

// StateCounts are the store's sweeps by state and points by state and failure class.
type StateCounts struct {
	// Sweeps holds every sweep state, 0 when no sweep is in it.
	Sweeps map[SweepState]int
	// Points holds the (state, failure class) pairs that have points, ordered by state then class.
	Points []PointStateCount
}

// StateCounts counts the sweeps by state and the points by state and failure class, in one query.
func (db *DB) StateCounts(ctx context.Context) (StateCounts, error) {
	out := StateCounts{Sweeps: map[SweepState]int{}}
	for s := range sweepTransitions {
		out.Sweeps[s] = 0
	}
	err := db.scan(ctx, `SELECT 'sweep', state, '', count(*) FROM sweeps GROUP BY state
		UNION ALL
		SELECT 'point', state, coalesce(failure_class, ''), count(*) FROM points GROUP BY 2, 3
		ORDER BY 1, 2, 3`, nil, func(_ []string, v []driver.Value) error {
		n := int(vInt64(v[3]))
		if vString(v[0]) == "sweep" {
			out.Sweeps[SweepState(vString(v[1]))] = n
		} else {
			out.Points = append(out.Points, PointStateCount{State: PointState(vString(v[1])),
				FailureClass: FailureClass(vString(v[2])), N: n})
		}
		return nil
	})
	if err != nil {
		return StateCounts{}, fmt.Errorf("store: state counts: %w", err)
	}
	return out, nil
}

func vString(v driver.Value) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

func vInt64(v driver.Value) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

func vIntPtr(v driver.Value) *int {
	if v == nil {
		return nil
	}
	i := int(vInt64(v))
	return &i
}

// vFloat stores a non-NULL number in *dst and returns dst; nil for NULL.
func vFloat(v driver.Value, dst *float64) *float64 {
	switch x := v.(type) {
	case float64:
		*dst = x
	case int64:
		*dst = float64(x)
	default:
		return nil
	}
	return dst
}

func vTime(v driver.Value) time.Time {
	if i, ok := v.(int64); ok {
		return time.UnixMilli(i).UTC()
	}
	return time.Time{}
}
