package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Plan is the expansion of a spec: the points in run order, the combinations
// skipped with their reasons, what the planner tells about how it applied the
// matrix, and what running it costs.
type Plan struct {
	Name     string    `json:"name"`
	SpecHash string    `json:"spec_hash"`
	Points   []Point   `json:"points"`
	Skipped  []Skipped `json:"skipped"`
	// Notes say how the matrix was applied where an algorithm does not take
	// it as written (one list not applied, a value passed as another flag, a
	// plugin whose effective values will be read back).
	Notes []string `json:"notes"`
	Runs  int      `json:"runs"` // points x concurrency levels x repeats
	// Spans are the multi-node layouts the points' tps take on the hosts that span nodes, one per
	// host and tp that needs more than one node (docs/spec.md, hosts[].nodes).
	Spans []Span `json:"spans,omitempty"`
	// Estimate is a rough wall-clock duration (model in docs/spec.md).
	Estimate time.Duration `json:"-"`
}

// Point is one server configuration to load and measure.
type Point struct {
	ID     string `json:"id"`
	Method string `json:"method"`
	// NumSteps, TopK and NumDraftTokens are the configuration the point stands
	// for: what SGLang should run by its rules (Params' Expected), else what
	// the command line asks for (a plugin); nil for a baseline, or where the
	// value is left to the server and cannot be predicted.
	NumSteps       *int              `json:"num_steps"`
	TopK           *int              `json:"topk"`
	NumDraftTokens *int              `json:"num_draft_tokens"`
	TP             int               `json:"tp"`
	Argv           []string          `json:"argv"`
	Env            map[string]string `json:"env,omitempty"`
	Baseline       bool              `json:"baseline"`
	// Algorithm is the method's --speculative-algorithm as written, its last occurrence (the
	// one SGLang reads); "" for a baseline.
	Algorithm string `json:"algorithm,omitempty"`
	// Params are the speculative parameters: which the command line requests
	// and which it leaves to the server, with the values expected (the ones
	// to compare the server's effective values with). Empty for a baseline.
	Params []Param `json:"params,omitempty"`
	// Files are written on the host before the server starts (the method's files).
	Files []File `json:"files,omitempty"`
}

// Label is a short human name for the point that says what it sets, e.g.
// "eagle3 s=3 k=1 n=4 tp=4", "dflash block=16 tp=1", "ngram k=10 n=12 tp=1":
// its Setting and its tp.
func (p Point) Label() string { return fmt.Sprintf("%s tp=%d", p.Setting(), p.TP) }

// Setting is the one spelling of what a point sets, without its tp: "eagle3
// s=3 k=1 n=4", "dflash block=16", "baseline". Only Method, Baseline,
// Algorithm and the three parameters are read, so the orchestrator and the
// report label their stored points with it (ArgvAlgorithm gives the algorithm).
func (p Point) Setting() string {
	if p.Baseline {
		return p.Method
	}
	r := rulesOf(p.Algorithm)
	if p.Algorithm == "" {
		r = eagleRules{} // a point built by hand, as before algorithms were told apart
	}
	return p.Method + r.label(p)
}

// ArgvAlgorithm is the --speculative-algorithm of a point's argv as SGLang reads it (the last
// occurrence; "" for none).
func ArgvAlgorithm(argv []string) string { return Method{Args: argv}.Algorithm() }

// Span is how points of one tp lay out over a host that spans nodes: one SGLang rank per node,
// each with the point's argv plus RankArgs (--nnodes, --node-rank, --dist-init-addr).
type Span struct {
	Host        string `json:"host"`
	TP          int    `json:"tp"`
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
	// Ranks are the nodes in rank order (a point of k nodes takes the group's first k, as listed);
	// empty for a Slurm cluster, whose job's nodes are known when it starts.
	Ranks []string `json:"ranks,omitempty"`
	// DistInit is --dist-init-addr as far as the plan knows it: rank 0's host and the port, each
	// in angle brackets where it is chosen at start ("10.0.0.1:<free port>").
	DistInit string `json:"dist_init"`
}

