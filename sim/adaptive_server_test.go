package sim_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/sim"
)

// adaptiveArgs run the falling-steps profile on one GPU under 2026 main's adaptive mode with its
// default slots; 64 requests may run at once, so a batch of 64 reaches the slot of 64.
var adaptiveArgs = []string{"--tp", "1", "--enable-metrics", "--max-running-requests", "64",
	"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-adaptive"}

// A server under a load whose concurrency goes from 1 to 64 and back switches as the source does:
// one stream climbs its slot's candidates on the EMA, a batch of 64 routes to the slot of 64 (no
// drafting), and one stream again gets its slot's steps back at once. The log, the truth file,
// /server_info and /metrics agree.
func TestAdaptiveServerSwitches(t *testing.T) {
	t.Parallel()
	// A time scale at which 64 requests sent at once arrive well within their first decode steps.
	p := startSim(t, map[string]string{"SGLANGSIM_PROFILE": "testdata/profiles/falling-steps.json", "SGLANGSIM_WARMUP_SECONDS": "0",
		"SGLANGSIM_TIME_SCALE": "0.1", "SGLANGSIM_LOAD_SECONDS": "2"}, adaptiveArgs...)
	p.waitReady()
	counters := func() (gen, reqs, verify float64) {
		resp, err := client.Get(p.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text := string(b)
		return metricValue(t, text, "sglang:generation_tokens_total"), metricValue(t, text, "sglang:num_requests_total"),
			metricValue(t, text, "sglang:spec_verify_calls_total")
	}
	gen0, req0, ver0 := counters()
	one := func(n, tokens int) {
		for i := 0; i < n; i++ {
			p.post("/generate", map[string]any{"text": words(64), "sampling_params": map[string]any{"max_new_tokens": tokens, "ignore_eos": true, "temperature": 0}})
		}
	}
	one(4, 160) // about 200 batches of one: past the warmup and several updates
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Not p.post: a test may not fail fatally outside its own goroutine.
			body := `{"text": "` + words(64) + `", "sampling_params": {"max_new_tokens": 96, "ignore_eos": true, "temperature": 0}}`
			resp, err := client.Post(p.base+"/generate", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	close(start)
	wg.Wait()
	one(2, 32)
	gen1, req1, ver1 := counters()

	log := p.stderr.String()
	for _, re := range []string{
		`TP0\] AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=\[1, 3, 5, 7\]\n`,
		`TP0\] Built adaptive runtime state steps=0: elapsed=[\d.]+s, mem=[\d.]+GB\n`,
		`TP0\] Built adaptive runtime state steps=7: elapsed=[\d.]+s, mem=[\d.]+GB\n`,
		`TP0\] Adaptive spec params updated: steps 3 -> 5 \(ema_accept_len=\d\.\d\d\)\n`,
		`TP0\] Switch adaptive runtime state: steps 3 -> 5, draft_tokens 4 -> 6\n`,
		`TP0\] Switch adaptive runtime state: steps \d -> 0, draft_tokens \d -> 1\n`,
	} {
		if !regexp.MustCompile(re).MatchString(log) {
			t.Errorf("log lacks %s", re)
		}
	}
	f, err := os.Open(p.truth)
	if err != nil {
		t.Fatal(err)
	}
	sws, err := sim.ReadAdaptiveSwitches(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var to0, back bool
	prev := 3
	for i, sw := range sws {
		if sw.From != prev || sw.Slot == nil {
			t.Errorf("switch %d %+v does not follow the steps in use (%d) or names no slot", i, sw, prev)
		}
		prev = sw.To
		if sw.To == 0 && sw.BatchSize > 56 && *sw.Slot == 64 && sw.Reason == "batch_size" {
			to0 = true
		}
		// Back at slot 1 as the load drains: the batch that routes there is 1 to 7 (slot 8 begins at
		// 8), whichever the drain reaches first on a busy machine (CI saw 4).
		if to0 && sw.BatchSize < 8 && *sw.Slot == 1 && sw.Reason == "batch_size" && sw.To >= 5 {
			back = true
		}
	}
	if !to0 || !back {
		t.Errorf("switches %+v: want one to 0 at a batch of 64 (slot 64), then one back to slot 1's steps (5 or 7) at a batch below 8", sws)
	}
	info := p.getJSON("/server_info")
	states, _ := info["internal_states"].([]any)
	st, _ := states[0].(map[string]any)
	if got, _ := st["speculative_num_steps"].(float64); int(got) != prev {
		t.Errorf("internal_states[0].speculative_num_steps = %v, last switch to %d", st["speculative_num_steps"], prev)
	}
	if info["speculative_adaptive"] != true || info["speculative_num_steps"] != 3.0 {
		t.Errorf("server_info speculative_adaptive %v, speculative_num_steps %v: want true and the initial 3", info["speculative_adaptive"], info["speculative_num_steps"])
	}

	// The counters move by what the truth file's requests accepted, at every step count alike.
	var accepted, verify, n int
	for _, l := range p.truthLines() {
		if l.Event == "request" {
			accepted += l.AcceptedTokens
			verify += l.VerifySteps
			n++
		}
	}
	if n != 4+64+2 || req1-req0 != float64(n) {
		t.Errorf("%d request lines, Δnum_requests %v; sent 70", n, req1-req0)
	}
	if got := gen1 - gen0 - (req1 - req0); got != float64(accepted) {
		t.Errorf("/metrics: Δgeneration_tokens - Δrequests = %v, truth: %d accepted tokens", got, accepted)
	}
	if got := ver1 - ver0; got != float64(verify) {
		t.Errorf("/metrics: Δspec_verify_calls = %v, truth: %d verify steps", got, verify)
	}
	var seq []string
	for _, sw := range sws {
		seq = append(seq, fmt.Sprintf("%d->%d (batch %d, %s)", sw.From, sw.To, sw.BatchSize, sw.Reason))
	}
	t.Logf("switches: %s; accept length over the run %.2f", strings.Join(seq, ", "), float64(accepted)/float64(verify))
}

// What each era does with --speculative-adaptive at start: fallbacks are warnings and the server
// runs its static steps; bad configs and steps outside the candidates fail as SGLang fails.
func TestAdaptiveStartRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	flat := write("flat.json", `{"candidate_steps": [1, 3, 7]}`)
	slots := write("slots.json", `{"1": {"candidate_steps": [1, 3, 5]}, "16": {"candidate_steps": [0, 1]}}`)
	list := write("list.json", `[1, 3]`)
	ta := write("ta.json", `{"strategy": "throughput_aware", "1": {"candidate_steps": [1, 3]}}`)
	eagle := []string{"--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d"}
	const fallback = "speculative_adaptive disabled: %s. Falling back to static speculative params."
	for _, c := range []struct {
		era  string
		args []string
		code int
		want []string // in stderr
	}{
		{"main", []string{"--speculative-adaptive", "--speculative-eagle-topk", "2", "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "6"}, 0,
			[]string{fmt.Sprintf(fallback, "speculative_eagle_topk=2 (only topk=1 is supported)")}},
		{"main", []string{"--speculative-adaptive", "--enable-two-batch-overlap"}, 0,
			[]string{fmt.Sprintf(fallback, "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)")}},
		{"main", []string{"--speculative-adaptive", "--speculative-adaptive-config", slots, "--speculative-num-steps", "7"}, 1,
			[]string{"\nValueError: --speculative-num-steps=7 is not in the adaptive config candidate_steps [0, 1, 3, 5]. Pass one of those values.\n",
				"speculative_hook.py\", line 476, in _init_adaptive_speculative_params\n"}},
		{"main", []string{"--speculative-adaptive", "--speculative-adaptive-config", list}, 1,
			[]string{"in resolve_adaptive_strategy\n    raise ValueError(\nValueError: speculative adaptive config must be a JSON object, got list\n"}},
		{"main", []string{"--speculative-adaptive", "--speculative-adaptive-config", filepath.Join(dir, "missing.json")}, 1,
			[]string{"FileNotFoundError: [Errno 2] No such file or directory: '" + filepath.Join(dir, "missing.json") + "'\n"}},
		{"main", []string{"--speculative-adaptive", "--speculative-adaptive-config", ta}, 1,
			[]string{"sglangsim: --speculative-adaptive-config: strategy 'throughput_aware'"}},
		{"main", []string{"--speculative-adaptive", "--speculative-adaptive-config", flat}, 1,
			[]string{`ValueError: speculative_adaptive_config must contain at least one integer-string BS key, e.g. {"1": {"candidate_steps": [1,3,7]}}. Got keys: ['candidate_steps']`}},
		// 0.5.10's adaptive worker is spec v1: the overlap scheduler (on by default) turns it off.
		{"0.5.10", []string{"--speculative-adaptive"}, 0,
			[]string{"Spec v2 is enabled by default", fmt.Sprintf(fallback, "the overlap scheduler (spec v2) is enabled (adaptive is only implemented for EAGLEWorker v1)")}},
		{"0.5.10", []string{"--speculative-adaptive", "--disable-overlap-schedule", "--speculative-adaptive-config", flat}, 0,
			[]string{"Spec v1 is used for eagle/eagle3/standalone speculative decoding because overlap schedule is disabled."}},
		{"0.5.10", []string{"--speculative-adaptive", "--disable-overlap-schedule", "--speculative-algorithm", "NGRAM"}, 0,
			[]string{fmt.Sprintf(fallback, "speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported)")}},
		{"0.5.2", []string{"--speculative-adaptive"}, 2, []string{"error: unrecognized arguments: --speculative-adaptive"}},
	} {
		env := map[string]string{"SGLANGSIM_VERSION": c.era, "SGLANGSIM_CHECK_ARGS": "1"}
		code, _, stderr := runSimEnv(t, env, append(append([]string{}, eagle...), c.args...)...)
		if code != c.code {
			t.Errorf("%s %v: exit %d, want %d\n%s", c.era, c.args, code, c.code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s %v: stderr lacks %q:\n%s", c.era, c.args, w, stderr)
			}
		}
		if !strings.Contains(strings.Join(c.want, "\n"), "Falling back") && strings.Contains(stderr, "Falling back") {
			t.Errorf("%s %v: a fallback where none is wanted:\n%s", c.era, c.args, stderr)
		}
	}
}

// 0.5.10 reads the file when its EAGLE worker starts: a bad file passes the arguments and kills the
// scheduler, the process ending by SIGKILL as after any scheduler exception.
func TestAdaptiveBadConfigKillsScheduler0510(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "one.json")
	if err := os.WriteFile(path, []byte(`{"candidate_steps": [3]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startSim(t, map[string]string{"SGLANGSIM_VERSION": "0.5.10"}, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
		"--speculative-adaptive", "--disable-overlap-schedule", "--speculative-adaptive-config", path)
	ws := p.wait(10 * time.Second)
	if !killedBySIGKILL(ws) {
		t.Errorf("wait status %v, want killed by SIGKILL", ws)
	}
	log := p.stderr.String()
	for _, w := range []string{"TP0] Scheduler hit an exception: Traceback (most recent call last):\n",
		"in __init__\n    assert (\nAssertionError: candidate_steps must have at least 2 distinct values\n",
		"Received sigquit from a child process. It usually means the child failed."} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q", w)
		}
	}
	lines := p.truthLines()
	if len(lines) == 0 || lines[len(lines)-1].Event != "exit" || lines[len(lines)-1].Reason != "start_error" {
		t.Errorf("truth %+v: want an exit line with reason start_error", lines)
	}
}

// On 0.5.10 the initial steps snap to the nearest candidate (the larger on a tie) when the worker
// starts, and every batch size shares one set of candidates.
func TestAdaptiveSnap0510(t *testing.T) {
	t.Parallel()
	p := startSim(t, map[string]string{"SGLANGSIM_VERSION": "0.5.10", "SGLANGSIM_WARMUP_SECONDS": "0"}, "--speculative-algorithm", "EAGLE3",
		"--speculative-draft-model-path", "/d", "--speculative-num-steps", "5", "--speculative-eagle-topk", "1", "--speculative-adaptive", "--disable-overlap-schedule")
	p.waitReady()
	log := p.stderr.String()
	for _, w := range []string{"TP0] AdaptiveSpeculativeParams initialized: steps=7, candidate_steps=[1, 3, 7]\n",
		"TP0] Switch adaptive runtime state: steps 5 -> 7, draft_tokens 6 -> 8\n"} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q", w)
		}
	}
	f, err := os.Open(p.truth)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sws, err := sim.ReadAdaptiveSwitches(f)
	if err != nil || len(sws) != 1 || sws[0].From != 5 || sws[0].To != 7 || sws[0].Reason != "init" || sws[0].Slot != nil {
		t.Errorf("switches %+v (%v): want the start's 5 -> 7, no slot", sws, err)
	}
	info := p.getJSON("/server_info")
	if st := info["internal_states"].([]any)[0].(map[string]any); st["speculative_num_steps"] != 7.0 {
		t.Errorf("internal state steps %v, want 7", st["speculative_num_steps"])
	}
}
