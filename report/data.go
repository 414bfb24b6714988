package report

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
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
	// Levels are the concurrency levels at which some point has a level that counts (sweep.Repeats),
	// ascending.
	Levels []int
	// TPs are the tensor-parallel sizes of the points, ascending.
	TPs []int
	// Repeats is the largest repeat number recorded.
	Repeats int
	// CheckPrompts is how many prompts the output check asked each point (from the answers
	// stored; 0 when none were).
	CheckPrompts int
	// SpecText is the spec stored with the sweep, as written ("" where FromRuns reads none); the
	// report's header parses it (Spec) for the workload.
	SpecText string
	// PhasePlan is the spec's workload.phases (none: levels).
	PhasePlan []sweep.Phase
	// Precision is the spec's workload.precision (nil: levels of a fixed count); MaxRequests its
	// levels' cap (workload.requests).
	Precision   *sweep.Precision
	MaxRequests int
	// Sources are the prompt sources every level was measured on (sweep.Workload.Sources), whose
	// weighted mix is each cell's figure; those of the runs read, equally weighted, where the spec
	// does not tell.
	Sources []sweep.Source
}

// Mixed reports whether the sweep's cells mix several prompt sources, or one named prompt set: the
// report then shows each source's answer beside the weighted one.
func (s *Sweep) Mixed() bool {
	return len(s.Sources) > 1 || (len(s.Sources) == 1 && s.Sources[0].Dataset != "")
}

// Config is a point's server configuration. NumSteps, TopK and NumDraftTokens are 0 for a baseline.
type Config struct {
	Method                         string
	NumSteps, TopK, NumDraftTokens int
	TP                             int
	Baseline                       bool
	// Algorithm is the point's --speculative-algorithm ("" when unknown: labelled as EAGLE's).
	Algorithm string
}

// Label is a short human name, the plan's spelling without tp (sweep.Point.Setting): "eagle3 s=3
// k=1 n=4", "dflash block=16" or "baseline" (tp is shown separately).
func (c Config) Label() string {
	given := func(v int) *int { // 0: not given (a baseline, or left to the server)
		if v == 0 {
			return nil
		}
		return &v
	}
	return sweep.Point{Method: c.Method, Baseline: c.Baseline, Algorithm: c.Algorithm,
		NumSteps: given(c.NumSteps), TopK: given(c.TopK), NumDraftTokens: given(c.NumDraftTokens)}.Setting()
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
	Provenance    *hostctl.Provenance // nil when not recorded
	EffectiveArgs map[string]any
	// Argv and Env are the point's server command line and environment as planned (the server's
	// and its method's; nil where FromRuns does not read them).
	Argv []string
	Env  map[string]string
	// Requested holds the speculative parameters the plan asked for, as stored (nil: not given,
	// or a baseline), in the order steps, topk, draft tokens.
	Requested [3]*int
	// Effective holds the speculative parameters the server reports it ran (nil: not reported),
	// in the order steps, topk, draft tokens; they may differ from the requested ones.
	Effective [3]*int
	Started   time.Time
	Finished  time.Time
	// Searched: a search decided whether the point runs (spec `search:`); Reason is the search's
	// reason for releasing or pruning it ("" when it gave none).
	Searched bool
	Reason   string
	// OutputCheck is the lossless output check of the point's current attempt (docs/spec.md,
	// "output_check"): store.OutputCheckReference, OutputCheckOK, OutputCheckMismatch, or "" when
	// not checked (no baseline at its tp, or not compared yet). OutputAgreement is its agreement in
	// [0, 1] (a reference's with itself; nil when not measured) and OutputEvidence what the check
	// recorded (nil when none; FromRuns reads none).
	OutputCheck     string
	OutputAgreement *float64
	OutputEvidence  *OutputEvidence
	// Packed: the point ran on a packed host (spec `pack: true`) and recorded its neighbours at its
	// end (a "ran_beside" event); Beside is how many other points ran beside it at some moment of
	// its run, from the latest such event. Both zero for a point without one (FromRuns reads none).
	Packed bool
	Beside int
	// Cells holds each concurrency level that counts (sweep.Repeats: some repeat measured, none
	// failed), each repeat the weighted mix of the prompt sources (sweep.Mix), aggregated over its
	// repeats.
	Cells map[int]*Cell
	// Phases are the point's recorded phases (phase events), in order; phaseRuns its runs by
	// concurrency and occurrence (both only in a sweep of phases).
	Phases    []store.PhaseSeries
	phaseRuns map[phaseKey]phaseRun
	// BySource holds each prompt source's own cells, by source then level (the per-set figures);
	// nil when the sweep has one source.
	BySource map[sweep.SourceKey]map[int]*Cell
}

