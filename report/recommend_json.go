package report

import (
	"fmt"
	"strings"
	"time"
)

// RecommendationJSON is a recommendation as `specsweep recommend --format json` prints it and the
// API's results carry it (Live.Recommendation, for the report's default mix). Lists are [] when
// empty, never null; what there is not (no winner yet, no baseline, no runner-up, no next sweep)
// is left out.
type RecommendationJSON struct {
	Sweep   string `json:"sweep"`
	SweepID int64  `json:"sweep_id"`
	// Traffic is the mix, by concurrency; Mix the same in --traffic's syntax; DefaultMix: equal
	// shares over the measured levels.
	Traffic    []Share   `json:"traffic"`
	Mix        string    `json:"mix"`
	DefaultMix bool      `json:"default_mix"`
	SLOs       []SLOJSON `json:"slos"`
	// TP is the tp the competition was restricted to (0: every tp competed).
	TP int `json:"tp"`
	// None says why there is no recommendation ("" when there is one).
	None       string `json:"none,omitempty"`
	Candidates int    `json:"candidates"`
	// Winner, RunnerUp and Baseline: tok_s is each one's mix. OverBaseline and OverRunnerUp are
	// the winner's gains over the mix, with the noise verdict on the repeats' mixes.
	Winner       *ChoiceJSON `json:"winner,omitempty"`
	RunnerUp     *ChoiceJSON `json:"runner_up,omitempty"`
	Baseline     *ChoiceJSON `json:"baseline,omitempty"`
	OverBaseline *GainJSON   `json:"over_baseline,omitempty"`
	OverRunnerUp *GainJSON   `json:"over_runner_up,omitempty"`
	// Levels is the winner at each level of the mix against that level's best competitor.
	Levels []StandingJSON `json:"levels"`
	// Dropped are the configurations measured at some level of the mix that did not compete;
	// Unmeasured counts the points measured at none of them.
	Dropped    []DroppedJSON  `json:"dropped"`
	Unmeasured int            `json:"unmeasured"`
	Deploy     *DeployJSON    `json:"deploy,omitempty"`
	NextSweep  *NextSweepJSON `json:"next_sweep,omitempty"`
}

// SLOJSON is one SLO: the metric, its limit as written (Go's duration syntax) and in ms.
type SLOJSON struct {
	Metric string  `json:"metric"`
	Max    string  `json:"max"`
	MaxMs  float64 `json:"max_ms"`
}

// ChoiceJSON is one configuration over the mix.
type ChoiceJSON struct {
	Point          string `json:"point"`
	Label          string `json:"label"` // the plan's spelling with tp: "eagle3 s=3 k=1 n=4 tp=4"
	Method         string `json:"method"`
	NumSteps       *int   `json:"num_steps"`
	TopK           *int   `json:"topk"`
	NumDraftTokens *int   `json:"num_draft_tokens"`
	TP             int    `json:"tp"`
	Baseline       bool   `json:"baseline"`
	// TokS is the mix (Σ share × median output tok/s); TokSRepeats the mix of each repeat.
	TokS        float64   `json:"tok_s"`
	TokSRepeats []float64 `json:"tok_s_repeats"`
}

// GainJSON is a gain over the mix: percent, and the noise verdict (clear, within noise, unknown).
type GainJSON struct {
	Pct   float64 `json:"pct"`
	Noise string  `json:"noise"`
}

// StandingJSON is the winner at one level of the mix: its median output tok/s there, and that
// level's best competitor (itself when best_here), the gap (pct, 0 or below) and the noise verdict
// of the best over it ("" when best_here).
type StandingJSON struct {
	Concurrency int     `json:"concurrency"`
	Share       float64 `json:"share"`
	TokS        float64 `json:"tok_s"`
	BestHere    bool    `json:"best_here"`
	Best        string  `json:"best"`
	BestPoint   string  `json:"best_point"`
	BestTokS    float64 `json:"best_tok_s"`
	Pct         float64 `json:"pct"`
	Noise       string  `json:"noise"`
}

// DroppedJSON is a configuration that did not compete, and why.
type DroppedJSON struct {
	Point  string `json:"point"`
	Label  string `json:"label"`
	TP     int    `json:"tp"`
	Reason string `json:"reason"`
}

// DeployJSON is how to run the winner: SGLang's arguments after the command (args; args_line
// the same as one shell line), the command and the environment, secrets replaced by <redacted>
// (redacted counts them).
type DeployJSON struct {
	Command  []string          `json:"command"`
	Args     []string          `json:"args"`
	ArgsLine string            `json:"args_line"`
	Env      map[string]string `json:"env"`
	Redacted int               `json:"redacted"`
}

// NextSweepJSON is the next sweep: the mix's levels at which the winner is at the edge of the
// swept range, why (one sentence per axis) and the spec fragment.
type NextSweepJSON struct {
	Levels []int    `json:"levels"`
	Why    []string `json:"why"`
	Spec   string   `json:"spec"`
}

