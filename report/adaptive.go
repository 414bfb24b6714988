package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/sweep"
)

// SGLang's adaptive speculative decoding (issue 28; docs/report.md, "An adaptive schedule"): with
// --speculative-adaptive and --speculative-adaptive-config FILE, an EAGLE/EAGLE3 topk-1 server
// switches --speculative-num-steps at run time, per batch size. The file is a JSON object whose
// integer-string keys are batch sizes, each a slot with its candidate_steps (0: no speculation) and
// the controller's knobs; other keys (strategy, ema_alpha, ...) are defaults for every slot
// (python/sglang/srt/speculative/adaptive_spec_params.py, _load_adaptive_config and
// AdaptiveStepSlot, sgl-project/sglang at 015c872). FitAdaptive writes one from a sweep's measured
// curves: a slot per measured concurrency level, keyed where that level's batches begin (slotKeys).

// AdaptiveSlot is one batch size of a fitted schedule.
type AdaptiveSlot struct {
	// Level is the measured concurrency the slot serves; BatchSize its key, the smallest batch size
	// routed to it (slotKeys).
	Level     int
	BatchSize int
	// Steps are the candidate steps, ascending: the chain's measured steps within the noise of the
	// level's best (0: the baseline, no speculation).
	Steps []int
	// Best is the level's best steps and its median output tok/s; Within say why each other step
	// is a candidate ("within noise", "within 2%").
	Best     int
	BestTokS float64
	Why      map[int]string
}

// AdaptiveFit is a fitted schedule and how to start a server with it.
type AdaptiveFit struct {
	Method    string // the chain's method (the spec's name)
	Algorithm string // EAGLE or EAGLE3
	TP        int
	Slots     []AdaptiveSlot
	// InitialSteps is the --speculative-num-steps the server must start with: SGLang refuses one
	// outside the union of the candidates (_init_adaptive_speculative_params). It is the smallest
	// batch size's best (a server starts idle, at small batches).
	InitialSteps int
	// Argv is the server command line of one of the chain's points, as stored (ServerArgs edits it).
	Argv []string
	// MaxRunning is the --max-running-requests the server needs (0: none): SGLang caps a speculative
	// server at 48 running requests unless it is given (SpecMaxRunning), so a slot of no speculation
	// serving a level above 48 would run fewer requests than the baseline it stands in for.
	MaxRunning int
}

// SpecMaxRunning is the max_running_requests SGLang gives an EAGLE-family server without
// --max-running-requests (_handle_eagle_family in python/sglang/srt/arg_groups/speculative_hook.py,
// sgl-project/sglang at d9ccf6a: "Max running requests is reset to 48 for speculative decoding").
const SpecMaxRunning = 48

// NeedsMaxRunning is the --max-running-requests an adaptive server of argv needs to run a load of
// concurrency c without speculation as the baseline does: c when it is above SpecMaxRunning and argv
// does not set one, else 0.
func NeedsMaxRunning(argv []string, c int) int {
	if c <= SpecMaxRunning || argparse.Has(argv, "--max-running-requests") {
		return 0
	}
	return c
}

// ServerArgs is the command line that starts the chain's server with the schedule in the file at
// path: the chain's own, its steps the initial ones (and draft tokens steps + 1, which SGLang sets
// itself in adaptive mode), topk 1, and --speculative-adaptive --speculative-adaptive-config path.
func (f *AdaptiveFit) ServerArgs(path string) []string {
	argv := slices.Clone(f.Argv)
	argv = argparse.Set(argv, strconv.Itoa(f.InitialSteps), "--speculative-num-steps")
	argv = argparse.Set(argv, strconv.Itoa(f.InitialSteps+1), "--speculative-num-draft-tokens")
	argv = argparse.Set(argv, "1", "--speculative-eagle-topk")
	if !argparse.Has(argv, "--speculative-adaptive") {
		argv = append(argv, "--speculative-adaptive")
	}
	argv = argparse.Set(argv, path, "--speculative-adaptive-config")
	if f.MaxRunning > 0 {
		argv = argparse.Set(argv, strconv.Itoa(f.MaxRunning), "--max-running-requests")
	}
	return argv
}

// algorithmOf is a point's --speculative-algorithm, upper case; EAGLE when unknown (the label
// treats such a point as EAGLE's).
func algorithmOf(p *Point) string {
	if a := strings.ToUpper(p.Algorithm); a != "" {
		return a
	}
	return "EAGLE"
}

