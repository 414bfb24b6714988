package hostctl

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLaunchFilesAreChecked: a launch's files are refused, naming the path, unless each path is
// absolute, clean and free of newline and NUL, each file at most MaxFileSize, at most MaxFiles of
// them, no path twice; a refused launch is the point's bad_args.
func TestLaunchFilesAreChecked(t *testing.T) {
	base := Launch{Argv: []string{"/bin/x"}}
	for _, c := range []struct {
		files []File
		want  string // in the error
	}{
		{[]File{{Path: "adaptive.json"}}, `"adaptive.json": an absolute path is required`},
		{[]File{{Path: "./a.json"}}, `"./a.json": an absolute path is required`},
		{[]File{{Path: "/etc/../a.json"}}, `"/etc/../a.json": the path is not clean (want "/a.json")`},
		{[]File{{Path: "/etc//a.json"}}, `"/etc//a.json": the path is not clean`},
		{[]File{{Path: "/etc/a/"}}, `"/etc/a/": the path is not clean`},
		{[]File{{Path: "/etc/./a"}}, `"/etc/./a": the path is not clean`},
		{[]File{{Path: "/"}}, `"/": the path names no file`},
		{[]File{{Path: ""}}, `"": an absolute path is required`},
		{[]File{{Path: "/etc/a\nb"}}, `newline or NUL`},
		{[]File{{Path: "/etc/a\x00b"}}, `newline or NUL`},
		{[]File{{Path: "/etc/a\rb"}}, `newline or NUL`},
		{[]File{{Path: "/t/big", Data: make([]byte, MaxFileSize+1)}}, `"/t/big": 1048577 bytes, more than 1048576`},
		{[]File{{Path: "/t/a"}, {Path: "/t/a"}}, `"/t/a" is given twice`},
		{make([]File, MaxFiles+1), "17 files, more than 16"},
	} {
		l := base
		l.Files = c.files
		err := l.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.files[0].Path, err, c.want)
		}
	}
	// The bounds themselves are fine, as are odd but plain names.
	l := base
	for i := range MaxFiles {
		l.Files = append(l.Files, File{Path: "/t/" + string(rune('a'+i)), Data: make([]byte, MaxFileSize)})
	}
	l.Files[0].Path = "/t/it's a \"dir\"/$HOME/ünï.json"
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	// Refused at Start before anything runs: bad_args, with the path.
	l = Launch{Argv: []string{"/bin/true"}, Files: []File{{Path: "rel/a.json"}}}
	_, err := NewLocal(LocalOptions{}).Start(t.Context(), l)
	if f, ok := AsFailure(err); !ok || f.Class != ClassBadArgs || !strings.Contains(f.Detail, `"rel/a.json"`) {
		t.Fatalf("want bad_args naming the path, got %v", err)
	}
}

// TestLocalFileWriteFailureIsLaunchFailed: a file the local driver cannot write (its directory
// is a regular file) fails the point's launch, naming the path, and starts no server.
func TestLocalFileWriteFailureIsLaunchFailed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "plain", "a.json")
	mark := filepath.Join(dir, "ran")
	l := Launch{Argv: []string{"/bin/sh", "-c", "touch " + ShellQuote(mark)}, Files: []File{{Path: p, Data: []byte("{}")}}}
	_, err := NewLocal(LocalOptions{}).Start(t.Context(), l)
	if f, ok := AsFailure(err); !ok || f.Class != ClassLaunchFailed || !strings.Contains(f.Detail, p) {
		t.Fatalf("want launch_failed naming %s, got %v", p, err)
	}
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the server was started: %v", err)
	}
}

// TestJobScriptWritesFiles runs a batch script's lines with /bin/sh, as a node would: every file
// arrives byte for byte (binary, empty, large, a path with quotes and spaces, a missing
// directory, a file replaced), mode 0644, no temp file left, before the server's exec; a file
// that cannot be written ends the job with exit 203 and the line classified launch_failed.
func TestJobScriptWritesFiles(t *testing.T) {
	dir := t.TempDir()
	all := make([]byte, 256*3)
	for i := range all {
		all[i] = byte(i)
	}
	large := bytes.Repeat([]byte("SPECSWEEP-FILE-END\n'\"$x`\\\n"), 50000)[:MaxFileSize]
	files := []File{
		{Path: dir + "/adaptive.json", Data: []byte(`{"ema_alpha": 0.3}` + "\n")},
		{Path: dir + "/new/deeper dir/it's $HOME `id`.bin", Data: all},
		{Path: dir + "/empty", Data: nil},
		{Path: dir + "/large", Data: large},
	}
	if err := os.WriteFile(dir+"/adaptive.json", []byte("old content, replaced"), 0o600); err != nil {
		t.Fatal(err)
	}
	ran := dir + "/ran"
	l := Launch{Argv: []string{"/bin/sh", "-c", `for f in "$@"; do test -f "$f" || exit 9; done; touch "$0"`, ran}, Files: files}
	for _, f := range files {
		l.Argv = append(l.Argv, f.Path)
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	script, err := jobScript(SlurmOptions{}, l, "specsweep.s.p", "specsweep:sweep=s:point=p", "/o/%j.out")
	if err != nil {
		t.Fatal(err)
	}
	if len(script) > 2*MaxFileSize {
		t.Errorf("the script is %d bytes for %d of data", len(script), MaxFileSize+256*3+19)
	}
	cmd := exec.Command("/bin/sh", "-s")
	cmd.Stdin, cmd.Dir = bytes.NewReader(script), t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the script failed: %v\n%s", err, out)
	}
	for _, f := range files {
		got, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s: %d bytes differ from the %d written", f.Path, len(got), len(f.Data))
		}
		if fi, _ := os.Stat(f.Path); fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %o, want 644", f.Path, fi.Mode().Perm())
		}
		ents, _ := os.ReadDir(filepath.Dir(f.Path))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".specsweep-file") {
				t.Errorf("temp file left: %s", e.Name())
			}
		}
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the server did not run after the files were written: %v", err)
	}

	// A directory that is a regular file: the job ends before the server, 203, with the line.
	if err := os.WriteFile(dir+"/plain", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := dir + "/plain/a.json"
	l.Files = []File{{Path: bad, Data: []byte("{}")}}
	if script, err = jobScript(SlurmOptions{}, l, "specsweep.s.p", "specsweep:sweep=s:point=p", "/o/%j.out"); err != nil {
		t.Fatal(err)
	}
	os.Remove(ran)
	cmd = exec.Command("/bin/sh", "-s")
	cmd.Stdin = bytes.NewReader(script)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 203 || !strings.Contains(string(out), fileWriteFailed+bad) {
		t.Fatalf("want exit 203 and %q, got %v:\n%s", fileWriteFailed+bad, err, out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the server ran although a file could not be written")
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := classify(jobStateOf(scontrolFields("JobId=7 JobState=FAILED ExitCode=203:0"), time.Time{}), lines, false)
	if f == nil || f.Class != ClassLaunchFailed || !strings.Contains(strings.Join(f.Evidence, "\n"), bad) {
		t.Fatalf("want launch_failed with the path as evidence, got %+v", f)
	}
}
