package cli

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/orchestrator"
)

// TestFailuresShowTheirCauseAndEvidence: after `run`, and in `status SWEEP`, each failed point is
// listed with its cause (its class and detail) and its first evidence line, not only counted: a
// server command that cannot start says why (the OS error), an OOM shows the log's line.
func TestFailuresShowTheirCauseAndEvidence(t *testing.T) {
	dir := t.TempDir()
	spec := writeFile(t, dir, "cell.yaml", stateSpec("/nonexistent/sglangsim", testhost.FreePort(t)))
	db := dir + "/f.db"
	out, errs, code := runMain(t, nil, "run", "--db", db, spec)
	block := "Failed points (1): cause, then the first evidence line from the server's log:\n" +
		"  baseline tp=4  launch_failed: cannot start the server: fork/exec /nonexistent/sglangsim: no such file or directory\n"
	if code != ExitFailure || !strings.Contains(out, block) {
		t.Errorf("run of a spec whose command does not exist: exit %d, lacks\n%s\nstdout:\n%s\nstderr:\n%s", code, block, out, errs)
	}
	out, errs, code = runMain(t, nil, "status", "--db", db, "cell")
	if code != ExitOK || !strings.Contains(out, block) {
		t.Errorf("status: exit %d, lacks\n%s\nstdout:\n%s\nstderr:\n%s", code, block, out, errs)
	}

	f := newStateFixture(t, "failed", "/nonexistent/sglangsim", os.Getpid(), os.Getpid())
	out, _, _ = runMain(t, nil, "status", "--db", f.db, "1")
	want := "  baseline tp=4  oom: out of memory (code=killed, status=9)\n" +
		"                   torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
	if !strings.Contains(out, want) {
		t.Errorf("status of an OOM point lacks\n%s\n%s", want, out)
	}
}

// Small slips: the live line says a phase once ("ready after 1.2 s", not "ready ready after"); one
// GPU is not "1 GPUs"; the README lists each document once.
func TestSmallSlips(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, tty: true, hosts: []string{"h0"}, last: map[string]orchestrator.Update{}, total: 1, startedAt: map[string]time.Time{}}
	p.update(orchestrator.Update{Host: "h0", Label: "baseline tp=4", Phase: orchestrator.PhaseReady, Detail: "ready after 1.2 s"})
	if s := b.String(); !strings.Contains(s, "baseline tp=4 ready after 1.2 s") || strings.Contains(s, "ready ready") {
		t.Errorf("the live line: %q", s)
	}

	spec := writeFile(t, t.TempDir(), "one.yaml", `version: 1
name: one
hosts: [{name: h, address: h.example, gpus: 1}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline], tp: [2]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}
`)
	_, errs, _ := runMain(t, nil, "validate", spec)
	if !strings.Contains(errs, `tp 2 fits no host (the largest, "h", has 1 GPU)`) {
		t.Errorf("validate of a 1-GPU host: %s", errs)
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^- \[(docs/[^\]]+)\]`).FindAllStringSubmatch(string(readme), -1) {
		if seen[m[1]]++; seen[m[1]] == 2 {
			t.Errorf("README.md lists %s more than once", m[1])
		}
	}
	if len(seen) < 5 {
		t.Errorf("README.md's documentation list: %v", seen)
	}
}
