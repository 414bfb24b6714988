package hostctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckLocalCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "server")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "notes")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckLocalCommand(exe, ""); err != nil {
		t.Errorf("an executable: %v", err)
	}
	if err := CheckLocalCommand("sh", ""); err != nil {
		t.Errorf("a name in PATH: %v", err)
	}
	// A relative command with a slash is the spec folder's, whatever the working directory.
	if err := CheckLocalCommand("./server", dir); err != nil {
		t.Errorf("./server in the spec's folder: %v", err)
	}
	if err := CheckLocalCommand("bin/server", dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "bin/server")) {
		t.Errorf("bin/server under the spec's folder: %v, want its full path named", err)
	}
	for cmd, want := range map[string]string{
		filepath.Join(dir, "missing"):      "no such file or directory",
		plain:                              "is not executable",
		dir:                                "is a directory",
		"no-such-program-specsweep-tested": "not found in PATH",
	} {
		if err := CheckLocalCommand(cmd, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckLocalCommand(%q) = %v, want %q", cmd, err, want)
		}
	}
}
