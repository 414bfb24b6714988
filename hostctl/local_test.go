package hostctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalResolvesRelativeCommands: the local driver takes a command relative to the working
// directory or a bare name from $PATH (resolved once, in hostctl, not by its caller); a name not in
// $PATH is the point's bad_args.
func TestLocalResolvesRelativeCommands(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\nexec sleep 30\n"
	if err := os.WriteFile(filepath.Join(dir, "fake-server"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	for _, cmd := range []string{"./fake-server", "fake-server"} {
		l := NewLocal(LocalOptions{Name: "here"})
		in, err := l.Start(t.Context(), Launch{Argv: []string{cmd, "--port", "30123"}, Port: 30123})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if st, err := in.State(t.Context()); err != nil || st.MainPID == 0 {
			t.Errorf("%s: state %+v %v, want a running child", cmd, st, err)
		}
		if err := l.Restore(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	_, err := NewLocal(LocalOptions{}).Start(t.Context(), Launch{Argv: []string{"no-such-server-xyz", "--port", "30123"}, Port: 30123})
	if f, ok := AsFailure(err); !ok || f.Class != ClassBadArgs || !strings.Contains(f.Detail, "not found in PATH") {
		t.Fatalf("missing command: %v, want bad_args", err)
	}
}
