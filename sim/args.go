package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// UsageError is an argparse error: usage + "PROG: error: msg" on stderr, exit 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// HelpRequested is returned by the parser for -h/--help.
type HelpRequested struct{}

func (HelpRequested) Error() string { return "help requested" }

// rawArgs holds what the command line gave, keyed by dest; absent = not given.
type rawArgs map[string]any

// Parser is one era's argparse parser.
type Parser struct {
	Era  *Era
	Prog string
	defs []*flagDef
}

// NewParser builds the parser of era from its flag table.
func NewParser(era *Era) (*Parser, error) {
	t, err := LoadFlagTable(era)
	if err != nil {
		return nil, err
	}
	return &Parser{Era: era, Prog: t.Prog, defs: buildDefs(t)}, nil
}

func optionString(d *flagDef) string { return strings.Join(d.names, "/") }

func metavar(d *flagDef) string {
	m := strings.ToUpper(d.dest)
	if len(d.choices) > 0 {
		m = "{" + strings.Join(d.choices, ",") + "}"
	}
	switch d.nargs {
	case "?":
		return "[" + m + "]"
	case "*":
		return "[" + m + " ...]"
	case "+":
		return m + " [" + m + " ...]"
	}
	return m
}

func usagePart(d *flagDef) string {
	switch d.kind {
	case kindStoreTrue, kindZeroArgs, kindZeroArgErr:
		return d.names[0]
	case kindBoolOpt:
		return d.names[0] + " | " + d.names[len(d.names)-1]
	}
	return d.names[0] + " " + metavar(d)
}

