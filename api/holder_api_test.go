package api

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/specsweep/specsweep/store"
)

// A sweep stored as running whose holder's process is gone (a `specsweep run` killed with -9) is
// shown orphaned, with no ETA; one whose holder lives is not.
func TestAPIShowsASweepWhoseProcessDied(t *testing.T) {
	t.Parallel()
	a := newAPIHarness(t, APIConfig{})
	ctx := context.Background()
	if w := a.do("POST", "/api/sweeps", apiSpec(""), nil); w.Code != http.StatusCreated {
		t.Fatalf("submit: %d %s", w.Code, w.Body)
	}
	sws, _ := a.db.ListSweeps(ctx)
	id := sws[0].ID
	if err := a.db.SetSweepState(ctx, id, store.SweepRunning, "test"); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	get := func() SweepDetailJSON {
		t.Helper()
		w := a.do("GET", "/api/sweeps/"+jsonInt(id), "", nil)
		var j SweepDetailJSON
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &j) != nil {
			t.Fatalf("GET sweep: %d %s", w.Code, w.Body)
		}
		return j
	}
	if err := a.db.HoldSweep(ctx, id, store.Holder{Kind: store.HolderRun, PID: os.Getpid(), Host: host}); err != nil {
		t.Fatal(err)
	}
	if j := get(); j.OrphanedSince != nil || j.Holder == nil || j.Holder.Kind != "run" || j.Holder.PID != os.Getpid() {
		t.Fatalf("a live holder: %+v orphaned %v", j.Holder, j.OrphanedSince)
	}
	if err := a.db.HoldSweep(ctx, id, store.Holder{Kind: store.HolderRun, PID: dead.Process.Pid, Host: host}); err != nil {
		t.Fatal(err)
	}
	j := get()
	if j.OrphanedSince == nil || j.Holder.Heartbeat == nil || *j.OrphanedSince != *j.Holder.Heartbeat || j.ETASeconds != 0 {
		t.Fatalf("a dead holder: %+v orphaned %v eta %v", j.Holder, j.OrphanedSince, j.ETASeconds)
	}
	// Such a sweep can be queued again over HTTP, as from the CLI (the store alone refused a
	// running sweep).
	if w := a.do("POST", "/api/sweeps/"+jsonInt(id)+"/resume", "", nil); w.Code != http.StatusOK {
		t.Fatalf("resume of a sweep whose process died: %d %s", w.Code, w.Body)
	}
	if j := get(); j.State != string(store.SweepQueued) {
		t.Fatalf("after resume: state %s", j.State)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
