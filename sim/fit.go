package sim

import (
	"fmt"
	"strings"
)

// Fit is what the simulator's memory model says of one launch before it starts: the profile it
// picks, the GPU size and the per-GPU memory plan (Plan.OOM is "" when the launch fits).
type Fit struct {
	Profile  string
	GPUMemGB float64
	Plan     MemPlan
}

// FitOf decides, as sglangsim would at start, whether a server launched with args (without the
// program) under env (the spec's server environment) fits its GPUs: the release's argument rules
// (SGLANGSIM_VERSION), the profile (SGLANGSIM_PROFILE, else by model path), the GPU size
// (SGLANGSIM_GPU_MEM_GB) and the memory plan (docs/sglangsim.md, "The speed model"). The host's own
// SGLANGSIM_* file is not read: a host that sets another GPU size there decides otherwise. specsweep's
// plan uses it to warn about points that cannot start before any GPU time is spent.
func FitOf(args []string, env map[string]string) (Fit, error) { return NewFits().Of(args, env) }

// Fits answers FitOf for many launches (a plan's points), building each release's argument parser
// once: reading a release's flag table is about a millisecond, the rest of a fit microseconds.
type Fits struct{ parsers map[string]*Parser }

// NewFits is an empty set of parsers.
func NewFits() *Fits { return &Fits{parsers: map[string]*Parser{}} }

// Of is FitOf with the parsers of fs.
func (fs *Fits) Of(args []string, env map[string]string) (Fit, error) {
	getenv := func(k string) string { return env[k] }
	ver := strings.TrimSpace(getenv("SGLANGSIM_VERSION"))
	era, err := LookupEra(ver)
	if err != nil {
		return Fit{}, err
	}
	p := fs.parsers[ver]
	if p == nil {
		if p, err = NewParser(era); err != nil {
			return Fit{}, err
		}
		fs.parsers[ver] = p
	}
	a, _, err := ParseArgsEra(ParseOptions{Era: era, CompatAssert: ver == "", Parser: p}, args)
	if err != nil {
		return Fit{}, fmt.Errorf("the simulator refuses the arguments: %w", err)
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return Fit{}, err
	}
	prof, err := PickProfile(cfg.Profile, a.ModelPath)
	if err != nil {
		return Fit{}, err
	}
	m := NewModel(a, prof, cfg.GPUMemGB)
	return Fit{Profile: prof.Name, GPUMemGB: cfg.GPUMemGB, Plan: m.Plan}, nil
}

// Reason words a plan that does not fit, as the simulated server would fail ("" when it fits).
func (f Fit) Reason() string {
	p := f.Plan
	switch p.OOM {
	case "":
		return ""
	case "weights":
		return fmt.Sprintf("out of memory loading the weights: %.1f GB of weights and %.1f GB of draft per GPU on %.0f GB GPUs (profile %s); raise tp",
			p.WeightsGB, p.DraftGB, p.GPUMemGB, f.Profile)
	case "kv":
		return fmt.Sprintf("no room for the KV cache: mem_fraction_static %.2f of %.0f GB holds less than the %.1f GB of weights and draft per GPU (profile %s); raise tp or --mem-fraction-static",
			p.MemFraction, p.GPUMemGB, p.WeightsGB+p.DraftGB, f.Profile)
	default:
		return fmt.Sprintf("out of memory capturing CUDA graphs: %.1f GB of KV pool and %.1f GB of graphs per GPU on %.0f GB GPUs (profile %s); raise tp, or lower --cuda-graph-max-bs or the draft tree",
			p.PoolGB, p.GraphGB, p.GPUMemGB, f.Profile)
	}
}
