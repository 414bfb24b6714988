package sweep

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The search (docs/spec.md, "search") decides which planned points run. Decide is a pure function
// of the plan and of what is known of each point, so a sweep resumed after a crash replays the same
// decisions from its recorded runs: each chain is a small sequential program that is run again from
// its start on every call, reading recorded results where it has them and stopping at the first
// point it still needs.

// Knowledge is what the search knows of one point.
type Knowledge int

// What the search knows of a point.
const (
	Undecided Knowledge = iota // not decided yet (stored as waiting)
	Released                   // decided to run, not measured yet (pending or running)
	Measured                   // run to its end, done or failed: Levels holds what it measured
	Dropped                    // pruned (or cancelled): it will not run
)

// PointResult is what the search knows of a point.
type PointResult struct {
	Knowledge Knowledge
	// Levels are the measured concurrency levels; a failed point or level has none (it never
	// counts as an improvement nor as a best).
	Levels map[int]LevelResult
}

// LevelResult is one concurrency level of a measured point.
type LevelResult struct {
	OutputTokS []float64 // output tok/s of each ok repeat
	// TokS is the confidence interval of output tok/s over the repeats (Repeats.Stat's CI), nil
	// when some repeat had none.
	TokS *Bounds
	// AcceptLength is the median accept length over the repeats; 0 when not measured.
	AcceptLength float64
}

// Decided is one decision: a point and why.
type Decided struct {
	PointID string `json:"point_id"`
	Reason  string `json:"reason"`
}

// SearchDecision is what Decide decided now: points to release (run) and points to prune.
type SearchDecision struct {
	Release []Decided `json:"release"`
	Prune   []Decided `json:"prune"`
}

// Searched reports whether a spec's points are decided by a search (a climb, or a grid under a
// budget); without, every planned point runs.
func (s *Spec) Searched() bool {
	return s.Search != nil && (s.Search.Climbs() || s.Search.Budget > 0)
}

// Decide returns the decisions that follow from what is known of the plan's points (keyed by
// point id; a point without an entry is Undecided). It decides only Undecided points. Once every
// point is decided, it returns no decision.
func (s *Spec) Decide(plan *Plan, known map[string]PointResult) SearchDecision {
	d := &decider{spec: s, search: s.Search, known: known, levels: s.Workload.Concurrency,
		decided: map[string]bool{}}
	if d.search == nil {
		d.search = &Search{Strategy: StrategyGrid}
	}
	for _, pt := range plan.Points {
		switch known[pt.ID].Knowledge {
		case Released, Measured:
			d.used++
		}
	}
	if !d.search.Climbs() {
		for _, pt := range plan.Points {
			d.need(pt.ID, "grid: plan order")
		}
		return d.out
	}
	groups := chainGroups(plan)
	d.baselines = map[int][]string{}
	for _, pt := range plan.Points {
		if pt.Baseline {
			d.baselines[pt.TP] = append(d.baselines[pt.TP], pt.ID)
		}
	}
	// Baselines and points no chain climbs run as in the grid, first (every speedup needs them).
	for _, pt := range plan.Points {
		if !groups.climbed[pt.ID] {
			why := "not a num_steps chain: run as in the grid"
			if pt.Baseline {
				why = fmt.Sprintf("baseline of tp %d: every speedup needs it", pt.TP)
			}
			d.need(pt.ID, why)
		}
	}
	for _, g := range groups.list {
		d.group(g)
	}
	return d.out
}

// decider runs the chains' programs once.
type decider struct {
	spec    *Spec
	search  *Search
	known   map[string]PointResult
	levels  []int
	used    int // points run or released: what the budget counts
	decided map[string]bool
	out     SearchDecision
	// baselines are the baseline points of each tp: what a point must beat to be an answer.
	baselines map[int][]string
}

// need asks for a point's result: it returns it when measured; otherwise it releases the point
// (if undecided and within budget) and returns false. A dropped point returns (nil, true): the
// program goes on without it.
func (d *decider) need(id, why string) (*PointResult, bool) {
	r := d.known[id]
	switch r.Knowledge {
	case Measured:
		return &r, true
	case Dropped:
		return nil, true
	case Released:
		return nil, false
	}
	if d.decided[id] {
		return nil, false
	}
	d.decided[id] = true
	if b := d.search.Budget; b > 0 && d.used >= b {
		d.out.Prune = append(d.out.Prune, Decided{id, fmt.Sprintf("budget of %d points reached; the best found so far is the answer", b)})
		return nil, true
	}
	d.used++
	d.out.Release = append(d.out.Release, Decided{id, why})
	return nil, false
}

