package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/specsweep/specsweep/internal/tabular"
	"github.com/specsweep/specsweep/workload"
)

func benchCmd() command {
	return newCommand("bench", "",
		"One load test against a running server, like sglang.bench_serving: a table, or JSON lines per level.", benchRun).
		withExamples("specsweep bench --url http://127.0.0.1:30000 --concurrency 1,4,16",
			"specsweep bench --url http://127.0.0.1:30000 --request-rate 4 --duration 60s --format json")
}

type benchOptions struct {
	URL          string        // --url
	API          string        // --api: workload.APIChat or workload.APICompletions
	Model        string        // --model: "" for the first id of /v1/models
	Concurrency  string        // --concurrency: comma-separated levels
	RequestRate  float64       // --request-rate: 0 for a closed loop
	Requests     int           // --requests
	Duration     time.Duration // --duration
	Warmup       int           // --warmup
	InputTokens  int           // --input-tokens
	OutputTokens int           // --output-tokens
	Temperature  float64       // --temperature
	Datasets     []string      // --dataset, repeatable: random, sharegpt:PATH or NAME=PATH (a prompt set file)
	PadTo        string        // --pad-to: comma-separated lengths prompt sets are padded to
	Seed         uint64        // --seed
	Format       string        // --format: table or json
	JSON         bool          // --json: --format json
	SaveRequests string        // --save-requests: a file
	Timeout      time.Duration // --timeout
	StallTimeout time.Duration // --stall-timeout
	APIKey       string        // --api-key: "" for $SPECSWEEP_API_KEY

	// Which of --concurrency, --requests and --duration the command line gave (their meaning
	// depends on it, not only on their values).
	ConcurrencyGiven, RequestsGiven, DurationGiven bool
}

func (o *benchOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.URL, "url", "", "server base `URL`, e.g. http://127.0.0.1:30000 (required)")
	fs.StringVar(&o.API, "api", "chat", "endpoint: chat (/v1/chat/completions) or completions (/v1/completions)")
	fs.StringVar(&o.Model, "model", "", "model name sent with each request (default: the first id of /v1/models)")
	fs.StringVar(&o.Concurrency, "concurrency", "1", "comma-separated `LEVELS` of requests in flight, e.g. 1,4,16 (with --request-rate: caps on requests in flight; unset there: no cap)")
	fs.Float64Var(&o.RequestRate, "request-rate", 0, "open loop: Poisson arrivals at this many requests per second (0: closed loop)")
	fs.IntVar(&o.Requests, "requests", 64, "measured requests per level")
	fs.DurationVar(&o.Duration, "duration", 0, "instead of --requests: send requests for this long per level, e.g. 60s")
	fs.IntVar(&o.Warmup, "warmup", 4, "warmup requests before each level, excluded from every figure")
	fs.IntVar(&o.InputTokens, "input-tokens", 1024, "prompt length of random prompts, in tokens")
	fs.IntVar(&o.OutputTokens, "output-tokens", 512, "max_tokens of every request (sent with ignore_eos)")
	fs.Float64Var(&o.Temperature, "temperature", 0, "sampling temperature of every request (0: greedy; speculative acceptance is lower when sampling)")
	fs.Var((*stringList)(&o.Datasets), "dataset", "`SOURCE` of prompts: random, sharegpt:PATH (a ShareGPT JSON file) or NAME=PATH (a prompt set file, format detected: docs/bench.md); repeat it to measure each level on each (default random)")
	fs.StringVar(&o.PadTo, "pad-to", "", "comma-separated `LENGTHS` in tokens: each prompt set measured at each, its prompts padded by a shared document (default: as they are)")
	fs.StringVar(&o.Format, "format", "table", formatUsage(benchFormats, true)+"; json is one object per level, with bench_serving's field names")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of prompts and arrival times")
	fs.BoolVar(&o.JSON, "json", false, "the same as --format json")
	fs.StringVar(&o.SaveRequests, "save-requests", "", "write one JSON line per measured request to `FILE`")
	fs.DurationVar(&o.Timeout, "timeout", 0, fmt.Sprintf("per-request timeout; 0: %v + %v per output token", workload.DefaultTimeoutBase, workload.DefaultTimeoutPerToken))
	fs.DurationVar(&o.StallTimeout, "stall-timeout", workload.DefaultStallTimeout, "fail a request after this long without response headers or, once streaming, without data")
	fs.StringVar(&o.APIKey, "api-key", "", "bearer `TOKEN` for a server started with --api-key (default $SPECSWEEP_API_KEY)")
}

