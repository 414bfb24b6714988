package hostctl

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/sweep"
)

func TestFitChecks(t *testing.T) {
	t.Parallel()
	const gpu80 = 81920 // MiB, an 80 GB GPU as nvidia-smi prints it
	for _, c := range []struct {
		name    string
		weights int64
		f       Fit
		status  CheckStatus
		detail  string
	}{
		{"244 GB at tp 1 and 4", 244e9, Fit{TPs: []int{1, 4}}, CheckFail, "tp 1: 244.0 GB of weights per GPU do not fit a 85.9 GB GPU"},
		{"244 GB at tp 4 only", 244e9, Fit{TPs: []int{4}}, CheckOK, "fit at tp 4"},
		{"80 GB at tp 1: above the default fraction", 80e9, Fit{TPs: []int{1}}, CheckWarn, "default mem_fraction_static (0.88"},
		{"70 GB at tp 1 under an explicit 0.5", 70e9, Fit{TPs: []int{1}, MemFraction: 0.5}, CheckFail, "--mem-fraction-static 0.50"},
		{"54 GB at tp 1 and 2", 54e9, Fit{TPs: []int{1, 2}}, CheckOK, "fit at tp 1, 2"},
	} {
		var got []Check
		fitChecks(c.weights, gpu80, c.f, func(name string, st CheckStatus, format string, a ...any) {
			got = append(got, Check{Name: name, Status: st, Detail: fmt.Sprintf(format, a...)})
		})
		if len(got) != 1 || got[0].Status != c.status || !strings.Contains(got[0].Detail, c.detail) {
			t.Errorf("%s: %+v, want %s containing %q", c.name, got, c.status, c.detail)
		}
	}
}

func TestParseWeights(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]int64{
		`{"metadata": {"total_size": 244000000000}, "weight_map": {}}`: 244e9,
		`{"metadata": {"total_size": 1.5e10}}`:                         15e9,
		"@@\n1000\n2000\n":                                             3000,
		"none":                                                         0,
		"@@\n":                                                         0,
		"{not json":                                                    0,
	} {
		if got := parseWeights(out); got != want {
			t.Errorf("parseWeights(%q) = %d, want %d", out, got, want)
		}
	}
}

// TestDoctorWeighsTheModel: on a real host with simulated 80 GB GPUs and a model folder whose
// safetensors index says 244 GB, doctor fails tp 1 and passes tp 4, before any GPU time is spent.
func TestDoctorWeighsTheModel(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if testing.Short() {
		t.Skip("boots a test host")
	}
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{GPUs: 4})[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if out, err := h.Run(ctx, `mkdir -p "/models/big one" && printf '{"metadata": {"total_size": 244000000000}, "weight_map": {}}' > "/models/big one/model.safetensors.index.json"`); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	o := rootSSH(h)
	check := func(tps []int) Check {
		t.Helper()
		d, err := Open(ctx, sweep.Host{Name: "h", Driver: sweep.DriverSSH, Address: h.Addr, Unit: "sglang.service", GPUs: 4},
			Options{Sweep: "s", Port: 30000, ssh: &o, Fit: Fit{ModelPath: "/models/big one", TPs: tps}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for _, c := range d.Doctor(ctx) {
			if c.Name == "model fit" {
				return c
			}
		}
		t.Fatalf("no model fit check at tp %v: %+v", tps, d.Doctor(ctx))
		return Check{}
	}
	if c := check([]int{1, 4}); c.Status != CheckFail || !strings.Contains(c.Detail, "tp 1: 244.0 GB") || strings.Contains(c.Detail, "tp 4:") {
		t.Errorf("tp 1 and 4: %+v", c)
	}
	if c := check([]int{4}); c.Status != CheckOK {
		t.Errorf("tp 4: %+v", c)
	}
}
