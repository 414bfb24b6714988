package sim_test

import (
	"fmt"
	"io"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// loadResult is what a client sees of one load against a server: the output speed in simulated
// time, and the accept length from the /metrics counters (as specsweep reads it), the gauge, the
// Decode lines logged during the load and the truth file.
type loadResult struct {
	tokS                float64
	metricsAL, gaugeAL  float64
	decodeAL, truthAL   float64
	verify, decodeLines int
}

// acceptLenLine is a Decode line's accept length.
var acceptLenLine = regexp.MustCompile(`Decode batch.*accept len: ([0-9.]+)`)

// driveLoad sends requests neutral-prompt completions, conc at a time, each of out tokens with
// ignore_eos (greedy, seeded: every server draws from the same request seeds).
func driveLoad(t *testing.T, p *proc, scale float64, conc, requests, out int) loadResult {
	t.Helper()
	counters := func() (text string, gen, reqs, verify float64) {
		resp, err := client.Get(p.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text = string(b)
		gen, reqs = metricValue(t, text, "sglang:generation_tokens_total"), metricValue(t, text, "sglang:num_requests_total")
		if strings.Contains(text, "sglang:spec_verify_calls_total{") {
			verify = metricValue(t, text, "sglang:spec_verify_calls_total")
		}
		return
	}
	_, gen0, req0, ver0 := counters()
	logged := len(acceptLenLine.FindAllStringSubmatch(p.stderr.String(), -1))
	truthBefore := len(p.truthLines())
	next := make(chan int, requests)
	for i := range requests {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				code, body := p.post("/v1/completions", map[string]any{"prompt": words(100), "max_tokens": out, "ignore_eos": true,
					"temperature": 0, "seed": i})
				if code != 200 || !strings.Contains(string(body), fmt.Sprintf(`"completion_tokens":%d`, out)) {
					t.Errorf("request %d: %d %s", i, code, body)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds() / scale
	text, gen1, req1, ver1 := counters()
	r := loadResult{tokS: float64(requests*out) / el, verify: int(ver1 - ver0)}
	if r.verify > 0 {
		r.metricsAL = (gen1 - gen0 - (req1 - req0)) / (ver1 - ver0)
		r.gaugeAL = metricValue(t, text, "sglang:spec_accept_length")
	}
	var sum float64
	for _, m := range acceptLenLine.FindAllStringSubmatch(p.stderr.String(), -1)[logged:] {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
		r.decodeLines++
	}
	if r.decodeLines > 0 {
		r.decodeAL = sum / float64(r.decodeLines)
	}
	var accepted, verify int
	for _, l := range p.truthLines()[truthBefore:] {
		if l.Event == "request" {
			accepted += l.AcceptedTokens
			verify += l.VerifySteps
		}
	}
	if verify > 0 {
		r.truthAL = float64(accepted) / float64(verify)
	}
	return r
}

// TestAcceptScaleRegression makes the regression specsweep watch must catch: the same EAGLE3
// server "upgraded" from 0.5.9 to 0.5.10 with SGLANGSIM_ACCEPT_SCALE=0.3 accepts less and runs
// slower by every measure a client has, while a baseline server with the knob runs as fast as
// without it.
func TestAcceptScaleRegression(t *testing.T) {
	t.Parallel()
	const scale = 0.1
	env := func(kv ...string) map[string]string {
		e := map[string]string{"SGLANGSIM_TIME_SCALE": fmt.Sprint(scale), "SGLANGSIM_LOAD_SECONDS": "2", "SGLANGSIM_WARMUP_SECONDS": "0"}
		for i := 0; i < len(kv); i += 2 {
			e[kv[i]] = kv[i+1]
		}
		return e
	}
	specArgs := append([]string{"--enable-metrics"}, spec3...)
	specBefore := startSim(t, env("SGLANGSIM_ENGINE_VERSION", "0.5.9"), specArgs...)
	specAfter := startSim(t, env("SGLANGSIM_ENGINE_VERSION", "0.5.10", "SGLANGSIM_ACCEPT_SCALE", "0.3"), specArgs...)
	baseBefore := startSim(t, env(), "--enable-metrics")
	baseAfter := startSim(t, env("SGLANGSIM_ACCEPT_SCALE", "0.3"), "--enable-metrics")
	for _, p := range []*proc{specBefore, specAfter, baseBefore, baseAfter} {
		p.waitReady()
	}
	for p, want := range map[*proc]string{specBefore: "0.5.9", specAfter: "0.5.10", baseBefore: "main", baseAfter: "main"} {
		if info := p.getJSON("/server_info"); info["version"] != want || !strings.Contains(fmt.Sprint(info["simulator"]), "SGLANGSIM_VERSION main") {
			t.Errorf("server info: version %v, simulator %v; want version %s on the main profile", info["version"], info["simulator"], want)
		}
	}

	// One load at a time: the servers' speeds are measured on the wall clock.
	const conc, requests, out = 4, 8, 256
	sb := driveLoad(t, specBefore, scale, conc, requests, out)
	sa := driveLoad(t, specAfter, scale, conc, requests, out)
	bb := driveLoad(t, baseBefore, scale, conc, requests, out)
	ba := driveLoad(t, baseAfter, scale, conc, requests, out)
	t.Logf("EAGLE3 steps 3, c=%d: 0.5.9 %.1f tok/s, accept length %.2f (gauge %.2f, %d Decode lines %.2f, truth %.2f); "+
		"0.5.10 at scale 0.3 %.1f tok/s, accept length %.2f (gauge %.2f, %d Decode lines %.2f, truth %.2f); baseline %.1f -> %.1f tok/s",
		conc, sb.tokS, sb.metricsAL, sb.gaugeAL, sb.decodeLines, sb.decodeAL, sb.truthAL,
		sa.tokS, sa.metricsAL, sa.gaugeAL, sa.decodeLines, sa.decodeAL, sa.truthAL, bb.tokS, ba.tokS)

	for name, r := range map[string]loadResult{"before": sb, "after": sa} {
		// Every source of the accept length comes from the same draws: the truth file and the
		// counters agree exactly, the Decode lines and the gauge (windows of the same steps) closely.
		if r.verify == 0 || math.Abs(r.truthAL-r.metricsAL) > 1e-9 {
			t.Errorf("%s: accept length %.4f from /metrics (%d verify steps), %.4f from the truth file; want the same", name, r.metricsAL, r.verify, r.truthAL)
		}
		if r.decodeLines == 0 || math.Abs(r.decodeAL-r.metricsAL) > 0.1*r.metricsAL || math.Abs(r.gaugeAL-r.metricsAL) > 0.15*r.metricsAL {
			t.Errorf("%s: accept length %.2f from /metrics, %.2f from %d Decode lines, gauge %.2f; want them close", name, r.metricsAL, r.decodeAL, r.decodeLines, r.gaugeAL)
		}
	}
	// The model: 3.72 at steps 3, 1.40 with every position's probability x 0.3.
	if !(sb.metricsAL > 3.3 && sa.metricsAL < 1.7) {
		t.Errorf("accept length %.2f -> %.2f, want about 3.7 -> 1.4", sb.metricsAL, sa.metricsAL)
	}
	if !(sa.tokS < 0.6*sb.tokS) {
		t.Errorf("EAGLE3 output %.1f -> %.1f tok/s, want a fall of over 40%% (the model: about 58%%)", sb.tokS, sa.tokS)
	}
	// Noise 0 (the default profile): the baseline draws nothing from the scale, so its speed
	// differs only by the wall clock's jitter.
	if bb.verify != 0 || ba.verify != 0 || ba.tokS < 0.8*bb.tokS || ba.tokS > 1.25*bb.tokS {
		t.Errorf("baseline: %.1f -> %.1f tok/s (verify steps %d, %d), want the same speed and no verify step", bb.tokS, ba.tokS, bb.verify, ba.verify)
	}
}

func TestAcceptScaleBadValue(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0", "1.5", "-0.3", "x", "NaN"} {
		cmd := exec.Command(simBin, "--model-path", "m")
		cmd.Env = []string{"SGLANGSIM_ACCEPT_SCALE=" + v}
		out, err := cmd.CombinedOutput()
		want := fmt.Sprintf("sglangsim: invalid SGLANGSIM_ACCEPT_SCALE=%q: want a number in (0, 1]", v)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), want) {
			t.Errorf("SGLANGSIM_ACCEPT_SCALE=%s: %v %q; want exit 1 with %q", v, err, out, want)
		}
	}
}
