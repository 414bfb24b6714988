package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

func watchCmd() command {
	return newCommand("watch", "SWEEP",
		"Re-measure the configuration `specsweep apply` deployed on a host, and the baseline, against the figures the decision was made on: now, or on a daemon schedule; --check says whether the latest watch found a regression.", watchRun).
		withExamples("specsweep watch nightly --host gpu1                      # one watch now, in the foreground",
			"specsweep watch nightly --host gpu1 --cron \"0 3 * * *\"  # a daemon schedule",
			"specsweep watch --check nightly --host gpu1              # exit 1 when the latest watch found a regression")
}

type watchOptions struct {
	DB                string  // --db
	Host              string  // --host
	Cron              string  // --cron: submit as a daemon schedule
	Traffic           string  // --traffic: the levels to watch
	Tolerance         float64 // --tolerance
	Out               string  // -o
	Check             bool    // --check
	AcceptNewHostKeys bool    // --accept-new-host-keys
	Sweep             string  // SWEEP: the sweep the deployment was decided on
}

func (o *watchOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Host, "host", "", "the spec's `HOST` whose applied configuration is watched (required)")
	fs.StringVar(&o.Cron, "cron", "", "submit the watch as a daemon schedule firing on `CRON` (default: one watch now, in the foreground)")
	fs.StringVar(&o.Traffic, "traffic", "", "the `MIX` whose levels are watched (default: every level the sweep measured)")
	fs.Float64Var(&o.Tolerance, "tolerance", 0.1, "how far below the decision's lowest repeat a figure may fall before it is a regression, a `FRACTION`")
	fs.StringVar(&o.Out, "o", "", "write the watch's spec to `FILE` (default: NAME-watch-HOST.yaml in the current folder)")
	fs.BoolVar(&o.Check, "check", false, "measure nothing: say whether the latest watch of the host found a regression (exit 1) or not (exit 0)")
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown SSH host keys to known_hosts (a changed key is always refused)")
}

func (o *watchOptions) args(pos []string) (err error) {
	o.Sweep, err = oneArg(pos, "SWEEP")
	return err
}

// watchName is the name of the watch sweeps of a decision's sweep and host.
func watchName(sweepName, host string) string {
	name, _, _ := strings.Cut(sweepName, "@")
	return strings.ToLower(name + "-watch-" + host)
}

// watchRun writes the watch of the host's applied configuration and runs it now, or submits it as a
// schedule; with --check it only judges the latest one.
func watchRun(ctx context.Context, env Env, o *watchOptions) error {
	if o.Host == "" {
		return usagef("--host is required: the host whose applied configuration is watched")
	}
	if !(o.Tolerance >= 0 && o.Tolerance < 1) {
		return usagef("--tolerance %g: want a fraction from 0 to below 1 (0.1 is 10%%)", o.Tolerance)
	}
	ro, sw, err := openRecorded(ctx, env, o.DB, o.Sweep, "watch")
	if err != nil {
		return err
	}
	ro.Close()
	if o.Check {
		return watchCheck(ctx, env, o.DB, watchName(sw.Name, o.Host))
	}
	opt := report.RecommendOptions{}
	if o.Traffic != "" {
		if opt.Traffic, err = readTraffic(o.Traffic); err != nil {
			return err
		}
	}
	path, spec, err := writeWatch(ctx, env, sw, opt, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "Wrote %s: watch %s of host %s, levels %s, held to sweep %s (id %d) within %.0f%%.\n", path, spec.Name, o.Host,
		joinLevels(spec.Workload.Concurrency), sw.Name, sw.ID, 100*o.Tolerance)
	if o.Cron != "" {
		return submitRun(ctx, env, &submitOptions{DB: o.DB, Cron: o.Cron, MinEvery: sweep.MinEvery, Spec: path, New: true})
	}
	runErr := runRun(ctx, env, &runOptions{DB: o.DB, Spec: path, New: true, AcceptNewHostKeys: o.AcceptNewHostKeys, LogFormat: "text"})
	if ctx.Err() != nil {
		return runErr
	}
	st, err := store.Open(ctx, dbPath(env, o.DB))
	if err != nil {
		return err
	}
	ws, err := st.FindSweep(ctx, spec.Name)
	if err == nil {
		err = recordWatch(ctx, st, ws.ID, spec)
	}
	st.Close()
	if err != nil {
		return err
	}
	if err := watchCheck(ctx, env, o.DB, spec.Name); err != nil {
		return err
	}
	return runErr
}