// Usage returns argparse's usage text, wrapped as argparse wraps it.
func (p *Parser) Usage() string {
	var b strings.Builder
	prefix := "usage: " + p.Prog + " "
	b.WriteString(prefix)
	indent := strings.Repeat(" ", len(prefix))
	col := len(prefix)
	parts := []string{"[-h]"}
	for _, d := range p.defs {
		s := usagePart(d)
		if !d.req {
			s = "[" + s + "]"
		}
		parts = append(parts, s)
	}
	for i, s := range parts {
		if i > 0 {
			if col+1+len(s) > 79 {
				b.WriteString("\n" + indent)
				col = len(indent)
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(s)
		col += len(s)
	}
	b.WriteByte('\n')
	return b.String()
}

// Help returns the -h text.
func (p *Parser) Help() string {
	var b strings.Builder
	b.WriteString(p.Usage())
	b.WriteString("\noptions:\n  -h, --help            show this help message and exit\n")
	for _, d := range p.defs {
		if d.kind != kindValue {
			b.WriteString("  " + strings.Join(d.names, ", ") + "\n")
			continue
		}
		parts := make([]string, len(d.names))
		for i, n := range d.names {
			parts[i] = n + " " + metavar(d)
		}
		b.WriteString("  " + strings.Join(parts, ", ") + "\n")
	}
	return b.String()
}

func (p *Parser) lookup(opt string) (*flagDef, error) {
	for _, d := range p.defs {
		for _, n := range d.names {
			if n == opt {
				return d, nil
			}
		}
	}
	if opt == "--" || !strings.HasPrefix(opt, "--") {
		return nil, nil
	}
	var matches []string
	var hit *flagDef
	for _, d := range p.defs {
		for _, n := range d.names {
			if strings.HasPrefix(n, opt) {
				matches = append(matches, n)
				hit = d
			}
		}
	}
	if strings.HasPrefix("--help", opt) {
		matches = append(matches, "--help")
		hit = nil
	}
	switch {
	case len(matches) > 1:
		return nil, &UsageError{fmt.Sprintf("ambiguous option: %s could match %s", opt, strings.Join(matches, ", "))}
	case len(matches) == 1 && hit == nil:
		return nil, HelpRequested{}
	}
	return hit, nil
}

func looksNegativeNumber(s string) bool {
	if !strings.HasPrefix(s, "-") {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// isOption reports whether a command-line word is an option, not a value.
func isOption(s string) bool {
	return strings.HasPrefix(s, "-") && s != "-" && !looksNegativeNumber(s)
}

var hriRE = regexp.MustCompile(`^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)$`)

// pyInt is Python's int() of a string.
func pyInt(v string) (int, bool) {
	s := strings.TrimSpace(v)
	if strings.Contains(s, "__") || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
	return n, err == nil
}

// humanReadableInt is SGLang's human_readable_int: 16384, 32k, 1.5M, 4Ki.
func humanReadableInt(v string) (int, bool) {
	s := strings.TrimSpace(v)
	if m := hriRE.FindStringSubmatch(s); m != nil {
		mult := map[string]float64{"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}[m[2]]
		if strings.HasSuffix(m[2], "i") && strings.Contains(m[1], ".") {
			return 0, false
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		return int(f * mult), true
	}
	return pyInt(s)
}

// convert applies the flag's type to one value, as argparse does.
func convert(d *flagDef, v string) (any, error) {
	bad := func() error {
		return &UsageError{fmt.Sprintf("argument %s: invalid %s value: %s", optionString(d), d.conv, pyRepr(v))}
	}
	var out any
	switch d.conv {
	case "int":
		n, ok := pyInt(v)
		if !ok {
			return nil, bad()
		}
		out = n
	case "float":
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return nil, bad()
		}
		out = f
	case "human_readable_int":
		n, ok := humanReadableInt(v)
		if !ok {
			return nil, bad()
		}
		out = n
	case "loads", "parse_cuda_graph_config_arg":
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, bad()
		}
		out = x
	case "json_list_type":
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, &UsageError{fmt.Sprintf("argument %s: Invalid JSON list: %s. Please provide a valid JSON list.", optionString(d), v)}
		}
		out = x
	case "nullable_str":
		if v == "" || v == "None" {
			return nil, nil
		}
		out = v
	case "pybool":
		out = v != ""
	case "str_or_int":
		if n, ok := pyInt(v); ok {
			return n, nil
		}
		out = v
	default:
		out = v
	}
	if len(d.choices) > 0 {
		key := fmt.Sprint(out)
		for _, c := range d.choices {
			if c == key {
				return out, nil
			}
		}
		q := make([]string, len(d.choices))
		for i, c := range d.choices {
			if d.intChoices {
				q[i] = c
			} else {
				q[i] = pyRepr(c)
			}
		}
		shown := pyRepr(v)
		if d.intChoices {
			shown = key
		}
		return nil, &UsageError{fmt.Sprintf("argument %s: invalid choice: %s (choose from %s)", optionString(d), shown, strings.Join(q, ", "))}
	}
	return out, nil
}

// parseRaw applies argparse's rules to argv: exact option or unambiguous
// prefix, "--opt value" or "--opt=value", nargs, store_true and
// BooleanOptionalAction options, unknown arguments collected and reported
// after required ones. notes are the warnings of deprecated flags.
func (p *Parser) parseRaw(argv []string) (raw rawArgs, notes []string, err error) {
	raw = rawArgs{}
	var unknown []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "-h" || a == "--help" {
			return nil, nil, HelpRequested{}
		}
		if !isOption(a) {
			unknown = append(unknown, a)
			continue
		}
		opt, val, hasVal := a, "", false
		if k := strings.IndexByte(a, '='); k >= 0 && strings.HasPrefix(a, "--") {
			opt, val, hasVal = a[:k], a[k+1:], true
		}
		if opt == "--" {
			unknown = append(unknown, argv[i+1:]...)
			break
		}
		d, err := p.lookup(opt)
		if err != nil {
			return nil, nil, err
		}
		if d == nil {
			unknown = append(unknown, a)
			continue
		}
		if d.deprecated {
			notes = append(notes, fmt.Sprintf("'%s' is deprecated and will be removed in a future release.", d.names[0]))
		}
		switch d.kind {
		case kindStoreTrue, kindBoolOpt, kindZeroArgs, kindZeroArgErr:
			if hasVal {
				return nil, nil, &UsageError{fmt.Sprintf("argument %s: ignored explicit argument %s", optionString(d), pyRepr(val))}
			}
			switch d.kind {
			case kindZeroArgErr:
				return nil, nil, &UsageError{fmt.Sprintf("argument %s: %s is no longer supported.", optionString(d), d.names[0])}
			case kindBoolOpt:
				raw[d.dest] = !strings.HasPrefix(p.matched(d, opt), "--no-")
			default:
				raw[d.dest] = true
			}
			continue
		}
		var vals []string
		if hasVal {
			vals = []string{val}
		} else {
			for j := i + 1; j < len(argv) && !isOption(argv[j]); j++ {
				vals = append(vals, argv[j])
				if d.nargs == "" || d.nargs == "?" {
					break
				}
			}
			i += len(vals)
		}
		switch {
		case (d.nargs == "" && len(vals) == 0):
			return nil, nil, &UsageError{fmt.Sprintf("argument %s: expected one argument", optionString(d))}
		case d.nargs == "+" && len(vals) == 0:
			return nil, nil, &UsageError{fmt.Sprintf("argument %s: expected at least one argument", optionString(d))}
		}
		if d.nargs == "" || (d.nargs == "?" && len(vals) == 1) {
			v, err := convert(d, vals[0])
			if err != nil {
				return nil, nil, err
			}
			raw[d.dest] = v
			continue
		}
		if d.nargs == "?" {
			raw[d.dest] = "" // the flag alone stores its const
			continue
		}
		list := make([]any, 0, len(vals))
		for _, s := range vals {
			v, err := convert(d, s)
			if err != nil {
				return nil, nil, err
			}
			list = append(list, v)
		}
		raw[d.dest] = list
	}
	var missing []string
	for _, d := range p.defs {
		if d.req {
			if _, ok := raw[d.dest]; !ok {
				missing = append(missing, optionString(d))
			}
		}
	}
	if len(missing) > 0 {
		return nil, nil, &UsageError{"the following arguments are required: " + strings.Join(missing, ", ")}
	}
	if len(unknown) > 0 {
		return nil, nil, &UsageError{"unrecognized arguments: " + strings.Join(unknown, " ")}
	}
	return raw, notes, nil
}

// matched is the option string of d that opt (exact or prefix) selects.
func (p *Parser) matched(d *flagDef, opt string) string {
	for _, n := range d.names {
		if n == opt {
			return n
		}
	}
	for _, n := range d.names {
		if strings.HasPrefix(n, opt) {
			return n
		}
	}
	return opt
}

// Args are the effective server arguments after SGLang's post-init handling.
type Args struct {
	Era                                             *Era
	ModelPath, TokenizerPath, ServedModelName, Host string
	Port, TP                                        int
	// Multi-node launch: --nnodes, --node-rank, --dist-init-addr, --dist-timeout (0: unset).
	NNodes, NodeRank, DistTimeout               int
	DistInitAddr                                string
	SpecAlgo                                    string // "" = no speculation; NEXTN already resolved to EAGLE
	RequestedAlgo                               string
	Plugin                                      bool // a registered plugin name (simulated as EAGLE)
	DraftPath                                   string
	Steps, TopK, DraftTokens                    int
	MemFraction                                 float64 // 0 = auto (decided by the memory plan)
	MaxRunning                                  int     // 0 = auto
	CudaGraphMaxBS                              int     // 0 = auto
	ContextLen                                  int     // 0 = profile's
	EnableMetrics, SkipWarmup, DisableCudaGraph bool
	DecodeLogInterval                           int
	RandomSeed                                  int64
	LogHTTP                                     bool // uvicorn access log lines
	LogQuiet                                    bool // --log-level warning/error: no info lines
	APIKey                                      string
	Device                                      string  // --device as given ("" resolves to cuda)
	Raw                                         rawArgs // everything given, for /get_server_info
	defaults                                    map[string]any
	// Adaptive is the adaptive speculative decoding the server runs (nil: static steps, including
	// when --speculative-adaptive fell back).
	Adaptive *AdaptiveMode
}

// Spec reports whether speculative decoding is on.
func (a *Args) Spec() bool { return a.SpecAlgo != "" }

// AssertionError mimics a bare Python assert failing in the server-args
// post-processing.
type AssertionError struct{ Where string }

func (e *AssertionError) Error() string { return "AssertionError" }

// PyError is an exception SGLang raises while checking the arguments at
// start (ValueError, TypeError): a traceback, exit 1.
type PyError struct {
	Type, Msg, Func string
	// Frames, when set, are the traceback's lines below __post_init__'s call of the failing handler
	// (File/code line pairs), replacing the one frame of Func.
	Frames []string
}

func (e *PyError) Error() string { return e.Type + ": " + e.Msg }

// ParseOptions are what ParseArgsEra needs besides argv.
type ParseOptions struct {
	Era     *Era
	Plugins []string // speculative algorithm names registered by plugins (SGLANGSIM_SPEC_PLUGINS)
	// CompatAssert keeps the simulator's earlier bare AssertionError for a
	// partial triple that real SGLang fails with a TypeError (steps without
	// topk; steps and topk > 1 without draft tokens). It is on only when
	// SGLANGSIM_VERSION is unset: specsweep's tests expect that line.
	CompatAssert bool
	// ReadFile reads a file the arguments name (--speculative-adaptive-config); nil: os.ReadFile.
	ReadFile func(string) ([]byte, error)
	// Parser, when set, is Era's parser built once (NewParser reads the release's flag table: about
	// a millisecond) for many parses; nil builds it.
	Parser *Parser
}

// ParseArgs parses argv as the default era does.
func ParseArgs(argv []string) (*Args, []string, error) {
	era, err := LookupEra("")
	if err != nil {
		return nil, nil, err
	}
	return ParseArgsEra(ParseOptions{Era: era}, argv)
}

// ParseArgsEra parses argv like that era's launch_server and applies its
// post-init rules. warnings are the logger.warning lines SGLang prints.
func ParseArgsEra(o ParseOptions, argv []string) (a *Args, warnings []string, err error) {
	p := o.Parser
	if p == nil {
		if p, err = NewParser(o.Era); err != nil {
			return nil, nil, err
		}
	}
	raw, notes, err := p.parseRaw(argv)
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, notes...)
	a = &Args{Era: o.Era, Raw: raw, defaults: map[string]any{}}
	for _, d := range p.defs {
		if _, ok := a.defaults[d.dest]; !ok {
			a.defaults[d.dest] = d.dflt
		}
	}
	str := func(k, def string) string {
		if v, ok := raw[k].(string); ok {
			return v
		}
		return def
	}
	num := func(k string, def int) int {
		if v, ok := raw[k].(int); ok {
			return v
		}
		return def
	}
	flag := func(k string) bool { v, _ := raw[k].(bool); return v }
	a.ModelPath = str("model_path", "")
	a.TokenizerPath = str("tokenizer_path", a.ModelPath)
	a.ServedModelName = str("served_model_name", a.ModelPath)
	a.Host = str("host", "127.0.0.1")
	a.Port = num("port", 30000)
	a.TP = num("tp_size", 1)
	a.NNodes = num("nnodes", 1)
	a.NodeRank = num("node_rank", 0)
	a.DistTimeout = num("dist_timeout", 0)
	a.DistInitAddr = str("dist_init_addr", "")
	a.MaxRunning = num("max_running_requests", 0)
	a.CudaGraphMaxBS = num("cuda_graph_max_bs", num("cuda_graph_max_bs_decode", 0))
	a.ContextLen = num("context_length", 0)
	a.DecodeLogInterval = num("decode_log_interval", 40)
	a.RandomSeed = int64(num("random_seed", 0))
	a.EnableMetrics = flag("enable_metrics")
	a.SkipWarmup = flag("skip_server_warmup")
	a.DisableCudaGraph = flag("disable_cuda_graph") || flag("disable_decode_cuda_graph") || str("cuda_graph_backend_decode", "") == "disabled"
	a.APIKey = str("api_key", "")
	a.Device = str("device", "")
	if f, ok := raw["mem_fraction_static"].(float64); ok {
		a.MemFraction = f
	}
	lvl := strings.ToLower(str("log_level_http", str("log_level", "info")))
	a.LogHTTP = lvl == "info" || lvl == "debug"
	switch strings.ToLower(str("log_level", "info")) {
	case "warning", "error", "critical":
		a.LogQuiet = true
	}

	// Values argparse accepts but SGLang later refuses: start errors.
	if a.TP < 1 {
		return nil, nil, &AssertionError{Where: "tp_size"}
	}
	if a.MemFraction < 0 || a.MemFraction >= 1 || math.IsNaN(a.MemFraction) {
		return nil, nil, &AssertionError{Where: "mem_fraction_static"}
	}
	if a.DecodeLogInterval < 1 {
		a.DecodeLogInterval = 1
	}
	w, err := resolveSpec(o, a)
	if err != nil {
		return nil, nil, err
	}
	return a, append(warnings, w...), nil
}

// LaunchError is an exception of the launcher's own argument check (ServerArgs.check_server_args,
// called by _launch_subprocesses after the post-init rules): a traceback, exit 1.
type LaunchError struct{ Type, Msg string }

func (e *LaunchError) Error() string { return e.Type + ": " + e.Msg }

// checkServerArgs is the multi-node part of check_server_args, which _launch_subprocesses calls after
// the post-init rules (so SGLANGSIM_CHECK_ARGS=1 does not reach it): (tp_size * pp_size) % nnodes must be
// 0 (a ZeroDivisionError for --nnodes 0). SGLang checks neither --node-rank nor --dist-init-addr;
// the simulator refuses what it cannot run (docs/sglangsim.md, "Multi-node").
func checkServerArgs(a *Args) error {
	pp := intOr(a.Raw, "pp_size", 1)
	switch {
	case a.NNodes == 0:
		return &LaunchError{Type: "ZeroDivisionError", Msg: "integer modulo by zero"}
	case a.NNodes > 0 && (a.TP*pp)%a.NNodes != 0:
		return &LaunchError{Type: "AssertionError", Msg: "tp_size must be divisible by number of nodes"}
	case a.NNodes < 0 || a.NodeRank < 0 || a.NodeRank >= a.NNodes:
		return fmt.Errorf("--node-rank %d is not one of the %d nodes of --nnodes (0 to %d); SGLang does not check it, its ranks would compute a pipeline rank past --pp-size", a.NodeRank, a.NNodes, a.NNodes-1)
	}
	return nil
}

// launchTraceback is what Python prints for a LaunchError.
func launchTraceback(e *LaunchError) string {
	return "Traceback (most recent call last):\n" +
		"  File \"<frozen runpy>\", line 198, in _run_module_as_main\n" +
		"  File \"<frozen runpy>\", line 88, in _run_code\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py\", line 32, in <module>\n" +
		"    launch_server(server_args)\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/http_server.py\", line 1412, in launch_server\n" +
		"    tokenizer_manager, template_manager, scheduler_info = _launch_subprocesses(server_args=server_args)\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/engine.py\", line 673, in _launch_subprocesses\n" +
		"    server_args.check_server_args()\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 6666, in check_server_args\n" +
		"    assert (\n" +
		e.Type + ": " + e.Msg + "\n"
}

const reset48 = "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests."

// resolveSpec applies the era's speculative post-processing: aliases, the
// auto choice, the per-algorithm rules (docs/sglangsim.md, "Speculative rules").
func resolveSpec(o ParseOptions, a *Args) (warnings []string, err error) {
	era, raw := o.Era, a.Raw
	num := func(k string) (int, bool) { v, ok := raw[k].(int); return v, ok }
	a.RequestedAlgo, _ = raw["speculative_algorithm"].(string)
	a.DraftPath, _ = raw["speculative_draft_model_path"].(string)
	algo := a.RequestedAlgo
	adaptive, _ := raw["speculative_adaptive"].(bool)
	adaptive = adaptive && era.Adaptive != ""
	if algo == "" {
		if adaptive {
			return []string{fmt.Sprintf(adaptiveFallback, "speculative_algorithm=None (only EAGLE/EAGLE3 are supported)")}, nil
		}
		return nil, nil
	}
	overlapOn := false // 0.5.10: the overlap scheduler (spec v2) stays on, which its adaptive mode refuses
	if adaptive && era.Adaptive == "v0510" {
		// 0.5.10 checks the mode at the end of _handle_speculative_decoding, on the effective arguments.
		defer func() {
			if err != nil {
				return
			}
			mode, w, e := resolveAdaptive0510(o, a, overlapOn)
			a.Adaptive, warnings, err = mode, append(warnings, w...), e
		}()
	}
	if era.AnyAlgo {
		algo = strings.ToUpper(algo)
	}
	if algo == "NEXTN" && era.Rules != "v041" && era.Rules != "v044" {
		algo = "EAGLE"
		if a.DraftPath == "" {
			a.DraftPath = a.ModelPath
		}
	}
	if !era.builtin(algo) && algo != "EAGLE" {
		plugin := false
		for _, n := range o.Plugins {
			plugin = plugin || strings.EqualFold(strings.TrimSpace(n), algo)
		}
		if !plugin {
			return nil, &PyError{Type: "ValueError", Func: "from_string",
				Msg: fmt.Sprintf("Unknown speculative algorithm name: %s", algo)}
		}
		a.Plugin = true
	}
	a.SpecAlgo = algo
	steps, hs := num("speculative_num_steps")
	topk, hk := num("speculative_eagle_topk")
	draft, hn := num("speculative_num_draft_tokens")
	if adaptive && era.Adaptive == "main" {
		// 2026 main handles the mode before the algorithm's rules, which then see its triple.
		mode, w, t, g, e := resolveAdaptiveMain(o, a, algo, steps, topk, draft, hs, hk, hn)
		if e != nil {
			return nil, e
		}
		a.Adaptive, warnings = mode, append(warnings, w...)
		steps, topk, draft, hs, hk, hn = t[0], t[1], t[2], g[0], g[1], g[2]
	}
	reset := func() {
		if a.MaxRunning == 0 {
			a.MaxRunning = 48
			if era.Reset48Warn {
				warnings = append(warnings, reset48)
			}
		}
	}

	switch {
	case era.Rules == "v044":
		// 0.4.4's __post_init__: NEXTN runs as EAGLE, max_running_requests 32 when
		// unset, the dataclass defaults (5, 4, 8), nothing forced.
		a.Steps, a.TopK, a.DraftTokens = given(steps, hs, 5), given(topk, hk, 4), given(draft, hn, 8)
		if a.SpecAlgo == "NEXTN" {
			a.SpecAlgo = "EAGLE"
		}
		if a.MaxRunning == 0 {
			a.MaxRunning = 32
		}
		warnings = append(warnings, "Overlap scheduler is disabled because of using eagle speculative decoding.")
		return warnings, a.checkPositive()

	case era.Rules == "v041":
		// Defaults come from argparse (5, 8, 64); no auto choice, no forcing.
		a.Steps, a.TopK, a.DraftTokens = given(steps, hs, 5), given(topk, hk, 8), given(draft, hn, 64)
		warnings = append(warnings, "The radix cache, chunked prefill, and overlap scheduler are disabled because of using eagle speculative decoding.")
		return warnings, a.checkPositive()

	case algo == "DFLASH" || algo == "DSPARK":
		if a.DraftPath == "" && algo == "DFLASH" {
			return nil, &PyError{Type: "ValueError", Func: "_handle_dflash", Msg: "DFLASH speculative decoding requires setting --speculative-draft-model-path."}
		}
		name := map[string]string{"DFLASH": "DFLASH", "DSPARK": "DSpark"}[algo]
		if hs && steps != 1 {
			warnings = append(warnings, fmt.Sprintf("%s only supports speculative_num_steps == 1; overriding speculative_num_steps=%d to 1.", name, steps))
		}
		if hk && topk != 1 {
			warnings = append(warnings, fmt.Sprintf("%s only supports speculative_eagle_topk == 1; overriding speculative_eagle_topk=%d to 1.", name, topk))
		}
		a.Steps, a.TopK = 1, 1
		if algo == "DFLASH" {
			if bs, ok := num("speculative_dflash_block_size"); ok {
				if bs <= 0 {
					return nil, &PyError{Type: "ValueError", Func: "_handle_dflash", Msg: fmt.Sprintf("DFLASH requires --speculative-dflash-block-size to be positive, got %d.", bs)}
				}
				if hn && draft != bs {
					return nil, &PyError{Type: "ValueError", Func: "_handle_dflash", Msg: fmt.Sprintf("Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they differ. For DFLASH they must match. speculative_num_draft_tokens=%d, speculative_dflash_block_size=%d.", draft, bs)}
				}
				draft, hn = bs, true
			}
			if !hn {
				draft = 16
				warnings = append(warnings, "speculative_num_draft_tokens is not set; defaulting to 16 for DFLASH.")
			}
		} else {
			gamma, ok := num("speculative_dspark_block_size")
			if ok && gamma <= 0 {
				return nil, &PyError{Type: "ValueError", Func: "_handle_dspark", Msg: fmt.Sprintf("DSpark requires --speculative-dspark-block-size to be positive, got %d.", gamma)}
			}
			if !ok && !hn {
				gamma, ok = 15, true
				warnings = append(warnings, "DSpark gamma is not set; defaulting to 15.")
			}
			if ok {
				if hn && draft != gamma+1 {
					return nil, &PyError{Type: "ValueError", Func: "_handle_dspark", Msg: fmt.Sprintf("DSpark speculative_num_draft_tokens must equal gamma + 1 (= %d for gamma=%d), but got speculative_num_draft_tokens=%d.", gamma+1, gamma, draft)}
				}
				draft = gamma + 1
			}
			if draft < 2 {
				return nil, &PyError{Type: "ValueError", Func: "_handle_dspark", Msg: fmt.Sprintf("DSpark speculative_num_draft_tokens must be >= 2 (= gamma + 1), got %d.", draft)}
			}
		}
		a.DraftTokens = draft
		reset()
		if era.Rules == "v0510" {
			warnings = append(warnings, "Overlap scheduler is disabled when using DFLASH speculative decoding (spec v2 is not supported yet).")
		}
		return warnings, nil

	case algo == "NGRAM":
		reset()
		a.TopK = 10
		if b, ok := num("speculative_ngram_max_bfs_breadth"); ok {
			a.TopK = b
		}
		a.DraftTokens = draft
		if !hn && era.NgramWindowDraft {
			a.DraftTokens = 12 // speculative_ngram_max_match_window_size's default
			if w, ok := num("speculative_ngram_max_match_window_size"); ok {
				a.DraftTokens = w
			}
		} else if !hn {
			a.DraftTokens = 12
			warnings = append(warnings, "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. You can override this by explicitly setting --speculative-num-draft-tokens.")
		}
		if a.TopK < 1 || a.DraftTokens < 1 {
			return nil, &PyError{Type: "ZeroDivisionError", Func: "_handle_ngram", Msg: "integer division or modulo by zero"}
		}
		a.Steps = steps
		if !hs && !era.NgramWindowDraft { // 0.5.4 leaves speculative_num_steps None
			a.Steps = a.DraftTokens / a.TopK
		}
		if era.Rules == "v0510" || era.NgramWindowDraft {
			warnings = append(warnings, "The overlap scheduler and mixed chunked prefill are disabled because of using ngram speculative decoding.")
		} else {
			warnings = append(warnings, "The mixed chunked prefill are disabled because of using ngram speculative decoding.")
		}
		return warnings, nil
	}

	// The EAGLE family (EAGLE, EAGLE3, STANDALONE, plugin names).
	reset()
	if era.Rules == "v05" {
		w := "Overlap scheduler is disabled because of using eagle speculative decoding."
		if era.EagleOverlapWarn != "" {
			w = era.EagleOverlapWarn
		}
		warnings = append(warnings, w)
	}
	if !hs {
		if hk || hn {
			return nil, &AssertionError{Where: "speculative"}
		}
		auto := era.AutoDefault
		if algo == "STANDALONE" {
			auto = [3]int{3, 1, 4}
		}
		steps, topk, draft = auto[0], auto[1], auto[2]
		hk, hn = true, true
	}
	if !hk && o.CompatAssert {
		return nil, &AssertionError{Where: "speculative"}
	}
	if !hk {
		return nil, &PyError{Type: "TypeError", Func: "_handle_speculative_decoding", Msg: "'>' not supported between instances of 'NoneType' and 'int'"}
	}
	if era.Rules == "v0510" {
		switch noOverlap, _ := raw["disable_overlap_schedule"].(bool); {
		case topk > 1 && !noOverlap:
			warnings = append(warnings, "Spec v1 is used for eagle/eagle3/standalone speculative decoding because spec v2 currently only supports topk = 1.")
		case noOverlap:
			warnings = append(warnings, "Spec v1 is used for eagle/eagle3/standalone speculative decoding because overlap schedule is disabled.")
		default:
			overlapOn = true
			warnings = append(warnings, "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.")
		}
	}
	if era.PageTopK == "adjust" && topk > 1 {
		// 0.4.7's __post_init__ lowers topk before the topk = 1 forcing.
		if ps, ok := num("page_size"); ok && ps > 1 {
			topk = 1
			warnings = append(warnings, "speculative_eagle_topk is adjusted to 1 when page_size > 1")
		}
	}
	a.Steps, a.TopK, a.DraftTokens = steps, topk, draft
	if topk == 1 && (!hn || draft != steps+1) {
		warnings = append(warnings, "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")
		a.DraftTokens = steps + 1
		hn = true
	}
	if !hn && o.CompatAssert {
		return nil, &AssertionError{Where: "speculative"}
	}
	if !hn {
		return nil, &PyError{Type: "TypeError", Func: "_handle_speculative_decoding", Msg: "unsupported operand type(s) for -: 'NoneType' and 'int'"}
	}
	if topk > 1 && era.PageTopK == "" {
		if ps, ok := num("page_size"); ok && ps > 1 {
			be, _ := raw["attention_backend"].(string)
			allowed := map[string]bool{"flashinfer": true}
			if era.Rules == "v0510" {
				allowed["fa3"] = true
			}
			if era.Rules == "main" {
				allowed["fa3"], allowed["triton"] = true, true
			}
			if !allowed[be] {
				return nil, &PyError{Type: "ValueError", Func: "_handle_speculative_decoding",
					Msg: "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results for paged attention backends. This combination is only supported for the 'flashinfer' backend."}
			}
		}
	}
	return warnings, a.checkPositive()
}

func (a *Args) checkPositive() error {
	minSteps := 1
	if a.Adaptive != nil {
		minSteps = 0 // 2026 main's adaptive mode may start at a zero-step candidate (no drafting)
	}
	if a.Steps < minSteps || a.TopK < 1 || a.DraftTokens < 1 {
		return &AssertionError{Where: "speculative"}
	}
	return nil
}

// startTraceback is what Python prints for an exception raised while the
// server arguments are processed at start.
func startTraceback(err error, era *Era) string {
	fn, line, last := "_handle_speculative_decoding", "    assert (\n", "AssertionError\n"
	switch e := err.(type) {
	case *AssertionError:
		fn = map[string]string{"speculative": "_handle_speculative_decoding", "tp_size": "_handle_other_validations", "mem_fraction_static": "_handle_gpu_memory_settings"}[e.Where]
		line = map[string]string{
			"speculative":         "    assert (\n",
			"tp_size":             "    assert self.tp_size > 0\n",
			"mem_fraction_static": "    assert 0 < self.mem_fraction_static < 1\n",
		}[e.Where]
	case *PyError:
		fn, line, last = e.Func, "    raise "+e.Type+"(\n", e.Type+": "+e.Msg+"\n"
		if e.Type == "TypeError" || e.Type == "ZeroDivisionError" {
			line = "    if server_args.speculative_eagle_topk > 1:\n"
		}
	}
	if e, ok := err.(*PyError); ok && len(e.Frames) > 0 {
		return serverArgsTraceHead +
			"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 652, in __post_init__\n" +
			"    self._handle_speculative_decoding()\n" +
			"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 1493, in _handle_speculative_decoding\n" +
			"    handle_speculative_decoding(self)\n" +
			strings.Join(e.Frames, "\n") + "\n" + e.Type + ": " + e.Msg + "\n"
	}
	file := "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py"
	if era.Rules == "main" && (fn == "_handle_speculative_decoding" || strings.HasPrefix(fn, "_handle_d") || fn == "_handle_ngram") {
		file = "/usr/local/lib/python3.12/dist-packages/sglang/srt/arg_groups/speculative_hook.py"
	}
	return serverArgsTraceHead +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 652, in __post_init__\n" +
		"    self." + strings.TrimPrefix(fn, "self.") + "()\n" +
		"  File \"" + file + "\", line 1493, in " + fn + "\n" +
		line + last
}

// ServerInfo returns the effective arguments as SGLang's flat server_args
// dict: every dest of the era's table, its default unless given or decided.
func (a *Args) ServerInfo(plan *MemPlan) map[string]any {
	m := make(map[string]any, len(a.defaults)+8)
	for k, v := range a.defaults {
		m[k] = v
	}
	for k, v := range a.Raw {
		m[k] = v
	}
	var algo any
	if a.Spec() {
		algo = a.SpecAlgo
	}
	nilIfZero := func(n int) any {
		if n == 0 {
			return nil
		}
		return n
	}
	var draft any
	if a.DraftPath != "" {
		draft = a.DraftPath
	}
	for k, v := range map[string]any{
		"model_path": a.ModelPath, "tokenizer_path": a.TokenizerPath, "served_model_name": a.ServedModelName,
		"host": a.Host, "port": a.Port, "tp_size": a.TP,
		"speculative_algorithm": algo, "speculative_draft_model_path": draft,
		"speculative_num_steps": nilIfZero(a.Steps), "speculative_eagle_topk": nilIfZero(a.TopK),
		"speculative_num_draft_tokens": nilIfZero(a.DraftTokens),
		"mem_fraction_static":          plan.MemFraction, "max_running_requests": plan.MaxRunning,
		"context_length": plan.ContextLen, "max_total_tokens": plan.MaxTotalTokens,
		"decode_log_interval": a.DecodeLogInterval, "random_seed": a.RandomSeed,
		"enable_metrics": a.EnableMetrics, "skip_server_warmup": a.SkipWarmup,
		"dp_size": intOr(a.Raw, "dp_size", 1), "pp_size": intOr(a.Raw, "pp_size", 1), "ep_size": intOr(a.Raw, "ep_size", 1),
		"chunked_prefill_size": intOr(a.Raw, "chunked_prefill_size", 8192), "max_prefill_tokens": intOr(a.Raw, "max_prefill_tokens", 16384),
		"stream_interval": intOr(a.Raw, "stream_interval", 1), "attention_backend": strOr(a.Raw, "attention_backend", "fa3"),
		"api_key": nil, "disable_cuda_graph": a.DisableCudaGraph,
	} {
		m[k] = v
	}
	if a.Adaptive != nil {
		m["speculative_num_steps"] = a.Steps // 0 is a step count there: no drafting
	}
	if _, ok := a.defaults["speculative_adaptive"]; ok {
		m["speculative_adaptive"] = a.Adaptive != nil // False after a fallback
	}
	if _, ok := a.defaults["cuda_graph_max_bs_decode"]; ok {
		m["cuda_graph_max_bs_decode"] = plan.CudaGraphMaxBS
	} else {
		m["cuda_graph_max_bs"] = plan.CudaGraphMaxBS
	}
	return m
}

func intOr(r rawArgs, k string, def int) int {
	if v, ok := r[k].(int); ok {
		return v
	}
	return def
}

func strOr(r rawArgs, k, def string) string {
	if v, ok := r[k].(string); ok {
		return v
	}
	return def
}

// serverArgsRepr renders the "server_args=ServerArgs(...)" start-up line.
func serverArgsRepr(info map[string]any) string {
	keys := make([]string, 0, len(info))
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("server_args=ServerArgs(")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k + "=" + pyRepr(info[k]))
	}
	b.WriteString(")")
	return b.String()
}