func (o *benchOptions) given(set map[string]bool) {
	o.ConcurrencyGiven, o.RequestsGiven, o.DurationGiven = set["concurrency"], set["requests"], set["duration"]
}

func (o *benchOptions) args(pos []string) error { return noArgs(pos) }

// benchFormats are bench's --format values.
var benchFormats = []string{"table", "json"}

// benchRun runs the load test of o against a server, level by level.
func benchRun(ctx context.Context, env Env, o *benchOptions) error {
	format, err := outputFormat(o.Format, o.JSON, benchFormats...)
	if err != nil {
		return err
	}
	asJSON := format == "json"
	if o.URL == "" {
		return usagef("--url is required")
	}
	if o.API != workload.APIChat && o.API != workload.APICompletions {
		return usagef("unknown --api %q (want chat or completions)", o.API)
	}
	if o.RequestRate < 0 {
		return usagef("--request-rate must not be negative")
	}
	levels, err := parseLevels(o.Concurrency)
	if err != nil {
		return err
	}
	if o.RequestRate > 0 && !o.ConcurrencyGiven {
		levels = []int{0}
	}
	if o.DurationGiven && o.RequestsGiven {
		return usagef("give --requests or --duration, not both")
	}
	n := o.Requests
	if o.DurationGiven {
		n = 0
		if o.Duration <= 0 {
			return usagef("--duration must be positive")
		}
	} else if n < 1 {
		return usagef("--requests must be positive")
	}
	switch {
	case o.Warmup < 0:
		return usagef("--warmup must not be negative")
	case o.InputTokens < 1 || o.OutputTokens < 1:
		return usagef("--input-tokens and --output-tokens must be positive")
	case o.Timeout < 0 || o.StallTimeout < 0:
		return usagef("timeouts must not be negative")
	}
	sources, err := benchSources(ctx, o)
	if err != nil {
		return err
	}
	key := o.APIKey
	if key == "" {
		key = env.Getenv("SPECSWEEP_API_KEY")
	}
	var saveW io.Writer
	if o.SaveRequests != "" {
		f, err := os.Create(o.SaveRequests)
		if err != nil {
			return err
		}
		defer f.Close()
		saveW = f
	}
	model := o.Model
	maxC := 1
	for _, c := range levels {
		maxC = max(maxC, c)
	}
	client := workload.NewHTTPClient(maxC)
	defer client.CloseIdleConnections()
	prog := newBenchProgress(env.Stderr)

	var results []*workload.Result
	var labels []string
	var bad []string
levels:
	for _, c := range levels {
		for _, src := range sources {
			name := levelName(c, o.RequestRate)
			if len(sources) > 1 || src.named {
				name += " " + src.label
			}
			cfg := workload.Config{URL: o.URL, API: o.API, Model: model, APIKey: key, Concurrency: c, RequestRate: o.RequestRate,
				Requests: n, Duration: o.Duration, Warmup: o.Warmup, InputTokens: o.InputTokens, OutputTokens: o.OutputTokens,
				Prompts: src.prompts, Seed: o.Seed, RequestTimeout: o.Timeout, StallTimeout: o.StallTimeout, Temperature: o.Temperature,
				HTTPClient: client, SaveRequests: saveW}
			if prog != nil {
				cfg.Progress = prog.start(name, n)
			}
			res, err := workload.Run(ctx, cfg)
			prog.stop()
			if err != nil {
				if res != nil && errors.Is(err, ctx.Err()) {
					return exitError{ExitFailure, fmt.Errorf("specsweep bench: interrupted during level %s: %d completed, %d failed", name, res.Completed, res.Failed)}
				}
				return err
			}
			model = res.Model // resolve /v1/models once
			results, labels = append(results, res), append(labels, src.label)
			reportFailures(env.Stderr, res, name)
			if res.Aborted != "" || res.Completed == 0 {
				bad = append(bad, name)
			}
			if asJSON {
				line := benchLine{BenchServing: res.BenchServing()}
				if len(sources) > 1 || src.named {
					line.Dataset, line.PadTo = src.name, src.padTo
				}
				b, err := json.Marshal(line)
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(env.Stdout, "%s\n", b); err != nil {
					return err
				}
			}
			if res.Aborted != "" {
				break levels // the server is failing: further levels would only fail too
			}
		}
	}
	if !asJSON {
		if len(sources) == 1 && !sources[0].named {
			labels = nil
		}
		if err := writeBenchTable(env.Stdout, results, labels, o.RequestRate); err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return exitError{ExitFailure, fmt.Errorf("specsweep bench: level %s failed (see above)", strings.Join(bad, ", "))}
	}
	return nil
}