// prune drops an undecided point with a reason.
func (d *decider) prune(id, why string) {
	if d.known[id].Knowledge != Undecided || d.decided[id] {
		return
	}
	d.decided[id] = true
	d.out.Prune = append(d.out.Prune, Decided{id, why})
}

// chain is one (method, tp, topk, draft-token rule): its points by num_steps, ascending.
type chain struct {
	key    string // shape label, e.g. "k=1" or "k=4 n=8"
	topk   int
	auto   bool // num_draft_tokens follows num_steps (topk 1)
	steps  []int
	points []Point
}

// group is one (method, tp): its chain (the first shape) and its tree shapes.
type group struct {
	method string
	tp     int
	chains []*chain // the first is the chain that climbs; the others are explored around its best
}

type groups struct {
	list    []*group
	climbed map[string]bool
}

// chainGroups groups the climbable points (speculative, with num_steps) of a plan.
func chainGroups(plan *Plan) groups {
	gs := groups{climbed: map[string]bool{}}
	byKey := map[string]*group{}
	chainOf := map[string]*chain{}
	for _, pt := range plan.Points {
		if pt.Baseline || pt.NumSteps == nil {
			continue
		}
		gk := pt.Method + "\x00" + strconv.Itoa(pt.TP)
		g := byKey[gk]
		if g == nil {
			g = &group{method: pt.Method, tp: pt.TP}
			byKey[gk] = g
			gs.list = append(gs.list, g)
		}
		topk := 1
		if pt.TopK != nil {
			topk = *pt.TopK
		}
		auto := pt.NumDraftTokens == nil || *pt.NumDraftTokens == *pt.NumSteps+1
		key := fmt.Sprintf("k=%d", topk)
		if !auto || topk > 1 {
			key += " n=" + optional(pt.NumDraftTokens, 0)
			auto = false
		}
		ck := gk + "\x00" + key
		c := chainOf[ck]
		if c == nil {
			c = &chain{key: key, topk: topk, auto: auto}
			chainOf[ck] = c
			g.chains = append(g.chains, c)
		}
		c.steps = append(c.steps, *pt.NumSteps)
		c.points = append(c.points, pt)
		gs.climbed[pt.ID] = true
	}
	for _, g := range gs.list {
		for _, c := range g.chains {
			sort.Sort(byStepsChain{c})
		}
		// The chain that climbs: topk 1 with auto draft tokens if there is one, else the narrowest.
		slices.SortStableFunc(g.chains, func(a, b *chain) int {
			if a.auto != b.auto {
				if a.auto {
					return -1
				}
				return 1
			}
			return a.topk - b.topk
		})
	}
	return gs
}

type byStepsChain struct{ c *chain }

func (b byStepsChain) Len() int           { return len(b.c.steps) }
func (b byStepsChain) Less(i, j int) bool { return b.c.steps[i] < b.c.steps[j] }
func (b byStepsChain) Swap(i, j int) {
	b.c.steps[i], b.c.steps[j] = b.c.steps[j], b.c.steps[i]
	b.c.points[i], b.c.points[j] = b.c.points[j], b.c.points[i]
}

// walk is the state of one chain's program: what it has measured so far, in program order.
type walk struct {
	d    *decider
	c    *chain
	name string // "eagle3 tp=4 k=1"
	seen map[int]*PointResult
	done map[int]bool // asked for and answered (measured, failed or dropped)
	// ref is the climbing chain a tree shape is explored beside: a tree point is worth running
	// only if it may beat the best of both.
	ref *walk
	// floor is the best baseline median per level at the chain's tp: a point that cannot beat it
	// is not the answer at that level.
	floor map[int]float64
}

func (d *decider) newWalk(g *group, c *chain) *walk {
	return &walk{d: d, c: c, name: fmt.Sprintf("%s tp=%d %s", g.method, g.tp, c.key),
		seen: map[int]*PointResult{}, done: map[int]bool{}}
}

func (w *walk) index(steps int) int {
	i, ok := slices.BinarySearch(w.c.steps, steps)
	if !ok {
		return -1
	}
	return i
}

// get asks for the chain's point at index i; false: the program must stop here for now.
func (w *walk) get(i int, why string) bool {
	if w.done[i] {
		return true
	}
	r, ok := w.d.need(w.c.points[i].ID, why)
	if !ok {
		return false
	}
	w.done[i] = true
	if r != nil && len(r.Levels) > 0 {
		w.seen[i] = r
	}
	return true
}

