package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestDaemonHoldsASweepItDiedRunningThreeTimes: the real daemon binary is killed (-9) three times
// while a sweep runs a point on a real test host, as a spec that makes it run out of memory would
// kill it. The first two starts requeue the sweep; the third holds it (interrupted, an event saying
// why) and restores the host instead of running it into a fourth death; `specsweep resume` releases
// it and the daemon finishes it.
func TestDaemonHoldsASweepItDiedRunningThreeTimes(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	hosts := boot(t, 1, testhost.Options{})
	db := filepath.Join(t.TempDir(), "daemon.db")
	id := submit(t, db, smallSpec("killer", hosts, "1, 2, 3, 4, 5, 6, 7, 8", ""))
	running := fmt.Sprintf("SELECT count(*) FROM points WHERE sweep_id = %d AND state = 'running'", id)
	for death := 1; death <= 3; death++ {
		d := startDaemon(t, db)
		// This daemon runs it: it holds the sweep and a point runs. A point the previous daemon left
		// running is in the table until this one recovers it, so a running point alone is not enough
		// (the kill then came while the sweep was requeued: queued, not running).
		held := fmt.Sprintf("SELECT count(*) FROM sweeps WHERE id = %d AND state = 'running' AND holder_pid = %d", id, d.cmd.Process.Pid)
		waitFor(t, 2*time.Minute, fmt.Sprintf("a running point of this daemon before death %d", death), func() bool {
			return countRows(db, held) > 0 && countRows(db, running) > 0
		})
		signal(t, d.cmd, syscall.SIGKILL)
		_ = d.cmd.Wait()
		if s := sweepState(db, id); s != "running" {
			t.Fatalf("after death %d the sweep is %s, want running (as the dead daemon left it)", death, s)
		}
	}
	d := startDaemon(t, db)
	waitState(t, db, id, "interrupted", time.Minute)
	conn := openDB(t, db)
	detail := scalar[string](t, conn, `SELECT detail FROM events WHERE sweep_id = ? AND kind = 'sweep_state'
		ORDER BY id DESC LIMIT 1`, id)
	if !strings.Contains(detail, "died 3 times") || !strings.Contains(detail, "resume") {
		t.Errorf("the hold's event: %q", detail)
	}
	if n := scalar[int](t, conn, "SELECT daemon_deaths FROM sweeps WHERE id = ?", id); n != 3 {
		t.Errorf("daemon_deaths %d, want 3", n)
	}
	// Held: not run again by this daemon, and its host restored.
	time.Sleep(2 * time.Second)
	if s := sweepState(db, id); s != "interrupted" {
		t.Fatalf("the held sweep became %s", s)
	}
	if n := countRows(db, running); n != 0 {
		t.Errorf("%d points of the held sweep running", n)
	}
	waitFor(t, time.Minute, "the held sweep's host restored", func() bool {
		_, err := hosts[0].ReadFile("/etc/systemd/system/sglang.service.d/50-specsweep.conf")
		return err != nil
	})
	checkRestored(t, hosts)

	if r := specsweep(t, 30*time.Second, "resume", "--db", db, fmt.Sprint(id)); r.code != 0 {
		t.Fatalf("resume:\n%s", r)
	}
	waitState(t, db, id, "done", 3*time.Minute)
	if n := scalar[int](t, conn, "SELECT daemon_deaths FROM sweeps WHERE id = ?", id); n != 0 {
		t.Errorf("daemon_deaths %d after the resume, want 0", n)
	}
	signal(t, d.cmd, syscall.SIGTERM)
	_ = d.cmd.Wait()
}