func parseLevels(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, usagef("bad --concurrency %q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func levelName(c int, rate float64) string {
	switch {
	case rate > 0 && c > 0:
		return fmt.Sprintf("rate=%g/s c<=%d", rate, c)
	case rate > 0:
		return fmt.Sprintf("rate=%g/s", rate)
	}
	return "c=" + strconv.Itoa(c)
}

func reportFailures(w io.Writer, r *workload.Result, level string) {
	if r.Failed == 0 && r.WarmupFailed == 0 && r.Aborted == "" {
		return
	}
	fmt.Fprintf(w, "specsweep bench: %s: %d of %d requests failed", level, r.Failed, r.Sent)
	if r.WarmupFailed > 0 {
		fmt.Fprintf(w, " (and %d of %d warmups)", r.WarmupFailed, r.WarmupFailed+r.WarmupCompleted)
	}
	fmt.Fprintln(w)
	if r.Aborted != "" {
		fmt.Fprintf(w, "  level ended early: %s\n", r.Aborted)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  %dx %s\n", e.Count, e.Message)
	}
}

// benchLine is one level of --format json: bench_serving's fields, and the prompt source's when
// the levels were measured on more than random prompts.
type benchLine struct {
	workload.BenchServing
	Dataset string `json:"dataset,omitempty"`
	PadTo   int    `json:"pad_to,omitempty"`
}

// benchSource is one --dataset value at one --pad-to length: what a level is measured on.
type benchSource struct {
	name, label string
	padTo       int
	named       bool // a prompt set file (NAME=PATH)
	prompts     workload.Dataset
}

// benchSources reads the --dataset values: random and sharegpt:PATH as ever, NAME=PATH a prompt set
// file read in full (a bad line refused with its line number), padded to each --pad-to length.
func benchSources(ctx context.Context, o *benchOptions) ([]benchSource, error) {
	values := o.Datasets
	if len(values) == 0 {
		values = []string{"random"}
	}
	var pads []int
	if o.PadTo != "" {
		for _, f := range strings.Split(o.PadTo, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 4<<20 {
				return nil, usagef("bad --pad-to %q: want lengths from 1 to %d separated by commas", o.PadTo, 4<<20)
			}
			pads = append(pads, n)
		}
	}
	var out []benchSource
	seen := map[string]bool{}
	for _, v := range values {
		name, path, isSet := strings.Cut(v, "=")
		switch {
		case v == "random" || strings.HasPrefix(v, "sharegpt:"):
			ds, err := workload.ParseDataset(v, o.InputTokens, o.Seed)
			if err != nil {
				return nil, err
			}
			out = append(out, benchSource{name: ds.String(), label: ds.String(), prompts: ds})
			continue
		case !isSet || name == "" || path == "":
			return nil, usagef("unknown --dataset %q (want random, sharegpt:PATH or NAME=PATH)", v)
		case seen[name]:
			return nil, usagef("--dataset %s is given twice", name)
		}
		seen[name] = true
		set, err := workload.ReadPromptSet(ctx, name, path, "", workload.DefaultSetLimits())
		if err != nil {
			return nil, exitError{ExitFailure, fmt.Errorf("--dataset %s: %w", name, err)}
		}
		lens := pads
		if len(lens) == 0 {
			lens = []int{0}
		}
		for _, n := range lens {
			ds, err := workload.NewSetDataset(set, n, o.Seed)
			if err != nil {
				return nil, exitError{ExitFailure, fmt.Errorf("--dataset %s: %w", name, err)}
			}
			label := name
			if n > 0 {
				label = fmt.Sprintf("%s@%d", name, n)
			}
			out = append(out, benchSource{name: name, label: label, padTo: n, named: true, prompts: ds})
		}
	}
	return out, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// writeBenchTable writes one row per level; labels, when given, name each row's prompt source.
func writeBenchTable(w io.Writer, results []*workload.Result, labels []string, rate float64) error {
	cols := []string{"concurrency", "completed", "failed", "duration_s", "input_tokens", "output_tokens", "request_s",
		"output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms", "e2e_p50_ms", "accept_length", "accept_length_source"}
	if rate > 0 {
		cols = append([]string{"request_rate"}, cols...)
	}
	var rows [][]any
	for _, r := range results {
		ms := func(d workload.Dist, v float64) any {
			if d.Count == 0 {
				return nil
			}
			return v
		}
		var conc any = r.Concurrency
		if r.Concurrency == 0 {
			conc = nil
		}
		var al any
		if r.AcceptLength != nil {
			al = *r.AcceptLength
		}
		row := []any{conc, r.Completed, r.Failed, r.Duration.Seconds(), r.TotalInputTokens, r.TotalOutputTokens,
			r.RequestThroughput, r.OutputThroughput, ms(r.TTFT, r.TTFT.Median), ms(r.TTFT, r.TTFT.P99),
			ms(r.ITL, r.ITL.Median), ms(r.ITL, r.ITL.P99), ms(r.TPOT, r.TPOT.Median), ms(r.E2E, r.E2E.Median), al,
			r.AcceptLengthSource}
		if rate > 0 {
			row = append([]any{r.RequestRate}, row...)
		}
		if labels != nil {
			row = append([]any{labels[len(rows)]}, row...)
		}
		rows = append(rows, row)
	}
	if labels != nil {
		cols = append([]string{"dataset"}, cols...)
	}
	return tabular.Write(w, "table", cols, rows)
}

// benchProgress draws one status line on a terminal's stderr while a level runs.
type benchProgress struct {
	w          io.Writer
	done, fail atomic.Int64
	stopc      chan struct{}
	finished   chan struct{}
}

// newBenchProgress returns nil unless w is a terminal.
func newBenchProgress(w io.Writer) *benchProgress {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &benchProgress{w: w}
}

func (p *benchProgress) start(level string, total int) func(int, int) {
	p.done.Store(0)
	p.fail.Store(0)
	p.stopc, p.finished = make(chan struct{}), make(chan struct{})
	t0 := time.Now()
	draw := func() {
		of := ""
		if total > 0 {
			of = "/" + strconv.Itoa(total)
		}
		fmt.Fprintf(p.w, "\r\033[K%s: %d%s done, %d failed, %.0fs", level, p.done.Load(), of, p.fail.Load(), time.Since(t0).Seconds())
	}
	go func() {
		defer close(p.finished)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				draw()
			case <-p.stopc:
				fmt.Fprint(p.w, "\r\033[K")
				return
			}
		}
	}()
	return func(c, f int) { p.done.Store(int64(c)); p.fail.Store(int64(f)) }
}

func (p *benchProgress) stop() {
	if p == nil || p.stopc == nil {
		return
	}
	close(p.stopc)
	<-p.finished
	p.stopc = nil
}