// Spans lays out the tps in points over the hosts that span nodes.
func (s *Spec) Spans(points []Point) []Span {
	tps := map[int]bool{}
	for _, pt := range points {
		tps[pt.TP] = true
	}
	sorted := slices.Sorted(maps.Keys(tps))
	var out []Span
	for _, h := range s.Hosts {
		for _, tp := range sorted {
			n := h.Span(tp)
			if n < 2 {
				continue
			}
			sp := Span{Host: h.Name, TP: tp, Nodes: n, GPUsPerNode: tp / n}
			host, port := "<first node of the job>", "<free port>"
			if h.DistInitPort > 0 {
				port = strconv.Itoa(h.DistInitPort)
			}
			if len(h.Nodes) >= n {
				for _, nd := range h.Nodes[:n] {
					sp.Ranks = append(sp.Ranks, nd.Name)
				}
				host = AddressHost(h.Nodes[0].Address)
			}
			sp.DistInit = net.JoinHostPort(host, port)
			out = append(out, sp)
		}
	}
	return out
}

// AddressHost is the host part of a spec address (host, host:port, a bare IPv6 address or
// [v6]:port).
func AddressHost(a string) string {
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return strings.Trim(a, "[]")
}

// Skipped is a matrix combination that is not run, and why.
type Skipped struct {
	Method   string
	NumSteps *int
	TopK     *int
	// NumDraftTokens is "auto" or the number as written; "" for a baseline.
	NumDraftTokens string
	TP             int
	Reason         string
}

// MarshalJSON writes the fields like a point's (num_draft_tokens a number,
// "auto", or null for a baseline) plus the reason.
func (s Skipped) MarshalJSON() ([]byte, error) {
	var ndt any
	if n, err := strconv.Atoi(s.NumDraftTokens); err == nil {
		ndt = n
	} else if s.NumDraftTokens != "" {
		ndt = s.NumDraftTokens
	}
	return json.Marshal(struct {
		Method         string `json:"method"`
		NumSteps       *int   `json:"num_steps"`
		TopK           *int   `json:"topk"`
		NumDraftTokens any    `json:"num_draft_tokens"`
		TP             int    `json:"tp"`
		Reason         string `json:"reason"`
	}{s.Method, s.NumSteps, s.TopK, ndt, s.TP, s.Reason})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Skipped) UnmarshalJSON(data []byte) error {
	var v struct {
		Method         string          `json:"method"`
		NumSteps       *int            `json:"num_steps"`
		TopK           *int            `json:"topk"`
		NumDraftTokens json.RawMessage `json:"num_draft_tokens"`
		TP             int             `json:"tp"`
		Reason         string          `json:"reason"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("decode skipped combination: %w", err)
	}
	ndt := ""
	if raw := string(v.NumDraftTokens); raw != "" && raw != "null" {
		ndt = strings.Trim(raw, `"`)
	}
	*s = Skipped{v.Method, v.NumSteps, v.TopK, ndt, v.TP, v.Reason}
	return nil
}

