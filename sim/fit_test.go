package sim

import (
	"strings"
	"testing"
)

func TestFitOf(t *testing.T) {
	t.Parallel()
	base := []string{"--model-path", "/models/Qwen3.5-122B-A10B", "--port", "30000"}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		oom  string
	}{
		{"122B on one 96 GB GPU", append(base, "--tp-size", "1"), nil, "weights"},
		{"122B on four", append(base, "--tp-size", "4"), nil, ""},
		{"122B on four 40 GB GPUs", append(base, "--tp-size", "4"), map[string]string{"SGLANGSIM_GPU_MEM_GB": "40"}, "weights"},
		{"a fraction that leaves no pool", append(base, "--tp-size", "4", "--mem-fraction-static", "0.5"), nil, "kv"},
	} {
		f, err := FitOf(c.args, c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if f.Plan.OOM != c.oom {
			t.Errorf("%s: OOM %q, want %q (%+v)", c.name, f.Plan.OOM, c.oom, f.Plan)
		}
		if r := f.Reason(); (r == "") != (c.oom == "") || (r != "" && !strings.Contains(r, f.Profile)) {
			t.Errorf("%s: reason %q", c.name, r)
		}
	}
	if _, err := FitOf([]string{"--tp-size", "0", "--model-path", "m"}, nil); err == nil {
		t.Error("arguments the simulator refuses gave a plan")
	}
}

// BenchmarkFits: a plan's points asked one after another (validate and plan ask for every point of
// a sglangsim spec): FitOf reads the release's flag table each time, Fits once.
func BenchmarkFits(b *testing.B) {
	args := []string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4"}
	b.Run("FitOf", func(b *testing.B) {
		for b.Loop() {
			if _, err := FitOf(args, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Fits", func(b *testing.B) {
		fs := NewFits()
		for b.Loop() {
			if _, err := fs.Of(args, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
