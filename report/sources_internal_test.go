package report

import (
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

// mixedSweep is a sweep of a baseline and two EAGLE-3 points measured on a code and a chat set at
// c=1, whose winners differ by set: s=5 on code, s=1 on chat; the mix (three parts code) is s=5's.
func mixedSweep() *Sweep {
	code, chat := sweep.SourceKey{Dataset: "code"}, sweep.SourceKey{Dataset: "chat"}
	s := &Sweep{ID: 1, Name: "mixed", State: "done", Levels: []int{1}, TPs: []int{1}, Repeats: 1,
		Sources: []sweep.Source{{Dataset: "code", Weight: 0.75}, {Dataset: "chat", Weight: 0.25}}}
	point := func(id string, steps int, tokS map[sweep.SourceKey]float64, accept map[sweep.SourceKey]float64) *Point {
		p := &Point{ID: id, State: "done", Config: Config{Method: "eagle3", NumSteps: steps, TopK: 1, NumDraftTokens: steps + 1, TP: 1},
			Cells: map[int]*Cell{}, BySource: map[sweep.SourceKey]map[int]*Cell{}}
		if steps == 0 {
			p.Config = Config{Method: "baseline", TP: 1, Baseline: true}
		}
		m := sweep.NewMixer(s.Sources)
		for k, v := range tokS {
			var r sweep.RepeatRun
			r.OK = true
			tv := v
			r.Figures[sweep.OutputTokS] = &tv
			if a, ok := accept[k]; ok {
				av := a
				r.Figures[sweep.AcceptLength] = &av
			}
			m.Add(1, 1, k, r)
			reps := &sweep.Repeats{}
			reps.Add(r)
			p.BySource[k] = map[int]*Cell{1: newCell(p, 1, reps)}
		}
		p.Cells[1] = newCell(p, 1, m.Repeats(1))
		return p
	}
	s.Points = []*Point{
		point("b", 0, map[sweep.SourceKey]float64{code: 100, chat: 100}, nil),
		point("s1", 1, map[sweep.SourceKey]float64{code: 150, chat: 140}, map[sweep.SourceKey]float64{code: 1.9, chat: 1.6}),
		point("s5", 5, map[sweep.SourceKey]float64{code: 300, chat: 110}, map[sweep.SourceKey]float64{code: 4.5, chat: 1.7}),
	}
	return s
}

// TestSourcesTables: each set's own winner beside the weighted one, the acceptance matrix of the
// mix's fastest speculative configuration, and the summary naming every winner where they differ.
func TestSourcesTables(t *testing.T) {
	s := mixedSweep()
	if !s.Mixed() {
		t.Fatal("two sources are not mixed")
	}
	tb := sourcesTable(s)
	var rows []string
	for _, r := range tb.Rows {
		rows = append(rows, r[0]+" "+r[4]+" "+r[8])
	}
	if got, want := strings.Join(rows, "; "), "code eagle3 s=5 k=1 n=6 same; chat eagle3 s=1 k=1 n=2 eagle3 s=5 k=1 n=6"; got != want {
		t.Errorf("rows %q, want %q", got, want)
	}
	acc := acceptTables(s)
	if len(acc) != 1 || len(acc[0].Rows) != 2 || acc[0].Rows[0][1] != "4.50" || acc[0].Rows[1][1] != "1.70" ||
		!strings.Contains(acc[0].Note, "c=1 eagle3 s=5 k=1 n=6") {
		t.Errorf("accept tables %+v", acc)
	}
	sum := strings.Join(summary(s), " ")
	for _, want := range []string{"Measured on 2 prompt sources weighed as the traffic (code 75%, chat 25%)",
		"At tp 1, c=1 the winner differs by prompt source (code: eagle3 s=5 k=1 n=6; chat: eagle3 s=1 k=1 n=2); weighted: eagle3 s=5 k=1 n=6."} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if strings.Contains(sum, "random prompts") {
		t.Errorf("a sweep on prompt sets says it ran on random prompts:\n%s", sum)
	}
	// The weighted answer is s=5: 1/(0.75/300 + 0.25/110) = 209.5 tok/s, s=1's 147.3.
	if b := BestPerLevel(s); len(b) != 1 || b[0].Best.Point.ID != "s5" {
		t.Errorf("weighted best %+v", b)
	}
}

// TestRandomPromptsSaySo: a sweep on random prompts says that acceptance on random tokens is not a
// traffic's, and shows no per-source tables.
func TestRandomPromptsSaySo(t *testing.T) {
	s := &Sweep{Sources: []sweep.Source{{InputTokens: 512, Weight: 1}}}
	if s.Mixed() || len(sourcesTable(s).Rows) != 0 || acceptTables(s) != nil {
		t.Error("one random source is shown per source")
	}
	if got := strings.Join(summary(s), " "); !strings.Contains(got, "acceptance on random tokens is not a traffic's") {
		t.Errorf("summary:\n%s", got)
	}
}