// Plan expands the matrix into points (see docs/spec.md, "Expansion"): each
// method's algorithm decides which matrix lists apply and how.
// It expects a spec returned by Parse; on a hand-built spec, undefined
// methods are skipped rather than reported.
func (s *Spec) Plan() *Plan {
	pl := &Plan{Name: s.Name, SpecHash: s.Hash(), Points: []Point{}, Skipped: []Skipped{}, Notes: []string{}}
	byID := map[string]bool{}
	rank := map[string]int{} // method -> position in matrix.method, for ordering
	add := func(pt Point, sk Skipped) {
		if byID[pt.ID] {
			sk.Reason = "duplicate of " + pt.ID
			pl.Skipped = append(pl.Skipped, sk)
			return
		}
		byID[pt.ID] = true
		pl.Points = append(pl.Points, pt)
	}
	for _, name := range s.Matrix.Methods {
		m, ok := s.Methods[name]
		_, seen := rank[name]
		if !seen {
			rank[name] = len(rank)
		}
		var r rules
		if ok && !m.Baseline() {
			r = rulesOf(m.Algorithm())
			if !seen {
				pl.Notes = append(pl.Notes, r.notes(name, m.Algorithm(), s.MatrixOf(m))...)
			}
		}
		for _, tp := range s.Matrix.TP {
			switch {
			case !ok:
				pl.Skipped = append(pl.Skipped, Skipped{Method: name, TP: tp, Reason: fmt.Sprintf("method %q is not defined", name)})
			case r == nil:
				// A baseline ignores the speculative parameters: one point per tp.
				add(s.point(m, tp, nil), Skipped{Method: name, TP: tp})
			default:
				for _, c := range combos(r, s.MatrixOf(m)) {
					sk := Skipped{Method: name, NumSteps: clonePtr(c.steps), TopK: clonePtr(c.topk), TP: tp}
					if c.draft != nil {
						sk.NumDraftTokens = c.draft.String()
					}
					st, reason := r.apply(m.Algorithm(), c)
					if reason != "" {
						sk.Reason = reason
						pl.Skipped = append(pl.Skipped, sk)
						continue
					}
					add(s.point(m, tp, &st), sk)
				}
			}
		}
	}
	slices.SortStableFunc(pl.Points, func(a, b Point) int { return comparePoints(a, b, rank) })
	pl.Runs = satMul(satMul(satMul(len(pl.Points), s.Workload.Loads()), max(len(s.Workload.Sources()), 1)), s.Workload.Repeats)
	pl.Estimate = s.EstimateWith(pl.Points, DefaultAssumptions())
	pl.Spans = s.Spans(pl.Points)
	return pl
}

// point builds one point; a nil setting is a baseline.
func (s *Spec) point(m Method, tp int, st *setting) Point {
	argv := slices.Concat(s.Server.Command, s.Server.Args, m.Args)
	pt := Point{Method: m.Name, TP: tp, Baseline: st == nil}
	if st != nil {
		argv = append(argv, st.flags...)
		pt.Algorithm, pt.Params = m.Algorithm(), st.params
		for _, p := range st.params {
			v := p.Expected
			if v == nil {
				v = p.Requested
			}
			switch p.Name {
			case ParamNumSteps:
				pt.NumSteps = clonePtr(v)
			case ParamTopK:
				pt.TopK = clonePtr(v)
			case ParamNumDraftTokens:
				pt.NumDraftTokens = clonePtr(v)
			}
		}
	}
	pt.Argv = append(argv, FlagTPSize, strconv.Itoa(tp))
	// The method's environment overrides the server's.
	env := maps.Clone(s.Server.Env)
	if len(m.Env) > 0 {
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, m.Env)
	}
	if len(env) > 0 {
		pt.Env = env
	}
	pt.Files = m.Files
	pt.ID = PointIDOf(pt.Argv, pt.Env, tp, pt.Files)
	return pt
}

// pointIDFormat versions PointID's encoding: stored points are found again by
// their id, so change it only with a migration.
const pointIDFormat = "specsweep/point/v1"

// PointID is a point's identity: the first 12 hex digits of the SHA-256 of
// its canonical server config. The method's name, the spec's name and the
// hosts are not part of it, so the same server config has the same id in
// every sweep and every rerun.
func PointID(argv []string, env map[string]string, tp int) string {
	return PointIDOf(argv, env, tp, nil)
}

