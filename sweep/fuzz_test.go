package sweep_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

// FuzzParse: no input makes Parse (or Plan, on what Parse accepts) panic,
// every problem carries a position, and no spec Parse accepts holds a value outside a bound of
// sweep.Limits (docs/spec.md, "Limits").
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := sweep.Parse("f.yaml", data)
		if err != nil {
			list, ok := err.(sweep.ErrorList)
			if !ok || len(list) == 0 {
				t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.Line < 1 || e.Col < 1 || e.Msg == "" || e.File != "f.yaml" {
					t.Fatalf("bad error %+v", e)
				}
			}
			return
		}
		checkLimits(t, s)
		p := s.Plan()
		if len(p.Points)+len(p.Skipped) == 0 {
			t.Fatal("a valid spec planned nothing")
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatal(err)
		}
	})
}

// checkLimits fails t if s holds a value outside one of the bounds.
func checkLimits(t *testing.T, s *sweep.Spec) {
	t.Helper()
	for _, l := range sweep.Limits() {
		for _, v := range l.Values(s) {
			if v < l.Min || v > l.Max {
				t.Fatalf("accepted spec holds %s = %s, outside %s..%s", l.Key, l.Format(v), l.Format(l.Min), l.Format(l.Max))
			}
		}
	}
}
