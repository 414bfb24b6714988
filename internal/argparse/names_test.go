package argparse

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// release is what the tests read of a sim/flags table: each option's names, per release.
type release struct {
	Release string `json:"release"`
	Flags   []struct {
		Names []string `json:"names"`
	} `json:"flags"`
}

func releases(t *testing.T) []release {
	t.Helper()
	files, err := filepath.Glob("../../sim/flags/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no release tables in sim/flags: %v", err)
	}
	var out []release
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r release
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, r)
	}
	return out
}

// Every option declared under several names in a release is one group of aliasGroups, and every
// group is such an option somewhere.
func TestAliasGroups(t *testing.T) {
	used := map[string]bool{}
	for _, r := range releases(t) {
		for _, f := range r.Flags {
			if len(f.Names) < 2 {
				continue
			}
			g := aliasesOf(f.Names[0])
			for _, n := range f.Names {
				if !slices.Contains(g, n) {
					t.Errorf("%s: %v are one option, aliasGroups has %v", r.Release, f.Names, g)
				}
			}
			used[g[0]] = true
		}
	}
	for line := range strings.Lines(aliasGroups) {
		if g := strings.Fields(line); len(g) > 0 && !used[g[0]] {
			t.Errorf("aliasGroups: %v is no option of any release", g)
		}
	}
}

// Every abbreviation a modeled release expands to an option specsweep sets is one MayName takes
// for it (the table may be shorter, never longer).
func TestShortestAbbrev(t *testing.T) {
	set := []string{TPSize, SpeculativeAlgorithm, SpeculativeNumSteps, SpeculativeEagleTopK, SpeculativeNumDraftTokens,
		SpeculativeDFlashBlockSize, SpeculativeDSparkBlockSize, SpeculativeNgramMaxBFSBreadth}
	for _, r := range releases(t) {
		var opts []string
		for _, f := range r.Flags {
			opts = append(opts, f.Names...)
		}
		for _, o := range set {
			for _, n := range aliasesOf(o) {
				if !slices.Contains(opts, n) {
					continue
				}
				for l := 3; l <= len(n); l++ {
					p := n[:l]
					matches := 0
					for _, x := range opts {
						if strings.HasPrefix(x, p) {
							matches++
						}
					}
					if (matches == 1 || p == n) && !MayName(p, o) {
						t.Errorf("%s expands %s to %s; MayName(%q, %q) is false", r.Release, p, n, p, o)
					}
				}
			}
		}
	}
}

func TestAliases(t *testing.T) {
	argv := []string{"/x", "--tensor-parallel-size", "2", "--tp", "4", "--tensor-p=8"}
	if v, ok := Last(argv, TPSize); !ok || v != "8" {
		t.Errorf("Last(%v, %s) = %q %v, want 8 (an alias's abbreviation)", argv, TPSize, v, ok)
	}
	if v, ok := Last(argv[:3], TPSize); !ok || v != "2" {
		t.Errorf("Last(%v, %s) = %q %v, want 2 (the alias)", argv[:3], TPSize, v, ok)
	}
	if got := Set(argv[:3], "1", TPSize); strings.Join(got, " ") != "/x --tensor-parallel-size 1" {
		t.Errorf("Set over an alias = %v", got)
	}
	for tok, want := range map[string]bool{"--tp": true, "--te": true, "--tensor-parallel-size": true, "--t": false,
		"--speculative-df": true, "--speculative-d": false, "--speculative-e": true, "--speculative-": false} {
		if got := MayName(tok, TPSize, SpeculativeDFlashBlockSize, SpeculativeEagleTopK); got != want {
			t.Errorf("MayName(%q) = %v, want %v", tok, got, want)
		}
	}
}

func TestOption(t *testing.T) {
	for tok, want := range map[string]string{"--port": "--port", "--po": "--port", "--tp": "--tp-size",
		"--tensor-parallel-size": "--tp-size", "--model": "--model-path", "--ep": "--ep-size",
		"--speculative-algo": "--speculative-algorithm", "--p": "", "--no-such-option": "", "-p": "", "--": ""} {
		if got := Option(tok); got != want {
			t.Errorf("Option(%q) = %q, want %q", tok, got, want)
		}
	}
}

func TestRepeats(t *testing.T) {
	argv := []string{"-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3", "--port", "1",
		"--tp", "2", "--speculative-algo=NGRAM", "--tensor-parallel-size", "4", "--enable-metrics",
		"--", "--port", "3"}
	got := Known().Repeats(argv)
	want := []Repeat{{SpeculativeAlgorithm, []int{2, 8}}, {TPSize, []int{6, 9}}}
	if len(got) != len(want) {
		t.Fatalf("Repeats = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Option != want[i].Option || !slices.Equal(got[i].At, want[i].At) {
			t.Errorf("Repeats[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if r := Known().Repeats([]string{"--port", "1", "--host", "h"}); len(r) != 0 {
		t.Errorf("Repeats of distinct options = %v", r)
	}
}
