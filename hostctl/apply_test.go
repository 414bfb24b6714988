package hostctl

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestApplyParseEnvFiles: systemctl show's EnvironmentFiles lines become EnvironmentFile= values
// again ("-" for a file that may be missing), each once, in order, specsweep's own left out.
func TestApplyParseEnvFiles(t *testing.T) {
	out := "EnvironmentFiles=/etc/default/sglang (ignore_errors=no)\n" +
		"EnvironmentFiles=/etc/opt/a b (ignore_errors=yes)\n" +
		"EnvironmentFiles=" + AppliedEnvFilePath("sglang.service") + " (ignore_errors=no)\n" +
		"EnvironmentFiles=" + EnvFilePath("sglang.service") + " (ignore_errors=no)\n" +
		"EnvironmentFiles=/etc/default/sglang (ignore_errors=no)\n" +
		"garbage\n"
	got := parseEnvFiles([]byte(out), AppliedEnvFilePath("sglang.service"), EnvFilePath("sglang.service"))
	want := []string{"/etc/default/sglang", "-/etc/opt/a b"}
	if !slices.Equal(got, want) {
		t.Fatalf("parseEnvFiles = %q, want %q", got, want)
	}
	if got := parseEnvFiles(nil); got != nil {
		t.Fatalf("no lines: %q", got)
	}
}

// TestApplyRenderDropIns: the applied drop-in says what it is and how to undo it, and names its
// own environment file; a sweep's drop-in with resetEnv empties EnvironmentFile= first, then
// names the unit's own files (% kept literal) and the point's.
func TestApplyRenderDropIns(t *testing.T) {
	l := Launch{Argv: []string{"/bin/srv", "--port", "30000"}, Env: map[string]string{"K": "v"}, StopTimeout: 90 * time.Second}
	rec := AppliedRecord{Sweep: "lab\nx", SweepID: 7, Point: "p1", Label: "eagle3 s=3", Choice: "recommended",
		AppliedAt: time.Date(2026, 12, 1, 4, 50, 0, 0, time.UTC), By: "specsweep@laptop"}
	b, err := RenderAppliedDropIn("gpu1", "sglang.service", l, rec)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"sweep lab x (id 7), point p1", "(eagle3 s=3; recommended)", "2026-12-01T04:50:00Z",
		"`specsweep restore --applied gpu1`", AppliedRecordPath("sglang.service"),
		"\nExecStart=\nExecStart=/bin/srv \"--port\" \"30000\"\n",
		"\nEnvironmentFile=" + AppliedEnvFilePath("sglang.service") + "\n", "TimeoutStopSec=90s"} {
		if !strings.Contains(s, want) {
			t.Errorf("applied drop-in lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\nx (id") {
		t.Errorf("a newline of the record broke the comment:\n%s", s)
	}
	b, err = renderDropIn(l, dropInText{head: sweepDropInHead("sglang.service"), envFile: EnvFilePath("sglang.service"),
		resetEnv: true, keepEnv: []string{"/etc/default/sglang", "-/etc/50%.env"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "EnvironmentFile=\nEnvironmentFile=/etc/default/sglang\nEnvironmentFile=-/etc/50%%.env\nEnvironmentFile=" + EnvFilePath("sglang.service") + "\n"
	if !strings.Contains(string(b), want) {
		t.Errorf("sweep drop-in lacks %q:\n%s", want, b)
	}
	plain, _ := RenderDropIn("sglang.service", l)
	if strings.Contains(string(plain), "EnvironmentFile=\n") {
		t.Errorf("a sweep drop-in without an applied configuration resets EnvironmentFile=:\n%s", plain)
	}
}

// applyHost is a test host whose operator unit runs, with an operator's drop-in naming two
// environment files of theirs (one missing, "-"), connected over transport dbus or not.
type applyHost struct {
	h        *testhost.Host
	r        *Remote
	unitHash [32]byte
}

func bootApplyHost(t *testing.T, dbus bool) *applyHost {
	t.Helper()
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv, UnitEnabled: true})[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := h.WriteFile("/etc/default/sglang-ops", []byte("OPS_ONLY=ops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile("/etc/systemd/system/sglang.service.d/10-ops.conf",
		[]byte("[Service]\nEnvironmentFile=/etc/default/sglang-ops\nEnvironmentFile=-/etc/default/sglang-missing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Nsenter(ctx, "sh", "-c", "systemctl daemon-reload && systemctl restart sglang.service"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	r, err := DialRemote(ctx, RemoteOptions{Name: h.Name, DBus: dbus, SSH: rootSSH(h)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &applyHost{h: h, r: r, unitHash: sha256.Sum256(h.UnitText)}
}

// show is one property of the unit as systemctl shows it inside the host.
func (a *applyHost) show(t *testing.T, ctx context.Context, prop string) string {
	t.Helper()
	out, err := a.h.Nsenter(ctx, "systemctl", "show", "-p", prop, "--value", "--", "sglang.service")
	if err != nil {
		t.Fatalf("systemctl show %s: %v %s", prop, err, out)
	}
	return strings.TrimSpace(string(out))
}

// proc is /proc/MAINPID/FILE of the unit's server, once it runs.
func (a *applyHost) proc(t *testing.T, ctx context.Context, file string) string {
	t.Helper()
	var pid string
	waitUntil(t, 30*time.Second, "the unit's main process", func() bool {
		pid = a.show(t, ctx, "MainPID")
		return pid != "" && pid != "0"
	})
	out, err := a.h.Nsenter(ctx, "cat", "/proc/"+pid+"/"+file)
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	return string(out)
}

// waitRunning waits until the unit runs a server whose command line holds want (and not
// notWant), and answers on its port.
func (a *applyHost) waitRunning(t *testing.T, ctx context.Context, want, notWant string) {
	t.Helper()
	waitUntil(t, 30*time.Second, "the unit active", func() bool { return a.show(t, ctx, "ActiveState") == "active" })
	cmd := strings.ReplaceAll(a.proc(t, ctx, "cmdline"), "\x00", " ")
	if !strings.Contains(cmd, want) || notWant != "" && strings.Contains(cmd, notWant) {
		t.Fatalf("the unit runs %q: want %q, not %q", cmd, want, notWant)
	}
	waitUntil(t, 30*time.Second, "the server's port", func() bool {
		out, _ := a.h.Nsenter(ctx, "ss", "-Htln", "sport = :30000")
		return strings.Contains(string(out), "30000")
	})
}

// exists reports whether p is on the host.
func (a *applyHost) exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(a.h.Root, p))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// operatorIntact checks the operator's unit file is byte for byte as installed.
func (a *applyHost) operatorIntact(t *testing.T) {
	t.Helper()
	b, err := a.h.ReadFile(testhost.UnitPath)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(b) != a.unitHash {
		t.Fatalf("the operator's unit file changed:\n%s", b)
	}
	if !a.exists(t, "/etc/systemd/system/sglang.service.d/10-ops.conf") {
		t.Fatal("the operator's drop-in is gone")
	}
}

// nothingApplied checks no file of an applied configuration is left, nor any of paths.
func (a *applyHost) nothingApplied(t *testing.T, ctx context.Context, paths ...string) {
	t.Helper()
	u := "sglang.service"
	for _, p := range append([]string{AppliedDropInPath(u), AppliedEnvFilePath(u), AppliedRecordPath(u), ApplyRollbackPath(u)}, paths...) {
		if a.exists(t, p) {
			t.Errorf("%s left on the host", p)
		}
	}
	if cat := a.show(t, ctx, "DropInPaths"); strings.Contains(cat, AppliedDropInName) {
		t.Errorf("systemd still loads the applied drop-in: %s", cat)
	}
}

// appliedLaunch is sglangsim served as name, with a file of its own and a variable only it has.
func appliedLaunch(name string) Launch {
	l := launch(driver{simBin: testhost.SimPath}, map[string]string{"APPLIED_ONLY": name}, "--served-model-name", name)
	l.Files = []File{{Path: "/etc/specsweep-test/" + name + ".json", Data: []byte(`{"served": "` + name + `"}`)}}
	return l
}

func appliedRecord(name string) AppliedRecord {
	return AppliedRecord{Sweep: "lab", SweepID: 3, Point: "point-" + name, Label: "eagle3 s=3 k=1 n=4 tp=4", Choice: "recommended"}
}

// apply applies name's launch and waits for its server.
func (a *applyHost) apply(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	in, err := a.r.Apply(ctx, appliedLaunch(name), appliedRecord(name))
	if err != nil {
		t.Fatalf("apply %s: %v", name, err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatalf("apply %s: not ready: %v", name, err)
	}
}

// TestApplyOnARealHost: `specsweep apply`'s host side on real systemd, over systemctl and D-Bus:
// apply and commit, a second apply rolled back, a rollback to the operator's server, unapply
// (operator's unit byte-identical, the unit as it was before the first apply), a crash mid-apply
// then a new apply and a rollback, or an unapply, a sweep on the applied host (the point without
// the applied environment, the applied server back after the sweep's restore), and the refusals.
func TestApplyOnARealHost(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	for _, tr := range []struct {
		name string
		dbus bool
	}{{"ssh", false}, {"ssh-dbus", true}} {
		t.Run(tr.name, func(t *testing.T) {
			a := bootApplyHost(t, tr.dbus)
			r := a.r
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			u := "sglang.service"
			fileOf := func(name string) string { return "/etc/specsweep-test/" + name + ".json" }
			operatorArgv := "--host 127.0.0.1"

			t.Run("apply_commit", func(t *testing.T) {
				a.apply(t, ctx, "applied-a")
				cat, err := a.h.Nsenter(ctx, "systemctl", "cat", "--", u)
				if err != nil || !strings.Contains(string(cat), "# "+AppliedDropInPath(u)) ||
					!strings.Contains(string(cat), "specsweep's applied configuration") {
					t.Fatalf("systemctl cat lacks the applied drop-in: %v\n%s", err, cat)
				}
				if es := a.show(t, ctx, "ExecStart"); !strings.Contains(es, "--served-model-name applied-a") {
					t.Fatalf("ExecStart: %s", es)
				}
				a.waitRunning(t, ctx, "--served-model-name applied-a", operatorArgv)
				if env := a.proc(t, ctx, "environ"); !slices.Contains(strings.Split(env, "\x00"), "APPLIED_ONLY=applied-a") {
					t.Errorf("the applied server lacks its environment: %q", env)
				}
				fi, err := os.Stat(filepath.Join(a.h.Root, AppliedEnvFilePath(u)))
				if err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
					t.Fatalf("applied environment file: %v %v", fi, err)
				}
				if fi, err := os.Stat(filepath.Join(a.h.Root, ApplyRollbackPath(u))); err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("rollback record before the commit: %v %v", fi, err)
				}
				rec, err := r.Applied(ctx)
				if err != nil || rec == nil {
					t.Fatalf("Applied: %v %v", rec, err)
				}
				want := appliedRecord("applied-a")
				if rec.Point != want.Point || rec.Sweep != want.Sweep || rec.SweepID != 3 || rec.Label != want.Label ||
					rec.Choice != want.Choice || !rec.WasActive || rec.AppliedAt.IsZero() || !strings.HasPrefix(rec.By, "specsweep") ||
					!slices.Equal(rec.Files, []string{fileOf("applied-a")}) {
					t.Fatalf("Applied: %+v", rec)
				}
				if err := r.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if a.exists(t, ApplyRollbackPath(u)) {
					t.Fatal("rollback record left after Commit")
				}
				a.operatorIntact(t)
			})

			t.Run("rollback_to_the_previous_apply", func(t *testing.T) {
				a.apply(t, ctx, "applied-b")
				a.waitRunning(t, ctx, "--served-model-name applied-b", "")
				if a.exists(t, fileOf("applied-a")) || !a.exists(t, fileOf("applied-b")) {
					t.Fatal("the applied files are not the second apply's")
				}
				if err := r.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				if es := a.show(t, ctx, "ExecStart"); !strings.Contains(es, "--served-model-name applied-a") {
					t.Fatalf("ExecStart after the rollback: %s", es)
				}
				a.waitRunning(t, ctx, "--served-model-name applied-a", "")
				if rec, err := r.Applied(ctx); err != nil || rec == nil || rec.Point != "point-applied-a" {
					t.Fatalf("record after the rollback: %+v %v", rec, err)
				}
				if !a.exists(t, fileOf("applied-a")) || a.exists(t, fileOf("applied-b")) || a.exists(t, ApplyRollbackPath(u)) {
					t.Fatal("after the rollback: want the first apply's file back, the second's and the rollback record gone")
				}
				if err := r.Rollback(ctx); err != nil { // nothing to roll back
					t.Fatal(err)
				}
				a.waitRunning(t, ctx, "--served-model-name applied-a", "")
			})

			t.Run("sweep_on_the_applied_host", func(t *testing.T) {
				in, err := r.Start(ctx, launch(driver{simBin: testhost.SimPath}, nil, "--served-model-name", "point"))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := in.WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
				a.waitRunning(t, ctx, "--served-model-name point", "applied-a")
				env := strings.Split(a.proc(t, ctx, "environ"), "\x00")
				if slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "APPLIED_ONLY=") }) {
					t.Errorf("the sweep's point inherited the applied environment: %q", env)
				}
				for _, want := range []string{"OPS_ONLY=ops", "SGLANGSIM_TIME_SCALE=0.05"} {
					if !slices.Contains(env, want) {
						t.Errorf("the point's environment lacks %s (the operator's environment file, or its own): %q", want, env)
					}
				}
				// A packed sweep's slots copy the operator's settings, not the applied configuration.
				text, _, err := r.slotUnitText(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(text), AppliedDropInName) || strings.Contains(string(text), "applied-a") ||
					!strings.Contains(string(text), "10-ops.conf") {
					t.Errorf("a slot's unit copies the applied drop-in, or not the operator's:\n%s", text)
				}
				// Refused while the sweep has the unit.
				if _, err := r.Apply(ctx, appliedLaunch("applied-c"), appliedRecord("applied-c")); !errors.Is(err, ErrSweepOnHost) ||
					!strings.Contains(err.Error(), "specsweep restore") {
					t.Errorf("apply during a sweep: %v", err)
				}
				if err := r.Unapply(ctx); !errors.Is(err, ErrSweepOnHost) {
					t.Errorf("unapply during a sweep: %v", err)
				}
				if !a.exists(t, AppliedDropInPath(u)) || a.exists(t, ApplyRollbackPath(u)) {
					t.Fatal("a refused apply or unapply changed the host")
				}
				// The sweep's restore brings the applied configuration back, not the operator's.
				if err := r.Restore(ctx); err != nil {
					t.Fatal(err)
				}
				if es := a.show(t, ctx, "ExecStart"); !strings.Contains(es, "--served-model-name applied-a") {
					t.Fatalf("ExecStart after the sweep's restore: %s", es)
				}
				a.waitRunning(t, ctx, "--served-model-name applied-a", "")
				if env := a.proc(t, ctx, "environ"); !slices.Contains(strings.Split(env, "\x00"), "APPLIED_ONLY=applied-a") {
					t.Errorf("the applied server after the sweep lacks its environment: %q", env)
				}
				if a.exists(t, DropInPath(u)) || a.exists(t, MarkerPath(u)) || a.exists(t, EnvFilePath(u)) {
					t.Error("the sweep's files left after its restore")
				}
				a.operatorIntact(t)
			})

			t.Run("unapply", func(t *testing.T) {
				a.apply(t, ctx, "applied-b") // not committed: Unapply removes the rollback record too
				if err := r.Unapply(ctx); err != nil {
					t.Fatal(err)
				}
				a.operatorIntact(t)
				a.nothingApplied(t, ctx, fileOf("applied-a"), fileOf("applied-b"))
				a.waitRunning(t, ctx, operatorArgv, "--served-model-name")
				if rec, err := r.Applied(ctx); err != nil || rec != nil {
					t.Fatalf("Applied after Unapply: %+v %v", rec, err)
				}
				if err := r.Unapply(ctx); err != nil { // nothing applied: nothing to do
					t.Fatal(err)
				}
				a.waitRunning(t, ctx, operatorArgv, "--served-model-name")
			})

			t.Run("rollback_to_the_operator", func(t *testing.T) {
				a.apply(t, ctx, "applied-a")
				if err := r.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				a.waitRunning(t, ctx, operatorArgv, "--served-model-name")
				a.nothingApplied(t, ctx, fileOf("applied-a"))
				a.operatorIntact(t)
			})

			// crash is an apply of name that died after its rollback record, files, environment file
			// and drop-in were written and the operator's server stopped: no record, no start.
			crash := func(t *testing.T, name string) {
				t.Helper()
				l, rec := appliedLaunch(name), appliedRecord(name)
				st, err := r.UnitState(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.saveRollback(ctx, st, filePaths(l.Files)); err != nil {
					t.Fatal(err)
				}
				if _, err := r.stopRunning(ctx, l); err != nil {
					t.Fatal(err)
				}
				dropIn, err := RenderAppliedDropIn(r.o.Name, u, l, rec)
				if err != nil {
					t.Fatal(err)
				}
				env, _ := renderAppliedEnvFile(l.Env)
				for _, f := range []struct {
					path string
					data []byte
					mode os.FileMode
				}{{l.Files[0].Path, l.Files[0].Data, 0o644}, {AppliedEnvFilePath(u), env, 0o600}, {AppliedDropInPath(u), dropIn, 0o644}} {
					if err := a.h.WriteFile(f.path, f.data, f.mode); err != nil {
						t.Fatal(err)
					}
				}
				if out, err := a.h.Nsenter(ctx, "systemctl", "daemon-reload"); err != nil {
					t.Fatalf("%v %s", err, out)
				}
			}

			t.Run("crash_mid_apply_then_apply_and_rollback", func(t *testing.T) {
				crash(t, "crashed")
				// The next apply keeps the rollback record: it describes the host before the crashed
				// attempt (the operator's server running), not the half-applied state.
				a.apply(t, ctx, "applied-b")
				if a.exists(t, fileOf("crashed")) {
					t.Error("the crashed attempt's file left beside the new apply's")
				}
				if err := r.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				a.waitRunning(t, ctx, operatorArgv, "--served-model-name")
				a.nothingApplied(t, ctx, fileOf("crashed"), fileOf("applied-b"))
				a.operatorIntact(t)
			})

			t.Run("crash_mid_apply_then_unapply", func(t *testing.T) {
				crash(t, "crashed")
				if err := r.Unapply(ctx); err != nil {
					t.Fatal(err)
				}
				a.operatorIntact(t)
				a.nothingApplied(t, ctx, fileOf("crashed"))
				a.waitRunning(t, ctx, operatorArgv, "--served-model-name")
			})

			t.Run("unapply_leaves_an_inactive_unit_inactive", func(t *testing.T) {
				if out, err := a.h.Nsenter(ctx, "systemctl", "stop", "--", u); err != nil {
					t.Fatalf("%v %s", err, out)
				}
				a.apply(t, ctx, "applied-a")
				if err := r.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				a.apply(t, ctx, "applied-b")
				if rec, err := r.Applied(ctx); err != nil || rec == nil || rec.WasActive {
					t.Fatalf("a re-apply lost the state before the first apply: %+v %v", rec, err)
				}
				if err := r.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if err := r.Unapply(ctx); err != nil {
					t.Fatal(err)
				}
				a.operatorIntact(t)
				a.nothingApplied(t, ctx, fileOf("applied-a"), fileOf("applied-b"))
				if st := a.show(t, ctx, "ActiveState"); st != "inactive" {
					t.Fatalf("the unit was inactive before the first apply, is %s after Unapply", st)
				}
			})

			t.Run("refusals", func(t *testing.T) {
				if _, err := r.Slot(0).Apply(ctx, appliedLaunch("x"), appliedRecord("x")); err == nil || !strings.Contains(err.Error(), "slot 0") {
					t.Errorf("a slot's apply: %v", err)
				}
				o := r.o
				o.Unit = "nosuch.service"
				other, err := DialRemote(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close()
				if _, err := other.Apply(ctx, appliedLaunch("x"), appliedRecord("x")); err == nil ||
					!strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "create_unit") {
					t.Errorf("apply of a missing unit: %v", err)
				}
				if a.exists(t, ApplyRollbackPath("nosuch.service")) {
					t.Error("a refused apply wrote a rollback record")
				}
				// A restore marker alone (a sweep that died) refuses too.
				m := Marker{Unit: u, DropIn: DropInPath(u), CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
				if err := a.h.WriteFile(MarkerPath(u), m.Encode(), 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Apply(ctx, appliedLaunch("x"), appliedRecord("x")); !errors.Is(err, ErrSweepOnHost) || !strings.Contains(err.Error(), MarkerPath(u)) {
					t.Errorf("apply with a restore marker: %v", err)
				}
				if err := os.Remove(filepath.Join(a.h.Root, MarkerPath(u))); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