func joinLevels(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// writeWatch builds the watch spec from the decision's stored spec and the host's latest successful
// apply: the host alone, the baseline and the applied configuration (method sweep.WatchMethod) at the
// mix's levels, the decision's figures as reference.
func writeWatch(ctx context.Context, env Env, sw store.Sweep, opt report.RecommendOptions, o *watchOptions) (string, *sweep.Spec, error) {
	st, err := store.OpenReadOnly(ctx, dbPath(env, o.DB))
	if err != nil {
		return "", nil, err
	}
	defer st.Close()
	hist, err := st.Applies(ctx, o.Host, 100)
	if err != nil {
		return "", nil, err
	}
	var ap *store.Apply
	for i := range hist {
		if hist[i].Action == store.ApplyActionApply && hist[i].Result == store.ApplyApplied {
			ap = &hist[i]
			break
		}
	}
	if ap == nil || ap.SweepID != sw.ID {
		return "", nil, exitError{code: ExitFailure, err: fmt.Errorf("watch: host %s has no configuration of sweep %s applied (the latest successful `specsweep apply` on it is the watched one; `specsweep apply %s --host %s` first)",
			o.Host, sw.Name, sw.Name, o.Host)}
	}
	s, err := report.LoadID(ctx, st, sw.ID)
	if err != nil {
		return "", nil, err
	}
	src, err := sweep.Parse(sw.Name+".yaml", []byte(sw.SpecText))
	if err != nil {
		return "", nil, fmt.Errorf("watch: sweep %s (id %d): its stored spec no longer parses: %w", sw.Name, sw.ID, err)
	}
	hi := slices.IndexFunc(src.Hosts, func(h sweep.Host) bool { return h.Name == o.Host })
	if hi < 0 {
		return "", nil, usagef("--host %s: sweep %s has no such host", o.Host, sw.Name)
	}
	host := src.Hosts[hi]
	byID := map[string]*report.Point{}
	for _, p := range s.Points {
		byID[p.ID] = p
	}
	traffic := opt.Traffic
	if traffic == nil {
		traffic = report.EqualTraffic(s.Levels)
	}
	levels := traffic.Levels()
	reference := map[int]string{}
	var applied verifyMethod
	var tp int
	switch ap.Choice {
	case "adaptive":
		fit, err := report.FitAdaptive(s)
		if err != nil {
			return "", nil, fmt.Errorf("watch: the applied adaptive schedule cannot be fitted again: %w", err)
		}
		chain := src.Methods[fit.Method]
		path := "/var/lib/specsweep/applied/" + host.Unit + "-adaptive.json"
		args := append(slices.Clone(chain.Args), "--speculative-adaptive", "--speculative-adaptive-config", path)
		if fit.MaxRunning > 0 {
			args = append(args, "--max-running-requests", strconv.Itoa(fit.MaxRunning))
		}
		applied = verifyMethod{Args: args, Env: chain.Env, NumSteps: []int{fit.InitialSteps}, TopK: []int{1}, Files: map[string]string{path: string(fit.JSON())}}
		tp = fit.TP
		for _, c := range levels {
			if p := fit.PointAt(s, c); p != nil {
				reference[c] = p.ID
			}
		}
	default:
		p := byID[ap.PointID]
		if p == nil {
			return "", nil, fmt.Errorf("watch: the applied point %s is not in sweep %s", ap.PointID, sw.Name)
		}
		applied, tp = fixedMethod(src.Methods[p.Method], p), p.TP
		for _, c := range levels {
			reference[c] = p.ID
		}
	}
	base := report.BaselineAt(s, tp)
	if base == nil {
		return "", nil, exitError{code: ExitFailure, err: fmt.Errorf("watch: sweep %s measured no baseline at tp %d: the speedup has nothing to be measured against", sw.Name, tp)}
	}
	name := watchName(sw.Name, o.Host)
	path := o.Out
	if path == "" {
		path = name + ".yaml"
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", nil, err
	}

	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(sw.SpecText), &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return "", nil, fmt.Errorf("watch: sweep %s's stored spec is not a YAML mapping", sw.Name)
	}
	top := doc.Content[0]
	setKey(top, "name", strNode(name))
	delKey(top, "search")
	delKey(top, "schedule")
	absolutePaths(top, src, filepath.Dir(path))
	// The host alone.
	if hs := getKey(top, "hosts"); hs != nil && hs.Kind == yaml.SequenceNode {
		var keep []*yaml.Node
		for _, h := range hs.Content {
			if n := getKey(h, "name"); n != nil && n.Value == o.Host {
				keep = append(keep, h)
			}
		}
		hs.Content = keep
	}
	bm := src.Methods[base.Method]
	methods := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		strNode(sweep.WatchBaseline), verifyMethod{Args: bm.Args, Env: bm.Env}.node(),
		strNode(sweep.WatchMethod), applied.node()}}
	setKey(top, "methods", methods)
	matrix := &yaml.Node{}
	if err := matrix.Encode(struct {
		Method []string `yaml:"method,flow"`
		TP     []int    `yaml:"tp,flow"`
	}{[]string{sweep.WatchBaseline, sweep.WatchMethod}, []int{tp}}); err != nil {
		return "", nil, err
	}
	setKey(top, "matrix", matrix)
	w := getKey(top, "workload")
	if w == nil || w.Kind != yaml.MappingNode {
		return "", nil, fmt.Errorf("watch: the stored spec has no workload mapping")
	}
	lv := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, c := range levels {
		lv.Content = append(lv.Content, intNode(c))
	}
	setKey(w, "concurrency", lv)
	delKey(w, "phases")
	if getKey(w, "requests") == nil {
		setKey(w, "requests", intNode(4*slices.Max(levels)))
	}
	ref := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for _, c := range levels {
		if id, ok := reference[c]; ok {
			ref.Content = append(ref.Content, intNode(c), strNode(id))
		}
	}
	watch := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		strNode("sweep_id"), intNode(int(sw.ID)), strNode("host"), strNode(o.Host), strNode("reference"), ref,
		strNode("tolerance"), {Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(o.Tolerance, 'g', -1, 64)}}}
	setKey(top, "watch", watch)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return "", nil, err
	}
	text := append([]byte(fmt.Sprintf("# Written by `specsweep watch %s --host %s`: the configuration applied on %s (%s) and the baseline,\n"+
		"# held to sweep %s (id %d).\n", o.Sweep, o.Host, o.Host, ap.Label, sw.Name, sw.ID)), out...)
	spec, err := sweep.Parse(path, text)
	if err != nil {
		return "", nil, fmt.Errorf("watch: the watch spec does not validate (a bug; please report it with the sweep's spec): %w", err)
	}
	if err := os.WriteFile(path, text, 0o600); err != nil { // it holds the source's environment
		return "", nil, fmt.Errorf("watch: write %s: %w", path, err)
	}
	return path, spec, nil
}