// Stat summarises one figure over a cell's repeats: the one aggregation's (sweep.Stat), with its
// median, range and spread.
type Stat = sweep.Stat

func newStat(v []float64) Stat { return sweep.NewStat(v) }

// Cell is one point at one concurrency level that counts: its runs aggregated over repeats.
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
	// TokSByRepeat is the output tok/s of each repeat, in repeat order (a level that counts has
	// every repeat): the recommendation mixes each repeat over the levels (Recommend).
	TokSByRepeat []float64
	// PrecisionMissed: some repeat (or prompt source) ran to the level's cap before its interval
	// reached workload.precision's target.
	PrecisionMissed bool
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
	return load(ctx, db, sw)
}

// LoadID reads the sweep of that id from the store.
func LoadID(ctx context.Context, db *store.DB, id int64) (*Sweep, error) {
	sw, err := db.Sweep(ctx, id)
	if err != nil {
		return nil, err
	}
	return load(ctx, db, sw)
}

func load(ctx context.Context, db *store.DB, sw store.Sweep) (*Sweep, error) {
	hosts, err := db.Hosts(ctx, sw.ID)
	if err != nil {
		return nil, err
	}
	s := &Sweep{ID: sw.ID, Name: sw.Name, SpecHash: sw.SpecHash, State: string(sw.State), Created: sw.CreatedAt,
		Started: sw.StartedAt, Finished: sw.FinishedAt, Hosts: hosts, SpecText: sw.SpecText}

	// point_summary returns the points in plan order.
	pts, err := db.PointSummaries(ctx, sw.ID)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Point{}
	tps := map[int]bool{}
	for _, ps := range pts {
		p := &Point{ID: ps.PointID, Host: ps.Host, Config: configOf(ps.Method, ps.NumSteps, ps.TopK, ps.NumDraftTokens, ps.TP, ps.Baseline()),
			State: string(ps.State), Attempts: ps.Attempts, FailureClass: string(ps.FailureClass),
			FailureDetail: ps.FailureDetail, LoadS: ps.LoadS, EffectiveArgs: jsonObject(ps.EffectiveArgs),
			Provenance: provenanceOf(ps.Provenance), Started: ps.StartedAt, Finished: ps.FinishedAt, Cells: map[int]*Cell{},
			Requested: [3]*int{ps.NumSteps, ps.TopK, ps.NumDraftTokens},
			Effective: [3]*int{ps.EffectiveNumSteps, ps.EffectiveTopK, ps.EffectiveNumDraftTokens},
			Reason:    ps.Reason, OutputCheck: ps.OutputCheck, OutputAgreement: ps.OutputAgreement}
		s.Points = append(s.Points, p)
		byID[p.ID] = p
		tps[p.TP] = true
	}
	for tp := range tps {
		s.TPs = append(s.TPs, tp)
	}
	sort.Ints(s.TPs)
	if err := setAlgorithms(ctx, db, s.ID, byID); err != nil {
		return nil, err
	}
	if s.Checked() {
		// The evidence of the checks (the first divergence, both texts) is not in point_summary.
		outs, err := db.OutputChecks(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		for _, o := range outs {
			if p := byID[o.PointID]; p != nil && p.OutputCheck != "" {
				p.OutputEvidence = ParseOutputEvidence(o.Evidence)
			}
			var ans struct {
				Prompts []json.RawMessage `json:"prompts"`
			}
			if len(o.Outputs) > 0 && json.Unmarshal(o.Outputs, &ans) == nil {
				s.CheckPrompts = max(s.CheckPrompts, len(ans.Prompts))
			}
		}
	}

	if err := setPacking(ctx, db, s.ID, byID); err != nil {
		return nil, err
	}

	if spec := s.Spec(); spec != nil {
		s.Sources = spec.Workload.Sources()
		s.PhasePlan = spec.Workload.Phases
		s.Precision, s.MaxRequests = spec.Workload.Precision, spec.Workload.Requests
	}
	if len(s.PhasePlan) > 0 {
		if err := setPhases(ctx, db, s.ID, byID); err != nil {
			return nil, err
		}
	}
	agg := newAggregator()
	// Every run, failed ones included: a failed repeat makes its level not count (sweep.Repeats).
	err = db.EachRunSummary(ctx, store.RunsQuery{SweepID: sw.ID}, func(r *store.RunSummary) {
		if p := byID[r.PointID]; p != nil {
			agg.add(s, p, r)
			if len(s.PhasePlan) > 0 {
				p.addPhaseRun(r)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	agg.finish()
	return s, nil
}

// configOf is the configuration of a row of the views. A speculative point may leave parameters to
// the server (nil), so baseline comes from the store, not from them.
func configOf(method string, steps, topk, draft *int, tp int, baseline bool) Config {
	return Config{Method: method, NumSteps: deref(steps), TopK: deref(topk), NumDraftTokens: deref(draft), TP: tp,
		Baseline: baseline}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// aggregator collects the runs of each point by level, repeat and prompt source (sweep.Mixer), and
// finish keeps the levels that count, each repeat mixed over the sources, with every figure of a
// cell the median of its repeats and their range, and each sweep's Levels and Repeats.
type aggregator struct {
	mix     map[*Point]*sweep.Mixer
	sweeps  map[*Sweep][]*Point
	sources map[*Sweep]map[sweep.SourceKey]bool // the sources of the runs read
}

func newAggregator() *aggregator {
	return &aggregator{mix: map[*Point]*sweep.Mixer{}, sweeps: map[*Sweep][]*Point{}, sources: map[*Sweep]map[sweep.SourceKey]bool{}}
}

// add counts run r in point p of sweep s (a superseded run never counts).
func (g *aggregator) add(s *Sweep, p *Point, r *store.RunSummary) {
	if r.Status == store.RunSuperseded {
		return
	}
	if g.mix[p] == nil {
		g.mix[p] = sweep.NewMixer(nil) // the sources are known at finish
		g.sweeps[s] = append(g.sweeps[s], p)
	}
	key := sourceKey(r)
	g.mix[p].Add(r.Concurrency, r.Repeat, key, repeatRun(r))
	if g.sources[s] == nil {
		g.sources[s] = map[sweep.SourceKey]bool{}
	}
	g.sources[s][key] = true
	if r.Status == store.RunOK && r.OutputTokS != nil && r.Repeat > s.Repeats {
		s.Repeats = r.Repeat
	}
}

// sourceKey is the prompt source a run was measured on.
func sourceKey(r *store.RunSummary) sweep.SourceKey {
	k := sweep.SourceKey{Dataset: r.Dataset}
	if r.InputTokens != nil {
		k.InputTokens = *r.InputTokens
	}
	return k
}

// repeatRun is what the aggregation reads of a run.
func repeatRun(r *store.RunSummary) sweep.RepeatRun {
	rr := sweep.RepeatRun{OK: r.Status == store.RunOK}
	f := &rr.Figures
	f[sweep.OutputTokS], f[sweep.Speedup], f[sweep.AcceptLength] = r.OutputTokS, r.Speedup, r.AcceptLength
	f[sweep.TTFTP99Ms], f[sweep.TTFTP50Ms], f[sweep.TPOTP50Ms], f[sweep.ITLP50Ms] = r.TTFTP99Ms, r.TTFTP50Ms, r.TPOTP50Ms, r.ITLP50Ms
	if r.CIMetric == sweep.PrecisionOutputTokS && r.CILow != nil && r.CIHigh != nil {
		rr.TokS = &sweep.Bounds{Low: *r.CILow, High: *r.CIHigh}
	}
	rr.Missed = r.PrecisionReached != nil && !*r.PrecisionReached
	return rr
}

func (g *aggregator) finish() {
	for s, pts := range g.sweeps {
		s.Sources = sourcesOf(s.Sources, g.sources[s])
		levels := map[int]bool{}
		for _, p := range pts {
			m := g.mix[p].Over(s.Sources)
			for _, c := range m.Levels() {
				reps := m.Repeats(c)
				if !reps.Counts() {
					continue
				}
				levels[c] = true
				p.Cells[c] = newCell(p, c, reps)
				if !s.Mixed() {
					continue
				}
				for _, src := range s.Sources {
					if sr := m.Source(c, src.Key()); sr.Counts() {
						if p.BySource == nil {
							p.BySource = map[sweep.SourceKey]map[int]*Cell{}
						}
						if p.BySource[src.Key()] == nil {
							p.BySource[src.Key()] = map[int]*Cell{}
						}
						p.BySource[src.Key()][c] = newCell(p, c, sr)
					}
				}
			}
		}
		s.Levels = s.Levels[:0]
		for c := range levels {
			s.Levels = append(s.Levels, c)
		}
		sort.Ints(s.Levels)
	}
}

// newCell aggregates a point's repeats at a level.
func newCell(p *Point, c int, reps *sweep.Repeats) *Cell {
	return &Cell{Point: p, Concurrency: c, TokS: reps.Stat(sweep.OutputTokS),
		Speedup: reps.Stat(sweep.Speedup), Accept: reps.Stat(sweep.AcceptLength),
		TTFTP99: reps.Stat(sweep.TTFTP99Ms), TTFTP50: reps.Stat(sweep.TTFTP50Ms),
		TPOTP50: reps.Stat(sweep.TPOTP50Ms), ITLP50: reps.Stat(sweep.ITLP50Ms),
		TokSByRepeat: slices.Clone(reps.Values(sweep.OutputTokS)), PrecisionMissed: reps.Missed()}
}

// sourcesOf are the sources the cells mix: the spec's that have runs among those read (a --where
// that keeps one set mixes that set alone), their weights normalised again; without the spec, the
// sources of the runs, equally weighted, in a stable order.
func sourcesOf(spec []sweep.Source, seen map[sweep.SourceKey]bool) []sweep.Source {
	var out []sweep.Source
	total := 0.0
	for _, src := range spec {
		if seen[src.Key()] {
			out = append(out, src)
			total += src.Weight
		}
	}
	if len(out) == 0 || (len(out) < len(seen) && len(spec) > 1) {
		// Runs of sources the spec does not name (or no spec): equal shares of what was read.
		out = out[:0]
		for k := range seen {
			out = append(out, sweep.Source{Dataset: k.Dataset, InputTokens: k.InputTokens, Weight: 1})
		}
		slices.SortFunc(out, func(a, b sweep.Source) int {
			if c := strings.Compare(a.Dataset, b.Dataset); c != 0 {
				return c
			}
			return a.InputTokens - b.InputTokens
		})
		total = float64(len(out))
	}
	for i := range out {
		out[i].Weight /= total
	}
	return out
}

// FromRuns builds one Sweep per sweep id found among the run_summary rows q selects (the user's
// --where), with the points that have runs among them, in order of first appearance, reading the
// runs once without keeping them. Only what the runs tell is known: no hosts, states or provenance.
func FromRuns(ctx context.Context, db *store.DB, q store.RunsQuery) ([]*Sweep, error) {
	var out []*Sweep
	sweeps := map[int64]*Sweep{}
	points := map[*Sweep]map[string]*Point{}
	agg := newAggregator()
	err := db.EachRunSummary(ctx, q, func(r *store.RunSummary) {
		s := sweeps[r.SweepID]
		if s == nil {
			s = &Sweep{ID: r.SweepID, Name: r.Sweep}
			sweeps[r.SweepID] = s
			points[s] = map[string]*Point{}
			out = append(out, s)
		}
		if r.Status == store.RunSuperseded {
			return
		}
		p := points[s][r.PointID]
		if p == nil {
			p = &Point{ID: r.PointID, State: "done", Cells: map[int]*Cell{},
				Config:    configOf(r.Method, r.NumSteps, r.TopK, r.NumDraftTokens, r.TP, r.Baseline()),
				Requested: [3]*int{r.NumSteps, r.TopK, r.NumDraftTokens}}
			points[s][r.PointID] = p
			s.Points = append(s.Points, p)
		}
		agg.add(s, p, r)
	})
	if err != nil {
		return nil, err
	}
	for _, s := range out {
		// The weights of the prompt sources are the spec's.
		if sw, err := db.Sweep(ctx, s.ID); err == nil {
			if spec := (&Sweep{ID: s.ID, SpecText: sw.SpecText}).Spec(); spec != nil {
				s.Sources = spec.Workload.Sources()
			}
		}
	}
	agg.finish()
	for _, s := range out {
		// Only the points with a level that counts: a point whose every level failed is not there.
		s.Points = slices.DeleteFunc(s.Points, func(p *Point) bool { return len(p.Cells) == 0 })
		for _, p := range s.Points {
			if !slices.Contains(s.TPs, p.TP) {
				s.TPs = append(s.TPs, p.TP)
			}
		}
		sort.Ints(s.TPs)
		if err := setAlgorithms(ctx, db, s.ID, points[s]); err != nil {
			return nil, err
		}
		// The output check, so that a mismatching point is never named best.
		sums, err := db.PointSummaries(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		for _, ps := range sums {
			if p := points[s][ps.PointID]; p != nil {
				p.OutputCheck, p.OutputAgreement = ps.OutputCheck, ps.OutputAgreement
			}
		}
	}
	return out, nil
}

// setAlgorithms reads each point's --speculative-algorithm from its stored argv (the label's
// spelling depends on it), whether a search decided its running, and its argv and environment.
func setAlgorithms(ctx context.Context, db *store.DB, sweepID int64, byID map[string]*Point) error {
	stored, err := db.Points(ctx, sweepID)
	if err != nil {
		return err
	}
	for _, sp := range stored {
		p := byID[sp.ID]
		if p == nil {
			continue
		}
		p.Searched, p.Argv, p.Env = sp.Searched, sp.Argv, sp.Env
		if !p.Baseline {
			p.Algorithm = sweep.ArgvAlgorithm(sp.Argv)
		}
	}
	return nil
}

// setPacking reads the ran_beside events the orchestrator records at the end of each packed point
// by their structured fields (store.Event.RanBeside), never their prose: the latest of a point
// gives its count.
func setPacking(ctx context.Context, db *store.DB, sweepID int64, byID map[string]*Point) error {
	evs, err := db.Events(ctx, sweepID, "")
	if err != nil {
		return err
	}
	for _, e := range evs { // in order: a later event overrides an earlier one
		p := byID[e.PointID]
		if p == nil {
			continue
		}
		if rb, ok := e.RanBeside(); ok {
			p.Packed, p.Beside = true, rb.Beside
		}
	}
	return nil
}

// Spec parses the spec stored with the sweep; nil when there is none or it does not parse (a spec
// that later rules refuse: its workload is then unknown). Only the report's header needs it, so a
// live view that loads the sweep again and again does not parse it.
func (s *Sweep) Spec() *sweep.Spec {
	if s.SpecText == "" {
		return nil
	}
	spec, err := sweep.Parse(fmt.Sprintf("sweep %d", s.ID), []byte(s.SpecText))
	if err != nil {
		return nil
	}
	return spec
}

// PackedPoints are the points that ran on a packed host and recorded it, in plan order.
func (s *Sweep) PackedPoints() []*Point {
	var out []*Point
	for _, p := range s.Points {
		if p.Packed {
			out = append(out, p)
		}
	}
	return out
}

// BesideMark is the results' short mark of a packed point: "ran beside 3 others", "ran beside 1
// other", "ran alone" (packed, but no other point ran meanwhile); "" for a point not packed.
func (p *Point) BesideMark() string {
	switch {
	case !p.Packed:
		return ""
	case p.Beside == 0:
		return "ran alone"
	case p.Beside == 1:
		return "ran beside 1 other"
	}
	return fmt.Sprintf("ran beside %d others", p.Beside)
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

// Accept is the point's accept length over the levels: the median (and range) of its cells'
// median accept lengths.
func (p *Point) Accept() Stat {
	var acc []float64
	for _, cell := range p.Cells {
		if cell.Accept.OK() {
			acc = append(acc, cell.Accept.Median)
		}
	}
	return newStat(acc)
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

// Pruned are the points the search decided need not run, in plan order.
func (s *Sweep) Pruned() []*Point {
	var out []*Point
	for _, p := range s.Points {
		if p.State == string(store.PointPruned) {
			out = append(out, p)
		}
	}
	return out
}

// Searched reports whether a search decided which of the sweep's points run.
func (s *Sweep) Searched() bool {
	return slices.ContainsFunc(s.Points, func(p *Point) bool { return p.Searched })
}

// Mismatch reports whether the point's outputs do not answer as the reference's do (the lossless
// check failed): such a point is never the best, nor on the Pareto front.
func (p *Point) Mismatch() bool { return p.OutputCheck == store.OutputCheckMismatch }

// Checked reports whether some point of the sweep has an output check result (the report then
// has the check's sentence, and its table when some point mismatches).
func (s *Sweep) Checked() bool {
	return slices.ContainsFunc(s.Points, func(p *Point) bool { return p.OutputCheck != "" })
}

// Mismatches are the points whose output check failed, in plan order.
func (s *Sweep) Mismatches() []*Point {
	var out []*Point
	for _, p := range s.Points {
		if p.Mismatch() {
			out = append(out, p)
		}
	}
	return out
}

// Reference is the point checked as the reference of tp (its first baseline that answered), or nil.
func (s *Sweep) Reference(tp int) *Point {
	for _, p := range s.Points {
		if p.TP == tp && p.OutputCheck == store.OutputCheckReference {
			return p
		}
	}
	return nil
}

// OutputEvidence is what the output check recorded of a comparison (points.output_evidence, as the
// orchestrator writes it): the agreement, the earliest divergence and both texts there, the prompt,
// and the reference's agreement with itself and the threshold below which a point mismatches. A
// reference's evidence compares its own two answers.
type OutputEvidence struct {
	Agreement float64 `json:"agreement"`
	// Diverged: some answer differs; Prompt (0-based) is the prompt of the earliest divergence and
	// Word (0-based) its position in whitespace-separated words, the same in both texts.
	Diverged   bool   `json:"diverged"`
	Prompt     int    `json:"prompt"`
	Word       int    `json:"word"`
	Reference  string `json:"reference"` // the reference's answer to that prompt
	Got        string `json:"got"`       // the point's answer
	PromptText string `json:"prompt_text"`
	// ReferenceAgreement is the reference's agreement with itself and Threshold the agreement
	// under which a point mismatches (nil when not recorded).
	ReferenceAgreement *float64 `json:"reference_agreement"`
	Threshold          *float64 `json:"threshold"`
}

// ParseOutputEvidence decodes a stored evidence; nil when there is none or it does not decode.
func ParseOutputEvidence(raw []byte) *OutputEvidence {
	if len(raw) == 0 {
		return nil
	}
	var e OutputEvidence
	if json.Unmarshal(raw, &e) != nil {
		return nil
	}
	return &e
}

// Evidence splits a failure detail into its cause (first line) and evidence lines.
func (p *Point) Evidence() (cause string, lines []string) {
	all := strings.Split(strings.TrimRight(p.FailureDetail, "\n"), "\n")
	if len(all) == 0 {
		return "", nil
	}
	return all[0], all[1:]
}

// provenanceOf decodes a stored provenance into the struct hostctl writes; nil when none was recorded
// or it does not decode.
func provenanceOf(raw []byte) *hostctl.Provenance {
	if len(raw) == 0 {
		return nil
	}
	var p hostctl.Provenance
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	return &p
}

func jsonObject(raw []byte) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}