// adaptiveUnsupported is why SGLang turns adaptive mode off for a point's arguments, in SGLang's
// words (adaptive_unsupported_reason), or "".
func adaptiveUnsupported(p *Point) string {
	algo := algorithmOf(p)
	argv := p.Argv
	switch {
	case algo != "EAGLE" && algo != "EAGLE3":
		return fmt.Sprintf("speculative_algorithm=%s (only EAGLE/EAGLE3 are supported)", algo)
	case p.TopK != 1:
		return fmt.Sprintf("speculative_eagle_topk=%d (only topk=1 is supported)", p.TopK)
	case argparse.Has(argv, "--enable-dp-attention"):
		return "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
	case argparse.Has(argv, "--enable-multi-layer-eagle"):
		return "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"
	case argparse.Has(argv, "--enable-two-batch-overlap"):
		return "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)"
	case argparse.Has(argv, "--enable-pdmux"):
		return "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"
	}
	return ""
}

// FitAdaptive fits SGLang's adaptive schedule to the sweep: among its EAGLE/EAGLE3 topk-1 chains
// (a method and tp; one num_draft_tokens shape), the one whose per-level best serves the levels
// best (equal time at each), and for each measured level a slot of the chain's steps within the
// noise of the level's best, 0 where the baseline of its tp is among them. It fails, in SGLang's
// words, when no chain can run adaptive.
func FitAdaptive(s *Sweep) (*AdaptiveFit, error) {
	if len(s.Levels) == 0 {
		return nil, errors.New("adaptive: the sweep has no measured level")
	}
	type chainKey struct {
		method string
		tp     int
	}
	chains := map[chainKey][]*Point{}
	var order []chainKey
	var refused []string
	for _, p := range s.Points {
		if p.Baseline || p.Mismatch() || len(p.Cells) == 0 {
			continue
		}
		if why := adaptiveUnsupported(p); why != "" {
			if !slices.Contains(refused, why) {
				refused = append(refused, why)
			}
			continue
		}
		k := chainKey{p.Method, p.TP}
		if chains[k] == nil {
			order = append(order, k)
		}
		chains[k] = append(chains[k], p)
	}
	if len(order) == 0 {
		msg := "adaptive: the sweep has no measured EAGLE/EAGLE3 chain with topk 1, which SGLang's adaptive mode needs"
		if len(refused) > 0 {
			msg += "; SGLang turns it off for these points: " + strings.Join(refused, "; ")
		}
		return nil, errors.New(msg)
	}
	var best *AdaptiveFit
	bestScore := math.Inf(-1)
	for _, k := range order {
		fit, score := fitChain(s, chains[k])
		if fit != nil && score > bestScore {
			best, bestScore = fit, score
		}
	}
	if best == nil {
		return nil, errors.New("adaptive: no chain was measured at every level with its baseline")
	}
	return best, nil
}

