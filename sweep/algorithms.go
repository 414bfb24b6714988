package sweep

import (
	"fmt"
	"strconv"
	"strings"
)

// SGLang's names of the speculative parameters (server_args fields, the keys
// of /server_info): the keys under which effective values are read back.
const (
	ParamNumSteps       = "speculative_num_steps"
	ParamTopK           = "speculative_eagle_topk"
	ParamNumDraftTokens = "speculative_num_draft_tokens"
	ParamDFlashBlock    = "speculative_dflash_block_size"
	ParamDSparkBlock    = "speculative_dspark_block_size"
	ParamNgramBreadth   = "speculative_ngram_max_bfs_breadth"
)

// SGLang's defaults the planner predicts from (docs/spec.md, "Algorithms").
const (
	ngramDefaultBreadth     = 10 // --speculative-ngram-max-bfs-breadth, which becomes NGRAM's topk
	ngramDefaultDraftTokens = 12 // NGRAM's num_draft_tokens when none is given
	dflashFallbackBlock     = 16 // DFLASH's block size when the draft checkpoint names none
)

// Param is one speculative parameter of a point: what its command line asks
// for, and what SGLang should run by its rules. The values SGLang really runs
// are read back from the server under Name and compared with these.
type Param struct {
	// Name is SGLang's name of the parameter, e.g. "speculative_num_draft_tokens".
	Name string `json:"name"`
	// Flag and Requested are what the command line passes; "" and nil when
	// the value is left to the server.
	Flag      string `json:"flag,omitempty"`
	Requested *int   `json:"requested"`
	// Expected is the value SGLang should run; nil when the planner cannot
	// know it (a plugin algorithm, a default the server picks at start).
	Expected *int `json:"expected"`
}

// passed is a parameter the command line sets and SGLang keeps.
func passed(name, flag string, v int) Param {
	return Param{Name: name, Flag: flag, Requested: ptr(v), Expected: ptr(v)}
}

// asWritten is a parameter passed to an algorithm whose rules are unknown.
func asWritten(name, flag string, v int) Param {
	return Param{Name: name, Flag: flag, Requested: ptr(v)}
}

// leftToServer is a parameter SGLang sets itself; expected may be nil.
func leftToServer(name string, expected *int) Param {
	return Param{Name: name, Expected: expected}
}

// combo is one combination of the matrix lists an algorithm applies; nil is
// a list the matrix leaves out (or one the algorithm does not apply).
type combo struct {
	steps, topk *int
	draft       *DraftTokens
}

// setting is what one combination adds to a point: flags after the method's
// args, and the parameters they set (or leave to the server).
type setting struct {
	flags  []string
	params []Param
}

// lists says which matrix lists an algorithm applies.
type lists struct{ steps, topk, draft bool }

// rules are SGLang's rules for one family of --speculative-algorithm names.
type rules interface {
	// applies says which of num_steps, topk and num_draft_tokens are applied.
	applies() lists
	// required lists the matrix keys that must be given.
	required() []string
	// apply turns one combination into a setting, or says why it is skipped.
	apply(alg string, c combo) (setting, string)
	// notes says what the plan should tell about the method's points.
	notes(method, alg string, m Matrix) []string
	// label describes what a point of the family sets, e.g. " block=16".
	label(p Point) string
}

// rulesOf returns the rules of an algorithm name. SGLang 2026 upper-cases the
// name; older releases refuse anything but upper case at argparse.
func rulesOf(algorithm string) rules {
	switch strings.ToUpper(algorithm) {
	case "EAGLE", "EAGLE3", "NEXTN", "STANDALONE":
		return eagleRules{}
	case "DFLASH":
		return dflashRules{}
	case "DSPARK":
		return dsparkRules{}
	case "NGRAM":
		return ngramRules{}
	}
	return pluginRules{}
}

// eagleRules: steps, topk and num_draft_tokens, with topk=1 forcing
// num_draft_tokens = num_steps+1.
type eagleRules struct{}

func (eagleRules) applies() lists     { return lists{true, true, true} }
func (eagleRules) required() []string { return []string{"num_steps", "topk"} }

