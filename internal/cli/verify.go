package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

func verifyCmd() command {
	return newCommand("verify", "SWEEP",
		"Write and run a sweep of phases that checks a sweep's answers under shifting load: the baseline, the recommended fixed configuration, SGLang's default adaptive schedule and the one fitted from the sweep.", verifyRun).
		withExamples("specsweep verify nightly                                  # phases c=lowest:60s, c=highest:60s, c=lowest:60s",
			"specsweep verify 3 --traffic @mix.txt --phases c=1:2m,c=64:2m,c=16:2m,c=1:2m",
			"specsweep verify 3 -o verify.yaml --no-run               # write the spec; run it later with specsweep run or submit")
}

type verifyOptions struct {
	DB                string // --db
	Traffic           string // --traffic: the recommendation's mix, or @FILE
	SLO               string // --slo
	Phases            string // --phases
	Out               string // -o: the spec to write
	SpecDir           string // --spec-dir: the folder the source spec's relative paths are relative to
	ConfigPath        string // --config-path: where the hosts keep the fitted schedule
	Schedule          string // --schedule: a schedule of the user's to verify beside the fitted one
	NoRun             bool   // --no-run
	New               bool   // --new
	AcceptNewHostKeys bool   // --accept-new-host-keys
	Sweep             string // SWEEP
}

func (o *verifyOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Traffic, "traffic", "", "the recommendation's traffic `MIX` (as for recommend; default: equal shares over the measured levels)")
	fs.StringVar(&o.SLO, "slo", "", "latency `SLOS` the recommended configuration must meet (as for recommend)")
	fs.StringVar(&o.Phases, "phases", "", "the shifting load, `PHASES` c=1:60s,c=64:60s,c=1:60s (default: the lowest measured level, the highest, the lowest, 60 s each)")
	fs.StringVar(&o.Out, "o", "", "write the verification spec to `FILE` (default: NAME-verify.yaml in the current folder)")
	fs.StringVar(&o.SpecDir, "spec-dir", "", "`DIR`, the folder of the spec the sweep ran from: a local host's relative command and prompt set paths are made absolute against it (default: -o's folder)")
	fs.StringVar(&o.ConfigPath, "config-path", "", "where the hosts keep the fitted schedule, an absolute `PATH` (default: beside the spec for local hosts, /var/lib/specsweep/NAME-adaptive.json otherwise)")
	fs.StringVar(&o.Schedule, "schedule", "", "also verify the adaptive schedule in `FILE` (SGLang's --speculative-adaptive-config JSON, e.g. a hand-tuned one), as point adaptive-given")
	fs.BoolVar(&o.NoRun, "no-run", false, "write the spec and stop (run it with specsweep run or submit)")
	fs.BoolVar(&o.New, "new", false, "run a new verification even if one of this name exists")
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown SSH host keys to known_hosts (a changed key is always refused)")
}

func (o *verifyOptions) args(pos []string) (err error) {
	o.Sweep, err = oneArg(pos, "SWEEP")
	return err
}