// fitChain fits one chain; its score is the mean over levels of the slot best's tok/s.
func fitChain(s *Sweep, pts []*Point) (*AdaptiveFit, float64) {
	p0 := pts[0]
	var base *Point
	for _, p := range s.Points {
		if p.Baseline && p.TP == p0.TP && !p.Mismatch() {
			base = p
			break
		}
	}
	fit := &AdaptiveFit{Method: p0.Method, Algorithm: algorithmOf(p0), TP: p0.TP}
	score := 0.0
	for _, c := range s.Levels {
		type cand struct {
			steps int
			cell  *Cell
		}
		var cs []cand
		if base != nil && base.Cells[c] != nil {
			cs = append(cs, cand{0, base.Cells[c]})
		}
		for _, p := range pts {
			if cell := p.Cells[c]; cell != nil && cell.TokS.OK() && p.NumSteps > 0 {
				cs = append(cs, cand{p.NumSteps, cell})
			}
		}
		if len(cs) == 0 {
			continue
		}
		top := cs[0]
		for _, x := range cs[1:] {
			if x.cell.TokS.Median > top.cell.TokS.Median {
				top = x
			}
		}
		slot := AdaptiveSlot{Level: c, BatchSize: c, Best: top.steps, BestTokS: top.cell.TokS.Median, Why: map[int]string{}}
		for _, x := range cs {
			if x.steps == top.steps {
				continue
			}
			switch {
			case x.cell.TokS.N > 1 && top.cell.TokS.N > 1:
				if sweep.NoiseOf(top.cell.TokS, x.cell.TokS) != sweep.NoiseClear {
					slot.Why[x.steps] = fmt.Sprintf("within noise of the best (%.1f vs %.1f tok/s, ranges overlap)", x.cell.TokS.Median, top.cell.TokS.Median)
				}
			case x.cell.TokS.Median >= top.cell.TokS.Median*(1-PlateauTolerance):
				slot.Why[x.steps] = fmt.Sprintf("within %g%% of the best (%.1f vs %.1f tok/s; one repeat: noise not measured)",
					100*PlateauTolerance, x.cell.TokS.Median, top.cell.TokS.Median)
			}
		}
		slot.Steps = append(slot.Steps, top.steps)
		for st := range slot.Why {
			slot.Steps = append(slot.Steps, st)
		}
		slices.Sort(slot.Steps)
		slot.Steps = slices.Compact(slot.Steps)
		fit.Slots = append(fit.Slots, slot)
		score += top.cell.TokS.Median
	}
	if len(fit.Slots) == 0 {
		return nil, math.Inf(-1)
	}
	slotKeys(fit.Slots)
	// The server starts with the smallest batch size's best; SGLang refuses steps outside the
	// union of the candidates, and steps 0 cannot start a speculative server.
	fit.InitialSteps = fit.Slots[0].Best
	if fit.InitialSteps == 0 {
		fit.InitialSteps = -1
		for _, sl := range fit.Slots {
			for _, st := range sl.Steps {
				if st > 0 && (fit.InitialSteps < 0 || st < fit.InitialSteps) {
					fit.InitialSteps = st
				}
			}
		}
		if fit.InitialSteps < 0 {
			return nil, math.Inf(-1) // no speculation pays anywhere: nothing to adapt
		}
	}
	fit.Argv = p0.Argv
	for _, sl := range fit.Slots {
		if slices.Contains(sl.Steps, 0) {
			fit.MaxRunning = max(fit.MaxRunning, NeedsMaxRunning(p0.Argv, sl.Level))
		}
	}
	return fit, score / float64(len(s.Levels))
}

// slotKeys puts each slot's key where its level's batches begin: 1 for the lowest level, else the
// geometric middle between the level below and its own (rounded up, so above the level below and at
// most its own). SGLang routes a decode batch to the slot with the largest key not above the batch's
// size padded up to a CUDA-graph batch size (AdaptiveSpeculativeParams, adaptive_spec_params.py at
// 015c872); a load of concurrency c runs batches below c (requests in prefill, finishing, being sent
// again; at most 48 on a speculative server without --max-running-requests), so a slot keyed at c
// itself can be left to the level below, or never reached (docs/benchmarks.md, "Verification under
// shifting load").
func slotKeys(slots []AdaptiveSlot) {
	for i := range slots {
		if i == 0 {
			slots[i].BatchSize = 1
			continue
		}
		a, b := float64(slots[i-1].Level), float64(slots[i].Level)
		slots[i].BatchSize = int(math.Ceil(math.Sqrt(a*b) - 1e-9))
	}
}

// JSON is the schedule in SGLang's --speculative-adaptive-config format: the strategy, then a slot
// per batch size (ascending) with its candidate steps and the controller's hysteresis and ceiling
// as SGLang's default schedule writes them (DEFAULT_ADAPTIVE_CONFIG); the EMA's alpha, warmup and
// update interval are left to SGLang's defaults.
func (f *AdaptiveFit) JSON() []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"strategy\": \"ema\"")
	for _, sl := range f.Slots {
		steps, _ := json.Marshal(sl.Steps)
		fmt.Fprintf(&b, ",\n  %q: {\"candidate_steps\": %s, \"up_hysteresis\": 0.0, \"down_hysteresis\": 0.0, \"ceiling_coeff\": 0}",
			strconv.Itoa(sl.BatchSize), steps)
	}
	b.WriteString("\n}\n")
	return b.Bytes()
}

// PointAt is the point the schedule's slot of level c stands for: the chain's best steps there, or
// the baseline of its tp (nil: the level has no slot). An adaptive server at that level is held to it
// (apply's speed check, a watch's reference).
func (f *AdaptiveFit) PointAt(s *Sweep, c int) *Point {
	for _, sl := range f.Slots {
		if sl.Level != c {
			continue
		}
		for _, p := range s.Points {
			if p.TP == f.TP && ((sl.Best == 0 && p.Baseline) || (sl.Best > 0 && p.Method == f.Method && p.NumSteps == sl.Best)) {
				return p
			}
		}
	}
	return nil
}
