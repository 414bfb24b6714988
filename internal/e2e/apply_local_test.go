package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// testApplyOnALocalHost: apply on a local host (the machine of `make run`) leaves the server running
// after specsweep exits, doctor names it, and restore --applied ends it. The state directory is the
// test's own (stateHome, the XDG_STATE_HOME of every specsweep it starts), and the server is killed
// at the end whatever happens.
func testApplyOnALocalHost(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	state := stateHome(t)
	record := filepath.Join(state, "specsweep", "here", "applied.json")
	t.Cleanup(func() {
		var a struct {
			PID int `json:"pid"`
		}
		if b, err := os.ReadFile(record); err == nil && json.Unmarshal(b, &a) == nil && a.PID > 0 {
			_ = syscall.Kill(-a.PID, syscall.SIGKILL) // its own process group
		}
	})
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-apply-local
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "31891", --enable-metrics]
  env: {%s}
  port: 31891
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [3], topk: [1], tp: [4]}
workload: {concurrency: [1, 4], requests: 8, warmup_requests: 1, input_tokens: 32, output_tokens: 48}
`, testhost.SimBinary(t), fastEnv))
	if r := specsweep(t, 3*time.Minute, "run", "--db", f.db, f.spec); r.code != 0 {
		t.Fatalf("sweep:\n%s", r)
	}
	// --tolerance 0.5: the speed check's figure moves with a shared machine's load (the simulator runs
	// at a twentieth of real time); the speed check itself is TestApplyOnATestHost's.
	r := specsweep(t, 2*time.Minute, "apply", "--db", f.db, "--host", "here", "--tolerance", "0.5", "e2e-apply-local")
	if r.code != 0 || !strings.Contains(r.stdout, "Applied ") {
		t.Fatalf("apply on a local host:\n%s", r)
	}
	if _, err := os.Stat(record); err != nil {
		t.Errorf("the applied record is not in the test's state directory: %v", err)
	}
	// specsweep has exited; the applied server still answers.
	port := onFreePortOf(t, f.spec)
	waitFor(t, 10*time.Second, "the applied server's /health after specsweep exited", func() bool { return healthOK(port) })
	d := specsweep(t, time.Minute, "doctor", f.spec)
	if !strings.Contains(d.stdout, "applied: ") {
		t.Errorf("doctor does not name what is applied:\n%s", d)
	}
	u := specsweep(t, time.Minute, "restore", "--db", f.db, "--applied", "here")
	if u.code != 0 {
		t.Fatalf("restore --applied:\n%s", u)
	}
	waitFor(t, 30*time.Second, "the applied server gone", func() bool { return !healthOK(port) })
	if _, err := os.Stat(record); err == nil {
		t.Error("the applied record is left after restore --applied")
	}
}

// onFreePortOf is the server port writeSpec put in the spec file.
func onFreePortOf(t *testing.T, spec string) string {
	t.Helper()
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	m := reServerPort.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no server port in %s", spec)
	}
	return m[1]
}

// healthOK: a server answers /health on 127.0.0.1:port.
func healthOK(port string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + port + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