// verifyRun builds the verification spec of a recorded sweep, writes it, runs it and says how the
// adaptive schedules stood against the fixed configurations (report.AdaptiveChecks).
func verifyRun(ctx context.Context, env Env, o *verifyOptions) error {
	opt, err := mixOptions(o.Traffic, o.SLO)
	if err != nil {
		return err
	}
	var phases []sweep.Phase
	if o.Phases != "" {
		if phases, err = parsePhases(o.Phases); err != nil {
			return usagef("--phases %s: %v", o.Phases, err)
		}
	}
	if o.ConfigPath != "" {
		if err := sweep.CheckFilePath(o.ConfigPath); err != nil {
			return usagef("--config-path: %v", err)
		}
	}
	var given *givenSchedule
	if o.Schedule != "" {
		if given, err = readSchedule(o.Schedule); err != nil {
			return err
		}
	}
	st, sw, err := openRecorded(ctx, env, o.DB, o.Sweep, "verify")
	if err != nil {
		return err
	}
	s, err := report.LoadID(ctx, st, sw.ID)
	st.Close()
	if err != nil {
		return fmt.Errorf("loading sweep %s (id %d): %w", sw.Name, sw.ID, err)
	}
	v, err := buildVerify(s, sw, opt, phases, given, o)
	if err != nil {
		return err
	}
	if err := os.WriteFile(v.path, v.text, 0o600); err != nil { // the spec may hold the source's env
		return fmt.Errorf("verify: write %s: %w", v.path, err)
	}
	fmt.Fprintf(env.Stdout, "Wrote %s: sweep %s, %d point(s) under phases %s:\n", v.path, v.spec.Name, len(v.plan.Points), phasesWords(v.spec.Workload.Phases))
	for _, w := range v.what {
		fmt.Fprintf(env.Stdout, "  %s\n", w)
	}
	for _, n := range v.notes {
		fmt.Fprintf(env.Stdout, "note: %s\n", n)
	}
	if o.NoRun {
		fmt.Fprintf(env.Stdout, "Run it with: specsweep run %s\n", v.path)
		return nil
	}
	fresh := o.New
	if prior, ok := priorVerification(ctx, env, o.DB, v.spec.Name); ok && prior.SpecHash != v.spec.Hash() && !fresh {
		// A verification of other points (the source was measured again, other flags): this one
		// is new; one of the same points resumes, or reports its result when done.
		fmt.Fprintf(env.Stdout, "note: verification %s (id %d) has other points or phases: starting a new one\n", prior.Name, prior.ID)
		fresh = true
	}
	runErr := runRun(ctx, env, &runOptions{DB: o.DB, Spec: v.path, New: fresh, AcceptNewHostKeys: o.AcceptNewHostKeys, LogFormat: "text"})
	if ctx.Err() != nil {
		return runErr
	}
	if err := printVerdicts(ctx, env, o.DB, v.spec.Name, v.spec.Hash()); err != nil && runErr == nil {
		return err
	}
	return runErr
}

// priorVerification is the latest sweep of the verification's name, if the store has one.
func priorVerification(ctx context.Context, env Env, db, name string) (store.Sweep, bool) {
	st, err := store.OpenReadOnly(ctx, dbPath(env, db))
	if err != nil {
		return store.Sweep{}, false
	}
	defer st.Close()
	sw, err := st.FindSweep(ctx, name)
	return sw, err == nil
}

// verification is the spec verify writes.
type verification struct {
	path  string
	text  []byte
	spec  *sweep.Spec
	plan  *sweep.Plan
	what  []string // what each method is, for people
	notes []string
}

// Method names of the verification spec: its labels in every table.
const (
	verifyBaseline    = "baseline"
	verifyRecommended = "recommended"
	verifyDefault     = "adaptive-default"
	verifyFitted      = "adaptive-fitted"
	verifyGiven       = "adaptive-given"
	// defaultAdaptiveSteps is where the default schedule starts: the middle of SGLang main's default
	// candidates [0, 1, 3, 5, 7], SGLang's own choice when --speculative-num-steps is not given
	// (python/sglang/srt/speculative/adaptive_spec_params.py at 015c872); also a candidate of 0.5.10's
	// default [1, 3, 7].
	defaultAdaptiveSteps = 3
)

