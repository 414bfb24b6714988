package testhost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildCommandTakesMakesBuild: with $SPECSWEEP_TEST_BINDIR set, the binary is that one (a hard
// link: no go build runs), and one missing there is an error naming the variable, not a build.
func TestBuildCommandTakesMakesBuild(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "sglangsim")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinDirEnv, dir)
	dst := filepath.Join(t.TempDir(), "sglangsim")
	if err := BuildCommand("sglangsim", dst); err != nil {
		t.Fatal(err)
	}
	a, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(a, b) {
		t.Errorf("%s is not %s", dst, src)
	}
	err = BuildCommand("specsweep", filepath.Join(t.TempDir(), "specsweep"))
	if err == nil || !strings.Contains(err.Error(), BinDirEnv) {
		t.Errorf("a binary missing from %s: %v, want an error naming it", BinDirEnv, err)
	}
}
