package hostctl

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestLocalResolvesRelativeCommands: the local driver takes a command relative to the working
// directory or a bare name from $PATH (resolved once, in hostctl, not by its caller); a name not in
// $PATH is the point's bad_args.
func TestLocalResolvesRelativeCommands(t *testing.T) {
	port := testhost.FreePort(t)
	dir := t.TempDir()
	script := "#!/bin/sh\nexec sleep 30\n"
	if err := os.WriteFile(filepath.Join(dir, "fake-server"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	for _, cmd := range []string{"./fake-server", "fake-server"} {
		l := NewLocal(LocalOptions{Name: "here"})
		in, err := l.Start(t.Context(), Launch{Argv: []string{cmd, "--port", strconv.Itoa(port)}, Port: port})
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
	_, err := NewLocal(LocalOptions{}).Start(t.Context(), Launch{Argv: []string{"no-such-server-xyz", "--port", strconv.Itoa(port)}, Port: port})
	if f, ok := AsFailure(err); !ok || f.Class != ClassLaunchFailed || !strings.Contains(f.Detail, "not found in PATH") {
		t.Fatalf("missing command: %v, want launch_failed", err)
	}
	// A relative command with a slash is the spec folder's (LocalOptions.Dir), not the working
	// directory's: the working directory here holds no bin/.
	sub := filepath.Join(t.TempDir(), "specs")
	if err := os.MkdirAll(filepath.Join(sub, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "fake-server"), filepath.Join(sub, "bin", "server")); err != nil {
		t.Fatal(err)
	}
	l := NewLocal(LocalOptions{Name: "spec-dir", Dir: sub})
	if _, err := l.Start(t.Context(), Launch{Argv: []string{"bin/server", "--port", strconv.Itoa(port)}, Port: port}); err != nil {
		t.Fatalf("bin/server under the spec's folder: %v", err)
	}
	if err := l.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = NewLocal(LocalOptions{Name: "elsewhere", Dir: t.TempDir()}).Start(t.Context(), Launch{Argv: []string{"./fake-server", "--port", strconv.Itoa(port)}, Port: port})
	if f, ok := AsFailure(err); !ok || f.Class != ClassLaunchFailed || !strings.Contains(f.Detail, "no such file or directory") {
		t.Fatalf("./fake-server beside another spec: %v, want launch_failed naming the OS error", err)
	}
}

// TestLocalLogDirIsPrivate: the server log of the local driver (--log-dir) is its user's alone: the
// file 0600 (also one an earlier version left 0644), a directory it creates 0700; a symlink in
// its place is refused, not followed.
func TestLocalLogDirIsPrivate(t *testing.T) {
	port := testhost.FreePort(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fake-server"), []byte("#!/bin/sh\necho token=abc\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(logFile string) error {
		l := NewLocal(LocalOptions{Name: "here", LogFile: logFile})
		_, err := l.Start(t.Context(), Launch{Argv: []string{filepath.Join(dir, "fake-server"), "--port", strconv.Itoa(port)}, Port: port})
		if err == nil {
			t.Cleanup(func() { _ = l.Restore(context.Background()) })
		}
		return err
	}
	mode := func(p string) os.FileMode {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	logs := filepath.Join(dir, "logs", "run1")
	fresh := filepath.Join(logs, "here.log")
	if err := start(fresh); err != nil {
		t.Fatal(err)
	}
	if m := mode(fresh); m != 0o600 {
		t.Errorf("a new log file is %o, want 600", m)
	}
	for _, d := range []string{logs, filepath.Dir(logs)} {
		if m := mode(d); m != 0o700 {
			t.Errorf("the directory %s it created is %o, want 700", d, m)
		}
	}
	old := filepath.Join(dir, "old.log")
	if err := os.WriteFile(old, []byte("an earlier sweep's lines\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := start(old); err != nil {
		t.Fatal(err)
	}
	if m := mode(old); m != 0o600 {
		t.Errorf("a log file left 0644 is %o after a start, want 600", m)
	}
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), link); err != nil {
		t.Fatal(err)
	}
	if err := start(link); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("a symlink as the log file: %v, want an error naming it", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); err == nil {
		t.Error("the symlink's target was created")
	}
}
