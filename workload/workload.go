// Package workload is specsweep's load generator: an OpenAI-compatible streaming client of SGLang's
// /v1/chat/completions and /v1/completions, closed-loop (fixed concurrency) and open-loop (Poisson
// arrivals) load shapes, and the figures of one load level under the names of SGLang's
// bench_serving.
//
// The client is built to measure the server, not itself: a hand-written server-sent-events reader
// that timestamps each event when its bytes arrive (before parsing) and does not allocate per event,
// one keep-alive connection per in-flight request, no compression, latency histograms merged once at
// the end. Every request is bounded in time (a timeout derived from the output length and a stall
// timeout), a level stops early when the server keeps failing, and cancelling the context stops
// everything promptly.
package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Accept length sources (Result.AcceptLengthSource; runs.accept_length_source).
const (
	AcceptMetrics    = "metrics"
	AcceptDecodeLog  = "decode_log"
	AcceptStream     = "stream"
	AcceptServerInfo = "server_info"
)

// API names.
const (
	APIChat        = "chat"
	APICompletions = "completions"
)

// Defaults of Config's zero values.
const (
	DefaultStallTimeout = 60 * time.Second
	// A derived request timeout: DefaultTimeoutBase plus DefaultTimeoutPerToken per output token.
	DefaultTimeoutBase     = 2 * time.Minute
	DefaultTimeoutPerToken = 250 * time.Millisecond
	// An open loop without a concurrency cap still keeps at most this many requests in flight.
	OpenLoopMaxInFlight = 4096
)

// Config describes one load level.
type Config struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:30000 (a trailing /v1 is accepted).
	URL string
	// API is "chat" (/v1/chat/completions, the default) or "completions" (/v1/completions).
	API string
	// Model is the "model" of each request; empty: the first id of /v1/models.
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer KEY".
	APIKey string

	// Concurrency is the number of requests kept in flight (closed loop). With RequestRate it caps
	// the requests in flight instead (0: no cap but OpenLoopMaxInFlight), like bench_serving's
	// --max-concurrency.
	Concurrency int
	// RequestRate > 0 selects the open loop: requests arrive as a Poisson process of this rate (per
	// second).
	RequestRate float64
	// Requests is the number of measured requests; Duration instead (or as well) stops sending new
	// requests after that long. At least one of them must be set.
	Requests int
	Duration time.Duration
	// Precision, when set, ends the level once the confidence interval of its figure is within
	// Precision.Target (relative half-width), after at least MinRequests measured requests; at
	// MaxRequests (or Duration) it ends anyway, the precision reached recorded.
	Precision *Precision
	// SeriesWidth > 0 asks for Result.Series: the output tok/s of each interval of this width.
	SeriesWidth time.Duration
	// Warmup requests are sent first, at the level's concurrency, and excluded from every figure.
	Warmup int

	// InputTokens sizes random prompts (a prompt set's padding is its SetDataset's). OutputTokens
	// is every request's max_tokens (with ignore_eos, so the server generates exactly that many),
	// but for a prompt set's items that have their own.
	InputTokens, OutputTokens int
	// Temperature is every request's sampling temperature (0: greedy). Speculative acceptance
	// depends on it: rejection sampling accepts fewer draft tokens than greedy matching.
	Temperature float64
	// Dataset is "random" (default) or "sharegpt:PATH"; Prompts, when set, is used instead: a
	// prompt set's items are a *SetDataset (NewSetDataset). A set's conversations of several turns
	// need the chat API; each turn is one request (docs/bench.md, "Prompt set files").
	Dataset string
	Prompts Dataset
	// Seed makes prompts and arrival times reproducible.
	Seed uint64

	// RequestTimeout bounds one request (0: DefaultTimeoutBase + the request's max_tokens *
	// DefaultTimeoutPerToken). StallTimeout bounds the wait for response headers and, once the
	// stream has started, each gap between two reads (0: DefaultStallTimeout).
	RequestTimeout, StallTimeout time.Duration
	// MaxConsecutiveFailures ends the level early after that many failed requests in a row (0:
	// max(Concurrency, 4); negative: never).
	MaxConsecutiveFailures int

	// HTTPClient sends the requests; nil: NewHTTPClient(Concurrency). Reuse one across levels with
	// the highest concurrency to keep connections warm. On Linux, for a plain-HTTP server and a
	// client whose transport is net/http's without a proxy, cookie jar or overall timeout (as
	// NewHTTPClient's), the streams go instead on the level's event loop over connections it dials
	// with the transport's DialContext (evloop_linux.go); the probes and a redirect keep the client.
	HTTPClient *http.Client
	// SaveRequests, when set, receives one JSON line per measured request (RequestRecord).
	SaveRequests io.Writer
	// Progress, when set, is called after each measured request with the counts so far; it is
	// called from many goroutines and must be quick.
	Progress func(completed, failed int)
	// Activity, when set, is stored the time (UnixNano) of every response and stream chunk of any
	// request, warmup included: a watcher tells a server that stopped producing anything (hung)
	// from one that is busy.
	Activity *atomic.Int64
	// ServerLog, when set, gives the server's log lines (the orchestrator passes the instance's
	// journal): the accept length of a level is read from the "Decode batch" lines logged while its
	// measured requests ran when the server exports no verify counter (releases before 2026).
	ServerLog ServerLog
}