// PointIDOf is PointID of a point that writes files before it starts: their paths and contents
// are part of its server config (another adaptive schedule is another configuration); without
// files it is PointID, so points planned before files existed keep their ids.
func PointIDOf(argv []string, env map[string]string, tp int, files []File) string {
	if len(env) == 0 {
		env = nil // nil and empty encode alike
	}
	if len(files) == 0 {
		files = nil
	}
	b, err := json.Marshal(struct {
		Format string            `json:"format"`
		Argv   []string          `json:"argv"`
		Env    map[string]string `json:"env"` // encoding/json sorts keys
		TP     int               `json:"tp"`
		Files  []File            `json:"files,omitempty"`
	}{pointIDFormat, argv, env, tp, files})
	if err != nil {
		panic("sweep: encoding point id: " + err.Error()) // strings and ints always encode
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// comparePoints orders baselines first (by tp, so every tp's speedups can be
// computed early), then by tp, method and the speculative parameters, so
// neighbours differ in as few flags as possible.
func comparePoints(a, b Point, rank map[string]int) int {
	if a.Baseline != b.Baseline {
		if a.Baseline {
			return -1
		}
		return 1
	}
	if c := a.TP - b.TP; c != 0 {
		return c
	}
	if c := rank[a.Method] - rank[b.Method]; c != 0 {
		return c
	}
	for _, pair := range [][2]*int{{a.NumSteps, b.NumSteps}, {a.TopK, b.TopK}, {a.NumDraftTokens, b.NumDraftTokens}} {
		if c := deref(pair[0]) - deref(pair[1]); c != 0 {
			return c
		}
	}
	return strings.Compare(a.ID, b.ID)
}

// Assumptions of the duration estimate (docs/spec.md, "Estimate").
const (
	estimateLoad      = 90 * time.Second // start to ready: 80-100 s in the field reports
	estimateStop      = 5 * time.Second  // drain after the load has stopped
	estimateStreamTok = 100.0            // output tokens per second per stream
)

// Assumptions are what the duration estimate takes of one point (docs/spec.md, "Estimate"): Plan
// uses DefaultAssumptions; a caller that knows better (measured load times and decode speeds of
// the model, a simulator's time scale) passes its own to EstimateWith.
type Assumptions struct {
	Load time.Duration // start to ready
	Stop time.Duration // drain and stop after the load
	// StreamTokS is the decode speed of one stream in output tokens per second, at any
	// concurrency level, unless LevelTokS has the level.
	StreamTokS float64
	LevelTokS  map[int]float64
}

// DefaultAssumptions are the estimate's assumptions without measurements: a 90 s load, a 5 s stop,
// 100 output tokens per second per stream.
func DefaultAssumptions() Assumptions {
	return Assumptions{Load: estimateLoad, Stop: estimateStop, StreamTokS: estimateStreamTok}
}

// pointDuration estimates one point: load, warmup, the ladder repeated, stop.
func (s *Spec) pointDuration(a Assumptions) time.Duration {
	w := s.Workload
	// wave is the seconds one batch of concurrent requests takes at level c.
	wave := func(c int) float64 {
		tok := a.StreamTokS
		if v, ok := a.LevelTokS[c]; ok && v > 0 {
			tok = v
		}
		if tok <= 0 {
			tok = estimateStreamTok
		}
		return float64(w.OutputTokens) / tok
	}
	secs := 0.0
	if w.WarmupRequests > 0 && len(w.Concurrency) > 0 {
		top := slices.Max(w.Concurrency)
		secs += math.Ceil(float64(w.WarmupRequests)/float64(top)) * wave(top)
	}
	ladder := 0.0
	for _, c := range w.Concurrency {
		ladder += math.Ceil(float64(w.Requests)/float64(c)) * wave(c)
	}
	if len(w.Phases) > 0 {
		ladder = 0 // timed: each phase lasts its time, and the requests in flight at its end finish
		for _, ph := range w.Phases {
			ladder += ph.For.Seconds() + wave(ph.Concurrency)
		}
	}
	secs += ladder * float64(w.Repeats) * float64(max(len(w.Sources()), 1))
	total := float64(a.Load+a.Stop) + secs*float64(time.Second)
	if total >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(total)
}

// EstimateWith spreads the points over the hosts in plan order, each to the host that can hold
// its tp and is free first, each point taking what a predicts, and returns when the last ends.
func (s *Spec) EstimateWith(points []Point, a Assumptions) time.Duration {
	d := s.pointDuration(a)
	free := make([]time.Duration, len(s.Hosts))
	var end time.Duration
	for _, pt := range points {
		best := -1
		for i, h := range s.Hosts {
			if h.Span(pt.TP) > 0 && (best < 0 || free[i] < free[best]) {
				best = i
			}
		}
		if best < 0 {
			continue // validation refuses a tp no host holds
		}
		free[best] = satAdd(free[best], d)
		end = max(end, free[best])
	}
	return end
}

func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func ptr(v int) *int { return &v }

func clonePtr(p *int) *int {
	if p == nil {
		return nil
	}
	return ptr(*p)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
