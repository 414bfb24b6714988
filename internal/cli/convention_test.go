package cli

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOneOutputConvention: every command with machine output takes --format (table first where a
// person reads it), --json still works where it did (as --format json, not listed), and --help shows
// the flags as they are typed: one dash for a one-letter flag, a placeholder for the value, numbers
// unquoted, no zero default; each command's --help ends with examples; every command takes --db
// that reads a database; the top help lists version; a typo'd command or flag gets a suggestion.
func TestOneOutputConvention(t *testing.T) {
	machine := map[string]string{"plan": "table", "status": "table", "runs": "table", "sweeps": "table",
		"schedules": "table", "bench": "table", "export": "jsonl", "recommend": "table"}
	for _, c := range commands() {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.opts().flags(fs)
		f := fs.Lookup("format")
		if def, ok := machine[c.name]; ok && (f == nil || f.DefValue != def) {
			t.Errorf("%s: no --format defaulting to %s", c.name, def)
		}
		if fs.Lookup("json") != nil && f == nil {
			t.Errorf("%s: --json without --format", c.name)
		}
		help, _, code := runMain(t, nil, c.name, "--help")
		if code != ExitOK {
			t.Errorf("%s --help: exit %d", c.name, code)
		}
		if strings.Contains(help, "  --json") && f != nil {
			t.Errorf("%s --help lists --json beside --format:\n%s", c.name, help)
		}
		for _, bad := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^  --[a-z]\b`),              // a one-letter flag is typed -o
			regexp.MustCompile(`\(default "?(0|0s|false)"?\)`),  // a zero default says nothing
			regexp.MustCompile(`\(default "[0-9][0-9.a-z]*"\)`), // a number is not a string
		} {
			if m := bad.FindString(help); m != "" {
				t.Errorf("%s --help shows %q:\n%s", c.name, m, help)
			}
		}
		ex := strings.Index(help, "\nExamples:\n")
		if ex < 0 || !strings.Contains(help[ex:], "specsweep "+c.name) {
			t.Errorf("%s --help has no examples of itself:\n%s", c.name, help)
		}
	}
	help, _, _ := runMain(t, nil, "report", "--help")
	if !strings.Contains(help, "\n  -o DIR ") {
		t.Errorf("report --help does not show -o DIR:\n%s", help)
	}
	help, _, _ = runMain(t, nil, "runs", "--help")
	if !strings.Contains(help, "--limit N ") || strings.Contains(help, "(default \"0\")") {
		t.Errorf("runs --help: --limit:\n%s", help)
	}
	help, _, _ = runMain(t, nil, "bench", "--help")
	if !strings.Contains(help, "(default 64)") || !strings.Contains(help, "(default 1m0s)") {
		t.Errorf("bench --help: numbers and durations unquoted:\n%s", help)
	}
	top, _, _ := runMain(t, nil, "--help")
	if !strings.Contains(top, "\n  version ") {
		t.Errorf("the top help does not list version:\n%s", top)
	}

	// --json and --format json print the same.
	spec := exampleCopy(t, "quickstart.yaml")
	// submit needs an absolute command (the daemon has no spec folder): the copy's stand-in.
	data, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(filepath.Dir(filepath.Dir(spec)), "bin", "sglangsim")
	if err := os.WriteFile(spec, []byte(strings.Replace(string(data), "../bin/sglangsim", abs, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	a, _, c1 := runMain(t, nil, "plan", "--json", spec)
	b, _, c2 := runMain(t, nil, "plan", "--format", "json", spec)
	if c1 != 0 || c2 != 0 || a != b || !strings.HasPrefix(a, "{") {
		t.Errorf("plan --json (exit %d) and --format json (exit %d) differ:\n%s\n%s", c1, c2, a, b)
	}
	db := filepath.Join(t.TempDir(), "empty.db")
	if _, errs, code := runMain(t, nil, "submit", "--db", db, spec); code != 0 {
		t.Fatalf("submit: %s", errs)
	}
	a, _, c1 = runMain(t, nil, "status", "--db", db, "--json")
	b, _, c2 = runMain(t, nil, "status", "--db", db, "--format", "json")
	if c1 != 0 || c2 != 0 || a != b || !strings.HasPrefix(a, "[") {
		t.Errorf("status --json (exit %d) and --format json (exit %d) differ:\n%s\n%s", c1, c2, a, b)
	}
	if _, errs, code := runMain(t, nil, "status", "--db", db, "--json", "--format", "csv"); code != ExitUsage || !strings.Contains(errs, "--json means --format json") {
		t.Errorf("status --json --format csv: exit %d\n%s", code, errs)
	}
	if _, errs, code := runMain(t, nil, "sweeps", "--db", db, "--format", "jsn"); code != ExitUsage || !strings.Contains(errs, "(did you mean json?)") {
		t.Errorf("sweeps --format jsn: exit %d\n%s", code, errs)
	}

	// doctor takes --db as every command that reads a database does.
	if _, errs, code := runMain(t, nil, "doctor", "--db", db, filepath.Join(t.TempDir(), "missing.yaml")); code == ExitUsage || strings.Contains(errs, "not defined") {
		t.Errorf("doctor --db: exit %d\n%s", code, errs)
	}
	// A typo'd command or flag: the nearest one.
	if _, errs, code := runMain(t, nil, "stauts"); code != ExitUsage || !strings.Contains(errs, `unknown command "stauts" (did you mean status?)`) {
		t.Errorf("stauts: exit %d\n%s", code, errs)
	}
	if _, errs, code := runMain(t, nil, "report", "--fromat", "md", "3"); code != ExitUsage || !strings.Contains(errs, "(did you mean --format?)") {
		t.Errorf("report --fromat: exit %d\n%s", code, errs)
	}
	if _, errs, code := runMain(t, nil, "frobnicate"); code != ExitUsage || strings.Contains(errs, "did you mean") {
		t.Errorf("frobnicate: exit %d, a suggestion for a word near nothing:\n%s", code, errs)
	}
	if out, _, code := runMain(t, nil, "version"); code != 0 || !strings.HasPrefix(out, "specsweep ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if out, _, code := runMain(t, nil, "--version"); code != 0 || !strings.HasPrefix(out, "specsweep ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}