func (eagleRules) apply(alg string, c combo) (setting, string) {
	if c.steps == nil || c.topk == nil {
		// Parse requires both; only a hand-built spec gets here.
		return setting{}, fmt.Sprintf("%s needs num_steps and topk", alg)
	}
	steps, topk := *c.steps, *c.topk
	d := DraftTokens{Auto: true}
	if c.draft != nil {
		d = *c.draft
	}
	ndt, reason := eagleDraftTokens(steps, topk, d)
	if reason != "" {
		return setting{}, reason
	}
	return setting{
		flags: []string{FlagNumSteps, strconv.Itoa(steps), FlagTopK, strconv.Itoa(topk), FlagNumDraftTokens, strconv.Itoa(ndt)},
		params: []Param{passed(ParamNumSteps, FlagNumSteps, steps), passed(ParamTopK, FlagTopK, topk),
			passed(ParamNumDraftTokens, FlagNumDraftTokens, ndt)},
	}, ""
}

// eagleDraftTokens returns the num_draft_tokens to run, or why the
// combination is skipped.
func eagleDraftTokens(steps, topk int, d DraftTokens) (int, string) {
	if topk == 1 {
		// SGLang silently forces num_draft_tokens = num_steps+1 for topk=1.
		if d.Auto || d.N == steps+1 {
			return steps + 1, ""
		}
		return 0, fmt.Sprintf("topk=1 forces num_draft_tokens=num_steps+1=%d (SGLang would silently run %d, not %d)", steps+1, steps+1, d.N)
	}
	limit := int64(steps)*int64(topk) + 1
	if d.Auto {
		return 0, fmt.Sprintf("num_draft_tokens auto needs topk=1 (with topk=%d give explicit values up to num_steps*topk+1=%d)", topk, limit)
	}
	// Nothing in SGLang checks this at start; such a tree fails at run time.
	if int64(d.N) > limit {
		return 0, fmt.Sprintf("num_draft_tokens %d exceeds num_steps*topk+1 = %d (the draft tree has fewer tokens; SGLang would fail at run time)", d.N, limit)
	}
	return d.N, ""
}

func (eagleRules) notes(string, string, Matrix) []string { return nil }

func (eagleRules) label(p Point) string {
	if p.NumSteps == nil || p.TopK == nil || p.NumDraftTokens == nil {
		return ""
	}
	return fmt.Sprintf(" s=%d k=%d n=%d", *p.NumSteps, *p.TopK, *p.NumDraftTokens)
}

// dflashRules: the block size is the one knob; SGLang sets num_draft_tokens
// to it and forces num_steps=1, topk=1 (newer releases refuse a topk flag).
type dflashRules struct{}

func (dflashRules) applies() lists     { return lists{draft: true} }
func (dflashRules) required() []string { return nil }

func (dflashRules) apply(_ string, c combo) (setting, string) {
	st := setting{params: []Param{leftToServer(ParamNumSteps, ptr(1)), leftToServer(ParamTopK, ptr(1))}}
	if c.draft == nil || c.draft.Auto {
		// SGLang takes the block size from the draft checkpoint.
		st.params = append(st.params, leftToServer(ParamNumDraftTokens, nil), leftToServer(ParamDFlashBlock, nil))
		return st, ""
	}
	b := c.draft.N
	st.flags = []string{FlagDFlashBlockSize, strconv.Itoa(b)}
	st.params = append(st.params, leftToServer(ParamNumDraftTokens, ptr(b)), passed(ParamDFlashBlock, FlagDFlashBlockSize, b))
	return st, ""
}

func (dflashRules) notes(method, alg string, m Matrix) []string {
	n := fmt.Sprintf("method %q (%s): each num_draft_tokens value is passed as the block size (%s)", method, alg, FlagDFlashBlockSize)
	if len(m.NumSteps) > 0 || len(m.TopK) > 0 {
		n += "; num_steps and topk are not applied (DFLASH runs 1 and 1)"
	}
	notes := []string{n}
	if hasAuto(m) {
		notes = append(notes, fmt.Sprintf("method %q (%s): num_draft_tokens auto leaves the block size to SGLang (the draft checkpoint's, else %d); the value it runs is read back", method, alg, dflashFallbackBlock))
	}
	return notes
}

