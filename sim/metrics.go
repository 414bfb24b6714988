package sim

import (
	"fmt"
	"strconv"
	"strings"
)

var (
	ttftBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	itlBuckets  = []float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8}
	e2eBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800}
)

type histogram struct {
	bounds []float64
	counts []int64 // per bucket (not cumulative); last is +Inf
	sum    float64
	n      int64
}

func newHistogram(b []float64) *histogram {
	return &histogram{bounds: b, counts: make([]int64, len(b)+1)}
}

func (h *histogram) observe(v float64, weight int) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i] += int64(weight)
	h.sum += v * float64(weight)
	h.n += int64(weight)
}

func (h *histogram) clone() *histogram {
	c := *h
	c.counts = append([]int64(nil), h.counts...)
	return &c
}

func promFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// renderMetrics writes the Prometheus text exposition of s with the metrics
// the era has.
func renderMetrics(s Stats, model string, spec bool, era *Era) string {
	var b strings.Builder
	lbl := fmt.Sprintf(`engine_type="unified",model_name=%q,pp_rank="0",tp_rank="0"`, model)
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s gauge\nsglang:%s{%s} %s\n", name, help, name, name, lbl, promFloat(v))
	}
	counter := func(name, help string, v int64) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s counter\nsglang:%s{%s} %d\n", name, help, name, name, lbl, v)
	}
	hist := func(name, help string, h *histogram) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s histogram\n", name, help, name)
		var cum int64
		for i, ub := range h.bounds {
			cum += h.counts[i]
			fmt.Fprintf(&b, "sglang:%s_bucket{%s,le=\"%s\"} %d\n", name, lbl, promFloat(ub), cum)
		}
		cum += h.counts[len(h.bounds)]
		fmt.Fprintf(&b, "sglang:%s_bucket{%s,le=\"+Inf\"} %d\n", name, lbl, cum)
		fmt.Fprintf(&b, "sglang:%s_sum{%s} %s\nsglang:%s_count{%s} %d\n", name, lbl, promFloat(h.sum), name, lbl, h.n)
	}
	gauge("num_running_reqs", "The number of running requests.", float64(s.Running))
	gauge("num_used_tokens", "The number of used tokens.", float64(s.Tokens))
	gauge("token_usage", "The token usage.", s.TokenUsage)
	gauge("gen_throughput", "The generation throughput (token/s).", s.GenThroughput)
	gauge("num_queue_reqs", "The number of requests in the waiting queue.", float64(s.Queued))
	al, ar := 0.0, 0.0
	if spec {
		al, ar = s.AcceptLen, s.AcceptRate
	}
	if era.SpecLengthGauge {
		gauge("spec_accept_length", "The average acceptance length of speculative decoding.", al)
	}
	if era.SpecRateGauge {
		gauge("spec_accept_rate", "The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).", ar)
	}
	counter("prompt_tokens_total", "Number of prefill tokens processed.", s.PromptTokens)
	counter("generation_tokens_total", "Number of generation tokens processed.", s.GenTokens)
	counter("num_requests_total", "Number of requests processed.", s.Requests)
	if era.VerifyCounter {
		counter("spec_verify_calls_total", "Number of speculative decoding verification calls.", s.VerifyCalls)
	}
	hist("time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.TTFT)
	hist("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", s.ITL)
	hist("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", s.E2E)
	return b.String()
}
