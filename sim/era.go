package sim

import (
	"fmt"
	"strings"
)

// Era is how one SGLang release behaves where a client, supervisor or log
// reader can see it. docs/sglangsim.md cites the source of every field.
type Era struct {
	Name  string // SGLANGSIM_VERSION value; also the reported "version"
	Table string // file under flags/ holding the launch flag table

	// Health: Gate makes /health and /health_generate answer 503 until the
	// warmup is done (ServerStatus.Starting); without it /health answers 200
	// as soon as the port is open. Generate makes /health run a one-token
	// generation like /health_generate (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION
	// defaults to true; false gives the 200 fast path). HealthTimeout bounds the
	// generation (seconds; 0: wait for ever).
	Gate, Generate bool
	HealthTimeout  float64
	// NoHealthBypass: SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false does nothing
	// (upstream added it in f0b5ccf5f, 2025-11-15, first in 0.5.5.post3).
	NoHealthBypass bool

	// ServerInfo: NewInfoPath serves /server_info with /get_server_info as a
	// deprecated alias that logs a warning per call; InternalStates adds the
	// per-DP internal_states list; FlushStatus answers 400 when the flush was
	// refused (older releases always answer 200).
	NewInfoPath, InternalStates, FlushStatus bool

	// MetricsNoKey exempts /metrics from --api-key (/health* always is).
	MetricsNoKey bool
	// Metrics present with --enable-metrics.
	SpecLengthGauge, SpecRateGauge, VerifyCounter bool

	// Decode batch line: DecodeComma ("Decode batch," vs "Decode batch."),
	// AcceptLen (accept len under speculation), AcceptRate ("accept rate"),
	// RateDraftMinus1 (rate = (len-1)/(draft-1), else len/draft), CudaGraph
	// ("cuda graph: B, "), TrailingComma (the line ends with ", "), LargestLen
	// ("largest-len: 0, " before "#queue-req", 0.4.3.post3 to 0.4.4.post1).
	DecodeComma, AcceptLen, AcceptRate, RateDraftMinus1, CudaGraph, TrailingComma, LargestLen bool
	// DecodeBracket prints the scheduler's forward count after "Decode batch" and
	// "Prefill batch" ("Decode batch [N], ...", 0.5.4 only); Timestamp ends both lines
	// with "timestamp: ISO" (0.4.9.post1 to 0.4.9.post2).
	DecodeBracket, Timestamp bool
	// GraphLabel names the graph field by --device: "" always "cuda graph";
	// "cpu": "cuda graph" on cuda, else "cpu graph" (0.5.3rc2 on); "device": cpu ->
	// "cpu graph", npu -> "npu graph", anything else "cuda graph" (2026-01-22 on).
	GraphLabel string

	// FlatInternalState puts the scheduler's internal state (avg_spec_accept_length,
	// last_gen_throughput) at the top level of /get_server_info instead of an
	// internal_states list (0.4.3.post3 to 0.4.6.post3; the list from 0.4.6.post4).
	FlatInternalState bool

	// OldDeviceTrace: a scheduler whose set_device fails prints no "Context:"
	// line and its traceback calls min_per_gpu_memory = init_torch_distributed()
	// (model_runner.py before 26f07294f, 2025-03-26).
	OldDeviceTrace bool

	// CaptureTarget prints the 2026 capture lines ("Capture target decode CUDA graph
	// begin. backend=full, ..." / "Capture target verify ..." under speculation,
	// "Capture draft decode CUDA graph ...") instead of "Capture cuda graph begin".
	CaptureTarget bool
	// ShortCapture prints 0.4.1's and 0.4.2's capture lines ("Capture cuda graph begin. This
	// can take up to several minutes." / "... end. Time elapsed: X s", no memory figures)
	// and no draft capture lines (model_runner.py at efc52f85e2 and 4ab43cfb3e, whose
	// EAGLE worker logs none).
	ShortCapture bool

	// Speculative rules.
	Algorithms  []string // built-in names
	AnyAlgo     bool     // argparse takes any name; unknown ones fail at start
	Rules       string   // "v041", "v044", "v05", "v0510", "main"
	AutoDefault [3]int   // (steps, topk, draft) chosen for the simulator's models
	Reset48Warn bool     // the "Max running requests is reset to 48" warning
	// PageTopK is what topk > 1 with --page-size > 1 does: "" a ValueError unless the
	// backend allows it (0.5.x on), "adjust" topk set to 1 with a warning (0.4.7),
	// "none" nothing (0.4.9.post1).
	PageTopK string
	// EagleOverlapWarn replaces the "v05" rules' overlap warning (0.5.4's text).
	EagleOverlapWarn string
	// NgramWindowDraft: NGRAM's draft tokens default to
	// --speculative-ngram-max-match-window-size (12), without a warning (0.5.4).
	NgramWindowDraft bool
	// Adaptive is the release's adaptive speculative decoding (--speculative-adaptive): "" none,
	// "v0510" (6c2714f5a: one set of candidates, the file read by the worker) or "main" (015c872:
	// batch-size slots, step 0, the file read with the arguments); adaptive.go.
	Adaptive string
}