// ServerLog is a server's log as a sequence: LogMark is the position now, LogsSince the lines
// logged after a mark.
type ServerLog interface {
	LogMark(ctx context.Context) (int, error)
	LogsSince(ctx context.Context, mark int) ([]string, error)
}

// Result holds the figures of one level. Latencies are in milliseconds.
type Result struct {
	API, Model, Dataset string
	Concurrency         int
	RequestRate         float64
	InputTokens         int // requested: random prompts' length, a prompt set's padding (0: none)
	OutputTokens        int // max_tokens (of the requests whose item has none of its own)

	// Sent counts measured requests sent; Completed + Failed == Sent.
	Sent, Completed, Failed int
	// Errors keeps the first distinct failure causes with their counts.
	Errors []ErrorSample
	// Aborted is set when the level ended early (the server kept failing, or every warmup failed).
	Aborted string
	// WarmupCompleted and WarmupFailed count the warmup requests (excluded from every figure).
	WarmupCompleted, WarmupFailed int

	// Start is when the first measured request was sent; Duration runs from there to the end of the
	// last one.
	Start    time.Time
	Duration time.Duration

	// Token totals of the completed requests, as the server reported them in usage.
	TotalInputTokens, TotalOutputTokens int64
	// UsageMissing counts completed requests without a usage chunk (their output is counted as
	// chunks, their input estimated from the prompt's words).
	UsageMissing int
	// Means per completed request of those totals: the input tokens actually sent (chat template
	// included, as the server counts them), the same of first turns only (a padded set's length as
	// measured: a later turn also carries the conversation before it), and the output tokens.
	MeanInputTokens, MeanFirstInputTokens, MeanOutputTokens float64
	// LaterTurns counts the completed requests that were a conversation's turn after the first
	// (every turn is a request in every count and figure).
	LaterTurns int

	RequestThroughput, InputThroughput, OutputThroughput float64 // per second

	// TTFT: request sent to first token. ITL: between two token-carrying chunks (one chunk can
	// carry several tokens under speculative decoding). TPOT: (E2E - TTFT) / (output tokens - 1).
	// E2E: request sent to the end of the stream.
	TTFT, ITL, TPOT, E2E Dist

	// AcceptLength is the level's mean accepted length (bonus token included), from the first
	// source that is per level: the delta of generation_tokens_total over the delta of
	// spec_verify_calls_total around the measured window, less one prefill token per request
	// ("metrics"); else the "Decode batch" lines of the server's log during the window
	// ("decode_log", with Config.ServerLog); else the tokens per streamed chunk after the first
	// ("stream": SGLang streams one chunk per verify step at stream_interval 1, so a chunk carries
	// the step's accepted tokens; releases whose log has no accept length); else the server info's
	// avg_spec_accept_length, a lifetime average ("server_info": not per level). Nil for a server
	// without speculation.
	AcceptLength       *float64
	AcceptLengthSource string // AcceptMetrics, AcceptDecodeLog, AcceptStream, AcceptServerInfo or ""

	// Interval is the figure's confidence interval (batch means over the steady-state window):
	// for every level with enough data, Precision or not (the Precision's metric and confidence,
	// else output tok/s at 0.95). Nil when there were too few batches.
	Interval *Interval

	// Series, with Config.SeriesWidth, is the output tok/s of each interval of that width from
	// Start to the end of the last request: each completed request's tokens spread evenly from its
	// first token to its end (a request's tokens are not timed one by one), at most MaxSeries
	// intervals.
	Series []float64
	// Switches are the step changes an adaptive server logged while the run's load ran (read only
	// with SeriesWidth, a phased load, and a ServerLog), in order, at most MaxSwitches of
	// SwitchCount.
	Switches    []StepSwitch
	SwitchCount int
}

