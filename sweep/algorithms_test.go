package sweep_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

// These tests use only what Plan gave before algorithms were told apart
// (argv, the three parameters, skipped), so they also run against that code.

// tail returns the argv after the method's args, without --tp-size.
func tail(t *testing.T, pt sweep.Point, methodArgs int) []string {
	t.Helper()
	const fixed = 5 // /usr/bin/python3 -m sglang.launch_server --model-path /m
	end := len(pt.Argv) - 2
	if end < fixed+methodArgs || pt.Argv[end] != "--tp-size" {
		t.Fatalf("argv %q", pt.Argv)
	}
	return pt.Argv[fixed+methodArgs : end]
}

func intOr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func triple(pt sweep.Point) [3]int {
	return [3]int{intOr(pt.NumSteps), intOr(pt.TopK), intOr(pt.NumDraftTokens)}
}

func TestDFlashBlockSize(t *testing.T) {
	// Issue 12: DFLASH points with 8 or 16 draft tokens were skipped as if
	// SGLang would run num_steps+1 = 2. The block size is DFLASH's knob.
	p := mustParse(t, spec("  d: [--speculative-algorithm, DFLASH, --speculative-draft-model-path, /d]",
		"  method: [d]\n  num_steps: [1, 3]\n  topk: [1, 4]\n  num_draft_tokens: [16, 8]")).Plan()
	if len(p.Points) != 2 || len(p.Skipped) != 0 {
		t.Fatalf("points %q, skipped %+v", labels(p), p.Skipped)
	}
	for i, want := range []int{8, 16} {
		pt := p.Points[i]
		if got := tail(t, pt, 4); !slices.Equal(got, []string{"--speculative-dflash-block-size", itoa(want)}) {
			t.Errorf("point %d sets %q, want only the block size %d", i, got, want)
		}
		if got := triple(pt); got != [3]int{1, 1, want} {
			t.Errorf("point %d (steps, topk, draft) = %v, want 1, 1, %d", i, got, want)
		}
	}
}

func TestDFlashNeedsNoStepsOrTopK(t *testing.T) {
	p := mustParse(t, spec("  d: [--speculative-algorithm, DFLASH]", "  method: [d]\n  num_draft_tokens: [16]")).Plan()
	if len(p.Points) != 1 || p.Points[0].NumDraftTokens == nil || *p.Points[0].NumDraftTokens != 16 {
		t.Fatalf("points %q", labels(p))
	}
}

func TestNgramOwnKnobs(t *testing.T) {
	// Issue 12: NGRAM points were labelled topk=1 (and skipped by the EAGLE
	// rule) where SGLang runs its BFS breadth, 10 unless given, as topk.
	p := mustParse(t, spec("  n: [--speculative-algorithm, NGRAM]",
		"  method: [n]\n  num_steps: [3]\n  topk: [1, 10]\n  num_draft_tokens: [auto, 8]")).Plan()
	if len(p.Skipped) != 0 {
		t.Errorf("skipped %+v", p.Skipped)
	}
	want := []struct {
		tail   []string
		triple [3]int
	}{
		{[]string{"--speculative-ngram-max-bfs-breadth", "1", "--speculative-num-draft-tokens", "8"}, [3]int{-1, 1, 8}},
		{[]string{"--speculative-ngram-max-bfs-breadth", "1"}, [3]int{-1, 1, 12}},
		{[]string{"--speculative-ngram-max-bfs-breadth", "10", "--speculative-num-draft-tokens", "8"}, [3]int{-1, 10, 8}},
		{[]string{"--speculative-ngram-max-bfs-breadth", "10"}, [3]int{-1, 10, 12}},
	}
	if len(p.Points) != len(want) {
		t.Fatalf("points %q", labels(p))
	}
	for i, w := range want {
		if got := tail(t, p.Points[i], 2); !slices.Equal(got, w.tail) {
			t.Errorf("point %d sets %q, want %q", i, got, w.tail)
		}
		if got := triple(p.Points[i]); got != w.triple {
			t.Errorf("point %d (steps, topk, draft) = %v, want %v", i, got, w.triple)
		}
	}
}

func TestNgramDefaults(t *testing.T) {
	p := mustParse(t, spec("  n: [--speculative-algorithm, NGRAM]", "  method: [n]")).Plan()
	if len(p.Points) != 1 {
		t.Fatalf("points %q", labels(p))
	}
	if got := triple(p.Points[0]); got != [3]int{-1, 10, 12} || len(tail(t, p.Points[0], 2)) != 0 {
		t.Errorf("(steps, topk, draft) = %v, argv %q; want SGLang's defaults 10 and 12, nothing passed", got, p.Points[0].Argv)
	}
}

func TestPluginPassedAsWritten(t *testing.T) {
	// An algorithm specsweep does not know: no EAGLE forcing, flags as written.
	p := mustParse(t, spec("  tree: {args: [--speculative-algorithm, MYTREE], env: {TREE: '1'}}",
		"  method: [tree]\n  num_steps: [3]\n  topk: [1]\n  num_draft_tokens: [8, auto]")).Plan()
	if len(p.Points) != 2 || len(p.Skipped) != 0 {
		t.Fatalf("points %q, skipped %+v", labels(p), p.Skipped)
	}
	if got := tail(t, p.Points[0], 2); !slices.Equal(got, []string{"--speculative-num-steps", "3", "--speculative-eagle-topk", "1"}) {
		t.Errorf("auto point sets %q", got)
	}
	if got := tail(t, p.Points[1], 2); !slices.Equal(got, []string{"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8"}) {
		t.Errorf("point sets %q", got)
	}
	if got := triple(p.Points[1]); got != [3]int{3, 1, 8} {
		t.Errorf("(steps, topk, draft) = %v, want as written", got)
	}
}

