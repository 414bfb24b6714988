package sweep

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limit is the bound on one size a spec can set. Every limit is declared once, in Limits: the
// decoder checks values against it (errors name the key, the value and the bound), docs/spec.md
// ("Limits") lists the same table, and FuzzParse checks that no spec Parse accepts exceeds one.
// The bounds keep the work a spec asks for within what one daemon can hold: without them
// `workload.concurrency: [3000000]` or `input_tokens: 2000000000` validated and then killed the
// daemon with out-of-memory (issue 23).
type Limit struct {
	// Key names the value as docs/spec.md does; "[]" marks each item of a list, "#" the length of
	// a list or the size of what a spec expands to.
	Key string
	// Min and Max bound the value, both included: a count, or nanoseconds when Duration is set.
	Min, Max int64
	// Duration says Min and Max are time.Durations.
	Duration bool
	// Why is the reason the bound is what it is, quoted in the error.
	Why string
	// values returns what a parsed spec holds for the key.
	values func(*Spec) []int64
}

// Values returns the values a parsed spec holds for the limit's key (nil when it sets none).
func (l Limit) Values(s *Spec) []int64 {
	if s == nil || l.values == nil {
		return nil
	}
	return l.values(s)
}

// Format spells a value of the key the way a spec writes it (a duration or a number).
func (l Limit) Format(v int64) string {
	if l.Duration {
		return formatDuration(time.Duration(v))
	}
	return strconv.FormatInt(v, 10)
}

// Keys of the limits (docs/spec.md, "Limits").
const (
	LimitSpecBytes        = "spec size (bytes)"
	LimitFiles            = "methods.*.files#"
	LimitHosts            = "hosts#"
	LimitGPUs             = "hosts[].gpus"
	LimitMaxJobs          = "hosts[].slurm.max_jobs"
	LimitMaxNodes         = "hosts[].slurm.max_nodes"
	LimitNodes            = "hosts[].nodes#"
	LimitTimeLimit        = "hosts[].slurm.time_limit"
	LimitSbatchArgs       = "hosts[].slurm.sbatch_args#"
	LimitReadyTimeout     = "server.ready_timeout"
	LimitStopTimeout      = "server.stop_timeout"
	LimitGPUWait          = "server.gpu_wait"
	LimitJoinTimeout      = "server.join_timeout"
	LimitNumSteps         = "matrix.num_steps[]"
	LimitTopK             = "matrix.topk[]"
	LimitDraftTokens      = "matrix.num_draft_tokens[]"
	LimitTP               = "matrix.tp[]"
	LimitCombinations     = "matrix combinations#"
	LimitPoints           = "points#"
	LimitRuns             = "runs#"
	LimitConcurrency      = "workload.concurrency[]"
	LimitLevels           = "workload.concurrency#"
	LimitRequests         = "workload.requests"
	LimitWarmup           = "workload.warmup_requests"
	LimitInputTokens      = "workload.input_tokens"
	LimitPhases           = "workload.phases#"
	LimitPhaseFor         = "workload.phases[].for"
	LimitLengths          = "workload.input_tokens#"
	LimitDatasets         = "workload.datasets#"
	LimitOutputTokens     = "workload.output_tokens"
	LimitRepeats          = "workload.repeats"
	LimitCheckPrompts     = "workload.output_check.prompts"
	LimitCheckMaxTokens   = "workload.output_check.max_tokens"
	LimitSearchPatience   = "search.patience"
	LimitSearchBudget     = "search.budget"
	LimitEveryMin         = "schedule.cron @every"
	maxPointsPerSpec      = 10_000
	maxConcurrencyPerSlot = 4096
	maxNumSteps           = 64
)

// MinEvery is the shortest interval an @every schedule may have (ParseCron): a sweep restarts
// servers and runs a load for minutes, and a schedule fires again only after its previous sweep
// ended, so a shorter interval only hammers the store and the log.
const MinEvery = time.Minute

