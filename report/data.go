// Package report turns a recorded sweep into answers: the best configuration per concurrency level
// (with its speedup, the margin to the runner-up and whether that margin is inside run-to-run noise),
// the Pareto front of per-user against per-GPU throughput, a comparison of two sweeps, charts
// (gonum/plot, SVG and PDF) and self-contained HTML, Markdown and LaTeX documents.
//
// It reads only the store's public views (run_summary, point_summary; run_detail for the export's
// extra bench_serving figures) through store.DB.Query, which is read-only.
package report

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/specsweep/specsweep/store"
)

// Sweep is one recorded sweep, loaded and aggregated.
type Sweep struct {
	ID       int64
	Name     string
	SpecHash string
	State    string
	Created  time.Time
	Started  time.Time
	Finished time.Time
	Hosts    []store.Host
	// Points are in plan order.
	Points []*Point
	// Levels are the concurrency levels with at least one ok run, ascending.
	Levels []int
	// TPs are the tensor-parallel sizes of the points, ascending.
	TPs []int
	// Repeats is the largest repeat number recorded.
	Repeats int
}

// Config is a point's server configuration. NumSteps, TopK and NumDraftTokens are 0 for a baseline.
type Config struct {
	Method                         string
	NumSteps, TopK, NumDraftTokens int
	TP                             int
	Baseline                       bool
}

// Label is a short human name: "eagle3 s=3 k=1 d=4" or "baseline" (tp is shown separately).
func (c Config) Label() string {
	if c.Baseline {
		return c.Method
	}
	return fmt.Sprintf("%s s=%d k=%d d=%d", c.Method, c.NumSteps, c.TopK, c.NumDraftTokens)
}

// key identifies a configuration across sweeps.
func (c Config) key() string {
	return fmt.Sprintf("%s|%d|%d|%d|%d", c.Method, c.NumSteps, c.TopK, c.NumDraftTokens, c.TP)
}

// Point is one point of the plan with its state and its aggregated runs.
type Point struct {
	ID string
	Config
	Host          string
	State         string
	Attempts      int
	FailureClass  string
	FailureDetail string
	LoadS         float64
	Provenance    map[string]any
	EffectiveArgs map[string]any
	// Effective holds the speculative parameters the server reports it ran (nil: not reported),
	// in the order steps, topk, draft tokens; they may differ from the requested ones.
	Effective [3]*int
	Started   time.Time
	Finished  time.Time
	// Cells holds the ok runs of each concurrency level, aggregated over repeats.
	Cells map[int]*Cell
}

// Stat summarises one figure over a cell's repeats.
type Stat struct {
	N                int // number of values (0: none recorded)
	Median, Min, Max float64
}

// OK reports whether the figure was recorded at least once.
func (s Stat) OK() bool { return s.N > 0 }

// Spread is (max-min)/median, the relative run-to-run spread; 0 with fewer than two values.
func (s Stat) Spread() float64 {
	if s.N < 2 || s.Median == 0 {
		return 0
	}
	return (s.Max - s.Min) / s.Median
}

func newStat(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return Stat{N: len(v), Median: median(v), Min: v[0], Max: v[len(v)-1]}
}

// median of sorted values: the middle one, or the mean of the two middle ones.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Cell is one point at one concurrency level: its ok runs over repeats.
type Cell struct {
	Point       *Point
	Concurrency int
	TokS        Stat // output tok/s
	Speedup     Stat // run_summary.speedup (over the baseline at the same tp, level and repeat)
	Accept      Stat // accept length
	TTFTP99     Stat // ms
	TTFTP50     Stat // ms
	TPOTP50     Stat // ms
	ITLP50      Stat // ms
}

// PerGPU is the median output tok/s divided by tp.
func (c *Cell) PerGPU() float64 { return c.TokS.Median / float64(c.Point.TP) }

// PerUser is the tokens per second one user sees while decoding: 1000 / median TPOT (ms); 0 when
// unknown.
func (c *Cell) PerUser() float64 {
	if !c.TPOTP50.OK() || c.TPOTP50.Median <= 0 {
		return 0
	}
	return 1000 / c.TPOTP50.Median
}

