package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/report"
)

// startSim starts the real simulator with args after its model, port and log level, and env, on a
// free loopback port, waits for /health and returns its URL; it is killed, by pid, at cleanup.
func startSim(t *testing.T, args []string, env ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (runs sglangsim)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(testhost.SimBinary(t), append([]string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4",
		"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--log-level", "warning"}, args...)...)
	cmd.Env = append(append(os.Environ(), "SGLANGSIM_LOAD_SECONDS=0", "SGLANGSIM_WARMUP_SECONDS=0", "SGLANGSIM_TIME_SCALE=0.02"), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
	}
	t.Fatal("sglangsim did not answer /health")
	return ""
}

// TestObserveMeasuresTheMixItRan: observe, sampling a simulator while the test runs a closed-loop
// load at concurrency 4 for 2.5 s and then at 16 for 5 s, writes a mix whose share at each level is, within 5%, the
// share of the load's time the test measured itself at that level (the idle time before, between and
// after left out); counted at the levels 4 and 16, the file names only those, and recommend reads it.
// Requests of 256 tokens (about 60 ms each) keep the closed loop's turnaround, when fewer are in
// flight, small beside them. observe runs as its own process and is stopped by SIGINT, as Ctrl-C.
func TestObserveMeasuresTheMixItRan(t *testing.T) {
	// The simulator at a fifth of real time, not startBenchSim's fiftieth: longer requests need a
	// tenth of its CPU per second, and a starved server takes requests in late. Its truth file has
	// every request's arrival and finish: the server's own count in flight, which observe samples.
	truthFile := filepath.Join(t.TempDir(), "truth.jsonl")
	sim := &benchSim{URL: startSim(t, []string{"--enable-metrics"}, "SGLANGSIM_TIME_SCALE=0.2", "SGLANGSIM_TRUTH="+truthFile)}
	// observe runs in a process of its own, as on the user's machine, not in the test's: a loaded
	// machine starving the test process would stop its clients and the sampling together.
	dir := t.TempDir()
	bin := filepath.Join(dir, "specsweep")
	if err := testhost.BuildCommand("specsweep", bin); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "mix.txt")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "observe", sim.URL, "--for", "5m", "--every", "20ms", "--levels", "4,16", "-o", out)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	time.Sleep(300 * time.Millisecond) // idle samples first: left out
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	body := `{"model": "/models/Qwen3.5-122B-A10B", "prompt": "` + strings.Repeat("word ", 32) + `", "max_tokens": 256}`
	complete := func() error {
		resp, err := client.Post(sim.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("completion: %s", resp.Status)
		}
		return nil
	}
	// A closed loop of c clients for d; the requests in flight at the end finish (the server's
	// drain is part of the mix).
	load := func(c int, d time.Duration) {
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for range c {
			wg.Go(func() {
				for time.Now().Before(end) {
					err := complete()
					if err != nil {
						t.Errorf("load at %d: %v", c, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	// Unequal times, so a mix that only split the samples evenly would not pass.
	load(4, 2500*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	load(16, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	// Ctrl-C: observe writes what it observed.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || stdout.Len() != 0 {
			t.Fatalf("observe: %v, stdout %q\n%s", err, stdout.String(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("observe did not stop")
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	mix, err := report.ParseTraffic(string(text))
	if err != nil {
		t.Fatalf("the observed mix does not parse: %v\n%s", err, text)
	}
	// The truth observe should find: how long the server had each count of requests in flight, by
	// the level nearest it (a tie: the larger), from its truth file. Neither the levels' wall times
	// nor the clients' own count were it on a loaded machine: the clients and the simulator kept
	// fewer than 16 in flight for much of c=16's time (observed c=4 0.43 where the wall times said
	// 0.33), and a starved test process saw its requests end late (its clients' count said c=4 0.46
	// where the server's was 0.37; go test -p 3, 2026-12-07).
	busy := serverBusy(t, truthFile, func(n int) int {
		if n >= 10 {
			return 16
		}
		return 4
	})
	total := busy[4] + busy[16]
	want := map[int]float64{4: busy[4].Seconds() / total.Seconds(), 16: busy[16].Seconds() / total.Seconds()}
	if len(mix) != 2 {
		t.Fatalf("observed %s, want the levels 4 and 16 only\n%s", mix, text)
	}
	t.Logf("observed %s; the server had requests in flight nearest 4 for %.4f of its busy time (%s), nearest 16 for %.4f (%s)",
		mix, want[4], busy[4].Round(time.Millisecond), want[16], busy[16].Round(time.Millisecond))
	for _, sh := range mix {
		if math.Abs(sh.Share-want[sh.Concurrency]) > 0.05 {
			t.Errorf("c=%d: observed share %.4f, the server had %.4f of its busy time there (%s at 4, %s at 16)\n%s%s",
				sh.Concurrency, sh.Share, want[sh.Concurrency], busy[4], busy[16], text, stderr.String())
		}
	}
	for _, want := range []string{"# in flight = sglang:num_running_reqs + sglang:num_queue_reqs", "each sample counted at the nearest of 4, 16 (a tie: the larger)",
		"idle sample(s) (nothing in flight, ", "# stopped early, after "} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the file lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(stderr.String(), "wrote "+out+": "+mix.String()) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	// recommend reads the file as it is, against a sweep of those levels.
	db, _ := recordedDB(t) // the quickstart plan: 1, 4 and 16 measured
	if _, errs, code := runMain(t, map[string]string{"SPECSWEEP_DB": db}, "recommend", "quickstart", "--traffic", "@"+out); code != ExitOK {
		t.Errorf("recommend --traffic @%s: exit %d\n%s", out, code, errs)
	}
}

// TestObserveSamplesOnTheClock: a server whose count in flight alternates between 16 and 4 every
// 23.5 ms (half the time each) and answers /metrics 40 ms late when it has 16: observe's shares, over
// 4 s, are each about half. Sending a sample only after the last one's answer made each sample at 16 hold
// for its 40 ms answer and each at 4 for the 10 ms period: c=16 about 0.8 of the time.
func TestObserveSamplesOnTheClock(t *testing.T) {
	t.Parallel()
	const half = 23500 * time.Microsecond
	start := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 4
		if time.Since(start)%(2*half) < half {
			n = 16
			time.Sleep(40 * time.Millisecond)
		}
		fmt.Fprintf(w, "sglang:num_running_reqs %d\n", n)
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "mix.txt")
	if _, errs, code := runMain(t, nil, "observe", srv.URL, "--for", "4s", "--every", "10ms", "-o", out); code != ExitOK {
		t.Fatalf("observe: exit %d\n%s", code, errs)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	mix, err := report.ParseTraffic(string(text))
	if err != nil || len(mix) != 2 {
		t.Fatalf("the observed mix: %v\n%s", err, text)
	}
	t.Logf("observed %s", mix)
	for _, sh := range mix {
		// 0.15: a loaded machine's observer sent 65 samples in 2 s instead of 200 (c=4 read 0.38 so,
		// CI 2026-12-07); the bias this checks for put c=16 at 0.87.
		if math.Abs(sh.Share-0.5) > 0.15 {
			t.Errorf("c=%d: observed share %.4f, the server had 0.5 of the time there\n%s", sh.Concurrency, sh.Share, text)
		}
	}
}

// observeFail is a server observe fails on, and what it says.
type observeFail struct {
	url  string
	env  map[string]string
	args []string
	want string
}

// TestObserveRefusals: a bad URL or flag is a usage error; an unreachable server, one without
// --enable-metrics, one whose /metrics has no sglang:num_running_reqs, one that needs an API key
// (without it, with a wrong one) and one idle throughout are failures that say so, and leave no file.
func TestObserveRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ftp://h:1", "--for", "1m"}, `bad URL "ftp://h:1": want the server's base URL, http://HOST:PORT`},
		{[]string{"http://", "--for", "1m"}, `bad URL "http://"`},
		{[]string{"http://h:1/?x=1", "--for", "1m"}, `bad URL`},
		{[]string{"http://h:1"}, "--for is required: how long to observe, e.g. 30m"},
		{[]string{"http://h:1", "--for", "200h"}, "--for 200h0m0s is above the limit 168h0m0s"},
		{[]string{"http://h:1", "--for", "1m", "--every", "1ms"}, "--every 1ms is below the minimum 10ms"},
		{[]string{"http://h:1", "--for", "1s", "--every", "2s"}, "--every 2s is longer than --for 1s: not one sample"},
		{[]string{"http://h:1", "--for", "168h", "--every", "10ms"}, "is 60480000 samples, above the limit 1000000"},
		{[]string{"http://h:1", "--for", "1m", "--levels", "1,x"}, `bad --levels "1,x": "x" is not a concurrency from 1 to 4096`},
		{[]string{"http://h:1", "--for", "1m", "--levels", "4,4"}, `bad --levels "4,4": 4 is given twice`},
		{[]string{"http://h:1", "--for", "1m", "--levels", "0"}, `"0" is not a concurrency`},
	} {
		if _, errs, code := runMain(t, nil, append([]string{"observe"}, tc.args...)...); code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tc.args, code, ExitUsage, tc.want, errs)
		}
	}

	// A server that is not SGLang's: /metrics without the gauge.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE up gauge\nup 1\n")
	}))
	defer other.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	fails := []observeFail{
		{closed, nil, nil, "observing " + closed + ": cannot reach the server"},
		{other.URL, nil, nil, "its /metrics has no sglang:num_running_reqs gauge: is it an SGLang server started with --enable-metrics?"},
	}
	if !testing.Short() {
		plain := startSim(t, nil)
		// SGLang 0.4.1 asks /metrics for the API key (later releases exempt it).
		keyed := startSim(t, []string{"--enable-metrics", "--api-key", "k-123"}, "SGLANGSIM_VERSION=0.4.1")
		fails = append(fails,
			observeFail{plain, nil, nil, "it serves no /metrics (404): the server was started without --enable-metrics"},
			observeFail{keyed, nil, nil, "/metrics needs the server's API key (401 Unauthorized): give --api-key or set $SPECSWEEP_API_KEY"},
			observeFail{keyed, nil, []string{"--api-key", "wrong"}, "/metrics refused the API key (401 Unauthorized)"},
			observeFail{keyed, map[string]string{"SPECSWEEP_API_KEY": "k-123"}, nil, "the server had nothing in flight in any of the "},
		)
	}
	for i, tc := range fails {
		out := filepath.Join(dir, fmt.Sprintf("mix%d.txt", i))
		args := append([]string{"observe", tc.url, "--for", "300ms", "--every", "50ms", "-o", out}, tc.args...)
		stdout, errs, code := runMain(t, tc.env, args...)
		if code != ExitFailure || !strings.Contains(errs, tc.want) || stdout != "" {
			t.Errorf("%v: exit %d, want %d with %q:\n%s%s", args, code, ExitFailure, tc.want, stdout, errs)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: the file is left behind (%v)", args, err)
		}
	}
	// A path that cannot be written fails before the first sample.
	start := time.Now()
	if _, errs, code := runMain(t, nil, "observe", other.URL, "--for", "1m", "-o", filepath.Join(dir, "no", "such", "dir", "mix.txt")); code != ExitFailure ||
		!strings.Contains(errs, "-o: creating the mix's file") || time.Since(start) > 10*time.Second {
		t.Errorf("an unwritable -o: exit %d after %s\n%s", code, time.Since(start), errs)
	}
}

// TestParseInFlight: the running and queued gauges are summed over their series (one per data
// parallel rank), in SGLang's colon and underscore spellings, whatever their labels hold; a gauge
// that is not a count is refused.
func TestParseInFlight(t *testing.T) {
	text := `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="a {b} c",dp_rank="0"} 3
sglang:num_running_reqs{model_name="a",dp_rank="1"} 4.0 1700000000000
sglang_num_queue_reqs 2
sglang:num_running_reqs_total 99
`
	run, hasRun, queue, hasQueue, err := parseInFlight([]byte(text))
	if err != nil || run != 7 || !hasRun || queue != 2 || !hasQueue {
		t.Errorf("parsed %d %v %d %v %v", run, hasRun, queue, hasQueue, err)
	}
	if _, _, _, _, err := parseInFlight([]byte("sglang:num_running_reqs -1\n")); err == nil || !strings.Contains(err.Error(), `sglang:num_running_reqs is "-1", not a count`) {
		t.Errorf("a negative gauge: %v", err)
	}
	if _, hasRun, _, _, err := parseInFlight([]byte("up 1\n")); err != nil || hasRun {
		t.Errorf("no gauge: %v %v", hasRun, err)
	}
}

// serverBusy reads a simulator's truth file (SGLANGSIM_TRUTH) and returns how long the server had
// requests in flight, between each one's arrival and finish, by level(count in flight); no time with
// none in flight.
func serverBusy(t *testing.T, path string, level func(n int) int) map[int]time.Duration {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type change struct {
		at    float64 // unix ms
		delta int
	}
	var changes []change
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r struct {
			Event   string   `json:"event"`
			Arrival *float64 `json:"arrival_unix_ms"`
			Finish  *float64 `json:"finish_unix_ms"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("truth line %q: %v", line, err)
		}
		if r.Event != "request" {
			continue
		}
		if r.Arrival == nil || r.Finish == nil {
			t.Fatalf("truth line without its times: %q", line)
		}
		changes = append(changes, change{*r.Arrival, +1}, change{*r.Finish, -1})
	}
	if len(changes) == 0 {
		t.Fatalf("no request in the truth file %s", path)
	}
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].at != changes[j].at {
			return changes[i].at < changes[j].at
		}
		return changes[i].delta < changes[j].delta // a finish before an arrival at the same instant
	})
	busy := map[int]time.Duration{}
	n := 0
	for i, c := range changes {
		if i > 0 && n > 0 {
			busy[level(n)] += time.Duration((c.at - changes[i-1].at) * float64(time.Millisecond))
		}
		n += c.delta
	}
	return busy
}
