package workload

import (
	"math"
	"strings"
	"testing"
)

// The Decode-batch line of every shape SGLang has printed, each written from the format string of
// log_decode_stats at the release named (python/sglang/srt/managers/scheduler.py up to 0.4.9.post6,
// scheduler_metrics_mixin.py from 0.4.10; sgl-project/sglang, the release's version-bump commit,
// read in its git history), with the numbers of a speculative run. docs/sglang-versions.md lists the
// shapes and where each changed.
var decodeEraLines = []struct {
	release, commit, line string
	want                  float64 // 0: no accept length in the line
}{
	{"0.4.1 to 0.4.1.post6, no accept len", "efc52f85e2",
		"[2025-01-02 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, gen throughput (token/s): 150.23, #queue-req: 0", 0},
	{"0.4.1.post7 to 0.4.3.post2", "e94fb7cb10",
		"[2025-01-21 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, gen throughput (token/s): 150.23, #queue-req: 0", 2.45},
	{"0.4.3.post3 to 0.4.4.post1, largest-len", "6aaeb84872",
		"[2025-03-14 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, gen throughput (token/s): 150.23, largest-len: 0, #queue-req: 0, ", 2.45},
	{"0.4.4.post2 to 0.4.5.post3", "1099f6c974",
		"[2025-04-01 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"0.4.6 to 0.4.6.post3", "84022c0e56",
		"[2025-04-28 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, gen throughput (token/s): 150.23, #queue-req: 0", 2.45},
	{"0.4.6.post4 to 0.4.9, cuda graph", "16267d4fa7",
		"[2025-05-14 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0", 2.45},
	{"0.4.9.post1 to 0.4.9.post2, timestamp", "066f4ec91f",
		"[2025-07-09 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0, timestamp: 2025-07-09T10:00:00.123456", 2.45},
	{"0.4.9.post3 to 0.5.3.post1", "01c000043c",
		"[2025-07-23 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"0.4.9.post3 on, hybrid SWA model", "01c000043c",
		"[2025-07-23 10:00:00 TP0] Decode batch. #running-req: 3, #full token: 1234, full token usage: 0.01, #swa token: 600, swa token usage: 0.01, accept len: 2.45, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"0.5.2 on a CPU build", "b0d25e72c4",
		"[2025-09-12 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, cpu graph: False, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"0.5.3.post2 to 0.5.3.post3, accept rate with the period", "baf277a9bf",
		"[2025-10-16 10:00:00 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, accept rate: 0.61, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"0.5.4, the forward count always printed", "1053e1be17",
		"[2025-10-24 10:00:00 TP0] Decode batch [1234], #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, accept rate: 0.61, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"0.5.4.post1 on, the comma", "55d75e11bd",
		"[2025-10-27 10:00:00 TP0] Decode batch, #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, accept rate: 0.61, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"0.5.4.post1 on, hybrid GDN model with SGLANG_LOG_FORWARD_ITERS", "55d75e11bd",
		"[2025-10-27 10:00:00 TP0] Decode batch [812], #running-req: 3, #full token: 1234, full token usage: 0.01, mamba num: 6, mamba usage: 0.02, accept len: 2.45, accept rate: 0.61, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"2026-01 on an NPU build (npu graph)", "a4dc43258",
		"[2026-01-23 10:00:00 TP0] Decode batch, #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, accept rate: 0.61, npu graph: True, gen throughput (token/s): 150.23, #queue-req: 0, ", 2.45},
	{"2026-01-30 on, no trailing comma", "77a27e728",
		"[2026-01-31 10:00:00 TP0] Decode batch, #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, accept rate: 0.48, cuda graph: True, gen throughput (token/s): 150.23, #queue-req: 0", 2.45},
	{"2026-01-30 on, NPU, no trailing comma", "77a27e728",
		"[2026-01-31 10:00:00 TP0] Decode batch, #running-req: 3, #token: 1234, token usage: 0.01, accept len: 2.45, accept rate: 0.48, npu graph: False, gen throughput (token/s): 150.23, #queue-req: 0", 2.45},
}

func TestDecodeAcceptLengthEveryShape(t *testing.T) {
	for _, c := range decodeEraLines {
		got := DecodeAcceptLength([]string{c.line})
		switch {
		case c.want == 0 && got != nil:
			t.Errorf("%s (%s): got %v, want none: %s", c.release, c.commit, *got, c.line)
		case c.want != 0 && (got == nil || math.Abs(*got-c.want) > 1e-9):
			t.Errorf("%s (%s): got %v, want %v: %s", c.release, c.commit, got, c.want, c.line)
		}
		// A window of two lines of the shape keeps the second only (the first reports batches
		// from before the window).
		if c.want != 0 {
			first := c.line
			second := strings.Replace(c.line, "accept len: 2.45", "accept len: 3.10", 1)
			if got := DecodeAcceptLength([]string{first, second}); got == nil || math.Abs(*got-3.10) > 1e-9 {
				t.Errorf("%s: two lines gave %v, want the second's 3.10", c.release, got)
			}
		}
	}
}

// Decode-batch lines as real servers printed them, copied from public reports (numbers as there).
var decodeRealLines = []struct {
	source, line string
	want         float64 // 0: no accept length in the line
}{
	{"sgl-project/sglang issue 4407 (2025-03-14, 0.4.4: largest-len, no speculation)",
		"[2025-03-14 02:16:14 TP0] Decode batch. #running-req: 509, #token: 180776, token usage: 0.43, gen throughput (token/s): 7897.87, largest-len: 0, #queue-req: 0, ", 0},
	{"sgl-project/sglang test/srt/debug_utils/test_log_parser.py @ 3701f34da (PR #12605: a 2025-10-31 Ray log, 0.5.4's bracket, no speculation)",
		"(SGLangEngine pid=35555) [2025-10-31 03:45:20 TP0] Decode batch [51341], #running-req: 317, #token: 1094261, token usage: 0.67, cuda graph: True, gen throughput (token/s): 14806.57, #queue-req: 0,", 0},
	{"sgl-project/sglang issue 6949 (2025-06-07, no speculation)",
		"[2025-06-07 21:25:14 TP0] Decode batch. #running-req: 1, #token: 9322, token usage: 0.00, gen throughput (token/s): 97.52, #queue-req: 0", 0},
	{"sgl-project/sglang PR 21723 (2026-03-18, NEXTN on a hybrid GDN model, a custom log format)",
		"2026-03-18 11:22:05.874 INFO 120984 [ TP0 scheduler_metrics_mixin.py:415] Decode batch, #running-req: 2, #full token: 5046, full token usage: 0.01, mamba num: 2, mamba usage: 0.08, accept len: 2.64, accept rate: 0.66, cuda graph: True, gen throughput (token/s): 242.08, #queue-req: 0", 2.64},
	{"sgl-project/sglang PR 22331 (2026-04-08, no speculation)",
		"[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True, gen throughput (token/s): 144.95, #queue-req: 0", 0},
}

func TestDecodeAcceptLengthRealLines(t *testing.T) {
	for _, c := range decodeRealLines {
		got := DecodeAcceptLength([]string{c.line})
		switch {
		case c.want == 0 && got != nil:
			t.Errorf("%s: got %v, want none", c.source, *got)
		case c.want != 0 && (got == nil || math.Abs(*got-c.want) > 1e-9):
			t.Errorf("%s: got %v, want %v", c.source, got, c.want)
		}
	}
}