// Load reads a sweep (an id, or a name: the latest sweep of that name) from the store.
func Load(ctx context.Context, db *store.DB, ref string) (*Sweep, error) {
	sw, err := db.FindSweep(ctx, ref)
	if err != nil {
		return nil, err
	}
	hosts, err := db.Hosts(ctx, sw.ID)
	if err != nil {
		return nil, err
	}
	s := &Sweep{ID: sw.ID, Name: sw.Name, SpecHash: sw.SpecHash, State: string(sw.State), Created: sw.CreatedAt,
		Started: sw.StartedAt, Finished: sw.FinishedAt, Hosts: hosts}

	// point_summary returns the points in plan order.
	pr, err := db.Query(ctx, `SELECT point_id, coalesce(host, ''), method, num_steps, topk, num_draft_tokens, tp,
		state, attempts, coalesce(failure_class, ''), coalesce(failure_detail, ''), coalesce(load_s, 0),
		effective_args, provenance, started_at, finished_at,
		effective_num_steps, effective_topk, effective_num_draft_tokens
		FROM point_summary WHERE sweep_id = ?`, sw.ID)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Point{}
	tps := map[int]bool{}
	for _, v := range pr.Values {
		p := &Point{ID: str(v[0]), Host: str(v[1]), Config: Config{Method: str(v[2]), NumSteps: int(num(v[3])),
			TopK: int(num(v[4])), NumDraftTokens: int(num(v[5])), TP: int(num(v[6])), Baseline: v[3] == nil},
			State: str(v[7]), Attempts: int(num(v[8])), FailureClass: str(v[9]), FailureDetail: str(v[10]),
			LoadS: num(v[11]), EffectiveArgs: jsonObject(v[12]), Provenance: jsonObject(v[13]),
			Started: msTime(v[14]), Finished: msTime(v[15]), Cells: map[int]*Cell{}}
		for i := range p.Effective {
			if x := v[16+i]; x != nil {
				n := int(num(x))
				p.Effective[i] = &n
			}
		}
		s.Points = append(s.Points, p)
		byID[p.ID] = p
		tps[p.TP] = true
	}
	for tp := range tps {
		s.TPs = append(s.TPs, tp)
	}
	sort.Ints(s.TPs)

	rr, err := db.Query(ctx, `SELECT point_id, concurrency, repeat, status, output_tok_s, speedup, accept_length,
		ttft_p99_ms, ttft_p50_ms, tpot_p50_ms, itl_p50_ms FROM run_summary WHERE sweep_id = ?`, sw.ID)
	if err != nil {
		return nil, err
	}
	if err := s.addRuns(rr, func(_ []any, id string) *Point { return byID[id] }); err != nil {
		return nil, err
	}
	return s, nil
}

// runColumns are the run_summary columns addRuns needs.
var runColumns = []string{"point_id", "concurrency", "repeat", "status", "output_tok_s", "speedup", "accept_length",
	"ttft_p99_ms", "ttft_p50_ms", "tpot_p50_ms", "itl_p50_ms"}

// addRuns aggregates the ok runs among rows (run_summary columns, by name) into cells of the points
// that point returns (nil: skip the row), and sets Levels and Repeats.
func (s *Sweep) addRuns(rows *store.Rows, point func(row []any, id string) *Point) error {
	idx := map[string]int{}
	for i, c := range rows.Columns {
		idx[c] = i
	}
	for _, c := range runColumns {
		if _, ok := idx[c]; !ok {
			return fmt.Errorf("report: runs lack column %q", c)
		}
	}
	type acc struct{ tok, sp, al, t99, t50, tpot, itl []float64 }
	accs := map[*Cell]*acc{}
	levels := map[int]bool{}
	for _, c := range s.Levels {
		levels[c] = true
	}
	add := func(dst *[]float64, x any) {
		switch f := x.(type) {
		case float64:
			if !math.IsNaN(f) {
				*dst = append(*dst, f)
			}
		case int64:
			*dst = append(*dst, float64(f))
		}
	}
	for _, v := range rows.Values {
		if str(v[idx["status"]]) != "ok" || v[idx["output_tok_s"]] == nil {
			continue
		}
		p := point(v, str(v[idx["point_id"]]))
		if p == nil {
			continue
		}
		c := int(num(v[idx["concurrency"]]))
		if r := int(num(v[idx["repeat"]])); r > s.Repeats {
			s.Repeats = r
		}
		levels[c] = true
		cell := p.Cells[c]
		if cell == nil {
			cell = &Cell{Point: p, Concurrency: c}
			p.Cells[c] = cell
		}
		a := accs[cell]
		if a == nil {
			a = &acc{}
			accs[cell] = a
		}
		add(&a.tok, v[idx["output_tok_s"]])
		add(&a.sp, v[idx["speedup"]])
		add(&a.al, v[idx["accept_length"]])
		add(&a.t99, v[idx["ttft_p99_ms"]])
		add(&a.t50, v[idx["ttft_p50_ms"]])
		add(&a.tpot, v[idx["tpot_p50_ms"]])
		add(&a.itl, v[idx["itl_p50_ms"]])
	}
	for cell, a := range accs {
		cell.TokS, cell.Speedup, cell.Accept = newStat(a.tok), newStat(a.sp), newStat(a.al)
		cell.TTFTP99, cell.TTFTP50, cell.TPOTP50, cell.ITLP50 = newStat(a.t99), newStat(a.t50), newStat(a.tpot), newStat(a.itl)
	}
	s.Levels = s.Levels[:0]
	for c := range levels {
		s.Levels = append(s.Levels, c)
	}
	sort.Ints(s.Levels)
	return nil
}