func buildVerify(s *report.Sweep, sw store.Sweep, opt report.RecommendOptions, phases []sweep.Phase, given *givenSchedule, o *verifyOptions) (*verification, error) {
	src, err := sweep.Parse(sw.Name+".yaml", []byte(sw.SpecText))
	if err != nil {
		return nil, fmt.Errorf("verify: sweep %s (id %d): its stored spec no longer parses: %w", sw.Name, sw.ID, err)
	}
	fit, err := report.FitAdaptive(s)
	if err != nil {
		return nil, exitError{code: ExitFailure, err: fmt.Errorf("verify: sweep %s (id %d) has no schedule to verify: %w", s.Name, s.ID, err)}
	}
	opt.TP = fit.TP
	rec, err := report.Recommend(s, opt)
	if err != nil {
		return nil, exitError{code: ExitFailure, err: fmt.Errorf("verify: sweep %s (id %d): no recommendation at tp %d (the fitted schedule's): %w", s.Name, s.ID, fit.TP, err)}
	}
	chain, ok := src.Methods[fit.Method]
	if !ok {
		return nil, fmt.Errorf("verify: the fitted chain's method %q is not in sweep %s's spec", fit.Method, s.Name)
	}
	name, _, _ := strings.Cut(sw.Name, "@") // a scheduled sweep's firing: NAME@TIME
	name += "-verify"
	v := &verification{path: o.Out}
	if v.path == "" {
		v.path = name + ".yaml"
	}
	if v.path, err = filepath.Abs(v.path); err != nil {
		return nil, err
	}
	specDir := o.SpecDir
	if specDir == "" {
		specDir = filepath.Dir(v.path)
	}
	if specDir, err = filepath.Abs(specDir); err != nil {
		return nil, err
	}
	if len(phases) == 0 {
		lo, hi := slices.Min(s.Levels), slices.Max(s.Levels)
		phases = []sweep.Phase{{Concurrency: lo, For: time.Minute}, {Concurrency: hi, For: time.Minute}, {Concurrency: lo, For: time.Minute}}
	}
	configPath := o.ConfigPath
	if configPath == "" {
		configPath = "/var/lib/specsweep/" + name + "-adaptive.json"
		if allLocal(src) {
			configPath = filepath.Join(filepath.Dir(v.path), name+"-adaptive.json")
		}
	}

	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(sw.SpecText), &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("verify: sweep %s's stored spec is not a YAML mapping", s.Name)
	}
	top := doc.Content[0]
	setKey(top, "name", strNode(name))
	delKey(top, "search")
	delKey(top, "schedule")
	absolutePaths(top, src, specDir)

	methods := &yaml.Node{Kind: yaml.MappingNode}
	var order []string
	add := func(key string, m verifyMethod, what string) {
		methods.Content = append(methods.Content, strNode(key), m.node())
		order = append(order, key)
		v.what = append(v.what, fmt.Sprintf("%-17s %s", key, what))
	}
	if base := report.BaselineAt(s, fit.TP); base != nil {
		bm := src.Methods[base.Method]
		add(verifyBaseline, verifyMethod{Args: bm.Args, Env: bm.Env}, "no speculation (method "+base.Method+" of the sweep)")
	} else {
		v.notes = append(v.notes, fmt.Sprintf("sweep %s measured no baseline at tp %d: the verification has none", s.Name, fit.TP))
	}
	if w := rec.Winner.Point; w.Baseline {
		v.notes = append(v.notes, "the recommended configuration is the baseline: no separate fixed configuration")
	} else {
		add(verifyRecommended, fixedMethod(src.Methods[w.Method], w), fmt.Sprintf("%s, the recommendation for %s", w.Label(), report.MixWords(rec.Traffic, rec.DefaultTraffic)))
	}
	// The best fixed configuration of each phase's level, so each phase is compared with the one a
	// static deployment would have chosen for it (measured under the same shifting load).
	chosen := map[*report.Point]bool{rec.Winner.Point: true}
	if base := report.BaselineAt(s, fit.TP); base != nil {
		chosen[base] = true
	}
	for _, c := range distinctLevels(phases) {
		best := bestFixedAt(s, fit.TP, c)
		switch {
		case best == nil:
			v.notes = append(v.notes, fmt.Sprintf("sweep %s did not measure concurrency %d at tp %d: its phases are compared with the configurations measured here only", s.Name, c, fit.TP))
			continue
		case chosen[best]:
			continue
		}
		chosen[best] = true
		bm := src.Methods[best.Method]
		add(fmt.Sprintf("best-c%d", c), fixedMethod(bm, best), fmt.Sprintf("%s, the sweep's best at concurrency %d", best.Label(), c))
	}
	adaptiveArgs := append(slices.Clone(chain.Args), "--speculative-adaptive")
	// An adaptive server is a speculative one: SGLang caps it at 48 running requests unless told
	// otherwise, and its steps-0 slots stand in for the baseline, which has no cap.
	highest := slices.Max(distinctLevels(phases))
	if n := report.NeedsMaxRunning(slices.Concat(src.Server.Args, chain.Args), max(highest, fit.MaxRunning)); n > 0 {
		adaptiveArgs = append(adaptiveArgs, "--max-running-requests", strconv.Itoa(n))
		v.notes = append(v.notes, fmt.Sprintf("the adaptive servers run with --max-running-requests %d: SGLang caps a speculative server at %d running requests unless it is given, and their slots without speculation stand in for the baseline, which has no cap",
			n, report.SpecMaxRunning))
	}
	add(verifyDefault, verifyMethod{Args: adaptiveArgs, Env: chain.Env, NumSteps: []int{defaultAdaptiveSteps}, TopK: []int{1}},
		fmt.Sprintf("%s with SGLang's default adaptive schedule, starting at %d steps", fit.Method, defaultAdaptiveSteps))
	add(verifyFitted, verifyMethod{Args: append(slices.Clone(adaptiveArgs), "--speculative-adaptive-config", configPath), Env: chain.Env,
		NumSteps: []int{fit.InitialSteps}, TopK: []int{1}, Files: map[string]string{configPath: string(fit.JSON())}},
		fmt.Sprintf("%s with the schedule fitted from the sweep (%s on the host), starting at %d steps", fit.Method, configPath, fit.InitialSteps))
	if given != nil {
		path := filepath.Join(filepath.Dir(configPath), name+"-given.json")
		start := given.start(fit.InitialSteps)
		add(verifyGiven, verifyMethod{Args: append(slices.Clone(adaptiveArgs), "--speculative-adaptive-config", path), Env: chain.Env,
			NumSteps: []int{start}, TopK: []int{1}, Files: map[string]string{path: string(given.data)}},
			fmt.Sprintf("%s with the schedule of %s (%s on the host), starting at %d steps", fit.Method, o.Schedule, path, start))
	}
	setKey(top, "methods", methods)

	matrix := &yaml.Node{}
	if err := matrix.Encode(struct {
		Method []string `yaml:"method,flow"`
		TP     []int    `yaml:"tp,flow"`
	}{order, []int{fit.TP}}); err != nil {
		return nil, err
	}
	setKey(top, "matrix", matrix)
	if err := verifyWorkload(top, src, phases, &v.notes); err != nil {
		return nil, err
	}

	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("verify: encoding the spec: %w", err)
	}
	head := fmt.Sprintf("# Written by `specsweep verify %s` from sweep %s (id %d) on %s: the baseline, the recommended fixed\n"+
		"# configuration, SGLang's default adaptive schedule and the one fitted from the sweep, under a load that shifts.\n",
		o.Sweep, sw.Name, sw.ID, time.Now().UTC().Format(time.RFC3339))
	v.text = append([]byte(head), out...)
	if v.spec, err = sweep.Parse(v.path, v.text); err != nil {
		return nil, fmt.Errorf("verify: the verification spec does not validate (a bug; please report it with the sweep's spec): %w", err)
	}
	v.spec.ResolveSetPaths(filepath.Dir(v.path))
	v.plan = v.spec.Plan()
	return v, nil
}

