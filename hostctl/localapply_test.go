package hostctl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/sweep"
)

// appliedSimLaunch is the simulator on port, as an applied configuration, with files.
func appliedSimLaunch(sim string, port int, files ...File) Launch {
	return Launch{Argv: []string{sim, "--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--port", fmt.Sprint(port)},
		Env: maps.Clone(fastEnv), Port: port, ReadyTimeout: 30 * time.Second, StopTimeout: 10 * time.Second, Files: files}
}

func openLocalApply(t *testing.T, stateDir string) *openLocal {
	t.Helper()
	d, err := Open(t.Context(), sweep.Host{Name: "here", Driver: sweep.DriverLocal}, Options{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	return d.(*openLocal)
}

// killPIDOnCleanup kills pid's process group at the end of the test if pid is still the process
// that started at start.
func killPIDOnCleanup(t *testing.T, pid int, start uint64) {
	t.Cleanup(func() {
		if procAlive(pid, start) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// cleanupApplied kills, at the end of the test, the applied server the state directory records
// then (whoever started it), and the process of its rollback record's.
func cleanupApplied(t *testing.T, stateDir string) {
	t.Cleanup(func() {
		d := &openLocal{h: sweep.Host{Name: "here"}, o: Options{StateDir: stateDir}, Local: NewLocal(LocalOptions{})}
		if a, _ := d.appliedState(); a.running() {
			_ = syscall.Kill(-a.PID, syscall.SIGKILL)
		}
		if rb, _ := d.rollbackState(); rb != nil && rb.Prev.running() {
			_ = syscall.Kill(-rb.Prev.PID, syscall.SIGKILL)
		}
	})
}

// trackApplied is the host's applied record now, its process killed at the end of the test.
func trackApplied(t *testing.T, d *openLocal) *localApplied {
	t.Helper()
	a, err := d.appliedState()
	if err != nil || a == nil {
		t.Fatalf("the applied record: %v %v", a, err)
	}
	killPIDOnCleanup(t, a.PID, a.StartTime)
	return a
}

func serves(port int) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func waitServes(t *testing.T, port int, want bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); serves(port) != want; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("port %d serves /health: want %v for 30 s", port, want)
		}
	}
}

func applyReady(t *testing.T, d *openLocal, l Launch, point string) *localApplied {
	t.Helper()
	in, err := d.Apply(t.Context(), l, AppliedRecord{Sweep: "s", SweepID: 1, Point: point, Label: "label " + point, Choice: "point"})
	if err != nil {
		t.Fatalf("apply %s: %v", point, err)
	}
	a := trackApplied(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := in.WaitReady(ctx); err != nil {
		lines, _ := in.Logs(ctx)
		t.Fatalf("apply %s: %v\n%s", point, err, strings.Join(lines, "\n"))
	}
	return a
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestLocalApplyHelperProcess is `specsweep apply` in a process of its own (TestLocalApplySurvives):
// it applies, waits for readiness and exits.
func TestLocalApplyHelperProcess(t *testing.T) {
	dir := os.Getenv("SPECSWEEP_TEST_LOCALAPPLY_STATE")
	if dir == "" {
		t.Skip("run by TestLocalApplySurvives")
	}
	port, _ := strconv.Atoi(os.Getenv("SPECSWEEP_TEST_LOCALAPPLY_PORT"))
	d := openLocalApply(t, dir)
	l := appliedSimLaunch(os.Getenv("SPECSWEEP_TEST_LOCALAPPLY_SIM"), port, File{Path: os.Getenv("SPECSWEEP_TEST_LOCALAPPLY_FILE"), Data: []byte("{}\n")})
	in, err := d.Apply(t.Context(), l, AppliedRecord{Sweep: "s", SweepID: 1, Point: "p1", Label: "eagle3 s=3", Choice: "recommended"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLocalApplySurvives: an applied server outlives the specsweep that applied it (a process of
// its own here, which exits), with its record (0600), its log and its files; Applied returns the
// record, and says when the process is gone.
func TestLocalApplySurvives(t *testing.T) {
	sim := testhost.SimBinary(t)
	dir := t.TempDir()
	cleanupApplied(t, dir)
	port := testhost.FreePort(t)
	file := filepath.Join(t.TempDir(), "conf", "adaptive.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalApplyHelperProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "SPECSWEEP_TEST_LOCALAPPLY_STATE="+dir, "SPECSWEEP_TEST_LOCALAPPLY_PORT="+strconv.Itoa(port),
		"SPECSWEEP_TEST_LOCALAPPLY_SIM="+sim, "SPECSWEEP_TEST_LOCALAPPLY_FILE="+file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the applying process: %v\n%s", err, out)
	}
	d := openLocalApply(t, dir)
	a := trackApplied(t, d)
	if !a.running() || !serves(port) {
		t.Fatalf("the applied server (pid %d) is gone with the process that applied it", a.PID)
	}
	if _, start, err := procStat(a.PID); err != nil || start != a.StartTime {
		t.Errorf("the record's start time %d, /proc says %d (%v)", a.StartTime, start, err)
	}
	if sid, err := syscall.Getpgid(a.PID); err != nil || sid != a.PID {
		t.Errorf("the applied server's process group %d (%v), want its own (%d)", sid, err, a.PID)
	}
	rec, err := d.Applied(t.Context())
	if err != nil || rec == nil || rec.Point != "p1" || rec.Choice != "recommended" || len(rec.Files) != 1 || rec.Files[0] != file {
		t.Fatalf("Applied: %+v %v", rec, err)
	}
	if !exists(file) {
		t.Errorf("the launch's file %s was not written", file)
	}
	for _, name := range []string{localAppliedFile, localAppliedLog} {
		fi, err := os.Stat(filepath.Join(dir, "here", name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 600", name, fi, err)
		}
	}
	if exists(filepath.Join(dir, "here", localRollbackFile)) {
		t.Error("the rollback record is there after the commit")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "here", localAppliedLog)); len(b) == 0 {
		t.Error("the applied server's log is empty")
	}
	// Gone: the record, and an error saying so.
	if err := syscall.Kill(-a.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); a.running(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed server is still there")
		}
	}
	rec, err = d.Applied(t.Context())
	if rec == nil || rec.Point != "p1" || !errors.Is(err, ErrAppliedNotRunning) || !strings.Contains(err.Error(), strconv.Itoa(a.PID)) {
		t.Errorf("Applied with the process gone: %+v %v, want the record and ErrAppliedNotRunning naming the pid", rec, err)
	}
}

// TestLocalApplyRollback: a second apply rolled back: the first launch runs again, with its
// file; the second's server and file are gone.
func TestLocalApplyRollback(t *testing.T) {
	sim := testhost.SimBinary(t)
	dir := t.TempDir()
	cleanupApplied(t, dir)
	files := t.TempDir()
	fa, fb := filepath.Join(files, "a.json"), filepath.Join(files, "b.json")
	pa, pb := testhost.FreePort(t), testhost.FreePort(t)
	d := openLocalApply(t, dir)
	first := applyReady(t, d, appliedSimLaunch(sim, pa, File{Path: fa, Data: []byte("a\n")}), "a")
	if err := d.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := applyReady(t, d, appliedSimLaunch(sim, pb, File{Path: fb, Data: []byte("b\n")}), "b")
	if first.running() || serves(pa) {
		t.Fatal("the first applied server still runs after the second apply")
	}
	if exists(fa) {
		t.Error("the first apply's file is there after an apply that does not name it")
	}
	if !exists(filepath.Join(dir, "here", localRollbackFile)) {
		t.Fatal("no rollback record after an apply")
	}
	if err := d.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	again := trackApplied(t, d)
	if second.running() || serves(pb) {
		t.Error("the second applied server runs after the rollback")
	}
	waitServes(t, pa, true)
	if again.PID == first.PID || again.Record.Point != "a" {
		t.Errorf("after the rollback: %+v, want the first launch started again", again)
	}
	if b, err := os.ReadFile(fa); err != nil || string(b) != "a\n" {
		t.Errorf("the first apply's file after the rollback: %q %v", b, err)
	}
	if exists(fb) {
		t.Error("the second apply's file is there after the rollback")
	}
	if exists(filepath.Join(dir, "here", localRollbackFile)) {
		t.Error("the rollback record is there after the rollback")
	}
	if rec, err := d.Applied(t.Context()); err != nil || rec.Point != "a" {
		t.Errorf("Applied after the rollback: %+v %v", rec, err)
	}
}

// TestLocalApplyUnapply: no server, no record, no file left.
func TestLocalApplyUnapply(t *testing.T) {
	sim := testhost.SimBinary(t)
	dir := t.TempDir()
	cleanupApplied(t, dir)
	port := testhost.FreePort(t)
	file := filepath.Join(t.TempDir(), "a.json")
	d := openLocalApply(t, dir)
	a := applyReady(t, d, appliedSimLaunch(sim, port, File{Path: file, Data: []byte("a\n")}), "a")
	if err := d.Unapply(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a.running() || serves(port) {
		t.Error("the applied server runs after Unapply")
	}
	for _, p := range []string{file, filepath.Join(dir, "here", localAppliedFile), filepath.Join(dir, "here", localRollbackFile)} {
		if exists(p) {
			t.Errorf("%s is there after Unapply", p)
		}
	}
	if rec, err := d.Applied(t.Context()); rec != nil || err != nil {
		t.Errorf("Applied after Unapply: %+v %v", rec, err)
	}
	if err := d.Unapply(t.Context()); err != nil {
		t.Errorf("Unapply with nothing applied: %v", err)
	}
}

// TestLocalApplySweep: a sweep point on the host stops the applied server (its port is the
// point's); apply is refused while the sweep has it; the host's Restore starts it again.
func TestLocalApplySweep(t *testing.T) {
	sim := testhost.SimBinary(t)
	dir := t.TempDir()
	cleanupApplied(t, dir)
	port := testhost.FreePort(t)
	d := openLocalApply(t, dir)
	a := applyReady(t, d, appliedSimLaunch(sim, port), "a")
	if err := d.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Local.Restore(context.Background()) })
	in, err := d.Start(t.Context(), appliedSimLaunch(sim, port))
	if err != nil {
		t.Fatal(err)
	}
	if a.running() {
		t.Fatal("the applied server runs beside the sweep's point")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatalf("the point on the applied server's port: %v", err)
	}
	if _, err := d.Apply(t.Context(), appliedSimLaunch(sim, port), AppliedRecord{Point: "b"}); !errors.Is(err, ErrSweepOnHost) {
		t.Errorf("apply during the sweep: %v, want ErrSweepOnHost", err)
	}
	if _, err := d.Applied(t.Context()); !errors.Is(err, ErrAppliedNotRunning) || !strings.Contains(err.Error(), "sweep") {
		t.Errorf("Applied during the sweep: %v, want ErrAppliedNotRunning naming the sweep", err)
	}
	if err := d.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	again := trackApplied(t, d)
	if again.PID == a.PID || !again.running() {
		t.Fatalf("after the sweep's restore: %+v, want the applied server started again", again)
	}
	waitServes(t, port, true)
	if rec, err := d.Applied(t.Context()); err != nil || rec.Point != "a" {
		t.Errorf("Applied after the sweep: %+v %v", rec, err)
	}
	if exists(filepath.Join(dir, "here", localSuspendedFile)) {
		t.Error("the sweep's marker is there after its restore")
	}
}

// TestLocalApplyPackedSweep: a packing host's slot stops the applied server as the host's own Start
// does; the host's Restore, after the slots', starts it again.
func TestLocalApplyPackedSweep(t *testing.T) {
	sim := testhost.SimBinary(t)
	dir := t.TempDir()
	cleanupApplied(t, dir)
	port := testhost.FreePort(t)
	d0, err := Open(t.Context(), sweep.Host{Name: "here", Driver: sweep.DriverLocal, GPUs: 2, Pack: true}, Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d := d0.(*openLocal)
	a := applyReady(t, d, appliedSimLaunch(sim, port), "a")
	if err := d.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	slot := d.Slot(1)
	t.Cleanup(func() { _ = slot.Restore(context.Background()) })
	if _, err := slot.Start(t.Context(), appliedSimLaunch(sim, testhost.FreePort(t))); err != nil {
		t.Fatal(err)
	}
	if a.running() {
		t.Fatal("the applied server runs beside a slot's point")
	}
	if err := slot.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	trackApplied(t, d)
	waitServes(t, port, true)
}