// getAll asks for several points at once (they may run side by side).
func (w *walk) getAll(idx []int, why func(i int) string) bool {
	ok := true
	for _, i := range idx {
		if !w.get(i, why(i)) {
			ok = false
		}
	}
	return ok
}

// median of a level of the point at index i; NaN when not measured.
func (w *walk) median(i, level int) float64 {
	r := w.seen[i]
	if r == nil {
		return math.NaN()
	}
	l, ok := r.Levels[level]
	if !ok || len(l.OutputTokS) == 0 {
		return math.NaN()
	}
	return Median(l.OutputTokS)
}

// best returns, for a level, the index with the highest median among those measured (-1: none).
func (w *walk) best(level int, among func(i int) bool) int {
	b := -1
	for i := range w.c.steps {
		if among != nil && !among(i) {
			continue
		}
		if m := w.median(i, level); !math.IsNaN(m) && (b < 0 || m > w.median(b, level)) {
			b = i
		}
	}
	return b
}

// gains compares the point at index i with the best of the others measured (among, if given) at
// every level: it reports whether some level improves by at least min_gain (clear of the noise
// with repeats), and a wording of the gains, e.g. "+3.1% at c=1, -2.0% at c=64".
func (w *walk) gains(i int, among func(j int) bool) (bool, string) {
	improved := false
	var parts []string
	for _, lv := range w.d.levels {
		b := w.best(lv, func(j int) bool { return j != i && (among == nil || among(j)) })
		if b < 0 {
			if !math.IsNaN(w.median(i, lv)) {
				improved = true // the first measured point of the chain
			}
			continue
		}
		mi, mb := w.median(i, lv), w.median(b, lv)
		if math.IsNaN(mi) {
			parts = append(parts, fmt.Sprintf("failed at c=%d", lv))
			continue
		}
		g := mi/mb - 1
		parts = append(parts, fmt.Sprintf("%+.1f%% at c=%d", 100*g, lv))
		if g >= w.d.search.MinGain && w.clear(i, b, lv) {
			improved = true
		}
	}
	if w.seen[i] == nil {
		return false, "failed"
	}
	return improved, strings.Join(parts, ", ")
}

// clear applies the report's noise rule (NoiseOf): with repeats, every repeat of i beats every
// repeat of b; else, with confidence intervals, i's interval lies above b's. Where the noise is not
// measured it does not hold a gain back.
func (w *walk) clear(i, b, level int) bool {
	li, lb := w.seen[i].Levels[level], w.seen[b].Levels[level]
	a, o := NewStat(li.OutputTokS), NewStat(lb.OutputTokS)
	a.CI, o.CI = li.TokS, lb.TokS
	return NoiseOf(a, o) != NoiseWithin
}

func (w *walk) steps(i int) int { return w.c.steps[i] }

func (w *walk) gainPct() string { return strconv.FormatFloat(100*w.d.search.MinGain, 'g', 4, 64) + "%" }

// group runs the program of one (method, tp): climb its chain, then explore the tree shapes
// around the chain's best steps.
func (d *decider) group(g *group) {
	main := d.newWalk(g, g.chains[0])
	stop, ok := main.climb()
	if !ok {
		return
	}
	// From here on the baselines of the tp count (they ran first; the climb never waits for them).
	floor := map[int]float64{}
	for _, id := range d.baselines[g.tp] {
		r, ok := d.need(id, fmt.Sprintf("baseline of tp %d: every speedup needs it", g.tp))
		if !ok {
			return
		}
		if r == nil {
			continue
		}
		for lv, l := range r.Levels {
			if len(l.OutputTokS) > 0 {
				if m := Median(l.OutputTokS); m > floor[lv] {
					floor[lv] = m
				}
			}
		}
	}
	main.floor = floor
	if !main.refine(stop) {
		return
	}
	// Trees are tried at the chain's best steps of the levels where speculation beats the baseline,
	// from the lowest concurrency (where trees pay most).
	var seeds []seed
	levels := slices.Clone(d.levels)
	slices.Sort(levels)
	for _, lv := range levels {
		if b := main.best(lv, nil); b >= 0 && main.median(b, lv) > floor[lv] {
			seeds = append(seeds, seed{lv, main.steps(b)})
		}
	}
	for _, c := range g.chains[1:] {
		t := d.newWalk(g, c)
		t.ref, t.floor = main, floor
		t.explore(seeds)
	}
}