// MaxSeries bounds Result.Series: a day in one-second intervals.
const MaxSeries = 86400

// ErrorSample is one distinct failure cause.
type ErrorSample struct {
	Message      string `json:"message"`
	Count        int    `json:"count"`
	FirstRequest int    `json:"first_request"` // index of the first request that failed so (-1: warmup)
}

// maxErrorSamples is how many distinct causes a Result keeps; later ones count under the last.
const maxErrorSamples = 8

// BenchServing is one level in the JSON form of SGLang's bench_serving (docs/bench.md, `bench
// --json`): the same field names, in the same order.
type BenchServing struct {
	MaxConcurrency     int      `json:"max_concurrency"`
	Completed          int      `json:"completed"`
	Failed             int      `json:"failed"`
	Duration           float64  `json:"duration"`
	TotalInputTokens   int64    `json:"total_input_tokens"`
	TotalOutputTokens  int64    `json:"total_output_tokens"`
	RequestThroughput  float64  `json:"request_throughput"`
	InputThroughput    float64  `json:"input_throughput"`
	OutputThroughput   float64  `json:"output_throughput"`
	MeanTTFTMs         *float64 `json:"mean_ttft_ms"`
	MedianTTFTMs       *float64 `json:"median_ttft_ms"`
	P99TTFTMs          *float64 `json:"p99_ttft_ms"`
	MeanITLMs          *float64 `json:"mean_itl_ms"`
	MedianITLMs        *float64 `json:"median_itl_ms"`
	P99ITLMs           *float64 `json:"p99_itl_ms"`
	MeanTPOTMs         *float64 `json:"mean_tpot_ms"`
	MedianTPOTMs       *float64 `json:"median_tpot_ms"`
	MeanE2ELatencyMs   *float64 `json:"mean_e2e_latency_ms"`
	MedianE2ELatencyMs *float64 `json:"median_e2e_latency_ms"`
	AcceptLength       *float64 `json:"accept_length"`
}

// BenchServingFields lists BenchServing's JSON names in order.
var BenchServingFields = []string{"max_concurrency", "completed", "failed", "duration", "total_input_tokens",
	"total_output_tokens", "request_throughput", "input_throughput", "output_throughput", "mean_ttft_ms",
	"median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_tpot_ms",
	"median_tpot_ms", "mean_e2e_latency_ms", "median_e2e_latency_ms", "accept_length"}

// BenchServing returns the level's figures under bench_serving's names. Latency fields without a
// sample (no request completed) are null.
func (r *Result) BenchServing() BenchServing {
	opt := func(d Dist, v float64) *float64 {
		if d.Count == 0 || math.IsNaN(v) {
			return nil
		}
		v = math.Round(v*1e6) / 1e6 // nanoseconds: no float noise like 41.358864000000004
		return &v
	}
	return BenchServing{
		MaxConcurrency: r.Concurrency, Completed: r.Completed, Failed: r.Failed,
		Duration:         r.Duration.Seconds(),
		TotalInputTokens: r.TotalInputTokens, TotalOutputTokens: r.TotalOutputTokens,
		RequestThroughput: r.RequestThroughput, InputThroughput: r.InputThroughput, OutputThroughput: r.OutputThroughput,
		MeanTTFTMs: opt(r.TTFT, r.TTFT.Mean), MedianTTFTMs: opt(r.TTFT, r.TTFT.Median), P99TTFTMs: opt(r.TTFT, r.TTFT.P99),
		MeanITLMs: opt(r.ITL, r.ITL.Mean), MedianITLMs: opt(r.ITL, r.ITL.Median), P99ITLMs: opt(r.ITL, r.ITL.P99),
		MeanTPOTMs: opt(r.TPOT, r.TPOT.Mean), MedianTPOTMs: opt(r.TPOT, r.TPOT.Median),
		MeanE2ELatencyMs: opt(r.E2E, r.E2E.Mean), MedianE2ELatencyMs: opt(r.E2E, r.E2E.Median),
		AcceptLength: r.AcceptLength,
	}
}

