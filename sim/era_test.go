package sim_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/sim"
	"github.com/specsweep/specsweep/workload"
)

// runSimEnv runs the binary to completion with env (SGLANGSIM_* and SGL*
// variables of the test's own environment removed).
func runSimEnv(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(simBin, args...)
	cmd.Env = append(baseEnv(), "SGLANGSIM_HOST_FILE="+noHostFile)
	if _, ok := env["SGLANGSIM_STATE_DIR"]; !ok {
		cmd.Env = append(cmd.Env, "SGLANGSIM_STATE_DIR="+filepath.Join(t.TempDir(), "gpus"))
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, o.String(), e.String()
}

// eagle041 is EAGLE as 0.4.1 takes it (no EAGLE3; the triple spelled out).
var eagle041 = []string{"--tp", "4", "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/d",
	"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"}

func progOf(era string) string {
	switch era {
	case "0.5.10", "main":
		return "sglang serve"
	}
	return "launch_server.py"
}

func TestVersionKnob(t *testing.T) {
	t.Parallel()
	code, out, _ := runSimEnv(t, map[string]string{"SGLANGSIM_VERSION": "list"})
	if code != 0 || strings.TrimSpace(out) != strings.Join(sim.EraNames(), "\n") {
		t.Errorf("list: exit %d, %q", code, out)
	}
	if names := sim.EraNames(); len(names) < 4 || names[len(names)-1] != sim.DefaultEra() {
		t.Errorf("eras %v, default %s: want four or more, the newest last and default", names, sim.DefaultEra())
	}
	code, _, errOut := runSimEnv(t, map[string]string{"SGLANGSIM_VERSION": "0.3.0"}, "--model-path", "m")
	if code != 2 || !strings.Contains(errOut, `unknown SGLANGSIM_VERSION "0.3.0"`) || !strings.Contains(errOut, strings.Join(sim.EraNames(), ", ")) {
		t.Errorf("bad version: exit %d, %q", code, errOut)
	}
}

type triple struct {
	era, flag, valid, invalid string
	extra                     []string
}

func readTriples(t *testing.T) []triple {
	t.Helper()
	f, err := os.Open("testdata/flag_triples.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []triple
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		c := strings.Split(l, "|")
		if len(c) != 5 {
			t.Fatalf("bad triple line %q", l)
		}
		out = append(out, triple{c[0], c[1], c[2], c[3], strings.Fields(c[4])})
	}
	return out
}

func flagWords(flag, v string) []string {
	switch {
	case v == "":
		return []string{flag}
	case strings.HasPrefix(v, "="):
		return []string{flag + v}
	case strings.HasPrefix(v, "{") || strings.HasPrefix(v, "["):
		return []string{flag, v} // one JSON word
	}
	return append([]string{flag}, strings.Fields(v)...)
}

// The flag-table test: every (flag, valid, invalid) triple read from the real
// server_args.py of each era: valid accepted, invalid refused by argparse.
func TestFlagTriples(t *testing.T) {
	t.Parallel()
	triples := readTriples(t)
	seen := map[string]int{}
	for _, tr := range triples {
		seen[tr.era]++
		env := map[string]string{"SGLANGSIM_VERSION": tr.era, "SGLANGSIM_CHECK_ARGS": "1"}
		base := append([]string{"--model-path", "/models/Qwen3.5-122B-A10B"}, tr.extra...)
		code, _, stderr := runSimEnv(t, env, append(base, flagWords(tr.flag, tr.valid)...)...)
		if code != 0 {
			t.Errorf("%s %s %q: exit %d, %s; want accepted", tr.era, tr.flag, tr.valid, code, tail(stderr, 2))
		}
		if tr.invalid == "-" {
			continue
		}
		code, _, stderr = runSimEnv(t, env, append(base, flagWords(tr.flag, tr.invalid)...)...)
		prog := progOf(tr.era)
		named := regexp.MustCompile(`\n` + regexp.QuoteMeta(prog) + `: error: argument (\S+/)*` + regexp.QuoteMeta(tr.flag) + `(/\S+)*: `)
		if code != 2 || !strings.HasPrefix(stderr, "usage: "+prog+" [-h]") || !named.MatchString(stderr) {
			t.Errorf("%s %s %q: exit %d, %q; want an argparse refusal naming the flag", tr.era, tr.flag, tr.invalid, code, tail(stderr, 1))
		}
	}
	for _, e := range sim.EraNames() {
		if seen[e] < 25 {
			t.Errorf("era %s: %d triples, want at least 25", e, seen[e])
		}
	}
}

// Flags real SGLang takes (the list): refused by the old simulator.
func TestRealFlagsAccepted(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SGLANGSIM_CHECK_ARGS": "1"}
	for _, args := range [][]string{
		{"--enable-torch-compile"}, {"--page-size", "16"}, {"--cuda-graph-bs", "1", "2", "4"}, {"--log-requests-level", "2"},
		{"--disable-overlap-schedule"}, {"--chunked-prefill-size", "-1"}, {"--enable-dp-attention"}, {"--kv-cache-dtype", "fp8_e4m3"},
		{"--hicache-ratio", "2"}, {"--reasoning-parser", "qwen3"}, {"--tool-call-parser", "qwen"}, {"--watchdog-timeout", "600"},
	} {
		code, _, stderr := runSimEnv(t, env, append([]string{"--model-path", "m"}, args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d %s", args, code, tail(stderr, 2))
		}
	}
	for _, args := range [][]string{{"--attention-backend", "fa9"}, {"--quantization", "int3"}} {
		if code, _, _ := runSimEnv(t, env, append([]string{"--model-path", "m"}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func startEra(t *testing.T, era string, env map[string]string, args ...string) *proc {
	t.Helper()
	e := map[string]string{"SGLANGSIM_VERSION": era}
	for k, v := range env {
		e[k] = v
	}
	return startSim(t, e, args...)
}

func getStatus(c *http.Client, url string, hdr map[string]string) (int, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// /health and /health_generate per era: the warmup gate, and what a hung
// scheduler gets (SGLANGSIM_FAIL=hang-after:0: the first request hangs it).
func TestEraHealth(t *testing.T) {
	t.Parallel()
	cases := []struct {
		era            string
		env            map[string]string
		warmup         int // /health while warming up
		hungHealth     int // /health once hung: a code, or 0 for no answer
		hungGenerate   int
		healthTimesOut bool // the hung answer comes after the health check timeout, with its log line
	}{
		{"0.4.1", nil, 200, 200, 0, false},
		{"0.4.2", nil, 200, 200, 0, false},
		{"0.4.4", nil, 200, 200, 503, true}, // no gate, but /health_generate bounded by HEALTH_CHECK_TIMEOUT
		{"0.4.7", nil, 200, 200, 503, true},
		{"0.4.9.post1", nil, 200, 200, 503, true},
		{"0.5.2", nil, 503, 503, 503, true},
		{"0.5.2", map[string]string{"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"}, 503, 503, 503, true},
		{"0.5.3.post2", nil, 503, 503, 503, true},
		// Before 0.5.5.post3 the variable does not exist: /health generates whatever it says.
		{"0.5.3.post2", map[string]string{"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"}, 503, 503, 503, true},
		{"0.5.4", nil, 503, 503, 503, true},
		{"0.5.4", map[string]string{"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"}, 503, 503, 503, true},
		{"0.5.10", nil, 503, 503, 503, true},
		{"main", nil, 503, 503, 503, true},
		{"main", map[string]string{"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"}, 503, 200, 503, true},
	}
	for _, c := range cases {
		env := map[string]string{"SGLANGSIM_FAIL": "hang-after:0", "SGLANGSIM_WARMUP_SECONDS": "60"}
		for k, v := range c.env {
			env[k] = v
		}
		p := startEra(t, c.era, env)
		p.waitStatus("/v1/models", 200, 10*time.Second) // the port is open, warmup runs (0.6 s)
		if got := p.status("/health"); got != c.warmup {
			t.Errorf("%s %v: /health while warming up %d, want %d", c.era, c.env, got, c.warmup)
		}
		p.waitStatus("/health_generate", 200, 10*time.Second)
		if got := p.status("/health"); got != 200 {
			t.Errorf("%s: ready /health %d", c.era, got)
		}
		// Hang the scheduler with one request.
		go func() {
			short := &http.Client{Timeout: 5 * time.Second}
			resp, err := short.Post(p.base+"/generate", "application/json", strings.NewReader(`{"text":"a","sampling_params":{"max_new_tokens":4}}`))
			if err == nil {
				resp.Body.Close()
			}
		}()
		quick := &http.Client{Timeout: 3 * time.Second}
		// The hang shows once the generation probe stops answering 200 (a
		// probe taken before the request arrived still answers).
		for i := 0; ; i++ {
			if code, err := getStatus(quick, p.base+"/health_generate", nil); err != nil || code != 200 {
				break
			}
			if i == 50 {
				t.Fatalf("%s: the scheduler never hung", c.era)
			}
		}
		for path, want := range map[string]int{"/health": c.hungHealth, "/health_generate": c.hungGenerate} {
			got, err := getStatus(quick, p.base+path, nil)
			if want == 0 {
				if err == nil {
					t.Errorf("%s: hung %s answered %d, want no answer", c.era, path, got)
				}
				continue
			}
			if err != nil || got != want {
				t.Errorf("%s %v: hung %s = %d (%v), want %d", c.era, c.env, path, got, err, want)
			}
		}
		if c.healthTimesOut && !strings.Contains(p.stderr.String(), "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.") {
			t.Errorf("%s: no health check failure line", c.era)
		}
	}
}

func getJSONWith(t *testing.T, p *proc, path string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.base+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// Server info endpoints, the deprecation line, the API key's exemptions, the
// metrics each era has, and /flush_cache per era.
func TestEraServerInfoMetricsKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		era                      string
		newPath, internal        bool
		metricsNoKey             bool
		lengthGauge, rateGauge   bool
		verifyCounter, flushCode bool
	}{
		{"0.4.1", false, false, false, false, false, false, false},
		{"0.4.2", false, false, false, true, false, false, false},
		{"0.4.4", false, false, false, true, false, false, false}, // the internal state is at the top level
		{"0.4.7", false, true, true, true, false, false, true},
		{"0.4.9.post1", false, true, true, true, false, false, true},
		{"0.5.2", false, true, true, true, false, false, true},
		{"0.5.3.post2", false, true, true, true, true, false, true},
		{"0.5.4", false, true, true, true, true, false, true},
		{"0.5.10", true, true, true, true, true, false, true},
		{"main", true, true, true, true, true, true, true},
	}
	for _, c := range cases {
		t.Run(c.era, func(t *testing.T) {
			t.Parallel()
			args := spec3
			if c.era == "0.4.1" || c.era == "0.4.2" || c.era == "0.4.4" {
				args = eagle041
			}
			p := startEra(t, c.era, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"},
				append(args, "--enable-metrics", "--api-key", "k", "--decode-log-interval", "2")...)
			p.waitReady()
			key := map[string]string{"Authorization": "Bearer k"}
			code, info := getJSONWith(t, p, "/get_server_info", key)
			if code != 200 || info["version"] != c.era {
				t.Errorf("%s: /get_server_info %d version %v", c.era, code, info["version"])
			}
			if _, ok := info["internal_states"]; ok != c.internal {
				t.Errorf("%s: internal_states present %v, want %v", c.era, ok, c.internal)
			}
			code, _ = getJSONWith(t, p, "/server_info", key)
			if (code == 200) != c.newPath {
				t.Errorf("%s: /server_info %d", c.era, code)
			}
			dep := strings.Contains(p.stderr.String(), "Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.")
			if dep != c.newPath {
				t.Errorf("%s: deprecation warning logged %v, want %v", c.era, dep, c.newPath)
			}
			// The key: /health* exempt everywhere, /metrics where the era says.
			for path, want := range map[string]int{"/health": 200, "/health_generate": 200, "/get_server_info": 401, "/v1/models": 401} {
				if got, _ := getStatus(client, p.base+path, nil); got != want {
					t.Errorf("%s: %s without key %d, want %d", c.era, path, got, want)
				}
			}
			want := 401
			if c.metricsNoKey {
				want = 200
			}
			if got, _ := getStatus(client, p.base+"/metrics", nil); got != want {
				t.Errorf("%s: /metrics without key %d, want %d", c.era, got, want)
			}
			req, _ := http.NewRequest(http.MethodPost, p.base+"/generate", strings.NewReader(`{"text":"a b","sampling_params":{"max_new_tokens":40,"ignore_eos":true,"temperature":0}}`))
			req.Header.Set("Authorization", "Bearer k")
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			req, _ = http.NewRequest(http.MethodGet, p.base+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer k")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			mb, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := string(mb)
			for name, want := range map[string]bool{"sglang:spec_accept_length{": c.lengthGauge, "sglang:spec_accept_rate{": c.rateGauge,
				"sglang:spec_verify_calls_total{": c.verifyCounter, "sglang:generation_tokens_total{": true} {
				if strings.Contains(m, name) != want {
					t.Errorf("%s: metric %s present %v, want %v", c.era, name, !want, want)
				}
			}
			// /flush_cache when idle: GET allowed (POST only in 0.4.1); the lifetime accept length resets.
			fr, _ := http.NewRequest(http.MethodGet, p.base+"/flush_cache", nil)
			fr.Header.Set("Authorization", "Bearer k")
			fresp, err := client.Do(fr)
			if err != nil {
				t.Fatal(err)
			}
			fresp.Body.Close()
			if wantCode := map[bool]int{true: 200, false: 405}[c.flushCode]; fresp.StatusCode != wantCode {
				t.Errorf("%s: GET /flush_cache %d, want %d", c.era, fresp.StatusCode, wantCode)
			}
			if c.internal {
				_, info = getJSONWith(t, p, "/get_server_info", key)
				st := info["internal_states"].([]any)[0].(map[string]any)
				if _, ok := st["avg_spec_accept_length"]; ok {
					t.Errorf("%s: avg_spec_accept_length %v after /flush_cache, want absent until the next decode log line", c.era, st["avg_spec_accept_length"])
				}
			}
		})
	}
}

// The Decode batch line of each era, and its accept rate arithmetic.
func TestEraDecodeLine(t *testing.T) {
	t.Parallel()
	cases := map[string]*regexp.Regexp{
		"0.4.1":       regexp.MustCompile(`\] Decode batch\. #running-req: 1, #token: \d+, token usage: \d\.\d\d, gen throughput \(token/s\): [\d.]+, #queue-req: 0\n`),
		"0.4.4":       regexp.MustCompile(`\] Decode batch\. #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), gen throughput \(token/s\): [\d.]+, largest-len: 0, #queue-req: 0, \n`),
		"0.4.2":       regexp.MustCompile(`\] Decode batch\. #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), gen throughput \(token/s\): [\d.]+, #queue-req: 0\n`),
		"0.4.7":       regexp.MustCompile(`\] Decode batch\. #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), cuda graph: True, gen throughput \(token/s\): [\d.]+, #queue-req: 0\n`),
		"0.4.9.post1": regexp.MustCompile(`\] Decode batch\. #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), cuda graph: True, gen throughput \(token/s\): [\d.]+, #queue-req: 0, timestamp: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\n`),
		"0.5.4":       regexp.MustCompile(`\] Decode batch \[\d+\], #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), accept rate: ([\d.]+), cuda graph: True, gen throughput \(token/s\): [\d.]+, #queue-req: 0, \n`),
		"0.5.2":       regexp.MustCompile(`\] Decode batch\. #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), cuda graph: True, gen throughput \(token/s\): [\d.]+, #queue-req: 0, \n`),
		"0.5.3.post2": regexp.MustCompile(`\] Decode batch\. #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), accept rate: ([\d.]+), cuda graph: True, gen throughput \(token/s\): [\d.]+, #queue-req: 0, \n`),
		"0.5.10":      regexp.MustCompile(`\] Decode batch, #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), accept rate: ([\d.]+), cuda graph: True, gen throughput \(token/s\): [\d.]+, #queue-req: 0\n`),
		"main":        regexp.MustCompile(`\] Decode batch, #running-req: 1, #token: \d+, token usage: \d\.\d\d, accept len: ([\d.]+), accept rate: ([\d.]+), cuda graph: True, gen throughput \(token/s\): [\d.]+, #queue-req: 0\n`),
	}
	for era, re := range cases {
		args := append([]string{"--decode-log-interval", "4"}, spec3...)
		if era == "0.4.1" || era == "0.4.2" || era == "0.4.4" {
			args = append([]string{"--decode-log-interval", "4"}, eagle041...)
		}
		p := startEra(t, era, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, args...)
		p.waitReady()
		p.post("/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"max_new_tokens": 200, "ignore_eos": true, "temperature": 0}})
		// The lines may still be in the pipe when the answer is here (a CI run under load read the
		// stderr before them, 2026-12-07).
		p.waitLog(re, 5*time.Second)
		m := re.FindStringSubmatch(p.stderr.String())
		if m == nil {
			t.Errorf("%s: no Decode batch line like %s in %s", era, re, tail(p.stderr.String(), 4))
			continue
		}
		// The product's parser reads every simulated shape (the line's own accept len).
		if len(m) >= 2 {
			var al float64
			fmt.Sscan(m[1], &al)
			if got := workload.DecodeAcceptLength([]string{m[0]}); got == nil || *got != al {
				t.Errorf("%s: workload.DecodeAcceptLength gave %v for %q, want %v", era, got, m[0], al)
			}
		}
		if len(m) == 3 {
			var al, ar float64
			fmt.Sscan(m[1], &al)
			fmt.Sscan(m[2], &ar)
			want := al / 4 // 0.5.3.post2 to 0.5.10: accepted / verified tokens
			if era == "main" {
				want = (al - 1) / 3 // 2026: accepted drafts / proposed drafts
			}
			if d := ar - want; d > 0.011 || d < -0.011 {
				t.Errorf("%s: accept rate %v with accept len %v, want %.2f", era, ar, al, want)
			}
		}
	}
}

// 0.5.4's bracket is the scheduler's forward count: prefill and decode batches since start, so it
// grows from line to line (scheduler.py's forward_ct at 1053e1be17, never reset by a flush).
func TestEraDecodeForwardCount(t *testing.T) {
	t.Parallel()
	p := startEra(t, "0.5.4", map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, append([]string{"--decode-log-interval", "4"}, spec3...)...)
	p.waitReady()
	p.post("/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"max_new_tokens": 200, "ignore_eos": true, "temperature": 0}})
	p.waitLog(regexp.MustCompile(`(?s)\] Prefill batch \[\d+\], .*\] Decode batch \[\d+\], .*\] Decode batch \[\d+\], `), 5*time.Second) // still in the pipe, maybe
	ms := regexp.MustCompile(`\] (Prefill|Decode) batch \[(\d+)\], `).FindAllStringSubmatch(p.stderr.String(), -1)
	if len(ms) < 3 || ms[0][1] != "Prefill" {
		t.Fatalf("want a Prefill batch [N] line, then Decode batch [N] lines: %v in %s", ms, tail(p.stderr.String(), 4))
	}
	prev := 0
	for _, m := range ms {
		var n int
		fmt.Sscan(m[2], &n)
		if n <= prev {
			t.Errorf("forward counts %v: want them rising", ms)
			break
		}
		prev = n
	}
}

// The graph field's name by --device: always "cuda graph" up to 0.5.3rc2, then "cpu graph" on
// any device but cuda, and from 2026-01-22 (PR #17469) "npu graph" on NPU builds.
func TestEraGraphLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ era, device, label string }{
		{"0.4.7", "npu", "cuda graph"},
		{"0.5.4", "npu", "cpu graph"},
		{"0.5.4", "cuda", "cuda graph"},
		{"0.5.10", "npu", "npu graph"},
		{"main", "npu", "npu graph"},
		{"main", "cpu", "cpu graph"},
		{"main", "", "cuda graph"},
	} {
		args := append([]string{"--decode-log-interval", "4"}, spec3...)
		if c.device != "" {
			args = append(args, "--device", c.device)
		}
		p := startEra(t, c.era, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, args...)
		p.waitReady()
		p.post("/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"max_new_tokens": 40, "ignore_eos": true, "temperature": 0}})
		re := regexp.MustCompile(`Decode batch.*, accept len: [\d.]+, (accept rate: [\d.]+, )?` + c.label + `: (True|False), gen throughput`)
		if !p.waitLog(re, 5*time.Second) {
			t.Errorf("%s --device %q: no Decode line with %q: %s", c.era, c.device, c.label, tail(p.stderr.String(), 3))
		}
	}
}

// The auto-chosen speculative parameters and max_running_requests per era.
func TestEraAutoParams(t *testing.T) {
	t.Parallel()
	cases := []struct {
		era, algo        string
		steps, topk, ndt float64
		reset48          bool // max_running_requests 48, and whether the warning line shows
		warn48           bool
	}{
		{"0.4.1", "EAGLE", 5, 8, 64, false, false},
		{"0.4.4", "EAGLE", 5, 4, 8, false, false},
		{"0.4.2", "EAGLE", 5, 8, 64, false, false},
		{"0.4.4", "NEXTN", 5, 4, 8, false, false},
		{"0.4.7", "EAGLE3", 5, 4, 8, true, false},
		{"0.4.7", "NEXTN", 5, 4, 8, true, false},
		{"0.4.9.post1", "EAGLE3", 5, 4, 8, true, false},
		{"0.5.2", "EAGLE3", 5, 4, 8, true, false},
		{"0.5.3.post2", "EAGLE3", 5, 4, 8, true, false},
		{"0.5.4", "EAGLE3", 5, 4, 8, true, true},
		{"0.5.10", "EAGLE3", 3, 1, 4, true, true},
		{"main", "EAGLE3", 3, 1, 4, true, true},
		{"main", "NEXTN", 3, 1, 4, true, true},
	}
	for _, c := range cases {
		p := startEra(t, c.era, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, "--speculative-algorithm", c.algo, "--speculative-draft-model-path", "/d", "--cuda-graph-max-bs", "16")
		p.waitReady()
		info := p.getJSON("/get_server_info")
		if info["speculative_num_steps"] != c.steps || info["speculative_eagle_topk"] != c.topk || info["speculative_num_draft_tokens"] != c.ndt {
			t.Errorf("%s %s: auto (%v, %v, %v), want (%v, %v, %v)", c.era, c.algo, info["speculative_num_steps"], info["speculative_eagle_topk"],
				info["speculative_num_draft_tokens"], c.steps, c.topk, c.ndt)
		}
		if (info["max_running_requests"] == 48.0) != c.reset48 {
			t.Errorf("%s: max_running_requests %v", c.era, info["max_running_requests"])
		}
		if c.era == "0.4.4" && (info["max_running_requests"] != 32.0 || info["speculative_algorithm"] != "EAGLE") {
			// 0.4.4's __post_init__: NEXTN runs as EAGLE, max_running_requests 32 when unset.
			t.Errorf("0.4.4 %s: max_running_requests %v, algorithm %v, want 32, EAGLE", c.algo, info["max_running_requests"], info["speculative_algorithm"])
		}
		if strings.Contains(p.stderr.String(), "Max running requests is reset to 48") != c.warn48 {
			t.Errorf("%s: reset-to-48 warning shown %v, want %v", c.era, !c.warn48, c.warn48)
		}
	}
}

// Per-algorithm rules, plugin names and start-time failures (exit and stderr
// of the process; the servers that start are asked over HTTP).
func TestEraAlgorithmRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		era  string
		env  map[string]string
		args []string
		code int
		msg  string
	}{
		{"0.5.2", nil, []string{"--speculative-algorithm", "DFLASH"}, 2, "argument --speculative-algorithm: invalid choice: 'DFLASH' (choose from 'EAGLE', 'EAGLE3', 'NEXTN')"},
		{"0.5.2", nil, []string{"--speculative-algorithm", "TREE"}, 2, "invalid choice: 'TREE'"},
		{"0.4.1", nil, []string{"--speculative-algorithm", "NEXTN"}, 2, "invalid choice: 'NEXTN' (choose from 'EAGLE')"},
		{"main", nil, []string{"--speculative-algorithm", "TREE"}, 1, "ValueError: Unknown speculative algorithm name: TREE"},
		{"0.5.10", nil, []string{"--speculative-algorithm", "DFLASH"}, 1, "ValueError: DFLASH speculative decoding requires setting --speculative-draft-model-path."},
		{"main", nil, []string{"--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d", "--speculative-dflash-block-size", "0"}, 1,
			"ValueError: DFLASH requires --speculative-dflash-block-size to be positive, got 0."},
		{"main", nil, []string{"--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d", "--speculative-dflash-block-size", "8", "--speculative-num-draft-tokens", "4"}, 1,
			"but they differ. For DFLASH they must match."},
		{"main", nil, []string{"--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "/d", "--speculative-dspark-block-size", "0"}, 1,
			"ValueError: DSpark requires --speculative-dspark-block-size to be positive, got 0."},
		{"0.5.10", nil, []string{"--speculative-algorithm", "DSPARK"}, 1, "Unknown speculative algorithm name: DSPARK"},
		{"main", nil, []string{"--speculative-algorithm", "EAGLE3", "--speculative-num-draft-tokens", "4"}, 1, "\nAssertionError\n"},
		{"main", nil, []string{"--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"}, 1, "TypeError: '>' not supported between instances of 'NoneType' and 'int'"},
		{"0.5.2", nil, []string{"--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "2"}, 1, "\nAssertionError\n"},
		{"main", nil, []string{"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "2",
			"--speculative-num-draft-tokens", "8", "--page-size", "16", "--attention-backend", "flashmla"}, 1,
			"ValueError: speculative_eagle_topk > 1 with page_size > 1"},
	}
	for _, c := range cases {
		env := map[string]string{"SGLANGSIM_VERSION": c.era}
		for k, v := range c.env {
			env[k] = v
		}
		code, _, stderr := runSimEnv(t, env, append([]string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp", "4"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%s %v: exit %d, %q; want exit %d with %q", c.era, c.args, code, tail(stderr, 2), c.code, c.msg)
		}
		if c.code == 1 && !strings.HasPrefix(stderr, "Traceback (most recent call last):") {
			t.Errorf("%s %v: not a Python traceback: %q", c.era, c.args, tail(stderr, 3))
		}
	}

	// Servers that start: a plugin name registered with SGLANGSIM_SPEC_PLUGINS, NGRAM's and
	// DFLASH's effective parameters, topk 1 forcing and its warning.
	starts := []struct {
		era                string
		env                map[string]string
		args               []string
		algo               string
		steps, topk, draft float64
		warn               string
	}{
		{"main", map[string]string{"SGLANGSIM_SPEC_PLUGINS": "TREE"}, []string{"--speculative-algorithm", "tree", "--speculative-draft-model-path", "/d"}, "TREE", 3, 1, 4, ""},
		{"main", nil, []string{"--speculative-algorithm", "NGRAM"}, "NGRAM", 1, 10, 12, "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding."},
		{"main", nil, []string{"--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "4", "--speculative-num-draft-tokens", "16"}, "NGRAM", 4, 4, 16, ""},
		{"0.5.10", nil, []string{"--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "4"}, "DFLASH", 1, 1, 16,
			"DFLASH only supports speculative_num_steps == 1; overriding speculative_num_steps=4 to 1."},
		{"main", nil, []string{"--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d", "--speculative-dflash-block-size", "8"}, "DFLASH", 1, 1, 8, ""},
		{"main", nil, []string{"--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "/d", "--speculative-dspark-block-size", "7"}, "DSPARK", 1, 1, 8, ""},
		{"main", nil, []string{"--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1"}, "EAGLE3", 2, 1, 3,
			"speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"},
		{"0.4.1", nil, []string{"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8"},
			"EAGLE", 2, 1, 8, ""},
	}
	for _, c := range starts {
		env := map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}
		for k, v := range c.env {
			env[k] = v
		}
		p := startEra(t, c.era, env, c.args...)
		p.waitReady()
		info := p.getJSON("/get_server_info")
		if info["speculative_algorithm"] != c.algo || info["speculative_num_steps"] != c.steps || info["speculative_eagle_topk"] != c.topk || info["speculative_num_draft_tokens"] != c.draft {
			t.Errorf("%s %v: %v (%v, %v, %v), want %s (%v, %v, %v)", c.era, c.args, info["speculative_algorithm"], info["speculative_num_steps"],
				info["speculative_eagle_topk"], info["speculative_num_draft_tokens"], c.algo, c.steps, c.topk, c.draft)
		}
		if c.warn != "" && !strings.Contains(p.stderr.String(), c.warn) {
			t.Errorf("%s %v: no warning %q", c.era, c.args, c.warn)
		}
	}
}

// The out-of-memory variants: each its own journal line, each a SIGKILL.
func TestFailOOMVariants(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		args []string
		line string
	}{
		{map[string]string{"SGLANGSIM_FAIL": "oom"}, spec3, "Exception: Capture cuda graph failed: CUDA out of memory."},
		{map[string]string{"SGLANGSIM_FAIL": "oom-weights"}, nil, "torch.OutOfMemoryError: CUDA out of memory."},
		{map[string]string{"SGLANGSIM_FAIL": "oom-kv"}, nil, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."},
		{nil, []string{"--mem-fraction-static", "0.5"}, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."},
	} {
		p := startSim(t, c.env, c.args...)
		ws := p.wait(10 * time.Second)
		if !killedBySIGKILL(ws) || !strings.Contains(p.stderr.String(), c.line) || !strings.Contains(p.stderr.String(), "Received sigquit from a child process.") {
			t.Errorf("%v %v: status %v, log %s; want %q and a SIGKILL", c.env, c.args, ws, tail(p.stderr.String(), 3), c.line)
		}
	}
}

// Sampling lowers acceptance: the same requests, greedy and at temperature 1.
func TestTemperatureLowersAcceptance(t *testing.T) {
	t.Parallel()
	p := startSim(t, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, spec3...)
	p.waitReady()
	accept := func(temp float64) float64 {
		var sum float64
		for i := 0; i < 4; i++ {
			_, body := p.post("/generate", map[string]any{"text": "a b c", "sampling_params": map[string]any{
				"max_new_tokens": 400, "ignore_eos": true, "temperature": temp, "sampling_seed": i}})
			var g struct {
				MetaInfo struct {
					SpecAcceptLength float64 `json:"spec_accept_length"`
				} `json:"meta_info"`
			}
			if err := json.Unmarshal(body, &g); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			sum += g.MetaInfo.SpecAcceptLength
		}
		return sum / 4
	}
	greedy, sampled := accept(0), accept(1)
	if !(sampled < greedy-0.15) {
		t.Errorf("accept length greedy %.2f, temperature 1 %.2f: want clearly lower when sampling", greedy, sampled)
	}
	if code, _ := p.post("/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"temperature": -1}}); code != 400 {
		t.Errorf("negative temperature: %d, want 400", code)
	}
}

// The capture lines of start-up: 2026 main names the graph (target verify under
// speculation, draft decode) in the form of its capture code; older releases print
// "Capture cuda graph begin/end" and "Capture draft cuda graph begin/end".
func TestEraCaptureLines(t *testing.T) {
	t.Parallel()
	cases := map[string][]*regexp.Regexp{
		"0.4.2": {regexp.MustCompile(`TP0\] Capture cuda graph begin\. This can take up to several minutes\.\n`),
			regexp.MustCompile(`TP0\] Capture cuda graph end\. Time elapsed: [\d.]+ s\n`)},
		"0.4.7": {regexp.MustCompile(`TP0\] Capture cuda graph end\. Time elapsed: [\d.]+ s\. mem usage=[\d.]+ GB\. avail mem=[\d.]+ GB\.\n`),
			regexp.MustCompile(`TP0\] Capture draft cuda graph end\. Time elapsed: [\d.]+ s\. `)},
		"0.5.4": {regexp.MustCompile(`TP0\] Capture cuda graph end\. Time elapsed: [\d.]+ s\. mem usage=[\d.]+ GB\. avail mem=[\d.]+ GB\.\n`),
			regexp.MustCompile(`TP0\] Capture draft cuda graph end\. Time elapsed: [\d.]+ s\. `)},
		"0.5.10": {
			regexp.MustCompile(`TP0\] Capture cuda graph end\. Time elapsed: [\d.]+ s\. mem usage=[\d.]+ GB\. avail mem=[\d.]+ GB\.\n`),
			regexp.MustCompile(`TP0\] Capture draft cuda graph end\. Time elapsed: [\d.]+ s\. `),
		},
		"main": {
			regexp.MustCompile(`TP0\] Capture target verify CUDA graph begin\. backend=full, num_tokens_per_req=4, bs=\[1, 2, 4, 8, 12, 16, [\d, ]+\], avail mem=[\d.]+ GB\n`),
			regexp.MustCompile(`TP0\] Capture target verify CUDA graph end\. elapsed=[\d.]+ s, mem usage=[\d.]+ GB, avail mem=[\d.]+ GB\.\n`),
			regexp.MustCompile(`TP0\] Capture draft decode CUDA graph begin\. backend=full, num_tokens_per_req=1, bs=\[`),
			regexp.MustCompile(`TP0\] Capture draft decode CUDA graph end\. elapsed=[\d.]+ s, mem usage=[\d.]+ GB, avail mem=[\d.]+ GB\.\n`),
		},
	}
	for era, res := range cases {
		p := startEra(t, era, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, eagle041...)
		p.waitReady()
		log := p.stderr.String()
		for _, re := range res {
			if !re.MatchString(log) {
				t.Errorf("%s: no line like %s in the start-up log", era, re)
			}
		}
		if era == "main" && strings.Contains(log, "Capture cuda graph") {
			t.Errorf("main prints the old capture line")
		}
		if era == "0.4.2" && strings.Contains(log, "Capture draft") {
			t.Errorf("0.4.2 prints a draft capture line")
		}
	}
	// Without speculation the target graph is the decode graph.
	p := startEra(t, "main", map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, "--tp", "4")
	p.waitReady()
	if re := regexp.MustCompile(`TP0\] Capture target decode CUDA graph end\. elapsed=`); !re.MatchString(p.stderr.String()) {
		t.Errorf("main without speculation: no %s", re)
	}
}

// 0.4.4 (0.4.3.post3 to 0.4.6.post3) merges the scheduler's internal state into
// /get_server_info itself: avg_spec_accept_length at the top level, no list.
func TestEraFlatInternalState(t *testing.T) {
	t.Parallel()
	p := startEra(t, "0.4.4", map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, append([]string{"--decode-log-interval", "2"}, eagle041...)...)
	p.waitReady()
	p.post("/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"max_new_tokens": 64, "ignore_eos": true, "temperature": 0}})
	code, info := getJSONWith(t, p, "/get_server_info", nil)
	if code != 200 || info["version"] != "0.4.4" {
		t.Fatalf("/get_server_info %d version %v", code, info["version"])
	}
	if _, ok := info["internal_states"]; ok {
		t.Errorf("0.4.4 has an internal_states list")
	}
	if a, ok := info["avg_spec_accept_length"].(float64); !ok || a < 1 {
		t.Errorf("0.4.4: avg_spec_accept_length %v at the top level, want >= 1", info["avg_spec_accept_length"])
	}
	if _, ok := info["last_gen_throughput"]; !ok {
		t.Errorf("0.4.4: no last_gen_throughput at the top level")
	}
	// 0.4.2 (before ac2387279) has the internal state nowhere.
	p = startEra(t, "0.4.2", map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, append([]string{"--decode-log-interval", "2"}, eagle041...)...)
	p.waitReady()
	p.post("/generate", map[string]any{"text": "a", "sampling_params": map[string]any{"max_new_tokens": 64, "ignore_eos": true, "temperature": 0}})
	_, info = getJSONWith(t, p, "/get_server_info", nil)
	for _, k := range []string{"internal_states", "avg_spec_accept_length", "last_gen_throughput"} {
		if _, ok := info[k]; ok || info["version"] != "0.4.2" {
			t.Errorf("0.4.2 (version %v): /get_server_info has %s", info["version"], k)
		}
	}
}

// The speculative rules of the releases between: 0.4.7 lowers topk to 1 with --page-size > 1
// (then forces the draft tokens), 0.4.9.post1 does nothing about it, 0.5.4 takes NGRAM's draft
// tokens from its match window without a warning and leaves the steps unset, and prints its own
// overlap warning (server_args.py at 4f723edd3b, 066f4ec91f, 1053e1be17).
func TestEraRulesBetween(t *testing.T) {
	t.Parallel()
	cases := []struct {
		era                string
		args               []string
		algo               string
		steps, topk, draft any
		warn, noWarn       string
	}{
		{"0.4.7", []string{"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3",
			"--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8", "--page-size", "16"}, "EAGLE3", 3.0, 1.0, 4.0,
			"speculative_eagle_topk is adjusted to 1 when page_size > 1", ""},
		{"0.4.9.post1", []string{"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3",
			"--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8", "--page-size", "16", "--attention-backend", "fa3"}, "EAGLE3", 3.0, 4.0, 8.0,
			"Overlap scheduler is disabled because of using eagle speculative decoding.", "adjusted to 1 when page_size"},
		{"0.5.4", []string{"--speculative-algorithm", "NGRAM"}, "NGRAM", nil, 10.0, 12.0,
			"The overlap scheduler and mixed chunked prefill are disabled because of using ngram speculative decoding.", "set to 12 by default"},
		{"0.5.4", []string{"--speculative-algorithm", "NGRAM", "--speculative-ngram-max-match-window-size", "8"}, "NGRAM", nil, 10.0, 8.0, "", ""},
		{"0.5.4", []string{"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d"}, "EAGLE3", 5.0, 4.0, 8.0,
			"Overlap scheduler is disabled because of using eagle3 and standalone speculative decoding.", ""},
	}
	for _, c := range cases {
		p := startEra(t, c.era, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, append([]string{"--tp", "4"}, c.args...)...)
		p.waitReady()
		info := p.getJSON("/get_server_info")
		if info["speculative_algorithm"] != c.algo || info["speculative_num_steps"] != c.steps || info["speculative_eagle_topk"] != c.topk || info["speculative_num_draft_tokens"] != c.draft {
			t.Errorf("%s %v: %v (%v, %v, %v), want %s (%v, %v, %v)", c.era, c.args, info["speculative_algorithm"], info["speculative_num_steps"],
				info["speculative_eagle_topk"], info["speculative_num_draft_tokens"], c.algo, c.steps, c.topk, c.draft)
		}
		if c.warn != "" && !strings.Contains(p.stderr.String(), c.warn) {
			t.Errorf("%s %v: no warning %q", c.era, c.args, c.warn)
		}
		if c.noWarn != "" && strings.Contains(p.stderr.String(), c.noWarn) {
			t.Errorf("%s %v: a warning with %q", c.era, c.args, c.noWarn)
		}
	}
}