// climb is the chain's climb and probes; ok false: it waits for a result. stop says why the climb
// stopped, for the points past it.
func (w *walk) climb() (stop string, ok bool) {
	n := len(w.c.steps)
	s := w.d.search
	// Probes are tried once whatever the climb finds: ask for them at once, so they run beside it.
	var probes []int
	for _, p := range s.Probe {
		if i := w.index(p); i > 0 {
			probes = append(probes, i)
		}
	}
	probeWhy := func(i int) string {
		return fmt.Sprintf("%s: probe steps %d, tried once to catch a second rise", w.name, w.steps(i))
	}
	for _, i := range probes {
		w.get(i, probeWhy(i))
	}
	inClimb := map[int]bool{}
	climbed := func(j int) bool { return inClimb[j] }
	if !w.get(0, fmt.Sprintf("%s: the climb starts at steps %d", w.name, w.steps(0))) {
		return "", false
	}
	inClimb[0] = true
	i, stride, misses := 0, 1, 0
	for {
		j := min(i+stride, n-1)
		if j == i {
			stop = fmt.Sprintf("the climb reached the last steps, %d", w.steps(i))
			break
		}
		why := fmt.Sprintf("%s: climb to steps %d", w.name, w.steps(j))
		if j > i+1 {
			why += fmt.Sprintf(" (stride %d after a clear gain)", stride)
		}
		if !w.get(j, why) {
			return "", false
		}
		inClimb[j] = true
		up, words := w.gains(j, climbed)
		i = j
		if up {
			misses, stride = 0, min(2*stride, maxStride)
			continue
		}
		misses, stride = misses+1, 1
		if misses >= s.Patience {
			stop = fmt.Sprintf("the climb stopped after steps %d (%s against the best so far, below min_gain %s)", w.steps(j), words, w.gainPct())
			if w.seen[j] == nil {
				stop = fmt.Sprintf("the climb stopped after steps %d, which failed", w.steps(j))
			}
			break
		}
	}
	// Probes: one that beats the climb's best reopens the chain around it.
	for _, pi := range probes {
		if !w.get(pi, probeWhy(pi)) {
			return "", false
		}
		if inClimb[pi] {
			continue
		}
		up, words := w.gains(pi, climbed)
		inClimb[pi] = true
		if !up {
			continue
		}
		// Reopen: climb down from the probe towards the best, then up past it.
		for _, dir := range []int{-1, 1} {
			misses := 0
			for k := pi + dir; k >= 0 && k < n && !inClimb[k]; k += dir {
				why := fmt.Sprintf("%s: probe steps %d beat the climb (%s): reopened at steps %d", w.name, w.steps(pi), words, w.steps(k))
				if !w.get(k, why) {
					return "", false
				}
				inClimb[k] = true
				if up, _ := w.gains(k, climbed); up {
					misses = 0
					continue
				}
				if misses++; misses >= s.Patience {
					break
				}
			}
		}
	}
	return stop, true
}

// maxStride bounds how far one climbing step jumps.
const maxStride = 4

// refine tries the unmeasured neighbours of each level's best until none could beat it by
// min_gain (by the bound of predict), then prunes the rest of the chain with its reason.
func (w *walk) refine(stop string) bool {
	for round := 0; ; round++ {
		var want []int
		whys := map[int]string{}
		for _, lv := range w.d.levels {
			b := w.best(lv, nil)
			if b < 0 {
				continue
			}
			for _, k := range []int{b - 1, b + 1} {
				if k < 0 || k >= len(w.c.steps) || w.done[k] || whys[k] != "" {
					continue
				}
				if ok, words := w.mayBeat(k); ok {
					want = append(want, k)
					whys[k] = fmt.Sprintf("%s: steps %d, next to the best at c=%d (steps %d), %s", w.name, w.steps(k), lv, w.steps(b), words)
				}
			}
		}
		if len(want) == 0 {
			break
		}
		slices.Sort(want)
		if !w.getAll(want, func(i int) string { return whys[i] }) {
			return false
		}
	}
	w.pruneRest(stop)
	return true
}

// pruneRest prunes every point of the chain not asked for, each with why.
func (w *walk) pruneRest(stop string) {
	for k := range w.c.steps {
		if w.done[k] {
			continue
		}
		possible, words := w.mayBeat(k)
		if possible {
			// Only the neighbours of a best are tried: further from every best cannot win.
			words = "not next to any level's best (" + w.bestsWords() + ")"
		}
		why := fmt.Sprintf("%s: steps %d not run: %s", w.name, w.steps(k), words)
		if stop != "" && k > w.lastDone() {
			why = fmt.Sprintf("%s: steps %d not run: %s", w.name, w.steps(k), stop)
		}
		w.d.prune(w.c.points[k].ID, why)
	}
}

