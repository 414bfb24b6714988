package sim_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

var simBin string

// raceBuild is set under -race: the binary is then built with -race too.
var raceBuild bool

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sglangsim-test")
	if err != nil {
		panic(err)
	}
	simBin = filepath.Join(dir, "sglangsim")
	var flags []string
	if raceBuild {
		flags = append(flags, "-race")
	}
	if err := testhost.BuildCommand("sglangsim", simBin, flags...); err != nil {
		fmt.Fprintf(os.Stderr, "building sglangsim: %v\n", err)
		os.Exit(1)
	}
	// A simulator a test starts without --port would listen on 30000: held here, it fails every time.
	done := testhost.GuardDefaultPorts()
	code := done(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// noHostFile is a host file that does not exist: the tests do not read
// the machine's /etc/sglangsim.env.
const noHostFile = "/nonexistent/sglangsim.env"

// baseEnv is the test's environment without the variables the simulator
// reads (SGLANGSIM_*, SGL*, CUDA_VISIBLE_DEVICES).
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SGLANGSIM_") && !strings.HasPrefix(kv, "SGL") && !strings.HasPrefix(kv, "CUDA_VISIBLE_DEVICES=") {
			env = append(env, kv)
		}
	}
	return env
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	port   int
	base   string
	stdout *syncBuf
	stderr *syncBuf
	truth  string
	done   chan struct{}
	start  time.Time
}

// startSim runs the binary on a free port of 127.0.0.1. env holds
// SGLANGSIM_* overrides; the defaults make start-up fast.
func startSim(t *testing.T, env map[string]string, args ...string) *proc {
	t.Helper()
	port := testhost.FreePort(t)
	p := &proc{t: t, port: port, base: fmt.Sprintf("http://127.0.0.1:%d", port), stdout: &syncBuf{}, stderr: &syncBuf{},
		truth: filepath.Join(t.TempDir(), "truth.jsonl"), done: make(chan struct{})}
	full := append([]string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp", "4", "--host", "127.0.0.1", "--port", fmt.Sprint(port)}, args...)
	p.cmd = exec.Command(simBin, full...)
	e := map[string]string{"SGLANGSIM_TIME_SCALE": "0.01", "SGLANGSIM_LOAD_SECONDS": "20", "SGLANGSIM_WARMUP_SECONDS": "2",
		"SGLANGSIM_TRUTH": p.truth, "SGLANGSIM_STATE_DIR": filepath.Join(t.TempDir(), "gpus"), "SGLANGSIM_HOST_FILE": noHostFile}
	for k, v := range env {
		e[k] = v
	}
	p.cmd.Env = baseEnv()
	for k, v := range e {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("data race in sglangsim")
		}
		if t.Failed() {
			t.Logf("stderr:\n%s\nstdout:\n%s", tail(p.stderr.String(), 40), tail(p.stdout.String(), 20))
		}
	})
	return p
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// wait waits for the process to end and returns its wait status.
func (p *proc) wait(timeout time.Duration) syscall.WaitStatus {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("process still running after %v", timeout)
	}
	return p.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

var client = &http.Client{Timeout: 20 * time.Second}

// status returns the HTTP status of GET path, or -1 when the connection fails.
func (p *proc) status(path string) int {
	resp, err := client.Get(p.base + path)
	if err != nil {
		return -1
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (p *proc) waitStatus(path string, code int, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.status(path) == code {
			return
		}
		if !p.alive() {
			p.t.Fatalf("process died waiting for %s %d", path, code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.t.Fatalf("%s never answered %d within %v (last %d)", path, code, timeout, p.status(path))
}

func (p *proc) waitReady() { p.t.Helper(); p.waitStatus("/health", 200, 10*time.Second) }

// waitLog reports whether stderr matches re within timeout: a line the
// server wrote before answering may still be in the pipe to the test.
func (p *proc) waitLog(re *regexp.Regexp, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !re.MatchString(p.stderr.String()) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func (p *proc) post(path string, body any) (int, []byte) {
	p.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := client.Post(p.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		p.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (p *proc) getJSON(path string) map[string]any {
	p.t.Helper()
	resp, err := client.Get(p.base + path)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	return m
}

// sse posts body with stream=true and returns the data payloads in order.
func (p *proc) sse(path string, body map[string]any) []string {
	p.t.Helper()
	body["stream"] = true
	b, _ := json.Marshal(body)
	resp, err := client.Post(p.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		p.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		p.t.Fatalf("content type %q", ct)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	blank := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			blank = true
			continue
		}
		if !blank || !strings.HasPrefix(line, "data: ") {
			p.t.Fatalf("bad SSE framing at %q", line)
		}
		blank = false
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	return out
}

type truthLine struct {
	Event            string   `json:"event"`
	UnixMs           float64  `json:"unix_ms"`
	Reason           string   `json:"reason"`
	RID              string   `json:"rid"`
	Arrival          float64  `json:"arrival_unix_ms"`
	FirstToken       *float64 `json:"first_token_unix_ms"`
	Finish           float64  `json:"finish_unix_ms"`
	CompletionTokens int      `json:"completion_tokens"`
	VerifySteps      int      `json:"verify_steps"`
	PromptTokens     int      `json:"prompt_tokens"`
	AcceptedTokens   int      `json:"accepted_tokens"`
	AcceptLength     float64  `json:"accept_length"`
	ContentClass     string   `json:"content_class"`
	ContentScore     float64  `json:"content_score"`
	ContentFactor    float64  `json:"content_factor"`
	ContextFactor    float64  `json:"context_factor"`
	// ready
	PID                int     `json:"pid"`
	Port               int     `json:"port"`
	CUDAVisibleDevices *string `json:"cuda_visible_devices"`
	VisibleGPUs        []int   `json:"visible_gpus"`
	GPUs               []int   `json:"gpus"`
}

func (p *proc) truthLines() []truthLine {
	p.t.Helper()
	b, err := os.ReadFile(p.truth)
	if err != nil {
		return nil
	}
	var out []truthLine
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var tl truthLine
		if err := json.Unmarshal([]byte(l), &tl); err != nil {
			p.t.Fatalf("truth line %q: %v", l, err)
		}
		out = append(out, tl)
	}
	return out
}

func killedBySIGKILL(ws syscall.WaitStatus) bool {
	return ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func words(n int) string { return strings.TrimSpace(strings.Repeat("word ", n)) }