func TestDSparkGamma(t *testing.T) {
	p := mustParse(t, spec("  ds: [--speculative-algorithm, DSPARK]", "  method: [ds]\n  num_steps: [1]\n  topk: [1]\n  num_draft_tokens: [1, 6]")).Plan()
	if len(p.Points) != 1 || len(p.Skipped) != 1 {
		t.Fatalf("points %q, skipped %+v", labels(p), p.Skipped)
	}
	if got := tail(t, p.Points[0], 2); !slices.Equal(got, []string{"--speculative-dspark-block-size", "5"}) {
		t.Errorf("point sets %q, want gamma 5", got)
	}
	if got := triple(p.Points[0]); got != [3]int{1, 1, 6} {
		t.Errorf("(steps, topk, draft) = %v", got)
	}
	if r := p.Skipped[0].Reason; p.Skipped[0].NumDraftTokens != "1" || !strings.Contains(r, "gamma 0") {
		t.Errorf("skipped %+v", p.Skipped[0])
	}
}

func TestEagleFamilyUnchanged(t *testing.T) {
	// Stored sweeps resume by point id: the EAGLE family's ids (hashes of
	// argv, env and tp) and labels must not move.
	want := map[string]string{
		"ff01459e5d6c": "baseline tp=4",
		"88b47dfd14c1": "eagle3 s=1 k=1 n=2 tp=4",
		"949981ff2693": "eagle3 s=2 k=1 n=3 tp=4",
		"542c42b43a00": "eagle3 s=3 k=1 n=4 tp=4",
		"1e6d0ae9ee7f": "eagle3 s=4 k=1 n=5 tp=4",
		"59f4d9f8f18e": "eagle3 s=5 k=1 n=6 tp=4",
		"930eee81cde0": "eagle3 s=10 k=1 n=11 tp=4",
		"2054de376d8a": "autoregressive tp=1",
		"f255a7677ea8": "autoregressive tp=2",
		"341a47898b95": "autoregressive tp=8",
		"d35b2350c558": "nextn s=3 k=1 n=4 tp=1",
		"f0c6687e0bca": "nextn s=3 k=4 n=8 tp=1",
		"5aa13f3e72d4": "nextn s=5 k=1 n=6 tp=1",
		"651ea963bacc": "nextn s=5 k=4 n=8 tp=1",
		"f10f043e3eaa": "nextn s=5 k=4 n=16 tp=1",
		"77afc094824f": "ddtree s=3 k=1 n=4 tp=1",
		"b546bcbd5e5a": "ddtree s=3 k=4 n=8 tp=1",
		"7de7de34fa43": "ddtree s=5 k=1 n=6 tp=1",
		"d3c40ba09f84": "ddtree s=5 k=4 n=8 tp=1",
		"f49e1cf44421": "ddtree s=5 k=4 n=16 tp=1",
		"6be0d7983b64": "nextn s=3 k=1 n=4 tp=2",
		"55c3c016fa4d": "nextn s=3 k=4 n=8 tp=2",
		"6db3fd9e9f94": "nextn s=5 k=1 n=6 tp=2",
		"9d9ceec0bdfd": "nextn s=5 k=4 n=8 tp=2",
		"a933de28f412": "nextn s=5 k=4 n=16 tp=2",
		"50668018a3fa": "ddtree s=3 k=1 n=4 tp=2",
		"60622a86b662": "ddtree s=3 k=4 n=8 tp=2",
		"94d58236db86": "ddtree s=5 k=1 n=6 tp=2",
		"d47788234a03": "ddtree s=5 k=4 n=8 tp=2",
		"8fe2402107bd": "ddtree s=5 k=4 n=16 tp=2",
		"c1d077f902dc": "nextn s=3 k=1 n=4 tp=8",
		"2efd7bd1c5dd": "nextn s=3 k=4 n=8 tp=8",
		"f86e6fb7ae06": "nextn s=5 k=1 n=6 tp=8",
		"585357ab4779": "nextn s=5 k=4 n=8 tp=8",
		"42a18965b5e2": "nextn s=5 k=4 n=16 tp=8",
		"ff42655fba6a": "ddtree s=3 k=1 n=4 tp=8",
		"de9f1daaa145": "ddtree s=3 k=4 n=8 tp=8",
		"3eae4fd59932": "ddtree s=5 k=1 n=6 tp=8",
		"ce8fc0f1f962": "ddtree s=5 k=4 n=8 tp=8",
		"06bb1867fd55": "ddtree s=5 k=4 n=16 tp=8",
	}
	got := map[string]string{}
	for _, f := range []string{"testdata/eagle3-steps.good.yaml", "testdata/two-hosts-methods.good.yaml"} {
		s, err := sweep.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, pt := range s.Plan().Points {
			got[pt.ID] = pt.Label()
		}
	}
	for id, l := range want {
		if got[id] != l {
			t.Errorf("point %s: %q, want %q", id, got[id], l)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d points, want %d", len(got), len(want))
	}
}
