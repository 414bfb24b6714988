package report

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// The report's header: what was measured, below the title and above every figure (docs/report.md).
// Each fact comes from what the sweep recorded: the model and draft models from the servers'
// own server info (the effective args), the engine from the recorded provenance, the workload from
// the spec stored with the sweep, the hosts from the sweep's hosts and their probed GPUs, and
// whether the server was sglangsim (its server info's "simulator", or the command's name) with its
// time scale (SGLANGSIM_TIME_SCALE in the point's environment, the spec's server env and method
// env: sglangsim reports it nowhere else).

// simulatorCommand is the simulator's program name (cmd/sglangsim).
const simulatorCommand = "sglangsim"

// timeScaleVar is the simulator's knob that multiplies every simulated duration (docs/sglangsim.md).
const timeScaleVar = "SGLANGSIM_TIME_SCALE"

// serverArg is a server-info value as text: flat at the top (every release), or under
// "server_args"; "" when absent or null.
func serverArg(info map[string]any, key string) string {
	v, ok := info[key]
	if !ok {
		if sa, isMap := info["server_args"].(map[string]any); isMap {
			v = sa[key]
		}
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// grouped is values by the names that share each ("a (m1, m2); b (m3)"), in order of first
// appearance; the value alone when all share one.
type grouped struct {
	values []string
	names  map[string][]string
}

func (g *grouped) add(value, name string) {
	if g.names == nil {
		g.names = map[string][]string{}
	}
	if _, ok := g.names[value]; !ok {
		g.values = append(g.values, value)
	}
	if !contains(g.names[value], name) {
		g.names[value] = append(g.names[value], name)
	}
}

func (g *grouped) String() string {
	if len(g.values) == 1 {
		return g.values[0]
	}
	parts := make([]string, len(g.values))
	for i, v := range g.values {
		parts[i] = fmt.Sprintf("%s (%s)", v, strings.Join(g.names[v], ", "))
	}
	return strings.Join(parts, "; ")
}

// measured is the header's facts, key and value, in order; a fact nothing recorded is left out.
func measured(s *Sweep) [][2]string {
	var out [][2]string
	var models, engines grouped
	drafts := map[string]string{} // method -> draft model path
	var draftMethods []string
	simulator := ""
	var scales grouped
	for _, p := range s.Points {
		info := p.EffectiveArgs
		if m := serverArg(info, "model_path"); m != "" {
			models.add(m, p.Method)
		}
		if !p.Baseline && info != nil {
			if _, seen := drafts[p.Method]; !seen {
				draftMethods = append(draftMethods, p.Method)
				drafts[p.Method] = "none"
			}
			if d := serverArg(info, "speculative_draft_model_path"); d != "" {
				drafts[p.Method] = d
			}
		}
		if p.Provenance != nil && p.Provenance.EngineVer != "" {
			engines.add(p.Provenance.EngineVer, p.Method)
		}
		sim := serverArg(info, "simulator")
		if sim == "" && len(p.Argv) > 0 && path.Base(p.Argv[0]) == simulatorCommand {
			sim = simulatorCommand
		}
		if sim != "" {
			if simulator == "" || simulator == simulatorCommand {
				simulator = sim
			}
			scale := p.Env[timeScaleVar]
			if scale == "" {
				scale = "1"
			}
			scales.add(scale, p.Method)
		}
	}
	if len(models.values) > 0 {
		out = append(out, [2]string{"model", models.String()})
	}
	if len(draftMethods) > 0 {
		var d []string
		same := true
		for _, m := range draftMethods {
			d = append(d, fmt.Sprintf("%s: %s", m, drafts[m]))
			same = same && drafts[m] == drafts[draftMethods[0]]
		}
		v := strings.Join(d, "; ")
		if same {
			v = drafts[draftMethods[0]]
		}
		out = append(out, [2]string{"draft model", v})
	}
	switch {
	case simulator != "":
		eng := simulator + ", the SGLang simulator"
		if len(engines.values) > 0 {
			eng += ", simulating SGLang " + engines.String()
		}
		out = append(out, [2]string{"engine", eng}, [2]string{"simulated", simulated(s, &scales)})
	case len(engines.values) > 0:
		out = append(out, [2]string{"engine", "SGLang " + engines.String()})
	}
	if w := workloadFact(s); w != "" {
		out = append(out, [2]string{"workload", w})
	}
	if h := hostsFact(s); h != "" {
		out = append(out, [2]string{"hosts", h})
	}
	return out
}

// simulated says that the figures are sglangsim's and what its time scale does to them.
func simulated(s *Sweep, scales *grouped) string {
	set := "SGLANGSIM_TIME_SCALE in the spec's env"
	if len(scales.values) == 1 {
		v := scales.values[0]
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return fmt.Sprintf("SIMULATED figures, sglangsim at time scale %s (%s); no GPU ran.", v, set)
		}
		if _, given := firstEnv(s, timeScaleVar); !given {
			set = timeScaleVar + " not set in the spec: its default"
		}
		what := fmt.Sprintf("SIMULATED figures, at time scale %s (%s)", v, set)
		switch {
		case f < 1:
			return fmt.Sprintf("%s: sglangsim ran %s× faster than the GPUs its profile models, so every tok/s is %[2]s× and every latency 1/%[2]s of the modelled one (speedups and ratios are not affected); no GPU ran.",
				what, trimFloat(1/f))
		case f > 1:
			return fmt.Sprintf("%s: sglangsim ran %s× slower than the GPUs its profile models, so every tok/s is 1/%[2]s and every latency %[2]s× the modelled one (speedups and ratios are not affected); no GPU ran.",
				what, trimFloat(f))
		}
		return what + ": sglangsim's tok/s and latencies are those its profile models; no GPU ran."
	}
	return fmt.Sprintf("SIMULATED figures, at time scales %s (%s): each scale multiplies every duration sglangsim models, so figures measured at different scales do not compare; no GPU ran.",
		scales.String(), set)
}

// firstEnv is the value of an environment variable in some point's environment.
func firstEnv(s *Sweep, name string) (string, bool) {
	for _, p := range s.Points {
		if v, ok := p.Env[name]; ok {
			return v, true
		}
	}
	return "", false
}

// trimFloat writes a factor with up to 3 significant digits: "20", "3.33", "1.5".
func trimFloat(f float64) string { return strconv.FormatFloat(f, 'g', 3, 64) }

// workloadFact is the load of the spec stored with the sweep; "" when it did not parse.
func workloadFact(s *Sweep) string {
	spec := s.Spec()
	if spec == nil {
		return ""
	}
	w := spec.Workload
	var b strings.Builder
	if p := w.DatasetPath(); p != "" {
		fmt.Fprintf(&b, "ShareGPT prompts from %s (their own lengths), %d output tokens each", p, w.OutputTokens)
	} else {
		fmt.Fprintf(&b, "random prompts of %d input tokens, %d output tokens each", w.InputTokens, w.OutputTokens)
	}
	if w.Temperature == 0 {
		b.WriteString(", temperature 0 (greedy)")
	} else {
		fmt.Fprintf(&b, ", temperature %s (sampled)", trimFloat(w.Temperature))
	}
	levels := make([]string, len(w.Concurrency))
	for i, c := range w.Concurrency {
		levels[i] = strconv.Itoa(c)
	}
	fmt.Fprintf(&b, "; %d requests per level at concurrency %s", w.Requests, strings.Join(levels, ", "))
	if w.Repeats > 1 {
		fmt.Fprintf(&b, ", %d repeats", w.Repeats)
	} else {
		b.WriteString(", 1 repeat")
	}
	fmt.Fprintf(&b, "; %s API", w.API)
	return b.String()
}

// hostsFact is each host with its GPUs: the spec's count, and the model nvidia-smi reported on it.
func hostsFact(s *Sweep) string {
	var parts []string
	for _, h := range s.Hosts {
		where := h.Driver
		if h.Address != "" {
			where += ", " + h.Address
		}
		v := fmt.Sprintf("%s (%s): %d GPUs in the spec", h.Name, where, h.GPUs)
		if g := hostGPUs(s, h.Name); g.models != "" {
			v += ", " + g.models
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, "; ")
}

// gpuFacts are the GPUs the latest recorded provenance of a host shows.
type gpuFacts struct {
	// found: some point of the host recorded its provenance.
	found                            bool
	hostname, kernel, engine, driver string
	// models is "8× NVIDIA H100 80GB HBM3" ("" when none were probed); drivers the GPU drivers.
	models, drivers string
}

// hostGPUs reads the provenance of the host's latest point that recorded one.
func hostGPUs(s *Sweep, host string) gpuFacts {
	for i := len(s.Points) - 1; i >= 0; i-- {
		p := s.Points[i]
		if p.Host != host || p.Provenance == nil {
			continue
		}
		pv := p.Provenance
		g := gpuFacts{found: true, hostname: pv.Hostname, kernel: pv.Kernel, engine: pv.EngineVer, driver: pv.Driver}
		counts := map[string]int{}
		var names, drivers []string
		for _, gpu := range pv.GPUs {
			n := strOr(gpu.Name)
			if counts[n] == 0 {
				names = append(names, n)
			}
			counts[n]++
			if d := strOr(gpu.Driver); d != "-" && !contains(drivers, d) {
				drivers = append(drivers, d)
			}
		}
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%d× %s", counts[n], n))
		}
		g.models, g.drivers = strings.Join(parts, ", "), strings.Join(drivers, ", ")
		return g
	}
	return gpuFacts{}
}