func (dflashRules) label(p Point) string { return " block=" + optional(p.NumDraftTokens, 0) }

// dsparkRules: gamma (--speculative-dspark-block-size) is the knob; SGLang
// verifies gamma+1 tokens and forces num_steps=1, topk=1.
type dsparkRules struct{}

func (dsparkRules) applies() lists     { return lists{draft: true} }
func (dsparkRules) required() []string { return nil }

func (dsparkRules) apply(_ string, c combo) (setting, string) {
	st := setting{params: []Param{leftToServer(ParamNumSteps, ptr(1)), leftToServer(ParamTopK, ptr(1))}}
	if c.draft == nil || c.draft.Auto {
		// SGLang takes gamma from the draft checkpoint.
		st.params = append(st.params, leftToServer(ParamNumDraftTokens, nil), leftToServer(ParamDSparkBlock, nil))
		return st, ""
	}
	n := c.draft.N
	if n < 2 {
		return setting{}, fmt.Sprintf("num_draft_tokens %d would be gamma %d: DSPARK verifies gamma+1 tokens and SGLang refuses %s below 1", n, n-1, FlagDSparkBlockSize)
	}
	st.flags = []string{FlagDSparkBlockSize, strconv.Itoa(n - 1)}
	st.params = append(st.params, leftToServer(ParamNumDraftTokens, ptr(n)), passed(ParamDSparkBlock, FlagDSparkBlockSize, n-1))
	return st, ""
}

func (dsparkRules) notes(method, alg string, m Matrix) []string {
	n := fmt.Sprintf("method %q (%s): each num_draft_tokens value N is passed as gamma N-1 (%s; DSPARK verifies gamma+1 tokens)", method, alg, FlagDSparkBlockSize)
	if len(m.NumSteps) > 0 || len(m.TopK) > 0 {
		n += "; num_steps and topk are not applied (DSPARK runs 1 and 1)"
	}
	notes := []string{n}
	if hasAuto(m) {
		notes = append(notes, fmt.Sprintf("method %q (%s): num_draft_tokens auto leaves gamma to SGLang (from the draft checkpoint); the value it runs is read back", method, alg))
	}
	return notes
}

func (dsparkRules) label(p Point) string { return " gamma=" + optional(p.NumDraftTokens, -1) }

// ngramRules: topk is --speculative-ngram-max-bfs-breadth (SGLang overwrites
// --speculative-eagle-topk with it), num_draft_tokens is passed as is, and
// num_steps is not used; nothing is forced.
type ngramRules struct{}

func (ngramRules) applies() lists     { return lists{topk: true, draft: true} }
func (ngramRules) required() []string { return nil }

func (ngramRules) apply(_ string, c combo) (setting, string) {
	var st setting
	st.params = append(st.params, leftToServer(ParamNumSteps, nil))
	breadth := leftToServer(ParamNgramBreadth, ptr(ngramDefaultBreadth))
	if c.topk != nil {
		k := *c.topk
		st.flags = append(st.flags, FlagNgramMaxBFSBreadth, strconv.Itoa(k))
		breadth = passed(ParamNgramBreadth, FlagNgramMaxBFSBreadth, k)
	}
	st.params = append(st.params, leftToServer(ParamTopK, clonePtr(breadth.Expected)))
	if c.draft == nil || c.draft.Auto {
		st.params = append(st.params, leftToServer(ParamNumDraftTokens, ptr(ngramDefaultDraftTokens)))
	} else {
		n := c.draft.N
		st.flags = append(st.flags, FlagNumDraftTokens, strconv.Itoa(n))
		st.params = append(st.params, passed(ParamNumDraftTokens, FlagNumDraftTokens, n))
	}
	st.params = append(st.params, breadth)
	return st, ""
}