// Limits returns the table of bounds, one row per key.
func Limits() []Limit {
	ints := func(v ...int) []int64 {
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out
	}
	perHost := func(f func(Host) (int64, bool)) func(*Spec) []int64 {
		return func(s *Spec) []int64 {
			var out []int64
			for _, h := range s.Hosts {
				if v, ok := f(h); ok {
					out = append(out, v)
				}
			}
			return out
		}
	}
	day := int64(24 * time.Hour)
	return []Limit{
		{Key: LimitSpecBytes, Min: 1, Max: 1 << 20,
			Why:    "the API's request body limit; a real spec is a few KB",
			values: func(s *Spec) []int64 { return ints(len(s.Source)) }},
		{Key: LimitFiles, Min: 0, Max: 16,
			Why: "a method's config files, written on its host before each of its points starts; a server reads a handful",
			values: func(s *Spec) []int64 {
				var out []int64
				for _, name := range sortedMethodNames(s) {
					out = append(out, int64(len(s.Methods[name].Files)))
				}
				return out
			}},
		{Key: LimitHosts, Min: 1, Max: 256,
			Why:    "one SSH connection and one runner per host; a fleet larger than this is several sweeps",
			values: func(s *Spec) []int64 { return ints(len(s.Hosts)) }},
		{Key: LimitGPUs, Min: 1, Max: 128,
			Why:    "a machine holds 8 to 16 GPUs today, an NVLink rack 72; packing plans slots per GPU",
			values: perHost(func(h Host) (int64, bool) { return int64(h.GPUs), true })},
		{Key: LimitMaxJobs, Min: 1, Max: 256,
			Why: "each job in flight is polled over the login node's SSH connection",
			values: perHost(func(h Host) (int64, bool) {
				if h.Slurm == nil {
					return 0, false
				}
				return int64(h.Slurm.MaxJobs), true
			})},
		{Key: LimitMaxNodes, Min: 1, Max: 64,
			Why: "nodes one job's point spans; SGLang's largest deployments run tp 16 to 32 on 8-GPU nodes",
			values: perHost(func(h Host) (int64, bool) {
				if h.Slurm == nil || h.Slurm.MaxNodes == 0 {
					return 0, false
				}
				return int64(h.Slurm.MaxNodes), true
			})},
		{Key: LimitNodes, Min: 2, Max: 64,
			Why: "each node is an SSH connection and a unit started in step; SGLang's largest deployments span 2 to 4 nodes",
			values: perHost(func(h Host) (int64, bool) {
				if len(h.Nodes) == 0 {
					return 0, false
				}
				return int64(len(h.Nodes)), true
			})},
		{Key: LimitTimeLimit, Min: int64(time.Minute), Max: 365 * day, Duration: true,
			Why: "Slurm counts --time in minutes; a year is past any partition's MaxTime",
			values: perHost(func(h Host) (int64, bool) {
				if h.Slurm == nil || h.Slurm.TimeLimit == 0 {
					return 0, false
				}
				return int64(h.Slurm.TimeLimit), true
			})},
		{Key: LimitSbatchArgs, Min: 0, Max: 64,
			Why: "each becomes an #SBATCH line of every job; sbatch has about a hundred options",
			values: perHost(func(h Host) (int64, bool) {
				if h.Slurm == nil {
					return 0, false
				}
				return int64(len(h.Slurm.SbatchArgs)), true
			})},
		{Key: LimitReadyTimeout, Min: int64(time.Second), Max: 2 * day, Duration: true,
			Why:    "loading the largest models from a network file system takes hours, not days",
			values: func(s *Spec) []int64 { return []int64{int64(s.Server.ReadyTimeout)} }},
		{Key: LimitStopTimeout, Min: int64(time.Second), Max: int64(time.Hour), Duration: true,
			Why:    "a server that has not exited an hour after its stop signal is killed anyway",
			values: func(s *Spec) []int64 { return []int64{int64(s.Server.StopTimeout)} }},
		{Key: LimitJoinTimeout, Min: int64(time.Second), Max: int64(time.Hour), Duration: true,
			Why: "the ranks of a point meet at torch's rendezvous in seconds; torch itself gives up after 10 minutes",
			values: func(s *Spec) []int64 {
				if s.Server.JoinTimeout == 0 {
					return nil
				}
				return []int64{int64(s.Server.JoinTimeout)}
			}},
		{Key: LimitGPUWait, Min: int64(time.Second), Max: day, Duration: true,
			Why: "GPUs still busy after a day are someone else's job, not a slow release",
			values: func(s *Spec) []int64 {
				if s.Server.GPUWait == 0 {
					return nil
				}
				return []int64{int64(s.Server.GPUWait)}
			}},
		{Key: LimitNumSteps, Min: 1, Max: maxNumSteps,
			Why: "draft chains are a few steps long, as acceptance falls with each; 64 is far past any gain",
			values: func(s *Spec) []int64 {
				return ints(slices.Concat(s.Matrix.NumSteps, methodLists(s, func(m Method) []int { return m.NumSteps }), probes(s))...)
			}},
		{Key: LimitTopK, Min: 1, Max: 64,
			Why: "the draft tree's branching per step; SGLang's trees use single digits",
			values: func(s *Spec) []int64 {
				return ints(append(slices.Clone(s.Matrix.TopK), methodLists(s, func(m Method) []int { return m.TopK })...)...)
			}},
		{Key: LimitDraftTokens, Min: 1, Max: 1024,
			Why: "tokens verified per step; past a few hundred verification costs more than it saves",
			values: func(s *Spec) []int64 {
				var out []int64
				all := slices.Clone(s.Matrix.NumDraftTokens)
				for _, name := range sortedMethodNames(s) {
					all = append(all, s.Methods[name].NumDraftTokens...)
				}
				for _, d := range all {
					if !d.Auto {
						out = append(out, int64(d.N))
					}
				}
				return out
			}},
		{Key: LimitTP, Min: 1, Max: 128,
			Why:    "tensor parallelism over one node's GPUs or, whole nodes at a time, a group's (hosts[].gpus x nodes)",
			values: func(s *Spec) []int64 { return ints(s.Matrix.TP...) }},
		{Key: LimitCombinations, Min: 1, Max: maxCombinations,
			Why: "the matrix cross product is planned in memory; a typo must not make millions",
			values: func(s *Spec) []int64 {
				n := 1
				for _, l := range []int{len(s.Matrix.Methods), len(s.Matrix.NumSteps), len(s.Matrix.TopK), len(s.Matrix.NumDraftTokens), len(s.Matrix.TP)} {
					n = satMul(n, max(l, 1))
				}
				out := ints(n)
				for _, name := range sortedMethodNames(s) {
					if m := s.Methods[name]; m.NumSteps != nil || m.TopK != nil || m.NumDraftTokens != nil {
						out = append(out, int64(ownCombinations(s, m)))
					}
				}
				return out
			}},
		{Key: LimitPoints, Min: 1, Max: maxPointsPerSpec,
			Why:    "each point is a server restart of minutes; 10000 points are weeks of GPU time",
			values: func(s *Spec) []int64 { return ints(len(s.Plan().Points)) }},
		{Key: LimitRuns, Min: 1, Max: 200_000,
			Why:    "points x concurrency levels x prompt sources x repeats, each a stored run; past this the sweep is months long",
			values: func(s *Spec) []int64 { return ints(s.Plan().Runs) }},
		{Key: LimitConcurrency, Min: 1, Max: maxConcurrencyPerSlot,
			Why:    "one stream per slot in the load generator; SGLang's default CUDA-graph batch is at most 512",
			values: func(s *Spec) []int64 { return ints(s.Workload.Concurrency...) }},
		{Key: LimitLevels, Min: 1, Max: 64,
			Why:    "each level is a measured run of every point; doubling from 1 to 4096 is 13 levels",
			values: func(s *Spec) []int64 { return ints(len(s.Workload.Concurrency)) }},
		{Key: LimitRequests, Min: 1, Max: 100_000,
			Why: "requests measured per level, each a result kept until the level ends",
			values: func(s *Spec) []int64 {
				if len(s.Workload.Phases) > 0 {
					return nil // phases are timed
				}
				return ints(s.Workload.Requests)
			}},
		{Key: LimitWarmup, Min: 0, Max: 10_000,
			Why:    "warmup only fills caches and CUDA graphs; a few per slot is enough",
			values: func(s *Spec) []int64 { return ints(s.Workload.WarmupRequests) }},
		{Key: LimitInputTokens, Min: 1, Max: 4 << 20,
			Why: "the longest context windows of real models are a few million tokens",
			values: func(s *Spec) []int64 {
				if s.Workload.InputTokens == 0 {
					return nil
				}
				return ints(s.Workload.InputTokens)
			}},
		{Key: LimitPhases, Min: 1, Max: 64,
			Why: "each phase is a measured run of every point; a day in phases of 30 minutes is 48",
			values: func(s *Spec) []int64 {
				if len(s.Workload.Phases) == 0 {
					return nil
				}
				return ints(len(s.Workload.Phases))
			}},
		{Key: LimitPhaseFor, Min: int64(time.Second), Max: int64(time.Hour), Duration: true,
			Why: "a phase long enough to settle; an hour of one load is a level, not a phase",
			values: func(s *Spec) []int64 {
				var out []int64
				for _, ph := range s.Workload.Phases {
					out = append(out, int64(ph.For))
				}
				return out
			}},
		{Key: LimitLengths, Min: 1, Max: 16,
			Why: "each length measures every level again; context lengths doubling from 512 to 4M are 14",
			values: func(s *Spec) []int64 {
				if len(s.Workload.Lengths()) == 0 {
					return nil
				}
				return ints(len(s.Workload.Lengths()))
			}},
		{Key: LimitDatasets, Min: 1, Max: 16,
			Why: "each prompt set measures every level again and is held in memory while the sweep runs",
			values: func(s *Spec) []int64 {
				if len(s.Workload.Datasets) == 0 {
					return nil
				}
				return ints(len(s.Workload.Datasets))
			}},
		{Key: LimitOutputTokens, Min: 1, Max: 1 << 20,
			Why:    "a generation cannot outgrow the context window, a few million tokens at most",
			values: func(s *Spec) []int64 { return ints(s.Workload.OutputTokens) }},
		{Key: LimitRepeats, Min: 1, Max: 100,
			Why:    "repeats measure run-to-run noise; past a few dozen they add time, not confidence",
			values: func(s *Spec) []int64 { return ints(s.Workload.Repeats) }},
		{Key: LimitCheckPrompts, Min: 1, Max: 256,
			Why: "the output check is meant to cost little",
			values: func(s *Spec) []int64 {
				if !s.Workload.OutputCheck.Enabled {
					return nil
				}
				return ints(s.Workload.OutputCheck.Prompts)
			}},
		{Key: LimitCheckMaxTokens, Min: 1, Max: 4096,
			Why: "the output check is meant to cost little; a mismatch shows in the first tokens",
			values: func(s *Spec) []int64 {
				if !s.Workload.OutputCheck.Enabled {
					return nil
				}
				return ints(s.Workload.OutputCheck.MaxTokens)
			}},
		{Key: LimitSearchPatience, Min: 1, Max: maxNumSteps,
			Why: "non-improving steps in a row; a chain has at most matrix.num_steps's values",
			values: func(s *Spec) []int64 {
				if s.Search == nil {
					return nil
				}
				return ints(s.Search.Patience)
			}},
		{Key: LimitSearchBudget, Min: 0, Max: maxPointsPerSpec,
			Why: "a budget caps the points run, and a spec plans at most this many",
			values: func(s *Spec) []int64 {
				if s.Search == nil {
					return nil
				}
				return ints(s.Search.Budget)
			}},
		{Key: LimitEveryMin, Min: int64(MinEvery), Max: 1<<63 - 1, Duration: true,
			Why: "a sweep restarts servers and measures for minutes; shorter intervals only load the store",
			values: func(s *Spec) []int64 {
				if s.Schedule == nil {
					return nil
				}
				if d, ok := everyOf(s.Schedule.Cron); ok {
					return []int64{int64(d)}
				}
				return nil
			}},
	}
}

