package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// probeTimeout bounds every side request (/v1/models, /metrics, /get_server_info).
const probeTimeout = 10 * time.Second

func (r *runner) get(ctx context.Context, path string, limit int64) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return nil, 0, err
	}
	if r.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return b, resp.StatusCode, err
}

// warmConnections opens n keep-alive connections to the server before the measured window, so
// that no measured request pays for a TCP handshake: n GET /v1/models held open together (a
// connection returns to the pool only once its body is read), then drained.
func (r *runner) warmConnections(ctx context.Context, n int) {
	if n < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if r.loop != nil { // the streams go on the event loop's own connections
		r.loop.warm(ctx, n)
		return
	}
	var held, done sync.WaitGroup
	held.Add(n)
	for range n {
		done.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/v1/models", nil)
			var resp *http.Response
			if err == nil {
				if r.cfg.APIKey != "" {
					req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
				}
				resp, err = r.client.Do(req)
			}
			held.Done()
			if err != nil {
				return
			}
			held.Wait()
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		})
	}
	done.Wait()
}

// FirstModel returns the id of the first model /v1/models lists.
func (r *runner) firstModel(ctx context.Context) (string, error) {
	b, code, err := r.get(ctx, "/v1/models", 1<<20)
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("list models: GET /v1/models: HTTP %d: %s", code, excerpt(b))
	}
	var v struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("list models: GET /v1/models: %w", err)
	}
	if len(v.Data) == 0 || v.Data[0].ID == "" {
		return "", errors.New("list models: GET /v1/models lists no model (use --model)")
	}
	return v.Data[0].ID, nil
}

// serverInfo is what the load generator reads from the server info (/server_info, else the older
// /get_server_info).
type serverInfo struct {
	ok        bool
	spec      bool // a speculative algorithm is set
	specKnown bool // speculative_algorithm was present
	accept    float64
	hasAccept bool
}

func (r *runner) serverInfo(ctx context.Context) serverInfo {
	b, code, err := r.get(ctx, "/server_info", 8<<20)
	if err != nil || code != http.StatusOK {
		if ctx.Err() != nil {
			return serverInfo{}
		}
		// Releases before /server_info (its /get_server_info alias logs a deprecation warning).
		if b, code, err = r.get(ctx, "/get_server_info", 8<<20); err != nil || code != http.StatusOK {
			return serverInfo{}
		}
	}
	return parseServerInfo(b)
}