func (ngramRules) notes(method, alg string, m Matrix) []string {
	var parts []string
	if len(m.TopK) > 0 {
		parts = append(parts, "each topk value is passed as "+FlagNgramMaxBFSBreadth+" (NGRAM's topk)")
	} else {
		parts = append(parts, fmt.Sprintf("topk is left to SGLang (%s defaults to %d)", FlagNgramMaxBFSBreadth, ngramDefaultBreadth))
	}
	if len(m.NumSteps) > 0 {
		parts = append(parts, "num_steps is not applied (NGRAM does not use it)")
	}
	if hasAuto(m) {
		parts = append(parts, fmt.Sprintf("num_draft_tokens auto leaves it to SGLang (%d)", ngramDefaultDraftTokens))
	}
	return []string{fmt.Sprintf("method %q (%s): %s", method, alg, strings.Join(parts, "; "))}
}

func (ngramRules) label(p Point) string {
	return " k=" + optional(p.TopK, 0) + " n=" + optional(p.NumDraftTokens, 0)
}

// pluginRules: an algorithm specsweep does not know (a plugin registered with
// SGLang, or a builtin newer than this table). The matrix values are passed
// as written and nothing is forced; what SGLang runs is read back.
type pluginRules struct{}

func (pluginRules) applies() lists     { return lists{true, true, true} }
func (pluginRules) required() []string { return nil }

func (pluginRules) apply(_ string, c combo) (setting, string) {
	var st setting
	add := func(name, flag string, v *int) {
		if v == nil {
			st.params = append(st.params, leftToServer(name, nil))
			return
		}
		st.flags = append(st.flags, flag, strconv.Itoa(*v))
		st.params = append(st.params, asWritten(name, flag, *v))
	}
	add(ParamNumSteps, FlagNumSteps, c.steps)
	add(ParamTopK, FlagTopK, c.topk)
	var n *int
	if c.draft != nil && !c.draft.Auto {
		n = ptr(c.draft.N)
	}
	add(ParamNumDraftTokens, FlagNumDraftTokens, n)
	return st, ""
}

func (pluginRules) notes(method, alg string, _ Matrix) []string {
	return []string{fmt.Sprintf("method %q: algorithm %q is not one specsweep knows (a plugin?): num_steps, topk and num_draft_tokens are passed as written, nothing is forced or skipped, and the values SGLang runs will be read back", method, alg)}
}

func (pluginRules) label(p Point) string {
	var b strings.Builder
	for _, f := range []struct {
		key string
		v   *int
	}{{"s", p.NumSteps}, {"k", p.TopK}, {"n", p.NumDraftTokens}} {
		if f.v != nil {
			fmt.Fprintf(&b, " %s=%d", f.key, *f.v)
		}
	}
	return b.String()
}

// combos lists the combinations of the matrix lists r applies, in matrix
// order; a list left out (or not applied) contributes one nil.
func combos(r rules, m Matrix) []combo {
	use := r.applies()
	steps, topks := intsOrNil(m.NumSteps, use.steps), intsOrNil(m.TopK, use.topk)
	drafts := []*DraftTokens{nil}
	if use.draft && len(m.NumDraftTokens) > 0 {
		drafts = drafts[:0]
		for i := range m.NumDraftTokens {
			drafts = append(drafts, &m.NumDraftTokens[i])
		}
	}
	var out []combo
	for _, s := range steps {
		for _, k := range topks {
			for _, d := range drafts {
				out = append(out, combo{steps: s, topk: k, draft: d})
			}
		}
	}
	return out
}

func intsOrNil(vals []int, use bool) []*int {
	if !use || len(vals) == 0 {
		return []*int{nil}
	}
	out := make([]*int, len(vals))
	for i := range vals {
		out[i] = &vals[i]
	}
	return out
}

func hasAuto(m Matrix) bool {
	for _, d := range m.NumDraftTokens {
		if d.Auto {
			return true
		}
	}
	return false
}

// optional formats *v+offset, or "auto" when the value is left to the server.
func optional(v *int, offset int) string {
	if v == nil {
		return "auto"
	}
	return strconv.Itoa(*v + offset)
}