// RequestRecord is one measured request as --save-requests writes it (JSON lines).
type RequestRecord struct {
	Concurrency      int     `json:"max_concurrency"`
	Index            int     `json:"index"`
	ID               string  `json:"id,omitempty"` // the server's response id (SGLang: the request id)
	StartUnixMs      float64 `json:"start_unix_ms"`
	OK               bool    `json:"ok"`
	TTFTMs           float64 `json:"ttft_ms,omitempty"`
	E2EMs            float64 `json:"e2e_latency_ms"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Chunks           int     `json:"chunks"`
	Error            string  `json:"error,omitempty"`
	// Turn is the request's turn, from 1, in a conversation of several (0 otherwise).
	Turn int `json:"turn,omitempty"`
}

// maxResponseHeader bounds the response headers of a request; beyond it the request fails
// ("server response headers exceeded ... bytes").
const maxResponseHeader = 64 << 10

// NewHTTPClient returns a client fit for load generation at up to concurrency streams: enough idle
// keep-alive connections per host, no compression, no proxy, no overall timeout (each request
// carries its own).
func NewHTTPClient(concurrency int) *http.Client {
	idle := max(concurrency, 1) + 16
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		// A stream's headers are a few hundred bytes; Go's default bound (10 MB) would let each
		// connection of a level hold that much.
		MaxResponseHeaderBytes: maxResponseHeader,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		ReadBufferSize:         32 << 10,
		WriteBufferSize:        32 << 10,
	}}
}

// normalize validates cfg and fills in defaults.
func (cfg *Config) normalize() (base string, err error) {
	u, err := url.Parse(strings.TrimSpace(cfg.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("bad server URL %q: want http://HOST:PORT", cfg.URL)
	}
	base = strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/")
	base = strings.TrimSuffix(base, "/v1")
	switch cfg.API {
	case "":
		cfg.API = APIChat
	case APIChat, APICompletions:
	default:
		return "", fmt.Errorf("unknown API %q (want chat or completions)", cfg.API)
	}
	switch {
	case cfg.Concurrency < 0:
		return "", fmt.Errorf("concurrency must not be negative, got %d", cfg.Concurrency)
	case cfg.RequestRate < 0 || math.IsNaN(cfg.RequestRate) || math.IsInf(cfg.RequestRate, 0):
		return "", fmt.Errorf("request rate must be a positive number, got %v", cfg.RequestRate)
	case cfg.RequestRate == 0 && cfg.Concurrency == 0:
		return "", errors.New("set a concurrency (closed loop) or a request rate (open loop)")
	case cfg.Requests < 0 || cfg.Duration < 0 || cfg.Warmup < 0:
		return "", errors.New("requests, duration and warmup must not be negative")
	case cfg.Requests == 0 && cfg.Duration == 0 && (cfg.Precision == nil || cfg.Precision.MaxRequests == 0):
		if cfg.Precision != nil {
			return "", errNoBound
		}
		return "", errors.New("set a number of requests or a duration")
	case cfg.OutputTokens < 1:
		return "", fmt.Errorf("output tokens must be positive, got %d", cfg.OutputTokens)
	case cfg.RequestTimeout < 0 || cfg.StallTimeout < 0:
		return "", errors.New("timeouts must not be negative")
	case cfg.Temperature < 0 || math.IsNaN(cfg.Temperature) || math.IsInf(cfg.Temperature, 0):
		return "", fmt.Errorf("temperature must be a number >= 0, got %v", cfg.Temperature)
	}
	if p := cfg.Precision; p != nil {
		if err := p.Validate(); err != nil {
			return "", err
		}
		n := p.normalized(cfg.Concurrency, cfg.Requests)
		if n.MaxRequests > 0 && n.MinRequests > n.MaxRequests {
			return "", fmt.Errorf("precision: min requests %d is above the level's %d requests", n.MinRequests, n.MaxRequests)
		}
		cfg.Precision = &n // a copy: the caller's stays as given
	}
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.MaxConsecutiveFailures == 0 {
		cfg.MaxConsecutiveFailures = max(cfg.Concurrency, 4)
	}
	if cfg.Prompts == nil {
		if cfg.Prompts, err = ParseDataset(cfg.Dataset, cfg.InputTokens, cfg.Seed); err != nil {
			return "", err
		}
	}
	if sd, ok := cfg.Prompts.(*SetDataset); ok && sd.multi > 0 && cfg.API == APICompletions {
		// Flattening the turns into one prompt would send no chat template and none of the
		// answers the benchmarks' second turns follow: not what the set measures.
		return "", fmt.Errorf("prompt set %q has %d conversations of several turns: they need the chat API "+
			"(the completions API sends one prompt, with no turns)", sd.set.Name, sd.multi)
	}
	return base, nil
}

// streamKey separates the prompts of different levels (and of warmups): the same seed gives the
// same prompts for the same level shape, and different levels share no prompt.
func streamKey(cfg *Config, warm bool) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%g/%t", cfg.Concurrency, cfg.RequestRate, warm)
	return h.Sum64()
}

// jsonString encodes s as a JSON string.
func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
