package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
)

// TestSubmitWordsScheduleConflictsWithItsFlags: the orchestrator's typed refusal is worded with
// submit's own flags.
func TestSubmitWordsScheduleConflictsWithItsFlags(t *testing.T) {
	dir := t.TempDir()
	spec := `version: 1
name: words
hosts: [{name: h, address: h.example, gpus: 1}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}
`
	plain, scheduled := filepath.Join(dir, "plain.yaml"), filepath.Join(dir, "scheduled.yaml")
	if err := os.WriteFile(plain, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(scheduled, []byte(spec+"schedule: {cron: \"@daily\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--db", db, "--cron", "@daily", "--at", "2099-01-01T00:00:00Z", plain}, "--cron and --at exclude each other"},
		{[]string{"submit", "--db", db, "--at", "2099-01-01T00:00:00Z", scheduled}, "--at conflicts with the spec's schedule.cron"},
	} {
		if _, errs, code := runMain(t, nil, c.args...); code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: code %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// TestRunWordsAnExistingSweepWithNew: Prepare's refusals name run's --new.
func TestRunWordsAnExistingSweepWithNew(t *testing.T) {
	changed := &orchestrator.SweepExistsError{Name: "s", ID: 3, State: "done", Hash: "aaaa", NewHash: "bbbb", Err: orchestrator.ErrSpecChanged}
	err := prepareWords("run", changed)
	if !errors.Is(err, orchestrator.ErrSpecChanged) || !strings.Contains(err.Error(), "`specsweep run --new SPEC` starts a new sweep") ||
		!strings.Contains(err.Error(), "sweep s (id 3, done) was made from a different version of this spec") {
		t.Errorf("spec changed: %v", err)
	}
	finished := &orchestrator.SweepExistsError{Name: "s", ID: 3, State: "done", Err: orchestrator.ErrFinished,
		Prior: store.Sweep{ID: 3, Name: "s", State: store.SweepDone}}
	err = prepareWords("submit", finished)
	if !strings.Contains(err.Error(), "already finished (done") || !strings.Contains(err.Error(), "`specsweep submit --new SPEC` starts a new sweep") {
		t.Errorf("finished: %v", err)
	}
	other := errors.New("disk I/O error")
	if prepareWords("run", other) != other || prepareWords("run", nil) != nil {
		t.Error("other errors are passed through")
	}
}
