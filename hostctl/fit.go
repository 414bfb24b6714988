package hostctl

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Fit is what doctor needs to tell whether the spec's model fits the host's GPUs at each tp.
type Fit struct {
	ModelPath string // the server's --model-path ("" or a hub id: no check)
	TPs       []int  // the tp values the matrix sweeps
	// MemFraction is the spec's --mem-fraction-static (0: SGLang picks its default).
	MemFraction float64
}

// defaultMemFraction is the mem_fraction_static SGLang picks when the launch sets none, by tp, as the
// 0.4 releases' ServerArgs.__post_init__ (python/sglang/srt/server_args.py) sets it; newer releases
// derive it from the GPU's memory and reserve, to similar values. Only a warning rests on it.
func defaultMemFraction(tp int) float64 {
	switch {
	case tp >= 16:
		return 0.79
	case tp >= 8:
		return 0.81
	case tp >= 4:
		return 0.85
	case tp >= 2:
		return 0.87
	default:
		return 0.88
	}
}

// fitChecks judges the weights (bytes) against the smallest GPU (MiB) at each tp. SGLang keeps
// weights and KV cache within mem_fraction_static of a GPU and sizes the KV pool from what the
// loaded weights leave of it (model_runner_kv_cache_mixin.py, _profile_available_bytes): weights per
// GPU above the GPU cannot load (certain), above the fraction leave no KV cache ("Not enough
// memory. Please try to increase --mem-fraction-static.": certain for a fraction the spec sets,
// likely under a default).
func fitChecks(weights int64, gpuMiB int, f Fit, add func(string, CheckStatus, string, ...any)) {
	gb := func(b float64) string { return strconv.FormatFloat(b/1e9, 'f', 1, 64) + " GB" }
	gpu := float64(gpuMiB) * (1 << 20)
	var bad, tight, ok []string
	for _, tp := range f.TPs {
		per := float64(weights) / float64(max(tp, 1))
		mfs, set := f.MemFraction, f.MemFraction > 0
		if !set {
			mfs = defaultMemFraction(tp)
		}
		switch {
		case per >= gpu:
			bad = append(bad, fmt.Sprintf("tp %d: %s of weights per GPU do not fit a %s GPU", tp, gb(per), gb(gpu)))
		case per >= gpu*mfs && set:
			bad = append(bad, fmt.Sprintf("tp %d: %s per GPU leave no KV cache under --mem-fraction-static %.2f (%s)", tp, gb(per), mfs, gb(gpu*mfs)))
		case per >= gpu*mfs:
			tight = append(tight, fmt.Sprintf("tp %d: %s per GPU leave no KV cache under SGLang's default mem_fraction_static (%.2f: %s)", tp, gb(per), mfs, gb(gpu*mfs)))
		default:
			ok = append(ok, strconv.Itoa(tp))
		}
	}
	switch {
	case len(bad) > 0:
		add("model fit", CheckFail, "%s weights: %s; these points would fail oom: raise tp", gb(float64(weights)), strings.Join(append(bad, tight...), "; "))
	case len(tight) > 0:
		add("model fit", CheckWarn, "%s weights: %s; likely oom unless --mem-fraction-static is raised", gb(float64(weights)), strings.Join(tight, "; "))
	default:
		add("model fit", CheckOK, "%s weights fit at tp %s", gb(float64(weights)), strings.Join(ok, ", "))
	}
}

// weightsScript prints the model folder's safetensors index (its metadata.total_size is the
// weights' size), else "@@" and the size of each .safetensors file, else "none". dir is quoted.
func weightsScript(dir string) string {
	q := ShellQuote(dir)
	return "d=" + q + "; [ -d \"$d\" ] || { echo none; exit 0; }; f=\"$d/model.safetensors.index.json\"; " +
		"if [ -r \"$f\" ]; then head -c 4194304 \"$f\"; else echo @@; for x in \"$d\"/*.safetensors; do [ -f \"$x\" ] && stat -Lc %s \"$x\"; done; fi; true"
}

// parseWeights reads weightsScript's output: the weights' bytes, or 0 when the folder holds none
// that can be read.
func parseWeights(out string) int64 {
	out = strings.TrimSpace(out)
	if out == "" || out == "none" {
		return 0
	}
	if rest, ok := strings.CutPrefix(out, "@@"); ok {
		var n int64
		for _, l := range strings.Fields(rest) {
			if v, err := strconv.ParseInt(l, 10, 64); err == nil && v > 0 {
				n += v
			}
		}
		return n
	}
	var idx struct {
		Metadata struct {
			TotalSize json.Number `json:"total_size"`
		} `json:"metadata"`
	}
	if json.Unmarshal([]byte(out), &idx) != nil {
		return 0
	}
	if v, err := idx.Metadata.TotalSize.Float64(); err == nil && v > 0 {
		return int64(v)
	}
	return 0
}

// minGPUMiB is the smallest memory.total of nvidia-smi's GPU lines (0: none).
func minGPUMiB(lines string) int {
	least := 0
	for _, l := range strings.Split(lines, "\n") {
		if g, ok := parseGPU(l); ok && (least == 0 || g.MemoryMB < least) {
			least = g.MemoryMB
		}
	}
	return least
}

// doctorFit adds the model-fit check from the weights script's and nvidia-smi's outputs.
func doctorFit(f Fit, weightsOut, gpuOut string, add func(string, CheckStatus, string, ...any)) {
	if f.ModelPath == "" || len(f.TPs) == 0 || !strings.HasPrefix(f.ModelPath, "/") {
		return // a hub id is downloaded at start: nothing to weigh here
	}
	w := parseWeights(weightsOut)
	list, _, _ := strings.Cut(gpuOut, "@@")
	g := minGPUMiB(list)
	switch {
	case w == 0:
		add("model fit", CheckSkip, "no safetensors weights found in %s on the host", f.ModelPath)
	case g == 0:
		add("model fit", CheckSkip, "no GPU memory to weigh the weights against (nvidia-smi)")
	default:
		fitChecks(w, g, f, add)
	}
}