func probes(s *Spec) []int {
	if s.Search == nil {
		return nil
	}
	return s.Search.Probe
}

// limitsByKey indexes Limits for the decoder.
func limitsByKey() map[string]Limit {
	m := map[string]Limit{}
	for _, l := range Limits() {
		m[l.Key] = l
	}
	return m
}

// limit returns the bound of key. A key missing from the table is a programming error caught by
// TestLimitsTable; until then it bounds nothing but the overflow guard.
func (p *parser) limit(key string) Limit {
	if p.limits == nil {
		p.limits = limitsByKey()
	}
	if l, ok := p.limits[key]; ok {
		return l
	}
	return Limit{Key: key, Min: 0, Max: maxNumber}
}

// withinLimit reports v above or below l as an error at n and returns false.
func (p *parser) withinLimit(n *yaml.Node, path string, l Limit, v int64) bool {
	switch {
	case v > l.Max:
		p.errf(n, "%s: %s is above the limit %s (%s)", path, l.Format(v), l.Format(l.Max), l.Why)
		return false
	case v < l.Min:
		p.errf(n, "%s: %s is below the minimum %s (%s)", path, l.Format(v), l.Format(l.Min), l.Why)
		return false
	}
	return true
}

// formatDuration spells d as a spec would write it: 24h, 1h1m, 48h1s (not 24h0m0s); a duration
// with a fraction of a second, or under one, as time.Duration does (999ms).
func formatDuration(d time.Duration) string {
	if d <= 0 || d%time.Second != 0 {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.d
		}
	}
	return b.String()
}