// parseServerInfo reads a server-info body: whether a speculative algorithm is set, and the
// lifetime average accept length. That average is in the internal_states list from 0.4.6.post4
// on, and at the top level of the body from 0.4.3.post3 to 0.4.6.post3, where the scheduler's
// state was merged into it (docs/sglang-versions.md).
func parseServerInfo(b []byte) serverInfo {
	var v struct {
		SpecAlgo       *string          `json:"speculative_algorithm"`
		InternalStates []map[string]any `json:"internal_states"`
		AvgAccept      *float64         `json:"avg_spec_accept_length"`
	}
	if json.Unmarshal(b, &v) != nil {
		return serverInfo{}
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(b, &raw)
	si := serverInfo{ok: true}
	if _, present := raw["speculative_algorithm"]; present {
		si.specKnown = true
		si.spec = v.SpecAlgo != nil && *v.SpecAlgo != "" && !strings.EqualFold(*v.SpecAlgo, "none")
	}
	for _, st := range v.InternalStates {
		if a, ok := st["avg_spec_accept_length"].(float64); ok && a > 0 {
			si.accept, si.hasAccept = a, true
			break
		}
	}
	if !si.hasAccept && v.AvgAccept != nil && *v.AvgAccept > 0 {
		si.accept, si.hasAccept = *v.AvgAccept, true
	}
	return si
}

// counters are the /metrics counters accept length is derived from.
type counters struct {
	ok                bool
	gen, verify       float64
	hasGen, hasVerify bool
}

func (r *runner) counters(ctx context.Context) counters {
	b, code, err := r.get(ctx, "/metrics", 32<<20)
	if err != nil || code != http.StatusOK {
		return counters{}
	}
	return parseCounters(b)
}

// parseCounters sums every series of SGLang's generation_tokens_total and spec_verify_calls_total
// counters in a Prometheus text exposition (a malformed line of them is skipped: the counters
// serve the accept length, which falls back to other sources).
func parseCounters(b []byte) counters {
	sums, _ := SumMetrics(b, false, "sglang:generation_tokens_total", "sglang:spec_verify_calls_total")
	c := counters{ok: true}
	c.gen, c.hasGen = sums["sglang:generation_tokens_total"]
	c.verify, c.hasVerify = sums["sglang:spec_verify_calls_total"]
	return c
}

// SumMetrics is the one reader of SGLang's /metrics (a Prometheus text exposition): for each name
// (written "sglang:NAME"; SGLang's older "sglang_NAME" is read as the same), the sum of the values
// of all its series; a name without a series is not in the map. strict makes a malformed line of a
// named metric (labels without their end, no value, a value that is not a number) an error;
// otherwise it is skipped.
func SumMetrics(b []byte, strict bool, names ...string) (map[string]float64, error) {
	want := map[string]string{}
	for _, n := range names {
		want[n] = n
		if rest, ok := strings.CutPrefix(n, "sglang:"); ok {
			want["sglang_"+rest] = n
		}
	}
	sums := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name := line
		if i := bytes.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		key, ok := want[string(name)]
		if !ok {
			continue
		}
		rest := line[len(name):]
		if len(rest) > 0 && rest[0] == '{' {
			j := bytes.LastIndexByte(rest, '}')
			if j < 0 {
				if strict {
					return nil, fmt.Errorf("/metrics: a %s line without the end of its labels", name)
				}
				continue
			}
			rest = rest[j+1:]
		}
		fields := strings.Fields(string(rest))
		if len(fields) == 0 {
			if strict {
				return nil, fmt.Errorf("/metrics: a %s line without a value", name)
			}
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) {
			if strict {
				return nil, fmt.Errorf("/metrics: %s is %q, not a number", name, fields[0])
			}
			continue
		}
		sums[key] += v
	}
	if err := sc.Err(); err != nil && strict {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	return sums, nil
}

// acceptLength decides the level's accept length: counter deltas over the measured window when the
// server exports both counters and verified anything, else the Decode-batch lines of the window
// (decode), else the server info's lifetime average; nil for a server without speculative decoding
// (or when nothing tells).
//
// The counters: generation_tokens_total grows by a request's completion tokens when it finishes,
// the first of which came from prefill, not from a verify step; finished is the number of requests
// that finished in the window, one such token each.
func acceptLength(info serverInfo, before, after counters, decode *float64, after2 serverInfo, finished int64, perChunk float64) (*float64, string) {
	if info.specKnown && !info.spec {
		return nil, ""
	}
	if before.ok && after.ok && before.hasVerify && after.hasVerify && before.hasGen && after.hasGen {
		dv, dg := after.verify-before.verify, after.gen-before.gen
		if dv > 0 && dg > float64(finished) {
			a := (dg - float64(finished)) / dv
			return &a, AcceptMetrics
		}
		if dv == 0 && !info.specKnown {
			return nil, "" // counters say: no verify step, a baseline
		}
	}
	if decode != nil {
		return decode, AcceptDecodeLog
	}
	if perChunk > 0 && info.spec {
		return &perChunk, AcceptStream
	}
	if after2.hasAccept {
		a := after2.accept
		return &a, AcceptServerInfo
	}
	return nil, ""
}

// reDecodeBatch matches SGLang's periodic decode log line in every release: "Decode batch." (older)
// or "Decode batch," (newer), optionally " [ITER]" (SGLANG_LOG_FORWARD_ITERS), then the running
// requests and, for speculative decoding, "accept len: X" (the accepted tokens, bonus included,
// over the forward count of the batches since the previous line: scheduler_metrics_mixin.py
// log_decode_stats, which resets both after logging).
var reDecodeBatch = regexp.MustCompile(`Decode batch(?: \[\d+\])?[.,] #running-req: (\d+),.*?accept len: ([0-9]+(?:\.[0-9]+)?)`)

// DecodeAcceptLength is the accept length of a window of a server's log: the mean of the "accept
// len" of its Decode-batch lines, each weighted by its running requests (the batch size: SGLang's
// forward count grows by it at every batch), or nil when the window has none. The first line
// covers batches from before the window (the interval it reports began at the previous line, before
// the window: the previous level's tail, or its warmup), so it is left out when there are more.
func DecodeAcceptLength(lines []string) *float64 {
	type entry struct{ w, a float64 }
	var es []entry
	for _, l := range lines {
		m := reDecodeBatch.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, err1 := strconv.Atoi(m[1])
		a, err2 := strconv.ParseFloat(m[2], 64)
		if err1 != nil || err2 != nil || n < 1 || a <= 0 {
			continue
		}
		es = append(es, entry{float64(n), a})
	}
	if len(es) >= 2 {
		es = es[1:]
	}
	var sw, sa float64
	for _, e := range es {
		sw += e.w
		sa += e.w * e.a
	}
	if sw == 0 {
		return nil
	}
	v := sa / sw
	return &v
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// StepSwitch is one change of an adaptive server's speculative steps, as its log says it. Two lines
// tell of one (SGLang main, sgl-project/sglang at 015c872): the policy's decision, "Adaptive spec
// params updated: steps 3 -> 5 (ema_accept_len=2.96)" (python/sglang/srt/speculative/
// adaptive_spec_params.py, AdaptiveStepSlot), and the worker switching the steps it runs, "Switch
// adaptive runtime state: steps 3 -> 5, draft_tokens 4 -> 6" (apply_runtime_state), which also
// follows a batch routed to another batch-size slot with no decision logged.
type StepSwitch struct {
	// Runtime: the worker's switch (what ran); false: the policy's decision.
	Runtime  bool
	From, To int
	// EMA is the accept-length average that decided it (nil when the line has none).
	EMA *float64
	// Clock is the time of day the line's prefix gives ("15:04:05", the server's clock and zone;
	// "" when the line has no SGLang prefix).
	Clock string
}

// MaxSwitches bounds the switches kept of one window (a load that alternates between two slots
// switches at every batch); AdaptiveSwitches counts the rest.
const MaxSwitches = 512

var (
	// reStepSwitch matches the policy's line and the variants forks write ("updated (confidence):").
	reStepSwitch = regexp.MustCompile(`Adaptive spec params updated(?: \([^)]*\))?: steps (\d+) -> (\d+)(?:.*?ema_accept_len=([0-9.]+))?`)
	// reRuntimeSwitch matches the worker's.
	reRuntimeSwitch = regexp.MustCompile(`Switch adaptive runtime state: steps (\d+) -> (\d+)`)
	// reLogClock is the time of day of SGLang's log prefix "[2026-12-06 05:00:00 TP0] ".
	reLogClock = regexp.MustCompile(`^\[\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d)`)
)

// AdaptiveSwitches reads the step switches of a window of a server's log, in order: at most
// MaxSwitches, and how many there were.
func AdaptiveSwitches(lines []string) (kept []StepSwitch, total int) {
	for _, l := range lines {
		runtime := false
		m := reStepSwitch.FindStringSubmatch(l)
		if m == nil {
			if m = reRuntimeSwitch.FindStringSubmatch(l); m == nil {
				continue
			}
			runtime = true
		}
		from, err1 := strconv.Atoi(m[1])
		to, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || from > 1<<16 || to > 1<<16 {
			continue
		}
		total++
		if len(kept) == MaxSwitches {
			continue
		}
		sw := StepSwitch{Runtime: runtime, From: from, To: to}
		if len(m) > 3 && m[3] != "" {
			if v, err := strconv.ParseFloat(m[3], 64); err == nil {
				sw.EMA = &v
			}
		}
		if c := reLogClock.FindStringSubmatch(l); c != nil {
			sw.Clock = c[1]
		}
		kept = append(kept, sw)
	}
	return kept, total
}