// fixedMethod is the method that plans exactly point p of method m: m's args and env, p's values
// as its own lists.
func fixedMethod(m sweep.Method, p *report.Point) verifyMethod {
	vm := verifyMethod{Args: m.Args, Env: m.Env, Files: map[string]string{}}
	for _, f := range m.Files {
		vm.Files[f.Path] = f.Content
	}
	for i, list := range []*[]int{&vm.NumSteps, &vm.TopK, &vm.NumDraftTokens} {
		if r := p.Requested[i]; r != nil && !p.Baseline {
			*list = []int{*r}
		}
	}
	return vm
}

// bestFixedAt is the point with the highest median output tok/s at concurrency c among the sweep's
// fixed (not adaptive) points at tp; nil when none measured c.
func bestFixedAt(s *report.Sweep, tp, c int) *report.Point {
	var best *report.Point
	top := 0.0
	for _, p := range s.Points {
		cell := p.Cells[c]
		if p.TP != tp || cell == nil || !cell.TokS.OK() || argparse.Has(p.Argv, "--speculative-adaptive") {
			continue
		}
		if cell.TokS.Median > top {
			best, top = p, cell.TokS.Median
		}
	}
	return best
}

func distinctLevels(ph []sweep.Phase) []int {
	var out []int
	for _, p := range ph {
		if !slices.Contains(out, p.Concurrency) {
			out = append(out, p.Concurrency)
		}
	}
	return out
}

// verifyMethod is a method of the verification spec, as YAML.
type verifyMethod struct {
	Args           []string          `yaml:"args,flow"`
	Env            map[string]string `yaml:"env,omitempty"`
	NumSteps       []int             `yaml:"num_steps,omitempty,flow"`
	TopK           []int             `yaml:"topk,omitempty,flow"`
	NumDraftTokens []int             `yaml:"num_draft_tokens,omitempty,flow"`
	Files          map[string]string `yaml:"files,omitempty"`
}

func (m verifyMethod) node() *yaml.Node {
	if m.Args == nil {
		m.Args = []string{}
	}
	var n yaml.Node
	if err := n.Encode(m); err != nil {
		panic("verify: encoding a method: " + err.Error()) // strings, ints and maps of strings always encode
	}
	return &n
}

