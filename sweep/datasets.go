package sweep

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Prompt sets and prompt lengths (issue 27; docs/spec.md, "workload"): a sweep measures every level
// on each *source* of its workload, a named prompt set (workload.datasets) or specsweep's random
// prompts, at each prompt length of workload.input_tokens when it is a list. The answer weighs the
// sources by the user's traffic mix.

// The formats of a prompt set file (workload.datasets[].format; workload reads them, docs/bench.md,
// "Prompt set files").
const (
	SetFormatShareGPT = "sharegpt"
	SetFormatOpenAI   = "openai"
	SetFormatJSONL    = "jsonl"
	SetFormatMTBench  = "mtbench"
)

// SetFormats lists the formats in the order error messages name them.
var SetFormats = []string{SetFormatShareGPT, SetFormatOpenAI, SetFormatJSONL, SetFormatMTBench}

// DefaultSetWeight is a set's weight when the spec gives none: equal shares.
const DefaultSetWeight = 1.0

// maxSetWeight bounds a weight: weights are relative shares, so a wider range says nothing more.
const maxSetWeight = 1e6

// setName is a prompt set's name: it names a row of every table and a column of the store.
var setName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// PromptSetRef is one entry of workload.datasets: a prompt set file the sweep measures on.
type PromptSetRef struct {
	Name   string  `json:"name"`
	Path   string  `json:"path"`             // as written in the spec
	Format string  `json:"format,omitempty"` // one of SetFormats; "" detects it
	Weight float64 `json:"weight"`           // the set's share of the traffic (relative)
	// ContentHash is the hex SHA-256 of the file as read, filled by whoever reads it (orchestrator's
	// ReadPromptSets) before the spec is hashed: a changed file is a changed spec.
	ContentHash string `json:"content_hash,omitempty"`
	// File is Path resolved against the spec file's folder (ResolveSetPaths); not hashed.
	File string `json:"-"`
}

// Source is one of the workload's prompt sources at one length: what a run measures besides its
// point, concurrency and repeat.
type Source struct {
	// Dataset is the prompt set's name; "" for specsweep's random prompts, "sharegpt" for
	// workload.dataset sharegpt:PATH.
	Dataset string
	// InputTokens is the target prompt length: the random prompts' length, or the length a set is
	// padded to; 0 for a set sent at its own lengths.
	InputTokens int
	// Weight is the source's share of the weighted objective; the weights of a workload's sources sum to 1.
	Weight float64
}

// Label names a source in tables and logs: "code", "code@8192", "random@512".
func (c Source) Label() string {
	name := c.Dataset
	if name == "" {
		name = DefaultDataset
	}
	if c.InputTokens > 0 {
		return fmt.Sprintf("%s@%d", name, c.InputTokens)
	}
	return name
}

// Key is the source as the store keys a run: its dataset and input_tokens.
func (c Source) Key() SourceKey { return SourceKey{c.Dataset, c.InputTokens} }

// SourceKey identifies a source.
type SourceKey struct {
	Dataset     string
	InputTokens int
}

// Lengths are the prompt lengths of workload.input_tokens: the list when written as one, else the
// single value (none when input_tokens is not given).
func (w Workload) Lengths() []int {
	if len(w.InputLengths) > 0 {
		return w.InputLengths
	}
	if w.InputTokens > 0 {
		return []int{w.InputTokens}
	}
	return nil
}

// Sources lists what every level is measured on, in the order it is measured: each prompt set in
// spec order, at each length of an input_tokens list (padded) or as it is; otherwise the random
// prompts at each length (or the ShareGPT file). A set's weight is shared equally by its lengths,
// and the weights are normalised to sum to 1.
func (w Workload) Sources() []Source {
	var out []Source
	switch {
	case len(w.Datasets) > 0:
		total := 0.0
		for _, d := range w.Datasets {
			total += d.Weight
		}
		for _, d := range w.Datasets {
			lens := w.InputLengths
			if len(lens) == 0 {
				lens = []int{0}
			}
			for _, n := range lens {
				out = append(out, Source{Dataset: d.Name, InputTokens: n, Weight: d.Weight / total / float64(len(lens))})
			}
		}
	case w.DatasetPath() != "":
		out = append(out, Source{Dataset: "sharegpt", Weight: 1})
	default:
		lens := w.Lengths()
		for _, n := range lens {
			out = append(out, Source{InputTokens: n, Weight: 1 / float64(len(lens))})
		}
	}
	return out
}

// ResolveSetPaths sets each prompt set's File: its path, relative ones against dir (the spec file's
// folder, as for a local server command).
func (s *Spec) ResolveSetPaths(dir string) {
	for i := range s.Workload.Datasets {
		d := &s.Workload.Datasets[i]
		d.File = d.Path
		if !filepath.IsAbs(d.Path) && dir != "" {
			d.File = filepath.Join(dir, d.Path)
		}
	}
}

// datasets decodes workload.datasets: a non-empty list of {name, path, format, weight}.
func (p *parser) datasets(n *yaml.Node, w *Workload) {
	const path = "workload.datasets"
	items, ok := p.nonEmpty(n, path)
	if !ok {
		return
	}
	p.boundedLen(n, path, LimitDatasets, "prompt sets", len(items))
	seen := map[string]bool{}
	for i, it := range items {
		at := index(path, i)
		d := PromptSetRef{Weight: DefaultSetWeight}
		var nameNode *yaml.Node
		_, ok := p.object(it, at, []field{
			{"name", true, func(v *yaml.Node) {
				x, ok := p.str(v, at+".name")
				if !ok {
					return
				}
				nameNode = resolve(v)
				switch {
				case len(x) > maxSetNameLen:
					p.errf(nameNode, "%s.name: %d characters, above the limit %d", at, len(x), maxSetNameLen)
				case !setName.MatchString(x):
					p.errf(nameNode, "%s.name: %q must match [a-z0-9][a-z0-9_-]* (it names a row of every table)", at, clip(x))
				case x == DefaultDataset || x == "sharegpt":
					p.errf(nameNode, "%s.name: %q is reserved (it names specsweep's own prompts)", at, x)
				default:
					d.Name = x
				}
			}},
			{"path", true, func(v *yaml.Node) {
				if x, ok := p.str(v, at+".path"); ok {
					if strings.TrimSpace(x) == "" {
						p.errf(resolve(v), "%s.path: must not be empty", at)
						return
					}
					d.Path = x
				}
			}},
			{"format", false, func(v *yaml.Node) {
				if x, ok := p.oneOf(v, at+".format", SetFormats...); ok {
					d.Format = x
				}
			}},
			{"weight", false, func(v *yaml.Node) {
				x, ok := p.number(v, at+".weight")
				if !ok {
					return
				}
				if x <= 0 || x > maxSetWeight {
					p.errf(resolve(v), "%s.weight: must be above 0 and at most %g (a share of the traffic), got %g", at, float64(maxSetWeight), x)
					return
				}
				d.Weight = x
			}},
		})
		if !ok || d.Name == "" {
			continue
		}
		if seen[d.Name] {
			p.errf(nameNode, "%s.name: prompt set %q is listed twice", at, d.Name)
			continue
		}
		seen[d.Name] = true
		w.Datasets = append(w.Datasets, d)
	}
}

// maxSetNameLen bounds a set's name: it is printed in every table's first column.
const maxSetNameLen = 32