// recordWatch compares a finished watch sweep with its decision and records a `regression` event
// per regression (and a `watch` event either way), naming the measure and the engine versions. The
// daemon calls it after every watch it runs.
func recordWatch(ctx context.Context, st *store.DB, watchID int64, spec *sweep.Spec) error {
	if spec.Watch == nil {
		return nil
	}
	res, err := watchResult(ctx, st, watchID, spec.Watch)
	if err != nil {
		return err
	}
	for _, r := range res.Regressions {
		data, _ := json.Marshal(r) // strings and numbers always encode
		if err := st.AddEvent(ctx, store.Event{SweepID: watchID, Host: spec.Watch.Host, Kind: store.EventRegression, Detail: r.Words(), Data: data}); err != nil {
			return err
		}
	}
	detail := fmt.Sprintf("no regression: %d figure(s) within %.0f%% of sweep %d's", len(res.Checked), 100*spec.Watch.Tolerance, spec.Watch.SweepID)
	if n := len(res.Regressions); n > 0 {
		detail = fmt.Sprintf("%d regression(s) against sweep %d", n, spec.Watch.SweepID)
	}
	if len(res.Missing) > 0 {
		detail += "; not measured: " + strings.Join(res.Missing, ", ")
	}
	return st.AddEvent(ctx, store.Event{SweepID: watchID, Host: spec.Watch.Host, Kind: store.EventWatch, Detail: detail})
}

