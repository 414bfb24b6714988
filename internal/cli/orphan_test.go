package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/api"
	"github.com/specsweep/specsweep/store"
)

// A sweep left "running" by a process that died (kill -9 of `specsweep run`, a daemon's crash):
// status, sweeps and status --json say it is interrupted, since when, by which process, and how to
// resume it, instead of "running ... ETA" forever.
func TestStatusOfASweepWhoseProcessDied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbFile := filepath.Join(t.TempDir(), "o.db")
	db, err := store.Open(ctx, dbFile)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, kind string, pid int) {
		id, err := db.CreateSweep(ctx, store.NewSweep{Name: name, SpecHash: "h", SpecText: "name: " + name},
			[]store.NewHost{{Name: "local", Driver: "local", GPUs: 1}},
			[]store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 1, Argv: []string{"--tp-size", "1"}, Runs: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetSweepState(ctx, id, store.SweepRunning, "test"); err != nil {
			t.Fatal(err)
		}
		if err := db.HoldSweep(ctx, id, store.Holder{Kind: kind, PID: pid, Host: host}); err != nil {
			t.Fatal(err)
		}
	}
	mk("killed", store.HolderRun, dead.Process.Pid)
	mk("crashed", store.HolderDaemon, dead.Process.Pid)
	mk("alive", store.HolderRun, os.Getpid())
	env := map[string]string{}

	out, _, code := runMain(t, env, "status", "--db", dbFile, "killed")
	if code != 0 || !strings.Contains(out, "sweep killed (id 1): interrupted: no process has held it since ") ||
		!strings.Contains(out, "(specsweep run, pid ") || !strings.Contains(out, "run the same `specsweep run` command again to resume it") ||
		!strings.Contains(out, "; ETA -") {
		t.Errorf("status of a sweep whose run was killed (exit %d):\n%s", code, out)
	}
	out, _, _ = runMain(t, env, "status", "--db", dbFile, "crashed")
	if !strings.Contains(out, "(specsweep daemon, pid ") || !strings.Contains(out, "start the daemon again") {
		t.Errorf("status of a sweep whose daemon died:\n%s", out)
	}
	out, _, _ = runMain(t, env, "status", "--db", dbFile, "alive")
	if !strings.Contains(out, "sweep alive (id 3): running\n") {
		t.Errorf("status of a sweep whose process lives:\n%s", out)
	}
	out, _, _ = runMain(t, env, "status", "--db", dbFile)
	for _, want := range []string{"killed  interrupted (no process since ", "crashed  interrupted (no process since ", "alive    running"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("status list lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runMain(t, env, "sweeps", "--db", dbFile, "--format", "csv")
	if !strings.Contains(out, "1,killed,interrupted,") || !strings.Contains(out, "3,alive,running,") {
		t.Errorf("sweeps:\n%s", out)
	}
	out, _, _ = runMain(t, env, "status", "--db", dbFile, "--json", "killed")
	var j api.SweepDetailJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.OrphanedSince == nil || j.Holder == nil || j.Holder.Kind != "run" {
		t.Errorf("status --json: %v\n%s", err, out)
	}
}