// FromRuns builds one Sweep per sweep_id found in rows of run_summary (as store.QueryRuns returns
// them), with the points that have runs among the rows, in order of first appearance. Only what
// the rows tell is known: no hosts, states or provenance.
func FromRuns(rows *store.Rows) ([]*Sweep, error) {
	idx := map[string]int{}
	for i, c := range rows.Columns {
		idx[c] = i
	}
	for _, c := range []string{"sweep", "sweep_id", "method", "num_steps", "topk", "num_draft_tokens", "tp"} {
		if _, ok := idx[c]; !ok {
			return nil, fmt.Errorf("report: runs lack column %q", c)
		}
	}
	var out []*Sweep
	sweeps := map[int64]*Sweep{}
	points := map[*Sweep]map[string]*Point{}
	tps := map[*Sweep]map[int]bool{}
	for _, v := range rows.Values {
		id := int64(num(v[idx["sweep_id"]]))
		if sweeps[id] == nil {
			s := &Sweep{ID: id, Name: str(v[idx["sweep"]])}
			sweeps[id] = s
			points[s] = map[string]*Point{}
			tps[s] = map[int]bool{}
			out = append(out, s)
		}
	}
	for _, s := range out {
		err := s.addRuns(rows, func(v []any, pid string) *Point {
			if int64(num(v[idx["sweep_id"]])) != s.ID {
				return nil
			}
			p := points[s][pid]
			if p == nil {
				p = &Point{ID: pid, State: "done", Cells: map[int]*Cell{}, Config: Config{Method: str(v[idx["method"]]),
					NumSteps: int(num(v[idx["num_steps"]])), TopK: int(num(v[idx["topk"]])),
					NumDraftTokens: int(num(v[idx["num_draft_tokens"]])), TP: int(num(v[idx["tp"]])),
					Baseline: v[idx["num_steps"]] == nil}}
				points[s][pid] = p
				s.Points = append(s.Points, p)
				if !tps[s][p.TP] {
					tps[s][p.TP] = true
					s.TPs = append(s.TPs, p.TP)
				}
			}
			return p
		})
		if err != nil {
			return nil, err
		}
		sort.Ints(s.TPs)
	}
	return out, nil
}

// Cells returns every cell of the sweep, in plan order then concurrency.
func (s *Sweep) Cells() []*Cell {
	var out []*Cell
	for _, p := range s.Points {
		for _, c := range s.Levels {
			if cell := p.Cells[c]; cell != nil {
				out = append(out, cell)
			}
		}
	}
	return out
}

// Failures are the points that failed or whose last attempt was cut short, in plan order.
func (s *Sweep) Failures() []*Point {
	var out []*Point
	for _, p := range s.Points {
		if p.State == "failed" || p.FailureClass != "" {
			out = append(out, p)
		}
	}
	return out
}

// Evidence splits a failure detail into its cause (first line) and evidence lines.
func (p *Point) Evidence() (cause string, lines []string) {
	all := strings.Split(strings.TrimRight(p.FailureDetail, "\n"), "\n")
	if len(all) == 0 {
		return "", nil
	}
	return all[0], all[1:]
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	default:
		return fmt.Sprint(x)
	}
}

func num(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	default:
		return 0
	}
}

func msTime(v any) time.Time {
	if i, ok := v.(int64); ok {
		return time.UnixMilli(i).UTC()
	}
	return time.Time{}
}

func jsonObject(v any) map[string]any {
	s := str(v)
	if s == "" {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return m
}