// verifyWorkload turns the source's workload into phases: one prompt source (the first set or
// length), no levels.
func verifyWorkload(top *yaml.Node, src *sweep.Spec, phases []sweep.Phase, notes *[]string) error {
	w := getKey(top, "workload")
	if w == nil || w.Kind != yaml.MappingNode {
		return errors.New("verify: the stored spec has no workload mapping")
	}
	delKey(w, "concurrency")
	delKey(w, "requests")
	ph := &yaml.Node{Kind: yaml.SequenceNode}
	for _, p := range phases {
		ph.Content = append(ph.Content, &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{
			strNode("concurrency"), intNode(p.Concurrency), strNode("for"), strNode(p.For.String())}})
	}
	setKey(w, "phases", ph)
	if sets := getKey(w, "datasets"); sets != nil && sets.Kind == yaml.SequenceNode && len(sets.Content) > 1 {
		sets.Content = sets.Content[:1]
		*notes = append(*notes, fmt.Sprintf("phases measure one prompt source: the first prompt set, %s", src.Workload.Datasets[0].Name))
	}
	if in := getKey(w, "input_tokens"); in != nil && in.Kind == yaml.SequenceNode && len(in.Content) > 1 {
		setKey(w, "input_tokens", in.Content[0])
		*notes = append(*notes, fmt.Sprintf("phases measure one prompt length: the first, %s tokens", in.Content[0].Value))
	}
	return nil
}

// absolutePaths makes a local host's relative command and the prompt sets' relative paths absolute
// against dir, so the verification spec runs from wherever it is written.
func absolutePaths(top *yaml.Node, src *sweep.Spec, dir string) {
	if srv := getKey(top, "server"); srv != nil {
		if cmd := getKey(srv, "command"); cmd != nil && cmd.Kind == yaml.SequenceNode && len(cmd.Content) > 0 {
			c0 := cmd.Content[0]
			if !filepath.IsAbs(c0.Value) && strings.Contains(c0.Value, "/") {
				c0.Value = filepath.Join(dir, c0.Value)
			}
		}
	}
	if w := getKey(top, "workload"); w != nil {
		if sets := getKey(w, "datasets"); sets != nil && sets.Kind == yaml.SequenceNode {
			for _, set := range sets.Content {
				if p := getKey(set, "path"); p != nil && p.Value != "" && !filepath.IsAbs(p.Value) {
					p.Value = filepath.Join(dir, p.Value)
				}
			}
		}
	}
}

func allLocal(s *sweep.Spec) bool {
	for _, h := range s.Hosts {
		if h.Driver != sweep.DriverLocal {
			return false
		}
	}
	return true
}

// parsePhases reads --phases: c=N:DURATION terms, comma-separated, within the spec's limits.
func parsePhases(text string) ([]sweep.Phase, error) {
	lim := map[string]sweep.Limit{}
	for _, l := range sweep.Limits() {
		lim[l.Key] = l
	}
	terms := strings.Split(text, ",")
	if l := lim[sweep.LimitPhases]; int64(len(terms)) > l.Max {
		return nil, fmt.Errorf("%d phases, above the limit %d (%s)", len(terms), l.Max, l.Why)
	}
	var out []sweep.Phase
	for _, t := range terms {
		t = strings.TrimSpace(t)
		c, d, ok := strings.Cut(strings.TrimPrefix(t, "c="), ":")
		if !strings.HasPrefix(t, "c=") || !ok {
			return nil, fmt.Errorf("%q: want c=CONCURRENCY:DURATION, e.g. c=64:60s", t)
		}
		n, err := strconv.Atoi(c)
		if l := lim[sweep.LimitConcurrency]; err != nil || int64(n) < l.Min || int64(n) > l.Max {
			return nil, fmt.Errorf("%q: the concurrency must be an integer from %d to %d", t, l.Min, l.Max)
		}
		dur, err := time.ParseDuration(d)
		if l := lim[sweep.LimitPhaseFor]; err != nil || int64(dur) < l.Min || int64(dur) > l.Max {
			return nil, fmt.Errorf("%q: the duration must be from %s to %s (like 90s or 2m)", t, l.Format(l.Min), l.Format(l.Max))
		}
		out = append(out, sweep.Phase{Concurrency: n, For: dur})
	}
	return out, nil
}

func phasesWords(ph []sweep.Phase) string {
	var w []string
	for _, p := range ph {
		w = append(w, fmt.Sprintf("c=%d:%s", p.Concurrency, p.For))
	}
	return strings.Join(w, ",")
}