// bestsWords says each level's best steps, e.g. "c=1: steps 4, c=64: steps 2".
func (w *walk) bestsWords() string {
	var parts []string
	for _, lv := range w.d.levels {
		if b := w.best(lv, nil); b >= 0 {
			parts = append(parts, fmt.Sprintf("c=%d: steps %d", lv, w.steps(b)))
		}
	}
	return strings.Join(parts, ", ")
}

// refBest is the median to beat at a level: the best of the chain, and of the climbing chain for
// a tree shape; NaN when nothing is measured.
func (w *walk) refBest(level int) float64 {
	v := math.NaN()
	if b := w.best(level, nil); b >= 0 {
		v = w.median(b, level)
	}
	if w.ref != nil {
		if rv := w.ref.refBest(level); !math.IsNaN(rv) && (math.IsNaN(v) || rv > v) {
			v = rv
		}
	}
	if f, ok := w.floor[level]; ok && f > 0 && (math.IsNaN(v) || f > v) {
		v = f
	}
	return v
}

func (w *walk) lastDone() int {
	last := -1
	for k := range w.c.steps {
		if w.done[k] {
			last = k
		}
	}
	return last
}

// mayBeat bounds what the unmeasured point at index k could reach at each level, from its measured
// neighbours, using the structure of speculative decoding: each further draft position is accepted
// at most as often as the ones before it (the accept length grows ever more slowly), and the cost
// of a step is taken as linear in num_steps between (or beyond) the measured ones. It reports
// whether some level could beat its best by min_gain, and the bound in words. Without accept
// lengths on both sides nothing can be bounded: the point may beat the best.
func (w *walk) mayBeat(k int) (bool, string) {
	lo, hi := w.neighbours(k)
	var parts []string
	possible := false
	for _, lv := range w.d.levels {
		ref := w.refBest(lv)
		if math.IsNaN(ref) {
			continue
		}
		bound, ok := w.bound(k, lo, hi, lv)
		if !ok {
			// A tree shape with one measured point: its ratio to the chain, carried over.
			if bound, ok = w.transfer(k, lv); !ok {
				return true, fmt.Sprintf("which the measured neighbours cannot bound at c=%d", lv)
			}
		}
		g := bound/ref - 1
		parts = append(parts, fmt.Sprintf("at most %+.1f%% at c=%d", 100*g, lv))
		if g >= w.d.search.MinGain {
			possible = true
		}
	}
	if len(parts) == 0 {
		return true, "nothing measured to compare with"
	}
	words := "predicted " + strings.Join(parts, ", ")
	if !possible {
		words += ", below min_gain " + w.gainPct()
	}
	return possible, words
}

// bound is the highest output tok/s the point at index k may reach at a level, from the measured
// points lo (below, -1 none) and hi (above, -1 none): ok false when it cannot be bounded.
func (w *walk) bound(k, lo, hi, level int) (float64, bool) {
	sk := float64(w.steps(k))
	type obs struct{ s, a, t, c float64 } // steps, accept length, tok/s, relative step cost a/t
	at := func(j int) (obs, bool) {
		if j < 0 || w.seen[j] == nil {
			return obs{}, false
		}
		t := w.median(j, level)
		a := w.seen[j].Levels[level].AcceptLength
		if math.IsNaN(t) || t <= 0 || a < 1 {
			return obs{}, false
		}
		return obs{float64(w.steps(j)), a, t, a / t}, true
	}
	l, lok := at(lo)
	h, hok := at(hi)
	// The accept length's slope below the measured point under k: its last gain per step.
	slope := func(j int, o obs) float64 {
		for i := j - 1; i >= 0; i-- {
			if p, ok := at(i); ok {
				return max(0, (o.a-p.a)/(o.s-p.s))
			}
		}
		// Nothing measured below: from num_steps 0, where one token is accepted per step.
		return max(0, (o.a-1)/o.s)
	}
	switch {
	case lok && hok:
		a := min(h.a, l.a+(sk-l.s)*slope(lo, l))
		// Concave from above too: the slope left of hi is at least the slope right of it.
		for i := hi + 1; i < len(w.c.steps); i++ {
			if p, ok := at(i); ok {
				a = min(a, h.a-(h.s-sk)*max(0, (p.a-h.a)/(p.s-h.s)))
				break
			}
		}
		c := l.c + (h.c-l.c)*(sk-l.s)/(h.s-l.s)
		return a / c, c > 0
	case lok:
		// Beyond the last measured: the cost grows as it grew between the last two measured.
		for i := lo - 1; i >= 0; i-- {
			if p, ok := at(i); ok {
				growth := (l.c - p.c) / (l.s - p.s)
				if growth <= 0 {
					return 0, false
				}
				a := l.a + (sk-l.s)*slope(lo, l)
				return a / (l.c + growth*(sk-l.s)), true
			}
		}
	case hok:
		// Below the first measured: fewer steps accept at most as much, and cost at least the
		// verify step alone; without a measured point below, that cannot be bounded well.
		for i := hi + 1; i < len(w.c.steps); i++ {
			if p, ok := at(i); ok {
				growth := (p.c - h.c) / (p.s - h.s)
				c := h.c - growth*(h.s-sk)
				if growth <= 0 || c <= 0 {
					return 0, false
				}
				return h.a / c, true
			}
		}
	}
	return 0, false
}

