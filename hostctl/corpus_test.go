package hostctl

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestClassifyRealLogs classifies the corpus of real SGLang failure logs in testdata/failures/CLASS/
// (journal excerpts as SGLang printed them, from its source and its issue tracker; each file's first
// line says where it comes from): every file must come out as its directory's class. The state is
// what systemd reports for such an ending: exit status 2 for argparse, SIGKILL after SGLang's
// SIGQUIT handler (kill_process_tree kills the whole tree, itself included), else exit status 1;
// crash_during_load files were ready. A file may name lines its evidence must keep ("# evidence: ").
func TestClassifyRealLogs(t *testing.T) {
	dead := func(code, status int, result string) State {
		return State{ActiveState: "failed", SubState: "failed", Result: result, ExecMainCode: code, ExecMainStatus: status}
	}
	dirs, err := os.ReadDir("testdata/failures")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		class := Class(d.Name())
		files, _ := filepath.Glob(filepath.Join("testdata/failures", d.Name(), "*.log"))
		if len(files) == 0 {
			t.Errorf("class %s has no real log", class)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			if !strings.HasPrefix(text, "# source: ") {
				t.Errorf("%s: the first line must say where the log comes from", f)
			}
			lines := strings.Split(strings.TrimRight(text, "\n"), "\n")[1:]
			// "# evidence: TEXT" lines after the source: a line of the kept evidence must contain
			// each TEXT (the line that shows what happened).
			var wantEvidence []string
			for len(lines) > 0 && strings.HasPrefix(lines[0], "# evidence: ") {
				wantEvidence = append(wantEvidence, strings.TrimPrefix(lines[0], "# evidence: "))
				lines = lines[1:]
			}
			st := dead(CodeExited, 1, "exit-code")
			switch {
			case strings.HasPrefix(filepath.Base(f), "argparse-"):
				st = dead(CodeExited, 2, "exit-code")
			case strings.Contains(strings.ToLower(text), "sigquit"):
				st = dead(CodeKilled, 9, "signal")
			}
			got := classify(st, lines, class == ClassCrashDuringLoad)
			n++
			if got == nil || got.Class != class {
				t.Errorf("%s: got %v, want %s", f, got, class)
				continue
			}
			if len(got.Evidence) == 0 {
				t.Errorf("%s: no evidence kept", f)
			}
			for _, w := range wantEvidence {
				if !slices.ContainsFunc(got.Evidence, func(l string) bool { return strings.Contains(l, w) }) {
					t.Errorf("%s: the evidence lacks %q:\n%s", f, w, strings.Join(got.Evidence, "\n"))
				}
			}
		}
	}
	t.Logf("%d real logs classified", n)
}