// printVerdicts prints how each adaptive schedule stood against the fixed configurations in the
// verification sweep named name (its latest).
func printVerdicts(ctx context.Context, env Env, db, name, hash string) error {
	st, sw, err := openRecorded(ctx, env, db, name, "verify")
	if err != nil {
		return err
	}
	defer st.Close()
	if sw.SpecHash != hash {
		return nil // not the verification just written: the run said why
	}
	s, err := report.LoadID(ctx, st, sw.ID)
	if err != nil {
		return err
	}
	checks := report.AdaptiveChecks(s)
	if len(checks) == 0 {
		fmt.Fprintf(env.Stdout, "\nSweep %s (id %d) measured no adaptive schedule beside a fixed configuration: nothing to compare (see specsweep report %d).\n", s.Name, s.ID, s.ID)
		return nil
	}
	fmt.Fprintf(env.Stdout, "\nAdaptive schedules against the best fixed configuration (output tok/s; within %.0f%% counts as a match):\n", report.VerifyTolerance*100)
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ADAPTIVE\tPHASE\tCONCURRENCY\tTOK/S\tBEST FIXED\tTOK/S\tRATIO\tVERDICT\t")
	line := func(p *report.Point, phase, conc string, v report.PhaseVerdict) {
		best, bt, ratio := "-", "-", "-"
		if v.Best != nil {
			best, bt = v.Best.Label(), fmt.Sprintf("%.1f", v.BestTokS)
			if v.TokS > 0 {
				ratio = fmt.Sprintf("%.3f", v.Ratio())
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t\n", p.Label(), phase, conc, v.TokS, best, bt, ratio, report.VerdictWords(v))
	}
	for _, ch := range checks {
		for _, v := range ch.Phases {
			line(ch.Point, strconv.Itoa(v.Phase), strconv.Itoa(v.Concurrency), v)
		}
		line(ch.Point, "whole run", "-", ch.Whole)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "Step switches, settling and tok/s over time: specsweep report %d.\n", s.ID)
	return nil
}

// YAML node helpers for editing the stored spec in place (its hosts and server as the user wrote them).

func strNode(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
func intNode(n int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(n)}
}

func getKey(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func setKey(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, strNode(key), v)
}

func delKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// givenSchedule is --schedule's file: SGLang's adaptive config as the user wrote it.
type givenSchedule struct {
	data []byte
	// candidates is the union of its slots' candidate_steps (the flat format's list too), ascending.
	candidates []int
}

// maxScheduleBytes bounds --schedule's file (a method file's bound: docs/spec.md, "methods").
const maxScheduleBytes = 1 << 20

// readSchedule reads --schedule: a JSON object of at most maxScheduleBytes. SGLang's own checks are
// the server's (a bad schedule fails its point at start, with SGLang's words).
func readSchedule(path string) (*givenSchedule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--schedule %s: %v", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxScheduleBytes+1))
	if err != nil {
		return nil, usagef("--schedule %s: %v", path, err)
	}
	if len(data) > maxScheduleBytes {
		return nil, usagef("--schedule %s: larger than %d KiB (a schedule is a few slots)", path, maxScheduleBytes>>10)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, usagef("--schedule %s: not a JSON object, as SGLang's --speculative-adaptive-config wants: %v", path, err)
	}
	g := &givenSchedule{data: data}
	add := func(raw json.RawMessage) {
		var l []int
		if json.Unmarshal(raw, &l) == nil {
			for _, k := range l {
				if k >= 0 && !slices.Contains(g.candidates, k) {
					g.candidates = append(g.candidates, k)
				}
			}
		}
	}
	add(top["candidate_steps"])
	for k, raw := range top {
		if _, err := strconv.Atoi(k); err == nil {
			var slot map[string]json.RawMessage
			if json.Unmarshal(raw, &slot) == nil {
				add(slot["candidate_steps"])
			}
		}
	}
	slices.Sort(g.candidates)
	if !slices.ContainsFunc(g.candidates, func(k int) bool { return k > 0 }) {
		return nil, usagef("--schedule %s: no slot has a candidate step above 0: nothing to start a speculative server with", path)
	}
	return g, nil
}

// start is the steps the server starts with: the fit's when it is a candidate (the same start as
// the fitted schedule's), else SGLang main's own choice, the middle candidate, if it drafts, else
// the smallest that does (SGLang refuses a start outside the candidates).
func (g *givenSchedule) start(fit int) int {
	if slices.Contains(g.candidates, fit) {
		return fit
	}
	if mid := g.candidates[len(g.candidates)/2]; mid > 0 {
		return mid
	}
	for _, k := range g.candidates {
		if k > 0 {
			return k
		}
	}
	return fit
}