// explore tries a tree shape at the chain's best steps (the nearest it has), level by level from
// the lowest concurrency, then its measured points' neighbours while they may beat the best, and
// prunes the rest. Once the shape has a measured point, a further seed is tried only if the shape's
// ratio to the chain there, carried over to the seed's steps, may beat the level's best.
func (w *walk) explore(seeds []seed) {
	if len(seeds) == 0 {
		for k := range w.c.steps {
			w.d.prune(w.c.points[k].ID, fmt.Sprintf("%s: steps %d not run: the chain beat the baseline at no level, so no tree shape is tried", w.name, w.steps(k)))
		}
		return
	}
	for _, sd := range seeds {
		k := w.nearest(sd.steps)
		if k < 0 || w.done[k] {
			continue
		}
		why := fmt.Sprintf("%s: tree shape tried at steps %d, next to the chain's best at c=%d (steps %d)", w.name, w.steps(k), sd.level, sd.steps)
		if est, ok := w.transfer(k, sd.level); ok {
			g := est/w.refBest(sd.level) - 1
			if g < w.d.search.MinGain {
				continue // pruned with the rest, by mayBeat's words
			}
			why += fmt.Sprintf(", where its ratio to the chain predicts %+.1f%%", 100*g)
		}
		if !w.get(k, why) {
			return
		}
	}
	w.refine("")
}

// seed is where a tree shape is tried: the chain's best steps at a level.
type seed struct{ level, steps int }

// transfer estimates the tree point at index k at a level from the shape's measured point nearest
// to it: its ratio to the chain at the same steps, times the chain at k's steps (measured, else
// bounded). ok false: nothing to estimate from.
func (w *walk) transfer(k, level int) (float64, bool) {
	if w.ref == nil {
		return 0, false
	}
	m := -1
	for j := range w.c.steps {
		if w.seen[j] != nil && !math.IsNaN(w.median(j, level)) && (m < 0 || abs(j-k) < abs(m-k)) {
			m = j
		}
	}
	if m < 0 {
		return 0, false
	}
	chainAt := func(steps int) (float64, bool) {
		i := w.ref.index(steps)
		if i < 0 {
			return 0, false
		}
		if v := w.ref.median(i, level); !math.IsNaN(v) {
			return v, true
		}
		lo, hi := w.ref.neighbours(i)
		return w.ref.bound(i, lo, hi, level)
	}
	cm, ok1 := chainAt(w.steps(m))
	ck, ok2 := chainAt(w.steps(k))
	if !ok1 || !ok2 || cm <= 0 {
		return 0, false
	}
	return w.median(m, level) * ck / cm, true
}

// neighbours returns the measured indexes nearest below and above k (-1: none).
func (w *walk) neighbours(k int) (lo, hi int) {
	lo, hi = -1, -1
	for j := k - 1; j >= 0; j-- {
		if w.seen[j] != nil {
			lo = j
			break
		}
	}
	for j := k + 1; j < len(w.c.steps); j++ {
		if w.seen[j] != nil {
			hi = j
			break
		}
	}
	return lo, hi
}

// nearest returns the index of the chain's num_steps closest to s (the lower on a tie), -1 if none.
func (w *walk) nearest(s int) int {
	b := -1
	for i, v := range w.c.steps {
		if b < 0 || abs(v-s) < abs(w.c.steps[b]-s) {
			b = i
		}
	}
	return b
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
