package sweep_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/sweep"
)

// Issue 25: a method naming the algorithm twice was planned by its first occurrence (EAGLE3:
// steps, topk and draft tokens expanded) while SGLang's argparse runs the last (NGRAM).
func TestRepeatedAlgorithmPlansAsLast(t *testing.T) {
	matrix := "  method: [m]\n  num_steps: [3]\n  topk: [1, 4]\n  num_draft_tokens: [8]"
	twice := mustParse(t, spec("  m: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /d, --speculative-algorithm, NGRAM]", matrix))
	once := mustParse(t, spec("  m: [--speculative-draft-model-path, /d, --speculative-algorithm, NGRAM]", matrix))
	got, want := twice.Plan(), once.Plan()
	if !slices.Equal(labels(got), labels(want)) {
		t.Fatalf("repeated algorithm plans as %q, want NGRAM's %q", labels(got), labels(want))
	}
	if len(got.Skipped) != len(want.Skipped) {
		t.Errorf("skipped %+v, want %+v", got.Skipped, want.Skipped)
	}
	for i, pt := range got.Points {
		if pt.Algorithm != "NGRAM" || sweep.ArgvAlgorithm(pt.Argv) != "NGRAM" {
			t.Errorf("point %d: algorithm %q, argv reads as %q, want NGRAM", i, pt.Algorithm, sweep.ArgvAlgorithm(pt.Argv))
		}
		// The point passes what the NGRAM method passes, after the method's own args.
		if g, w := pt.Argv[len(pt.Argv)-6:], want.Points[i].Argv[len(want.Points[i].Argv)-6:]; !slices.Equal(g, w) {
			t.Errorf("point %d ends %q, want %q", i, g, w)
		}
	}
}

// The planner reads the algorithm as internal/argparse does (the reader hostctl uses for the
// port, the host and the tp): last occurrence, "=" form, abbreviations, "--" ends the options.
func TestAlgorithmReadAsArgparse(t *testing.T) {
	for _, argv := range [][]string{
		{"--speculative-algo", "NGRAM"},
		{"--speculative-al=NGRAM"},
		{"--speculative-algorithm", "EAGLE3", "--speculative-algo", "NGRAM"},
		{"--speculative-algorithm=EAGLE3", "--speculative-algorithm", "DFLASH"},
		{"--speculative-a", "EAGLE"}, // ambiguous in later releases
		{"--speculative-algorithm", "EAGLE", "--", "--speculative-algorithm", "NGRAM"},
		{"--model-path", "/m"},
	} {
		want, _ := argparse.Last(argv, argparse.SpeculativeAlgorithm)
		if got := (sweep.Method{Args: argv}).Algorithm(); got != want {
			t.Errorf("Algorithm(%q) = %q, argparse reads %q", argv, got, want)
		}
		if got := sweep.ArgvAlgorithm(argv); got != want {
			t.Errorf("ArgvAlgorithm(%q) = %q, argparse reads %q", argv, got, want)
		}
	}
	p := mustParse(t, spec("  n: [--speculative-algo, NGRAM]", "  method: [n]\n  topk: [4]")).Plan()
	if l := labels(p); len(l) != 1 || !strings.HasPrefix(l[0], "n k=4") {
		t.Errorf("--speculative-algo NGRAM plans as %q, want an NGRAM point", l)
	}
}

func TestRepeatedFlagWarning(t *testing.T) {
	src := spec(`  m: [--speculative-algorithm, EAGLE3, --speculative-algorithm, NGRAM]
  s: [--speculative-algorithm, NGRAM, --mem-fraction-static, "0.7"]
  b:`, "  method: [b, m, s]\n  topk: [4]")
	src = strings.Replace(src, "args: [--model-path, /m]", "args: [--model-path, /m, --mem-fraction-static=0.8, --model, /n]", 1)
	s := mustParse(t, src)
	var got []string
	for _, w := range s.Warnings {
		got = append(got, w.Error())
	}
	want := []string{
		`spec.yaml:8:10: warning: server.args[0]: --model-path is given twice; SGLang uses the last occurrence, server.args[3] (line 8): --model /n`,
		`spec.yaml:8:28: warning: server.args[2]: --mem-fraction-static is given twice; SGLang uses the last occurrence, methods.s[2] (line 12): --mem-fraction-static 0.7`,
		`spec.yaml:11:7: warning: methods.m[0]: --speculative-algorithm is given twice; SGLang uses the last occurrence, methods.m[2] (line 11): --speculative-algorithm NGRAM`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if clean := mustParse(t, spec("  b:\n  n: [--speculative-algorithm, NGRAM]", "  method: [b, n]\n  topk: [4]")); len(clean.Warnings) != 0 {
		t.Errorf("warnings on a spec without repeats: %v", clean.Warnings)
	}
}

// BenchmarkParseManyArgs parses a spec near the size limit whose args are all options (the
// repeat check reads each token once): go test -run '^$' -bench ParseManyArgs ./sweep/
func BenchmarkParseManyArgs(b *testing.B) {
	var methods strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&methods, "  m%d: [--enable-metrics, --mem-frac, \"0.5\"]\n", i)
	}
	src := spec(methods.String()+"  b:", "  method: [b]")
	src = strings.Replace(src, "args: [--model-path, /m]", "args: [--model-path, /m"+strings.Repeat(", --enable-metrics", 1000)+"]", 1)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := sweep.Parse("spec.yaml", []byte(src)); err != nil {
			b.Fatal(err)
		}
	}
}
