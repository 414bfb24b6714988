package sim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Prog is the program name argparse prints in usage and error lines.
const Prog = "launch_server.py"

type flagKind int

const (
	kindStr flagKind = iota
	kindInt
	kindFloat
	kindBool // store_true
)

// flagDef describes one launch_server option the way argparse knows it.
type flagDef struct {
	names   []string // option strings, first is the canonical one
	dest    string   // server_args key
	kind    flagKind
	choices []string
	req     bool
}

// flagDefs is the subset of SGLang's launch_server options the simulator
// understands. Options that change nothing in the simulation are accepted and
// reported back in /get_server_info, as SGLang does.
var flagDefs = []flagDef{
	{names: []string{"--model-path", "--model"}, dest: "model_path", req: true},
	{names: []string{"--tokenizer-path"}, dest: "tokenizer_path"},
	{names: []string{"--revision"}, dest: "revision"},
	{names: []string{"--served-model-name"}, dest: "served_model_name"},
	{names: []string{"--host"}, dest: "host"},
	{names: []string{"--port"}, dest: "port", kind: kindInt},
	{names: []string{"--tensor-parallel-size", "--tp-size"}, dest: "tp_size", kind: kindInt},
	{names: []string{"--data-parallel-size", "--dp-size"}, dest: "dp_size", kind: kindInt},
	{names: []string{"--pipeline-parallel-size", "--pp-size"}, dest: "pp_size", kind: kindInt},
	{names: []string{"--expert-parallel-size", "--ep-size", "--ep"}, dest: "ep_size", kind: kindInt},
	{names: []string{"--dtype"}, dest: "dtype", choices: []string{"auto", "half", "float16", "bfloat16", "float", "float32"}},
	{names: []string{"--kv-cache-dtype"}, dest: "kv_cache_dtype", choices: []string{"auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16"}},
	{names: []string{"--quantization"}, dest: "quantization"},
	{names: []string{"--trust-remote-code"}, dest: "trust_remote_code", kind: kindBool},
	{names: []string{"--context-length"}, dest: "context_length", kind: kindInt},
	{names: []string{"--mem-fraction-static"}, dest: "mem_fraction_static", kind: kindFloat},
	{names: []string{"--max-running-requests"}, dest: "max_running_requests", kind: kindInt},
	{names: []string{"--max-total-tokens"}, dest: "max_total_tokens", kind: kindInt},
	{names: []string{"--chunked-prefill-size"}, dest: "chunked_prefill_size", kind: kindInt},
	{names: []string{"--max-prefill-tokens"}, dest: "max_prefill_tokens", kind: kindInt},
	{names: []string{"--schedule-policy"}, dest: "schedule_policy", choices: []string{"lpm", "random", "fcfs", "dfs-weight", "lof", "priority"}},
	{names: []string{"--cuda-graph-max-bs"}, dest: "cuda_graph_max_bs", kind: kindInt},
	{names: []string{"--disable-cuda-graph"}, dest: "disable_cuda_graph", kind: kindBool},
	{names: []string{"--disable-radix-cache"}, dest: "disable_radix_cache", kind: kindBool},
	{names: []string{"--attention-backend"}, dest: "attention_backend"},
	{names: []string{"--stream-interval"}, dest: "stream_interval", kind: kindInt},
	{names: []string{"--random-seed"}, dest: "random_seed", kind: kindInt},
	{names: []string{"--log-level"}, dest: "log_level"},
	{names: []string{"--log-level-http"}, dest: "log_level_http"},
	{names: []string{"--log-requests"}, dest: "log_requests", kind: kindBool},
	{names: []string{"--enable-metrics"}, dest: "enable_metrics", kind: kindBool},
	{names: []string{"--decode-log-interval"}, dest: "decode_log_interval", kind: kindInt},
	{names: []string{"--api-key"}, dest: "api_key"},
	{names: []string{"--reasoning-parser"}, dest: "reasoning_parser"},
	{names: []string{"--tool-call-parser"}, dest: "tool_call_parser"},
	{names: []string{"--skip-server-warmup"}, dest: "skip_server_warmup", kind: kindBool},
	{names: []string{"--speculative-algorithm"}, dest: "speculative_algorithm",
		choices: []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK"}},
	{names: []string{"--speculative-draft-model-path", "--speculative-draft-model"}, dest: "speculative_draft_model_path"},
	{names: []string{"--speculative-draft-model-revision"}, dest: "speculative_draft_model_revision"},
	{names: []string{"--speculative-num-steps"}, dest: "speculative_num_steps", kind: kindInt},
	{names: []string{"--speculative-eagle-topk"}, dest: "speculative_eagle_topk", kind: kindInt},
	{names: []string{"--speculative-num-draft-tokens"}, dest: "speculative_num_draft_tokens", kind: kindInt},
	{names: []string{"--speculative-accept-threshold-single"}, dest: "speculative_accept_threshold_single", kind: kindFloat},
	{names: []string{"--speculative-accept-threshold-acc"}, dest: "speculative_accept_threshold_acc", kind: kindFloat},
	{names: []string{"--speculative-attention-mode"}, dest: "speculative_attention_mode", choices: []string{"prefill", "decode"}},
}

// UsageError is an argparse error: usage + "error: msg" on stderr, exit 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// HelpRequested is returned by ParseArgs for -h/--help.
type HelpRequested struct{}

func (HelpRequested) Error() string { return "help requested" }

// rawArgs holds what the command line gave, keyed by dest; absent = not given.
type rawArgs map[string]any

func optionString(d *flagDef) string { return strings.Join(d.names, "/") }

func metavar(d *flagDef) string {
	if len(d.choices) > 0 {
		return "{" + strings.Join(d.choices, ",") + "}"
	}
	return strings.ToUpper(d.dest)
}

// Usage returns argparse's usage text, wrapped as argparse wraps it.
func Usage() string {
	var b strings.Builder
	prefix := "usage: " + Prog + " "
	b.WriteString(prefix)
	indent := strings.Repeat(" ", len(prefix))
	col := len(prefix)
	parts := []string{"[-h]"}
	for i := range flagDefs {
		d := &flagDefs[i]
		p := d.names[0]
		if d.kind != kindBool {
			p += " " + metavar(d)
		}
		if !d.req {
			p = "[" + p + "]"
		}
		parts = append(parts, p)
	}
	for i, p := range parts {
		if i > 0 {
			if col+1+len(p) > 79 {
				b.WriteString("\n" + indent)
				col = len(indent)
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(p)
		col += len(p)
	}
	b.WriteByte('\n')
	return b.String()
}

// Help returns the -h text.
func Help() string {
	var b strings.Builder
	b.WriteString(Usage())
	b.WriteString("\noptions:\n  -h, --help            show this help message and exit\n")
	for i := range flagDefs {
		d := &flagDefs[i]
		s := "  " + strings.Join(d.names, ", ")
		if d.kind != kindBool {
			s = "  "
			for j, n := range d.names {
				if j > 0 {
					s += ", "
				}
				s += n + " " + metavar(d)
			}
		}
		b.WriteString(s + "\n")
	}
	return b.String()
}

func lookupFlag(opt string) (*flagDef, error) {
	for i := range flagDefs {
		for _, n := range flagDefs[i].names {
			if n == opt {
				return &flagDefs[i], nil
			}
		}
	}
	var matches []string
	var def *flagDef
	for i := range flagDefs {
		for _, n := range flagDefs[i].names {
			if strings.HasPrefix(n, opt) {
				matches = append(matches, n)
				def = &flagDefs[i]
			}
		}
	}
	if opt == "--" || len(matches) == 0 {
		return nil, nil
	}
	if len(matches) > 1 {
		return nil, &UsageError{fmt.Sprintf("ambiguous option: %s could match %s", opt, strings.Join(matches, ", "))}
	}
	return def, nil
}

func looksNegativeNumber(s string) bool {
	if !strings.HasPrefix(s, "-") {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func convert(d *flagDef, v string) (any, error) {
	bad := func(t string) error {
		return &UsageError{fmt.Sprintf("argument %s: invalid %s value: '%s'", optionString(d), t, v)}
	}
	switch d.kind {
	case kindInt:
		n, err := strconv.Atoi(strings.TrimSpace(strings.ReplaceAll(v, "_", "")))
		if err != nil {
			return nil, bad("int")
		}
		return n, nil
	case kindFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return nil, bad("float")
		}
		return f, nil
	}
	if len(d.choices) > 0 {
		ok := false
		for _, c := range d.choices {
			ok = ok || c == v
		}
		if !ok {
			q := make([]string, len(d.choices))
			for i, c := range d.choices {
				q[i] = "'" + c + "'"
			}
			return nil, &UsageError{fmt.Sprintf("argument %s: invalid choice: '%s' (choose from %s)", optionString(d), v, strings.Join(q, ", "))}
		}
	}
	return v, nil
}

// parseRaw applies argparse's rules to argv: exact option or unambiguous
// prefix, "--opt value" or "--opt=value", store_true options, unknown
// arguments collected and reported after required ones.
func parseRaw(argv []string) (rawArgs, error) {
	raw := rawArgs{}
	var unknown []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "-h" || a == "--help" {
			return nil, HelpRequested{}
		}
		if !strings.HasPrefix(a, "-") || looksNegativeNumber(a) || a == "-" {
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
		d, err := lookupFlag(opt)
		if err != nil {
			return nil, err
		}
		if d == nil || !strings.HasPrefix(opt, "--") {
			unknown = append(unknown, a)
			continue
		}
		if d.kind == kindBool {
			if hasVal {
				return nil, &UsageError{fmt.Sprintf("argument %s: ignored explicit argument '%s'", optionString(d), val)}
			}
			raw[d.dest] = true
			continue
		}
		if !hasVal {
			if i+1 >= len(argv) || (strings.HasPrefix(argv[i+1], "-") && !looksNegativeNumber(argv[i+1]) && argv[i+1] != "-") {
				return nil, &UsageError{fmt.Sprintf("argument %s: expected one argument", optionString(d))}
			}
			i++
			val = argv[i]
		}
		v, err := convert(d, val)
		if err != nil {
			return nil, err
		}
		raw[d.dest] = v
	}
	var missing []string
	for i := range flagDefs {
		if flagDefs[i].req {
			if _, ok := raw[flagDefs[i].dest]; !ok {
				missing = append(missing, optionString(&flagDefs[i]))
			}
		}
	}
	if len(missing) > 0 {
		return nil, &UsageError{"the following arguments are required: " + strings.Join(missing, ", ")}
	}
	if len(unknown) > 0 {
		return nil, &UsageError{"unrecognized arguments: " + strings.Join(unknown, " ")}
	}
	return raw, nil
}

// Args are the effective server arguments after SGLang's post-init handling.
type Args struct {
	ModelPath, TokenizerPath, ServedModelName, Host string
	Port, TP                                        int
	SpecAlgo                                        string // "" = no speculation; NEXTN already resolved to EAGLE
	RequestedAlgo                                   string
	DraftPath                                       string
	Steps, TopK, DraftTokens                        int
	MemFraction                                     float64 // 0 = auto (decided by the memory plan)
	MaxRunning                                      int     // 0 = auto
	CudaGraphMaxBS                                  int     // 0 = auto
	ContextLen                                      int     // 0 = profile's
	EnableMetrics, SkipWarmup, DisableCudaGraph     bool
	DecodeLogInterval                               int
	RandomSeed                                      int64
	LogHTTP                                         bool // uvicorn access log lines
	LogQuiet                                        bool // --log-level warning/error: no info lines
	APIKey                                          string
	Raw                                             rawArgs // everything given, for /get_server_info
}

// Spec reports whether speculative decoding is on.
func (a *Args) Spec() bool { return a.SpecAlgo != "" }

// AssertionError mimics a bare Python assert failing in ServerArgs.__post_init__.
type AssertionError struct{ Where string }

func (e *AssertionError) Error() string { return "AssertionError" }

// ParseArgs parses argv like SGLang's launch_server and applies its
// __post_init__ rules. warnings are the logger.warning lines SGLang prints.
func ParseArgs(argv []string) (a *Args, warnings []string, err error) {
	raw, err := parseRaw(argv)
	if err != nil {
		return nil, nil, err
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
	a = &Args{Raw: raw}
	a.ModelPath = str("model_path", "")
	a.TokenizerPath = str("tokenizer_path", a.ModelPath)
	a.ServedModelName = str("served_model_name", a.ModelPath)
	a.Host = str("host", "127.0.0.1")
	a.Port = num("port", 30000)
	a.TP = num("tp_size", 1)
	a.MaxRunning = num("max_running_requests", 0)
	a.CudaGraphMaxBS = num("cuda_graph_max_bs", 0)
	a.ContextLen = num("context_length", 0)
	a.DecodeLogInterval = num("decode_log_interval", 40)
	a.RandomSeed = int64(num("random_seed", 0))
	a.EnableMetrics = flag("enable_metrics")
	a.SkipWarmup = flag("skip_server_warmup")
	a.DisableCudaGraph = flag("disable_cuda_graph")
	a.APIKey = str("api_key", "")
	if f, ok := raw["mem_fraction_static"].(float64); ok {
		a.MemFraction = f
	}
	lvl := strings.ToLower(str("log_level_http", str("log_level", "info")))
	a.LogHTTP = lvl == "info" || lvl == "debug"
	switch strings.ToLower(str("log_level", "info")) {
	case "warning", "error", "critical":
		a.LogQuiet = true
	}

	// Values argparse accepts but SGLang later refuses: treat as start errors.
	if a.TP < 1 {
		return nil, nil, &AssertionError{Where: "tp_size"}
	}
	if a.MemFraction < 0 || a.MemFraction >= 1 || math.IsNaN(a.MemFraction) {
		return nil, nil, &AssertionError{Where: "mem_fraction_static"}
	}
	if a.DecodeLogInterval < 1 {
		a.DecodeLogInterval = 1
	}

	a.RequestedAlgo = str("speculative_algorithm", "")
	a.SpecAlgo = a.RequestedAlgo
	a.DraftPath = str("speculative_draft_model_path", "")
	if a.SpecAlgo == "" {
		return a, warnings, nil
	}
	if a.SpecAlgo == "NEXTN" {
		a.SpecAlgo = "EAGLE"
		if a.DraftPath == "" {
			a.DraftPath = a.ModelPath
		}
	}
	_, hs := raw["speculative_num_steps"]
	_, hk := raw["speculative_eagle_topk"]
	_, hn := raw["speculative_num_draft_tokens"]
	if a.SpecAlgo == "DFLASH" || a.SpecAlgo == "DSPARK" {
		a.Steps, a.TopK = 1, 1
		a.DraftTokens = num("speculative_num_draft_tokens", 16)
		if (hs && num("speculative_num_steps", 1) != 1) || (hk && num("speculative_eagle_topk", 1) != 1) {
			warnings = append(warnings, fmt.Sprintf("%s only supports speculative_num_steps=1 and speculative_eagle_topk=1; overriding.", a.SpecAlgo))
		}
	} else {
		if !(hs == hk && hk == hn) {
			return nil, nil, &AssertionError{Where: "speculative"}
		}
		if !hs {
			a.Steps, a.TopK, a.DraftTokens = 3, 1, 4
		} else {
			a.Steps, a.TopK, a.DraftTokens = num("speculative_num_steps", 0), num("speculative_eagle_topk", 0), num("speculative_num_draft_tokens", 0)
		}
		if a.Steps < 1 || a.TopK < 1 || a.DraftTokens < 1 {
			return nil, nil, &AssertionError{Where: "speculative"}
		}
		if a.TopK == 1 && a.DraftTokens != a.Steps+1 {
			warnings = append(warnings, "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")
			a.DraftTokens = a.Steps + 1
		}
	}
	if a.MaxRunning == 0 {
		a.MaxRunning = 48
		warnings = append(warnings, "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.")
	}
	return a, warnings, nil
}

// assertionTraceback is what Python prints for the bare assert in
// ServerArgs._handle_speculative_decoding (or another __post_init__ check).
func assertionTraceback(e *AssertionError) string {
	line := map[string]string{
		"speculative":         "    assert (\n",
		"tp_size":             "    assert self.tp_size > 0\n",
		"mem_fraction_static": "    assert 0 < self.mem_fraction_static < 1\n",
	}[e.Where]
	fn := map[string]string{"speculative": "_handle_speculative_decoding", "tp_size": "_handle_other_validations", "mem_fraction_static": "_handle_gpu_memory_settings"}[e.Where]
	return "Traceback (most recent call last):\n" +
		"  File \"<frozen runpy>\", line 198, in _run_module_as_main\n" +
		"  File \"<frozen runpy>\", line 88, in _run_code\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py\", line 24, in <module>\n" +
		"    server_args = prepare_server_args(sys.argv[1:])\n" +
		"                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 4210, in prepare_server_args\n" +
		"    return ServerArgs.from_cli_args(raw_args)\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 3871, in from_cli_args\n" +
		"    return cls(**{attr: getattr(args, attr) for attr in attrs})\n" +
		"  File \"<string>\", line 301, in __init__\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 652, in __post_init__\n" +
		"    self." + fn + "()\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 1493, in " + fn + "\n" +
		line +
		"AssertionError\n"
}

// ServerInfo returns the effective arguments as SGLang's flat server_args dict.
func (a *Args) ServerInfo(plan *MemPlan) map[string]any {
	m := map[string]any{}
	for i := range flagDefs {
		d := &flagDefs[i]
		if v, ok := a.Raw[d.dest]; ok {
			m[d.dest] = v
		} else if d.kind == kindBool {
			m[d.dest] = false
		} else {
			m[d.dest] = nil
		}
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
		"cuda_graph_max_bs": plan.CudaGraphMaxBS, "context_length": plan.ContextLen,
		"max_total_tokens": plan.MaxTotalTokens, "decode_log_interval": a.DecodeLogInterval,
		"random_seed": a.RandomSeed, "enable_metrics": a.EnableMetrics, "skip_server_warmup": a.SkipWarmup,
		"dp_size": intOr(a.Raw, "dp_size", 1), "pp_size": intOr(a.Raw, "pp_size", 1), "ep_size": intOr(a.Raw, "ep_size", 1),
		"dtype": strOr(a.Raw, "dtype", "auto"), "kv_cache_dtype": strOr(a.Raw, "kv_cache_dtype", "auto"),
		"chunked_prefill_size": intOr(a.Raw, "chunked_prefill_size", 8192), "max_prefill_tokens": intOr(a.Raw, "max_prefill_tokens", 16384),
		"schedule_policy": strOr(a.Raw, "schedule_policy", "fcfs"), "stream_interval": intOr(a.Raw, "stream_interval", 1),
		"log_level": strOr(a.Raw, "log_level", "info"), "attention_backend": strOr(a.Raw, "attention_backend", "fa3"),
		"api_key": nil,
	} {
		m[k] = v
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
		return "'" + x + "'"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}