func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		if strings.Contains(x, "'") && !strings.Contains(x, `"`) {
			return `"` + x + `"`
		}
		return "'" + strings.ReplaceAll(x, "'", `\'`) + "'"
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e16 {
			return strconv.FormatFloat(x, 'f', 1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		return fmt.Sprint(x)
	}
}

// serverArgsTraceHead is the start of a traceback raised in ServerArgs.__post_init__ (launch_server
// -> prepare_server_args -> from_cli_args -> the dataclass __init__); line numbers are illustrative.
const serverArgsTraceHead = "Traceback (most recent call last):\n" +
	"  File \"<frozen runpy>\", line 198, in _run_module_as_main\n" +
	"  File \"<frozen runpy>\", line 88, in _run_code\n" +
	"  File \"/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py\", line 24, in <module>\n" +
	"    server_args = prepare_server_args(sys.argv[1:])\n" +
	"                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n" +
	"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 4210, in prepare_server_args\n" +
	"    return ServerArgs.from_cli_args(raw_args)\n" +
	"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 3871, in from_cli_args\n" +
	"    return cls(**{attr: getattr(args, attr) for attr in attrs})\n" +
	"  File \"<string>\", line 301, in __init__\n"

// given is v when the command line gave it, else the release's default def.
func given(v int, ok bool, def int) int {
	if ok {
		return v
	}
	return def
}
