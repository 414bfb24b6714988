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
	// Dataset and InputTokens are the run's cell (a level may be measured on several): the prompt
	// set's name, "" for specsweep's random prompts (NULL); the target prompt length, nil for a
	// set sent at its own lengths (or an older random run whose spec did not say: docs/schema.md).
	Dataset     string
	InputTokens *int
	// CIMetric, CILow, CIHigh and CIConfidence are the run's confidence interval of one figure
	// ("" and nil without one); PrecisionReached, with workload.precision, says whether the level
	// reached its target (nil: a fixed count).
	CIMetric         string
	CILow, CIHigh    *float64
	CIConfidence     *float64
	PrecisionReached *bool
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
	// CIMean and CIBatches are the interval's centre and batch count; PrecisionTarget is the
	// relative half-width workload.precision asked for (nil: a fixed count).
	CIMean          *float64
	CIBatches       *int
	PrecisionTarget *float64
}

// runDetailColumns are run_detail's columns beyond run_summary's, in the order RunDetails decodes them.
var runDetailColumns = []string{"run_id", "plan_order", "baseline", "attempt", "duration_s", "total_input_tokens",
	"total_output_tokens", "input_tok_s", "ttft_mean_ms", "itl_mean_ms", "tpot_mean_ms", "tpot_p99_ms",
	"e2e_mean_ms", "e2e_p99_ms", "error", "ci_mean", "ci_batches", "precision_target"}

// RunColumns are the columns a RunsQuery's Where and OrderBy may use: run_summary's, in the
// contract's order, then run_detail's others.
func RunColumns() (summary, detail []string) {
	return append([]string(nil), runSummaryColumns...), append([]string(nil), runDetailColumns...)
}

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
	dec, err := newDecoder(runSummaryFields, cols)
	if err != nil {
		return err
	}
	return db.runsQuery(ctx, q, cols, func(v []driver.Value) {
		dec.decode(&r, v)
		fn(&r)
	})
}