// knownEras returns the known releases, oldest first; the last is the default.
func knownEras() []Era {
	return []Era{
		{
			Name: "0.4.1", Table: "0_4_1.json",
			Gate: false, Generate: false, HealthTimeout: 0,
			NewInfoPath: false, InternalStates: false, FlushStatus: false,
			MetricsNoKey: false,
			DecodeComma:  false, AcceptLen: false, TrailingComma: false,
			Algorithms: []string{"EAGLE"}, Rules: "v041", OldDeviceTrace: true, ShortCapture: true,
		},
		{
			// sgl-project/sglang 4ab43cfb3e (the v0.4.2 bump): 0.4.1 with accept len in the
			// Decode line (no largest-len, no cuda graph, no trailing comma) and its gauge.
			Name: "0.4.2", Table: "0_4_2.json",
			Gate: false, Generate: false, HealthTimeout: 0,
			NewInfoPath: false, InternalStates: false, FlushStatus: false,
			MetricsNoKey: false, SpecLengthGauge: true,
			DecodeComma: false, AcceptLen: true, TrailingComma: false,
			Algorithms: []string{"EAGLE"}, Rules: "v041", OldDeviceTrace: true, ShortCapture: true,
		},
		{
			// sgl-project/sglang 6aaeb84872 (the v0.4.4 version bump): the Decode line
			// with accept len and largest-len, no cuda graph; the flat internal state.
			Name: "0.4.4", Table: "0_4_4.json",
			Gate: false, Generate: false, HealthTimeout: 20, // /health_generate: HEALTH_CHECK_TIMEOUT
			NewInfoPath: false, InternalStates: true, FlatInternalState: true, FlushStatus: false,
			MetricsNoKey: false, SpecLengthGauge: true,
			DecodeComma: false, AcceptLen: true, LargestLen: true, TrailingComma: true,
			Algorithms: []string{"EAGLE", "NEXTN"}, Rules: "v044", OldDeviceTrace: true,
		},
		{
			// sgl-project/sglang 4f723edd3b (the v0.4.7 bump): cuda graph after accept len,
			// no trailing comma; /health a fast path, internal_states, no gate yet.
			Name: "0.4.7", Table: "0_4_7.json",
			Gate: false, Generate: false, HealthTimeout: 20,
			NewInfoPath: false, InternalStates: true, FlushStatus: true,
			MetricsNoKey: true, SpecLengthGauge: true,
			DecodeComma: false, AcceptLen: true, CudaGraph: true, TrailingComma: false,
			Algorithms: []string{"EAGLE", "EAGLE3", "NEXTN"}, Rules: "v05", AutoDefault: [3]int{5, 4, 8}, PageTopK: "adjust",
		},
		{
			// sgl-project/sglang 066f4ec91f (the v0.4.9.post1 bump): 0.4.7's line ending
			// "#queue-req: Q, timestamp: ISO".
			Name: "0.4.9.post1", Table: "0_4_9_post1.json",
			Gate: false, Generate: false, HealthTimeout: 20,
			NewInfoPath: false, InternalStates: true, FlushStatus: true,
			MetricsNoKey: true, SpecLengthGauge: true,
			DecodeComma: false, AcceptLen: true, CudaGraph: true, TrailingComma: false, Timestamp: true,
			Algorithms: []string{"EAGLE", "EAGLE3", "NEXTN"}, Rules: "v05", AutoDefault: [3]int{5, 4, 8}, PageTopK: "none",
		},
		{
			Name: "0.5.2", Table: "0_5_2.json",
			Gate: true, Generate: true, HealthTimeout: 20, NoHealthBypass: true,
			NewInfoPath: false, InternalStates: true, FlushStatus: true,
			MetricsNoKey: true, SpecLengthGauge: true,
			DecodeComma: false, AcceptLen: true, CudaGraph: true, TrailingComma: true,
			Algorithms: []string{"EAGLE", "EAGLE3", "NEXTN"}, Rules: "v05", AutoDefault: [3]int{5, 4, 8},
		},
		{
			// sgl-project/sglang baf277a9bf (the v0.5.3.post2 version bump): accept rate
			// (over steps+1 drafts) while the line still starts "Decode batch.".
			Name: "0.5.3.post2", Table: "0_5_3_post2.json",
			Gate: true, Generate: true, HealthTimeout: 20, NoHealthBypass: true,
			NewInfoPath: false, InternalStates: true, FlushStatus: true,
			MetricsNoKey: true, SpecLengthGauge: true, SpecRateGauge: true,
			DecodeComma: false, AcceptLen: true, AcceptRate: true, CudaGraph: true, TrailingComma: true,
			Algorithms: []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"}, Rules: "v05", AutoDefault: [3]int{5, 4, 8},
			GraphLabel: "cpu",
		},
		{
			// sgl-project/sglang 1053e1be17 (the v0.5.4 bump): "Decode batch [FORWARD_CT], ..."
			// (PR #9366); the reset-to-48 warning; NGRAM's draft from the match window.
			Name: "0.5.4", Table: "0_5_4.json",
			Gate: true, Generate: true, HealthTimeout: 20, NoHealthBypass: true,
			NewInfoPath: false, InternalStates: true, FlushStatus: true,
			MetricsNoKey: true, SpecLengthGauge: true, SpecRateGauge: true,
			DecodeComma: true, DecodeBracket: true, AcceptLen: true, AcceptRate: true, CudaGraph: true, TrailingComma: true,
			GraphLabel: "cpu",
			Algorithms: []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"}, Rules: "v05", AutoDefault: [3]int{5, 4, 8},
			Reset48Warn: true, NgramWindowDraft: true,
			EagleOverlapWarn: "Overlap scheduler is disabled because of using eagle3 and standalone speculative decoding.",
		},
		{
			Name: "0.5.10", Table: "0_5_10.json",
			Gate: true, Generate: true, HealthTimeout: 20,
			NewInfoPath: true, InternalStates: true, FlushStatus: true,
			MetricsNoKey: true, SpecLengthGauge: true, SpecRateGauge: true,
			DecodeComma: true, AcceptLen: true, AcceptRate: true, CudaGraph: true,
			Algorithms: []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH"},
			AnyAlgo:    true, Rules: "v0510", AutoDefault: [3]int{3, 1, 4}, Reset48Warn: true, GraphLabel: "device",
			Adaptive: "v0510",
		},
		{
			Name: "main", Table: "2026-main.json",
			Gate: true, Generate: true, HealthTimeout: 20,
			NewInfoPath: true, InternalStates: true, FlushStatus: true,
			MetricsNoKey: true, SpecLengthGauge: true, SpecRateGauge: true, VerifyCounter: true,
			DecodeComma: true, AcceptLen: true, AcceptRate: true, RateDraftMinus1: true, CudaGraph: true,
			Algorithms: []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK"},
			AnyAlgo:    true, Rules: "main", AutoDefault: [3]int{3, 1, 4}, Reset48Warn: true, CaptureTarget: true, GraphLabel: "device",
			Adaptive: "main",
		},
	}
}

// EraNames lists the known releases, oldest first.
func EraNames() []string {
	eras := knownEras()
	n := make([]string, len(eras))
	for i := range eras {
		n[i] = eras[i].Name
	}
	return n
}

// DefaultEra is the release simulated without SGLANGSIM_VERSION: the newest.
func DefaultEra() string { e := knownEras(); return e[len(e)-1].Name }

// LookupEra returns the named release ("" is the default).
func LookupEra(name string) (*Era, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = DefaultEra()
	}
	eras := knownEras()
	for i := range eras {
		if eras[i].Name == name {
			return &eras[i], nil
		}
	}
	return nil, fmt.Errorf("unknown SGLANGSIM_VERSION %q (known, oldest first: %s; SGLANGSIM_VERSION=list prints them)", name, strings.Join(EraNames(), ", "))
}

// builtin reports whether algo is one of the era's built-in algorithms.
func (e *Era) builtin(algo string) bool {
	for _, a := range e.Algorithms {
		if a == algo {
			return true
		}
	}
	return false
}
