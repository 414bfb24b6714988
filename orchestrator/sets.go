package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/specsweep/specsweep/sweep"
	"github.com/specsweep/specsweep/workload"
)

// ReadPromptSets reads the prompt set files of spec's workload.datasets (each at its File when
// ResolveSetPaths set it, else its Path) and records each file's content hash in the spec, so the
// spec's hash, and so the sweep found again on resume, changes when a file does (issue 27). It
// returns the sets by name; none when the workload has no sets. Every file is read in full, once:
// a bad line fails here, before any host is touched.
func ReadPromptSets(ctx context.Context, spec *sweep.Spec) (map[string]*workload.PromptSet, error) {
	if len(spec.Workload.Datasets) == 0 {
		return nil, nil
	}
	out := make(map[string]*workload.PromptSet, len(spec.Workload.Datasets))
	for i := range spec.Workload.Datasets {
		d := &spec.Workload.Datasets[i]
		file := d.File
		if file == "" {
			file = d.Path
		}
		set, err := workload.ReadPromptSet(ctx, d.Name, file, d.Format, workload.DefaultSetLimits())
		if err != nil {
			return nil, fmt.Errorf("workload.datasets[%d] (%s): %w", i, d.Name, err)
		}
		if spec.Workload.API == sweep.APICompletions {
			// The completions API carries one prompt: a second turn cannot carry the first answer.
			multi := 0
			for _, it := range set.Items {
				if len(it.Turns) > 1 {
					multi++
				}
			}
			if multi > 0 {
				return nil, fmt.Errorf("workload.datasets[%d] (%s): %s has %d conversations of several turns: they need workload.api chat", i, d.Name, file, multi)
			}
		}
		d.ContentHash = set.Hash
		out[d.Name] = set
	}
	return out, nil
}

// checkPromptSets reads the sets of a stored sweep again and refuses them when a file changed since
// the sweep was planned: its runs so far were measured on other prompts. A spec whose hashes are
// not filled yet (the daemon parses the stored text again) is compared by its plan's hash.
func checkPromptSets(ctx context.Context, spec *sweep.Spec, storedHash string) (map[string]*workload.PromptSet, error) {
	before := make([]string, len(spec.Workload.Datasets))
	for i, d := range spec.Workload.Datasets {
		before[i] = d.ContentHash
	}
	sets, err := ReadPromptSets(ctx, spec)
	if err != nil {
		return nil, err
	}
	for i, d := range spec.Workload.Datasets {
		if before[i] != "" && before[i] != d.ContentHash {
			return nil, fmt.Errorf("prompt set %s: %s changed since the sweep was planned (content %.12s, now %.12s); "+
				"a changed file is a changed spec: run it as a new sweep (another name) or restore the file", d.Name, d.Path, before[i], d.ContentHash)
		}
	}
	if storedHash != "" {
		if h := spec.Plan().SpecHash; h != storedHash {
			return nil, fmt.Errorf("the prompt sets' files changed since the sweep was planned (spec hash %.12s, now %.12s); "+
				"a changed file is a changed spec: run it as a new sweep (another name) or restore the files", storedHash, h)
		}
	}
	return sets, nil
}

// sourcesOf reads what a sweep's levels send: a ShareGPT file (loaded once for every point) and the
// prompt sets (read once, refused when a file changed since the sweep was planned: storedHash), so a
// bad file fails before any host is touched.
func sourcesOf(ctx context.Context, spec *sweep.Spec, storedHash string) ([]promptSource, error) {
	var sharegpt workload.Dataset
	if p := spec.Workload.DatasetPath(); p != "" {
		ds, err := workload.ParseDataset(spec.Workload.Dataset, spec.Workload.InputTokens, uint64(spec.Workload.Seed))
		if err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
		sharegpt = ds
	}
	sets, err := checkPromptSets(ctx, spec, storedHash)
	if err == nil {
		var out []promptSource
		if out, err = promptSources(spec, sets, sharegpt); err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("workload.datasets: %w", err)
}

// promptSource is what a source's levels send: its prompts (nil: random prompts of the source's length,
// drawn from each repeat's seed by the load generator).
type promptSource struct {
	source  sweep.Source
	prompts func(seed uint64) (workload.Dataset, error)
}

// promptSources are the workload's sources with their prompts.
func promptSources(spec *sweep.Spec, sets map[string]*workload.PromptSet, sharegpt workload.Dataset) ([]promptSource, error) {
	var out []promptSource
	for _, c := range spec.Workload.Sources() {
		cs := promptSource{source: c}
		switch {
		case c.Dataset == "":
		case c.Dataset == "sharegpt" && len(spec.Workload.Datasets) == 0:
			cs.prompts = func(uint64) (workload.Dataset, error) { return sharegpt, nil }
		default:
			set := sets[c.Dataset]
			if set == nil {
				return nil, fmt.Errorf("orchestrator: prompt set %s was not read", c.Dataset)
			}
			pad := c.InputTokens
			cs.prompts = func(seed uint64) (workload.Dataset, error) {
				ds, err := workload.NewSetDataset(set, pad, seed)
				if err != nil {
					return nil, fmt.Errorf("orchestrator: prompt set %s: %w", set.Name, err)
				}
				return ds, nil
			}
		}
		out = append(out, cs)
	}
	return out, nil
}

// load is one run of a point: a level (a concurrency for a number of requests) or a phase (a
// concurrency for a time), on one prompt source, in one repeat.
type load struct {
	concurrency int
	repeat      int // the run's repeat: the round, or for a phase the concurrency's occurrence
	round       int // the repeat of the whole sequence, from 1
	source      promptSource
	seed        uint64
	requests    int
	duration    time.Duration
	warmup      int
	phase       int // from 1; 0 for a level
}

// loadsOf lists a point's runs in the order they run: for each repeat, each level on each source;
// or for each repeat each phase, back to back, on the one source phases allow (the warmup before
// the first phase only: the phases measure the shift from one load to the next).
func loadsOf(w sweep.Workload, sources []promptSource) []load {
	var out []load
	for rep := 1; rep <= w.Repeats; rep++ {
		seed := uint64(w.Seed) + uint64(rep-1)
		if len(w.Phases) > 0 {
			occ := w.Occurrences()
			for i, ph := range w.Phases {
				warm := 0
				if rep == 1 && i == 0 {
					warm = w.WarmupRequests
				}
				out = append(out, load{concurrency: ph.Concurrency, repeat: occ[rep-1][i], round: rep, source: sources[0], seed: seed,
					duration: ph.For, warmup: warm, phase: i + 1})
			}
			continue
		}
		for _, c := range w.Concurrency {
			for _, src := range sources {
				out = append(out, load{concurrency: c, repeat: rep, round: rep, source: src, seed: seed, requests: w.Requests,
					warmup: w.WarmupRequests})
			}
		}
	}
	return out
}