// watchResult loads a watch sweep and its decision and compares them.
func watchResult(ctx context.Context, st *store.DB, watchID int64, w *sweep.Watch) (report.WatchResult, error) {
	watch, err := report.LoadID(ctx, st, watchID)
	if err != nil {
		return report.WatchResult{}, err
	}
	decision, err := report.LoadID(ctx, st, w.SweepID)
	if err != nil {
		return report.WatchResult{}, fmt.Errorf("watch: the decision's sweep %d: %w", w.SweepID, err)
	}
	return report.Regressions(decision, watch, w), nil
}

// watchCheck judges the latest finished watch of name: exit 1 with each regression, 0 without.
func watchCheck(ctx context.Context, env Env, db, name string) error {
	st, err := store.OpenReadOnly(ctx, dbPath(env, db))
	if err != nil {
		return err
	}
	defer st.Close()
	all, err := st.ListSweeps(ctx)
	if err != nil {
		return err
	}
	var latest *store.Sweep
	for i := range all {
		sw := all[i]
		if (sw.Name == name || strings.HasPrefix(sw.Name, name+"@")) && (sw.State == store.SweepDone || sw.State == store.SweepFailed) &&
			(latest == nil || sw.FinishedAt.After(latest.FinishedAt)) {
			latest = &all[i]
		}
	}
	if latest == nil {
		return exitError{code: ExitFailure, err: fmt.Errorf("watch --check: no finished watch named %s (`specsweep watch` runs one)", name)}
	}
	spec, err := sweep.Parse(latest.Name+".yaml", []byte(latest.SpecText))
	if err != nil || spec.Watch == nil {
		return fmt.Errorf("watch --check: sweep %s (id %d) is not a watch: %v", latest.Name, latest.ID, err)
	}
	res, err := watchResult(ctx, st, latest.ID, spec.Watch)
	if err != nil {
		return err
	}
	when := latest.FinishedAt.Format(time.RFC3339)
	if len(res.Regressions) == 0 {
		fmt.Fprintf(env.Stdout, "No regression: watch %s (id %d, %s) measured %d figure(s) within %.0f%% of sweep %d's",
			latest.Name, latest.ID, when, len(res.Checked), 100*spec.Watch.Tolerance, spec.Watch.SweepID)
		if res.EngineAfter != "" {
			fmt.Fprintf(env.Stdout, " (SGLang %s)", res.EngineAfter)
		}
		fmt.Fprintln(env.Stdout, ".")
		if len(res.Missing) > 0 {
			fmt.Fprintf(env.Stdout, "Not measured: %s.\n", strings.Join(res.Missing, ", "))
		}
		if len(res.Checked) == 0 {
			return exitError{code: ExitFailure, err: fmt.Errorf("watch --check: watch %s measured nothing to compare", latest.Name)}
		}
		return nil
	}
	fmt.Fprintf(env.Stdout, "REGRESSION: watch %s (id %d, %s) against sweep %d:\n", latest.Name, latest.ID, when, spec.Watch.SweepID)
	for _, r := range res.Regressions {
		fmt.Fprintf(env.Stdout, "  %s\n", r.Words())
	}
	return exitError{code: ExitFailure, err: fmt.Errorf("watch: %d regression(s) on %s", len(res.Regressions), spec.Watch.Host)}
}
