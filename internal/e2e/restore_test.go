package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestRestoreAfterAKill: specsweep killed mid-point leaves its drop-in, environment file and
// marker on the host; doctor reports them as a failed check naming `specsweep restore`; restore
// puts the operator's unit back (running, as before the sweep), is idempotent, and exits 0.
func TestRestoreAfterAKill(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	hosts := boot(t, 1, testhost.Options{UnitEnabled: true})
	h := hosts[0]
	f := writeSpec(t, smallSpec("e2e-restore", hosts, "1, 2", ""))
	dropIn := filepath.Join(h.Root, "etc/systemd/system/sglang.service.d/50-specsweep.conf")
	envFile := filepath.Join(h.Root, "etc/systemd/system/sglang.service.d/50-specsweep.env")
	marker := filepath.Join(h.Root, "var/lib/specsweep/restore-sglang.service.json")

	cmd, out := startSpecsweep(t, "run", "--db", f.db, f.spec)
	waitFor(t, time.Minute, "the drop-in of a point", func() bool { _, err := os.Stat(dropIn); return err == nil })
	signal(t, cmd, syscall.SIGKILL)
	_ = cmd.Wait()
	for _, p := range []string{dropIn, envFile, marker} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("after the kill %s should be left: %v\n%s", p, err, tail(out.String(), 5))
		}
	}
	// The database still says running, but its holder's pid is gone: the sweep is interrupted in
	// all but the store's word, so restore needs no cancel first (a sweep a live process runs is
	// refused: internal/cli's TestEveryCommandAnswersEverySweepState).
	if st := specsweep(t, time.Minute, "status", "--db", f.db, "e2e-restore"); !strings.Contains(st.stdout, "interrupted: no process has held it since") {
		t.Fatalf("status after the kill:\n%s", st)
	}

	// doctor's bound is generous: beside the package's other parallel tests on a loaded machine it
	// once took more than a minute.
	d := specsweep(t, 3*time.Minute, "doctor", f.spec)
	if d.code != 1 || !strings.Contains(d.stdout, "leftovers") || !strings.Contains(d.stdout, "specsweep restore") {
		t.Fatalf("doctor should fail the leftovers check and name specsweep restore:\n%s", d)
	}
	r := specsweep(t, 2*time.Minute, "restore", "--db", f.db, f.spec)
	if r.code != 0 || !strings.Contains(r.stdout, "restored") {
		t.Fatalf("restore:\n%s", r)
	}
	for _, p := range []string{dropIn, envFile, marker} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after restore", p)
		}
	}
	got, _ := h.Run(t.Context(), "systemctl is-active sglang.service")
	if s := strings.TrimSpace(string(got)); s != "active" {
		t.Errorf("sglang.service is %q after restore; it ran before the sweep", s)
	}
	again := specsweep(t, time.Minute, "restore", "--db", f.db, f.spec)
	if again.code != 0 || !strings.Contains(again.stdout, "nothing of specsweep there") {
		t.Fatalf("second restore should find nothing to do:\n%s", again)
	}
	d = specsweep(t, time.Minute, "doctor", f.spec)
	if !strings.Contains(d.stdout, "no drop-in or restore marker") {
		t.Errorf("doctor after restore:\n%s", d)
	}
}
