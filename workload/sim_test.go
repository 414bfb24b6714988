package workload_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// The integration tests run the real sglangsim binary, built once here, on 127.0.0.1 only.
var simBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "workload-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if !testing.Short() {
		simBin = filepath.Join(dir, "sglangsim")
		if err := testhost.BuildCommand("sglangsim", simBin); err != nil {
			fmt.Fprintf(os.Stderr, "build sglangsim: %v\n", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	// The default ports held for the run (testhost.GuardDefaultPorts): a test on 30000 fails here.
	done := testhost.GuardDefaultPorts()
	code := done(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// simOpts describe one simulator process.
type simOpts struct {
	spec      bool              // EAGLE3 steps 3 topk 1 (else a baseline)
	scale     string            // SGLANGSIM_TIME_SCALE (default 0.02)
	env       map[string]string // more SGLANGSIM_* knobs
	args      []string          // more launch_server flags
	noMetrics bool
}

type simProc struct {
	URL   string
	Truth string // SGLANGSIM_TRUTH file
	Log   string
	cmd   *exec.Cmd
	done  chan struct{}
}

// startSim starts sglangsim and waits until /health answers 200; it is killed (by pid) at cleanup.
func startSim(t testing.TB, o simOpts) *simProc {
	t.Helper()
	if simBin == "" {
		t.Skip("integration test (needs the sglangsim binary; not in -short)")
	}
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := testhost.FreePort(t)
		p := &simProc{URL: "http://127.0.0.1:" + strconv.Itoa(port), Truth: filepath.Join(dir, "truth.jsonl"),
			Log: filepath.Join(dir, fmt.Sprintf("sim%d.log", attempt)), done: make(chan struct{})}
		args := []string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--log-level", "warning"}
		if !o.noMetrics {
			args = append(args, "--enable-metrics")
		}
		if o.spec {
			args = append(args, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
				"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
		}
		args = append(args, o.args...)
		cmd := exec.Command(simBin, args...)
		scale := o.scale
		if scale == "" {
			scale = "0.02"
		}
		cmd.Env = append(os.Environ(), "SGLANGSIM_LOAD_SECONDS=0", "SGLANGSIM_WARMUP_SECONDS=0",
			"SGLANGSIM_TIME_SCALE="+scale, "SGLANGSIM_TRUTH="+p.Truth)
		for k, v := range o.env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		logf, err := os.Create(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			t.Fatal(err)
		}
		p.cmd = cmd
		go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-p.done
		})
		if p.waitHealthy(15 * time.Second) {
			return p
		}
		_ = cmd.Process.Kill()
		<-p.done
		if attempt >= 2 {
			b, _ := os.ReadFile(p.Log)
			t.Fatalf("sglangsim did not become healthy:\n%s", b)
		}
	}
}

func (p *simProc) waitHealthy(limit time.Duration) bool {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return false
		default:
		}
		resp, err := c.Get(p.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// exited reports whether the process has ended.
func (p *simProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// truthRequest is one "request" line of SGLANGSIM_TRUTH.
type truthRequest struct {
	Event      string   `json:"event"`
	RID        string   `json:"rid"`
	Arrival    float64  `json:"arrival_unix_ms"`
	FirstToken *float64 `json:"first_token_unix_ms"`
	Finish     float64  `json:"finish_unix_ms"`
	Tokens     int      `json:"completion_tokens"`
	Verify     int      `json:"verify_steps"`
}

// truthRequests reads the request lines of the truth file, by rid.
func (p *simProc) truthRequests(t testing.TB) map[string]truthRequest {
	t.Helper()
	f, err := os.Open(p.Truth)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]truthRequest{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var tr truthRequest
		if err := json.Unmarshal(sc.Bytes(), &tr); err != nil {
			t.Fatalf("truth line %q: %v", sc.Text(), err)
		}
		if tr.Event == "request" {
			out[tr.RID] = tr
		}
	}
	return out
}

// syncBuffer is a goroutine-safe bytes sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }
