package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The first hour: `command: [bin/sglangsim]` in a spec outside the repository validated,
// then every point failed in 0.08 s. validate and plan now check a local command on this machine,
// resolved against the spec file's folder, and say which file they looked for.
func TestValidateChecksALocalCommandHere(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	specs := filepath.Join(root, "specs")
	if err := os.MkdirAll(filepath.Join(specs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := writeFile(t, specs, "s.yaml", stateSpec("bin/sglangsim", 31999))
	want := filepath.Join(specs, "bin/sglangsim")
	for _, cmd := range []string{"validate", "plan"} {
		out, errs, code := runMain(t, nil, cmd, spec)
		if code != ExitFailure || !strings.Contains(errs, `server.command[0]: command "bin/sglangsim" (`+want+`)`) ||
			!strings.Contains(errs, "no such file or directory") || !strings.Contains(errs, "launch_failed") {
			t.Errorf("%s of a missing local command: exit %d\nstdout %s\nstderr %s", cmd, code, out, errs)
		}
	}
	// The same relative command, present beside the spec: fine from any working directory.
	if err := os.WriteFile(want, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runMain(t, nil, "validate", spec); code != ExitOK {
		t.Errorf("validate with bin/sglangsim beside the spec: exit %d\n%s%s", code, out, errs)
	}
	if err := os.Chmod(want, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := runMain(t, nil, "validate", spec); code != ExitFailure || !strings.Contains(errs, "is not executable") {
		t.Errorf("validate of a command that is not executable: exit %d\n%s", code, errs)
	}
}

// Defaults that lead into OOM: the quickstart's 122B model at tp 1 dies in 1.4 s on the simulator.
// plan and validate say so, from the simulator's own memory model, before any GPU time is spent.
func TestPlanWarnsOfPointsThatCannotFit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stub := filepath.Join(dir, "sglangsim")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := writeFile(t, dir, "s.yaml", strings.Replace(stateSpec(stub, 31999), "tp: [4]", "tp: [1, 4]", 1))
	for _, cmd := range []string{"validate", "plan"} {
		_, errs, code := runMain(t, nil, cmd, spec)
		if code != ExitOK || !strings.Contains(errs, "warning: 1 point(s) will not start on the simulator's GPUs (baseline tp=1): out of memory loading the weights") ||
			strings.Contains(errs, "tp=4") {
			t.Errorf("%s: exit %d, stderr:\n%s", cmd, code, errs)
		}
	}
}

// submit refuses a local command relative to the spec's folder: the daemon gets the text, not the
// folder, and would start another program (or none) from its own working directory.
func TestSubmitRefusesACommandRelativeToTheSpec(t *testing.T) {
	t.Parallel()
	spec := exampleCopy(t, "quickstart.yaml")
	db := filepath.Join(t.TempDir(), "s.db")
	_, errs, code := runMain(t, nil, "submit", "--db", db, spec)
	want := filepath.Join(filepath.Dir(filepath.Dir(spec)), "bin", "sglangsim")
	if code != ExitFailure || !strings.Contains(errs, `server.command[0] "../bin/sglangsim" is relative to the spec's folder`) || !strings.Contains(errs, want) {
		t.Errorf("submit of a relative local command: exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("the refused submit created a database")
	}
}
