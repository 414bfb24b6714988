package sim

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseProfile: no profile file makes the loader panic; what it refuses is a ProfileError
// naming the file, and what it accepts validates and builds a model.
func FuzzParseProfile(f *testing.F) {
	files, _ := filepath.Glob("testdata/profiles/*.json")
	bad, _ := filepath.Glob("testdata/profiles/bad/*.json")
	for _, file := range append(files, bad...) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseProfile("f.json", data)
		if err != nil {
			var pe *ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ProfileError", err, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted a profile that does not validate: %v", err)
		}
		a, _, err := ParseArgs([]string{"--model-path", "/m", "--speculative-algorithm", "EAGLE3",
			"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
			"--tp-size", "1"})
		if err != nil {
			t.Fatal(err)
		}
		m := NewModel(a, p, 96)
		if st := m.StepTime(4, 1000); st < 0 {
			t.Fatalf("negative step time %v", st)
		}
		// Content and context keep every acceptance a probability, in the classes' order.
		for _, n := range []int{1, p.CtxKnee, p.CtxKnee + 1, p.CtxFull, 4 * p.CtxFull} {
			code, neutral, prose := m.ExpectedAcceptFor(ContentCode, n, 0), m.ExpectedAcceptFor(ContentNeutral, n, 0), m.ExpectedAcceptFor(ContentProse, n, 1)
			if !(code >= neutral && neutral >= prose && prose >= 1 && code <= float64(m.MaxAccept())) {
				t.Fatalf("prompt %d: accept length code %v, neutral %v, prose at T=1 %v", n, code, neutral, prose)
			}
		}
	})
}