// describeLimit is a row of docs/spec.md's table: the bound as text.
func describeLimit(l Limit) string {
	if l.Max == 1<<63-1 {
		return fmt.Sprintf("at least %s", l.Format(l.Min))
	}
	return fmt.Sprintf("%s to %s", l.Format(l.Min), l.Format(l.Max))
}

// planCheck bounds what a valid spec expands to: its points and its runs (Plan owns the expansion).
func (p *parser) planCheck(s *Spec) {
	pl := s.Plan()
	if l := p.limit(LimitPoints); int64(len(pl.Points)) > l.Max {
		p.errf(p.matrixNode, "matrix: plans %d points, above the limit %d (%s)", len(pl.Points), l.Max, l.Why)
		return
	}
	if l := p.limit(LimitRuns); int64(pl.Runs) > l.Max {
		p.errf(p.matrixNode, "matrix: plans %d runs (%d points x %d concurrency levels x %d prompt sources x %d repeats), above the limit %d (%s)",
			pl.Runs, len(pl.Points), s.Workload.Loads(), len(s.Workload.Sources()), s.Workload.Repeats, l.Max, l.Why)
	}
}

// sortedMethodNames are the spec's method names in a fixed order, so a limit's values (and the
// first one past it) do not depend on map order.
func sortedMethodNames(s *Spec) []string {
	names := slices.Collect(maps.Keys(s.Methods))
	slices.Sort(names)
	return names
}

// methodLists concatenates one list of every method's own (Method.NumSteps, ...).
func methodLists(s *Spec, list func(Method) []int) []int {
	var out []int
	for _, name := range sortedMethodNames(s) {
		out = append(out, list(s.Methods[name])...)
	}
	return out
}
