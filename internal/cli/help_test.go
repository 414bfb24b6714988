package cli

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help/*.txt from the current help output")

// TestHelpGolden compares `specsweep --help` and every command's `--help` with the copies in
// testdata/help: the flags' names, types, defaults and texts, the usage line and the summary stay
// as they are unless the golden files change with them (go test -run TestHelpGolden -update-help).
func TestHelpGolden(t *testing.T) {
	cases := map[string][]string{"specsweep": {"--help"}}
	for _, c := range commands() {
		cases[c.name] = []string{c.name, "--help"}
	}
	dir := filepath.Join("testdata", "help")
	for name, args := range cases {
		out, errs, code := runMain(t, nil, args...)
		if code != ExitOK || errs != "" {
			t.Errorf("%q: code %d, stderr %q", args, code, errs)
			continue
		}
		path := filepath.Join(dir, name+".txt")
		if *updateHelp {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (go test -run TestHelpGolden -update-help writes it)", name, err)
			continue
		}
		if out != string(want) {
			t.Errorf("%q differs from %s:\ngot:\n%s\nwant:\n%s", args, path, out, want)
		}
	}
	// A golden file of a command that no longer exists is stale.
	files, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	for _, f := range files {
		if name := filepath.Base(f); cases[name[:len(name)-len(".txt")]] == nil {
			t.Errorf("%s: no such command", f)
		}
	}
}