// RunDetails reads the run_detail rows q selects, in one query.
func (db *DB) RunDetails(ctx context.Context, q RunsQuery) ([]RunDetail, error) {
	cols := append(append([]string(nil), runSummaryColumns...), runDetailColumns...)
	dec, err := newDecoder(runDetailFields, cols)
	if err != nil {
		return nil, err
	}
	var out []RunDetail
	err = db.runsQuery(ctx, q, cols, func(v []driver.Value) {
		var r RunDetail
		dec.decode(&r, v)
		out = append(out, r)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// runSummaryFields decode run_summary's columns (and run_detail's baseline) by name into a
// RunSummary.
var runSummaryFields = map[string]column[RunSummary]{
	"sweep":                strCol(func(r *RunSummary) *string { return &r.Sweep }),
	"sweep_id":             int64Col(func(r *RunSummary) *int64 { return &r.SweepID }),
	"point_id":             strCol(func(r *RunSummary) *string { return &r.PointID }),
	"host":                 strCol(func(r *RunSummary) *string { return &r.Host }),
	"method":               strCol(func(r *RunSummary) *string { return &r.Method }),
	"num_steps":            intPtrCol(func(r *RunSummary) **int { return &r.NumSteps }),
	"topk":                 intPtrCol(func(r *RunSummary) **int { return &r.TopK }),
	"num_draft_tokens":     intPtrCol(func(r *RunSummary) **int { return &r.NumDraftTokens }),
	"tp":                   intCol(func(r *RunSummary) *int { return &r.TP }),
	"concurrency":          intCol(func(r *RunSummary) *int { return &r.Concurrency }),
	"repeat":               intCol(func(r *RunSummary) *int { return &r.Repeat }),
	"status":               strCol(func(r *RunSummary) *RunStatus { return &r.Status }),
	"requests":             intPtrCol(func(r *RunSummary) **int { return &r.Requests }),
	"completed":            intPtrCol(func(r *RunSummary) **int { return &r.Completed }),
	"failed":               intPtrCol(func(r *RunSummary) **int { return &r.Failed }),
	"output_tok_s":         floatCol(func(r *RunSummary) **float64 { return &r.OutputTokS }),
	"request_s":            floatCol(func(r *RunSummary) **float64 { return &r.RequestS }),
	"ttft_p50_ms":          floatCol(func(r *RunSummary) **float64 { return &r.TTFTP50Ms }),
	"ttft_p99_ms":          floatCol(func(r *RunSummary) **float64 { return &r.TTFTP99Ms }),
	"itl_p50_ms":           floatCol(func(r *RunSummary) **float64 { return &r.ITLP50Ms }),
	"itl_p99_ms":           floatCol(func(r *RunSummary) **float64 { return &r.ITLP99Ms }),
	"tpot_p50_ms":          floatCol(func(r *RunSummary) **float64 { return &r.TPOTP50Ms }),
	"e2e_p50_ms":           floatCol(func(r *RunSummary) **float64 { return &r.E2EP50Ms }),
	"accept_length":        floatCol(func(r *RunSummary) **float64 { return &r.AcceptLength }),
	"speedup":              floatCol(func(r *RunSummary) **float64 { return &r.Speedup }),
	"started_at":           timeCol(func(r *RunSummary) *time.Time { return &r.StartedAt }),
	"finished_at":          timeCol(func(r *RunSummary) *time.Time { return &r.FinishedAt }),
	"accept_length_source": strCol(func(r *RunSummary) *string { return &r.AcceptLengthSource }),
	"dataset":              strCol(func(r *RunSummary) *string { return &r.Dataset }),
	"input_tokens":         intPtrCol(func(r *RunSummary) **int { return &r.InputTokens }),
	"baseline":             boolCol(func(r *RunSummary) *bool { return &r.IsBaseline }),
	"ci_metric":            strCol(func(r *RunSummary) *string { return &r.CIMetric }),
	"ci_low":               floatCol(func(r *RunSummary) **float64 { return &r.CILow }),
	"ci_high":              floatCol(func(r *RunSummary) **float64 { return &r.CIHigh }),
	"ci_confidence":        floatCol(func(r *RunSummary) **float64 { return &r.CIConfidence }),
	"precision_reached":    boolPtrCol(func(r *RunSummary) **bool { return &r.PrecisionReached }),
}

// runDetailFields decode run_detail's columns by name into a RunDetail.
var runDetailFields = func() map[string]column[RunDetail] {
	m := lift(runSummaryFields, func(d *RunDetail) *RunSummary { return &d.RunSummary })
	for name, c := range map[string]column[RunDetail]{
		"run_id":     int64Col(func(r *RunDetail) *int64 { return &r.RunID }),
		"plan_order": intCol(func(r *RunDetail) *int { return &r.PlanOrder }),
		"baseline": {set: func(r *RunDetail, v driver.Value, _ *float64) {
			r.Baseline = vInt64(v) != 0
			r.IsBaseline = r.Baseline
		}},
		"attempt":             intCol(func(r *RunDetail) *int { return &r.Attempt }),
		"duration_s":          floatCol(func(r *RunDetail) **float64 { return &r.DurationS }),
		"total_input_tokens":  intPtrCol(func(r *RunDetail) **int { return &r.TotalInputTokens }),
		"total_output_tokens": intPtrCol(func(r *RunDetail) **int { return &r.TotalOutputTokens }),
		"input_tok_s":         floatCol(func(r *RunDetail) **float64 { return &r.InputTokS }),
		"ttft_mean_ms":        floatCol(func(r *RunDetail) **float64 { return &r.TTFTMeanMs }),
		"itl_mean_ms":         floatCol(func(r *RunDetail) **float64 { return &r.ITLMeanMs }),
		"tpot_mean_ms":        floatCol(func(r *RunDetail) **float64 { return &r.TPOTMeanMs }),
		"tpot_p99_ms":         floatCol(func(r *RunDetail) **float64 { return &r.TPOTP99Ms }),
		"e2e_mean_ms":         floatCol(func(r *RunDetail) **float64 { return &r.E2EMeanMs }),
		"e2e_p99_ms":          floatCol(func(r *RunDetail) **float64 { return &r.E2EP99Ms }),
		"error":               strCol(func(r *RunDetail) *string { return &r.Error }),
		"ci_mean":             floatCol(func(r *RunDetail) **float64 { return &r.CIMean }),
		"ci_batches":          intPtrCol(func(r *RunDetail) **int { return &r.CIBatches }),
		"precision_target":    floatCol(func(r *RunDetail) **float64 { return &r.PrecisionTarget }),
	} {
		m[name] = c
	}
	return m
}()

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
	// The cell after the level: a level's runs on each cell stay together, ordered alike.
	b.WriteString("sweep_id, plan_order, concurrency, repeat, dataset, input_tokens, attempt")
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
	cols := []string{"sweep", "sweep_id", "point_id", "host", "method", "num_steps", "topk", "num_draft_tokens", "tp",
		"state", "attempts", "failure_class", "failure_detail", "load_s", "exec_start", "effective_args", "provenance",
		"started_at", "finished_at", "effective_num_steps", "effective_topk", "effective_num_draft_tokens", "baseline",
		"reason", "output_check", "output_agreement"}
	dec, err := newDecoder(pointSummaryFields, cols)
	if err != nil {
		return nil, err
	}
	var out []PointSummary
	err = db.scan(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM point_summary WHERE sweep_id = ?", []any{sweepID},
		func(_ []string, v []driver.Value) error {
			var p PointSummary
			dec.decode(&p, v)
			out = append(out, p)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: point summaries of sweep %d: %w", sweepID, err)
	}
	return out, nil
}

// pointSummaryFields decode point_summary's columns by name into a PointSummary.
var pointSummaryFields = map[string]column[PointSummary]{
	"sweep":            strCol(func(p *PointSummary) *string { return &p.Sweep }),
	"sweep_id":         int64Col(func(p *PointSummary) *int64 { return &p.SweepID }),
	"point_id":         strCol(func(p *PointSummary) *string { return &p.PointID }),
	"host":             strCol(func(p *PointSummary) *string { return &p.Host }),
	"method":           strCol(func(p *PointSummary) *string { return &p.Method }),
	"num_steps":        intPtrCol(func(p *PointSummary) **int { return &p.NumSteps }),
	"topk":             intPtrCol(func(p *PointSummary) **int { return &p.TopK }),
	"num_draft_tokens": intPtrCol(func(p *PointSummary) **int { return &p.NumDraftTokens }),
	"tp":               intCol(func(p *PointSummary) *int { return &p.TP }),
	"state":            strCol(func(p *PointSummary) *PointState { return &p.State }),
	"attempts":         intCol(func(p *PointSummary) *int { return &p.Attempts }),
	"failure_class":    strCol(func(p *PointSummary) *FailureClass { return &p.FailureClass }),
	"failure_detail":   strCol(func(p *PointSummary) *string { return &p.FailureDetail }),
	// 0 when never ready (NULL).
	"load_s":                     {set: func(p *PointSummary, v driver.Value, _ *float64) { p.LoadS, _ = vNumber(v) }},
	"exec_start":                 strCol(func(p *PointSummary) *string { return &p.ExecStart }),
	"effective_args":             jsonCol(func(p *PointSummary) *json.RawMessage { return &p.EffectiveArgs }),
	"provenance":                 jsonCol(func(p *PointSummary) *json.RawMessage { return &p.Provenance }),
	"started_at":                 timeCol(func(p *PointSummary) *time.Time { return &p.StartedAt }),
	"finished_at":                timeCol(func(p *PointSummary) *time.Time { return &p.FinishedAt }),
	"effective_num_steps":        intPtrCol(func(p *PointSummary) **int { return &p.EffectiveNumSteps }),
	"effective_topk":             intPtrCol(func(p *PointSummary) **int { return &p.EffectiveTopK }),
	"effective_num_draft_tokens": intPtrCol(func(p *PointSummary) **int { return &p.EffectiveNumDraftTokens }),
	"baseline":                   boolCol(func(p *PointSummary) *bool { return &p.IsBaseline }),
	"reason":                     strCol(func(p *PointSummary) *string { return &p.Reason }),
	"output_check":               strCol(func(p *PointSummary) *string { return &p.OutputCheck }),
	"output_agreement":           floatCol(func(p *PointSummary) **float64 { return &p.OutputAgreement }),
}

// column is how one named column of a view fills a field of a row of type T, so a reader decodes
// by the names it selects, never by position. A nullable figure (float) takes a slot of the row's
// figures, allocated once per row.
type column[T any] struct {
	float bool
	set   func(r *T, v driver.Value, slot *float64)
}

func strCol[T any, S ~string](p func(*T) *S) column[T] {
	return column[T]{set: func(r *T, v driver.Value, _ *float64) { *p(r) = S(vString(v)) }}
}

func int64Col[T any](p func(*T) *int64) column[T] {
	return column[T]{set: func(r *T, v driver.Value, _ *float64) { *p(r) = vInt64(v) }}
}

func intCol[T any](p func(*T) *int) column[T] {
	return column[T]{set: func(r *T, v driver.Value, _ *float64) { *p(r) = int(vInt64(v)) }}
}

func intPtrCol[T any](p func(*T) **int) column[T] {
	return column[T]{set: func(r *T, v driver.Value, _ *float64) { *p(r) = vIntPtr(v) }}
}

func boolCol[T any](p func(*T) *bool) column[T] {
	return column[T]{set: func(r *T, v driver.Value, _ *float64) { *p(r) = vInt64(v) != 0 }}
}

// boolPtrCol: nil for NULL.
func boolPtrCol[T any](p func(*T) **bool) column[T] {
	return column[T]{set: func(r *T, v driver.Value, _ *float64) {
		if v == nil {
			*p(r) = nil
			return
		}
		b := vInt64(v) != 0
		*p(r) = &b
	}}
}

func timeCol[T any](p func(*T) *time.Time) column[T] {
	return column[T]{set: func(r *T, v driver.Value, _ *float64) { *p(r) = vTime(v) }}
}

// floatCol: nil for NULL.
func floatCol[T any](p func(*T) **float64) column[T] {
	return column[T]{float: true, set: func(r *T, v driver.Value, slot *float64) { *p(r) = vFloat(v, slot) }}
}

// jsonCol: nil for NULL or empty text.
func jsonCol[T any](p func(*T) *json.RawMessage) column[T] {
	return column[T]{set: func(r *T, v driver.Value, _ *float64) {
		*p(r) = nil
		if s := vString(v); s != "" {
			*p(r) = json.RawMessage(s)
		}
	}}
}

// lift makes the columns of U the columns of a T that holds a U.
func lift[T, U any](m map[string]column[U], inner func(*T) *U) map[string]column[T] {
	out := make(map[string]column[T], len(m))
	for name, c := range m {
		out[name] = column[T]{float: c.float, set: func(r *T, v driver.Value, slot *float64) { c.set(inner(r), v, slot) }}
	}
	return out
}

// decoder fills a T from the rows of a query of named columns.
type decoder[T any] struct {
	cols   []column[T]
	floats int
}

// newDecoder is the decoder of a query selecting names, in that order.
func newDecoder[T any](fields map[string]column[T], names []string) (decoder[T], error) {
	d := decoder[T]{cols: make([]column[T], len(names))}
	for i, n := range names {
		c, ok := fields[n]
		if !ok {
			return decoder[T]{}, fmt.Errorf("store: no %T field reads column %q", *new(T), n)
		}
		d.cols[i] = c
		if c.float {
			d.floats++
		}
	}
	return d, nil
}

// decode fills r from one row v (in the order of newDecoder's names).
func (d decoder[T]) decode(r *T, v []driver.Value) {
	var f []float64
	if d.floats > 0 {
		f = make([]float64, d.floats) // one allocation for the row's figures
	}
	k := 0
	for i, c := range d.cols {
		var slot *float64
		if c.float {
			slot = &f[k]
			k++
		}
		c.set(r, v[i], slot)
	}
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

// vNumber is a non-NULL number; false for NULL.
func vNumber(v driver.Value) (float64, bool) {
	var x float64
	return x, vFloat(v, &x) != nil
}

func vTime(v driver.Value) time.Time {
	if i, ok := v.(int64); ok {
		return time.UnixMilli(i).UTC()
	}
	return time.Time{}
}

// PointTiming is what one stored point measured that predicts another point's duration (`plan`'s
// estimate): its server's argv and environment, its tp, its start-to-ready time of the current
// attempt (0 when it never got ready) and its ok runs' output tok/s by concurrency level.
type PointTiming struct {
	SweepID int64
	PointID string
	Argv    []string
	Env     map[string]string
	TP      int
	LoadS   float64
	// TokS holds one output tok/s per ok run, by concurrency: every repeat and every cell of the
	// level (a level measured on 3 cells gives 3 a repeat).
	TokS map[int][]float64
	// Runs are the same runs with their cells, in the order of TokS's values at each level.
	Runs []TimedRun
}

// TimedRun is one ok run of a PointTiming.
type TimedRun struct {
	Concurrency int
	// Dataset and InputTokens are the run's cell, as in Run: "" and 0 for NULL.
	Dataset     string
	InputTokens int
	TokS        float64
}

// PointTimings reads every stored point that got ready or has an ok run, with what it measured,
// oldest sweep first, in two queries.
func (db *DB) PointTimings(ctx context.Context) ([]PointTiming, error) {
	wrap := func(err error) error { return fmt.Errorf("store: point timings: %w", err) }
	rows, err := db.rw.QueryContext(ctx, `SELECT sweep_id, point_id, argv, env, tp, coalesce(load_s, 0) FROM points p
		WHERE load_s > 0 OR EXISTS (SELECT 1 FROM runs r WHERE r.point_ref = p.id AND r.status = 'ok')
		ORDER BY sweep_id, plan_order`)
	if err != nil {
		return nil, wrap(err)
	}
	var out []PointTiming
	at := map[[2]any]int{}
	for rows.Next() {
		var t PointTiming
		var argv, env string
		if err := rows.Scan(&t.SweepID, &t.PointID, &argv, &env, &t.TP, &t.LoadS); err != nil {
			rows.Close()
			return nil, wrap(err)
		}
		if err := json.Unmarshal([]byte(argv), &t.Argv); err != nil {
			rows.Close()
			return nil, wrap(fmt.Errorf("point %s: argv: %w", t.PointID, err))
		}
		if err := json.Unmarshal([]byte(env), &t.Env); err != nil {
			rows.Close()
			return nil, wrap(fmt.Errorf("point %s: env: %w", t.PointID, err))
		}
		t.TokS = map[int][]float64{}
		at[[2]any{t.SweepID, t.PointID}] = len(out)
		out = append(out, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, wrap(err)
	}
	err = db.scan(ctx, `SELECT p.sweep_id, p.point_id, r.concurrency, r.output_tok_s, r.dataset, r.input_tokens FROM runs r
		JOIN points p ON p.id = r.point_ref WHERE r.status = 'ok' AND r.output_tok_s > 0
		ORDER BY r.id`, nil, func(_ []string, v []driver.Value) error {
		if i, ok := at[[2]any{vInt64(v[0]), vString(v[1])}]; ok {
			var tok float64
			if vFloat(v[3], &tok) != nil {
				c := int(vInt64(v[2]))
				out[i].TokS[c] = append(out[i].TokS[c], tok)
				out[i].Runs = append(out[i].Runs, TimedRun{Concurrency: c, Dataset: vString(v[4]),
					InputTokens: int(vInt64(v[5])), TokS: tok})
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err)
	}
	return out, nil
}