// JSON is r's shape for scripts and the API.
func (r *Recommendation) JSON() RecommendationJSON {
	out := recommendationHead(r.Sweep, r.Traffic, r.DefaultTraffic, r.SLOs, r.TP)
	out.Candidates, out.Unmeasured = r.Candidates, r.Unmeasured
	out.Winner, out.RunnerUp, out.Baseline = choiceJSON(r.Winner), choiceJSON(r.RunnerUp), choiceJSON(r.Baseline)
	out.OverBaseline, out.OverRunnerUp = gainJSON(r.OverBaseline), gainJSON(r.OverRunnerUp)
	for _, st := range r.Levels {
		out.Levels = append(out.Levels, StandingJSON{Concurrency: st.Concurrency, Share: st.Share, TokS: st.Cell.TokS.Median,
			BestHere: st.IsBest(), Best: pointLabel(st.Best.Point), BestPoint: st.Best.Point.ID, BestTokS: st.Best.TokS.Median,
			Pct: st.Pct, Noise: string(st.Noise)})
	}
	for _, d := range r.Dropped {
		out.Dropped = append(out.Dropped, DroppedJSON{Point: d.Point.ID, Label: pointLabel(d.Point), TP: d.Point.TP, Reason: d.Reason})
	}
	if r.Winner != nil {
		d := r.Deploy
		out.Deploy = &DeployJSON{Command: d.Command, Args: d.Args, ArgsLine: d.ArgsLine(), Env: d.Env, Redacted: d.Redacted}
		if out.Deploy.Args == nil {
			out.Deploy.Args = []string{}
		}
	}
	if r.Next != nil {
		out.NextSweep = &NextSweepJSON{Levels: r.Next.Levels, Why: r.Next.Why, Spec: r.Next.Spec}
	}
	return out
}

// NoRecommendationJSON is the shape of a mix with no recommendation: why (err) in none.
func NoRecommendationJSON(s *Sweep, opt RecommendOptions, err error) RecommendationJSON {
	t, def := opt.Traffic, false
	if t == nil && s != nil {
		t, def = EqualTraffic(s.Levels), true
	}
	out := recommendationHead(s, t, def, opt.SLOs, opt.TP)
	out.None = err.Error()
	return out
}

func recommendationHead(s *Sweep, t Traffic, def bool, slos []SLO, tp int) RecommendationJSON {
	out := RecommendationJSON{Traffic: []Share{}, Mix: t.String(), DefaultMix: def, SLOs: []SLOJSON{}, TP: tp,
		Levels: []StandingJSON{}, Dropped: []DroppedJSON{}}
	if s != nil {
		out.Sweep, out.SweepID = s.Name, s.ID
	}
	out.Traffic = append(out.Traffic, t...)
	for _, o := range slos {
		out.SLOs = append(out.SLOs, SLOJSON{Metric: o.Metric, Max: o.Max.String(), MaxMs: float64(o.Max) / float64(time.Millisecond)})
	}
	return out
}

func choiceJSON(ch *Choice) *ChoiceJSON {
	if ch == nil {
		return nil
	}
	p := ch.Point
	reps := ch.Repeats
	if reps == nil {
		reps = []float64{}
	}
	return &ChoiceJSON{Point: p.ID, Label: pointLabel(p), Method: p.Method, NumSteps: p.Requested[0], TopK: p.Requested[1],
		NumDraftTokens: p.Requested[2], TP: p.TP, Baseline: p.Baseline, TokS: ch.TokS, TokSRepeats: reps}
}

func gainJSON(g *Gain) *GainJSON {
	if g == nil {
		return nil
	}
	return &GainJSON{Pct: g.Pct, Noise: string(g.Noise)}
}

// pointLabel is a point's label with its tp: "eagle3 s=3 k=1 n=4 tp=4".
func pointLabel(p *Point) string { return fmt.Sprintf("%s tp=%d", p.Label(), p.TP) }

// MixWords says what a mix is, for people: "equal time at each measured concurrency (c=1, 16)" or
// "c=1 20%, c=16 50%, c=64 30% of the time".
func MixWords(t Traffic, def bool) string {
	if def {
		return fmt.Sprintf("equal time at each measured concurrency (c=%s)", joinInts(t.Levels()))
	}
	terms := make([]string, len(t))
	for i, sh := range t {
		terms[i] = fmt.Sprintf("c=%d %s", sh.Concurrency, fmtShare(sh.Share))
	}
	return strings.Join(terms, ", ") + " of the time"
}

// fmtShare is a share in percent, to 0.1 (to 0.01 below 1%).
func fmtShare(v float64) string {
	if v < 0.01 {
		return fmt.Sprintf("%.2f%%", 100*v)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", 100*v), ".0") + "%"
}
