package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/workload"
)

// The output check (docs/spec.md, "output_check"): every point answers fixed prompts greedily once
// it is ready, before its load; the baseline of the same tp answers them twice (all at once, then
// last first in batches of half the size) and is the reference. A point is compared as soon as both its
// answers and the reference's are stored, whichever came first.

// outputStore is what the check needs of the store (*store.DB satisfies it).
type outputStore interface {
	SetPointOutputs(ctx context.Context, sweepID int64, pointID string, attempt int, outputs json.RawMessage) error
	SetOutputCheck(ctx context.Context, sweepID int64, pointID string, check store.OutputCheck) error
	OutputChecks(ctx context.Context, sweepID int64) ([]store.PointOutputs, error)
}

// checkAnswers is what a point answered, as stored in points.outputs.
type checkAnswers struct {
	Prompts []string   `json:"prompts"`
	Runs    [][]string `json:"runs"` // the reference has two, in different orders and batch shapes
}

// checkEvidence is a comparison as stored in points.output_evidence.
type checkEvidence struct {
	workload.Comparison
	PromptText string  `json:"prompt_text,omitempty"`
	Reference  float64 `json:"reference_agreement"` // the reference's agreement with itself
	Threshold  float64 `json:"threshold"`
}

// outputChecker serialises the comparisons of one run (two workers may finish at once).
type outputChecker struct {
	st outputStore
	mu sync.Mutex
}

// checkOutputs answers the prompts on a ready server, stores the answers and compares what can be
// compared. It returns how the point ends when the spec fails mismatching points and this one
// mismatches (nil: go on to the load), or the server's failure while it answered (watched by the
// liveness rule of the levels: a server that hangs during the check is named within seconds, not
// after the answers' timeout); err is a store failure.
func (r *Runner) checkOutputs(ctx context.Context, a *attempt, url string, client *http.Client) (*store.PointFinish, *hostctl.Failure, error) {
	spec, oc := a.sr.spec, a.sr.spec.Workload.OutputCheck
	prompts := workload.CheckPrompts(oc.Prompts, uint64(spec.Workload.Seed))
	cfg := workload.CheckConfig{URL: url, API: spec.Workload.API, APIKey: hostctl.APIKey(a.launch), HTTPClient: client,
		Prompts: prompts, MaxTokens: oc.MaxTokens, Concurrency: len(prompts)}
	a.update(r, PhaseLoad, fmt.Sprintf("output check: %d prompts of %d tokens", oc.Prompts, oc.MaxTokens))
	ans := checkAnswers{Prompts: prompts}
	passes := []workload.CheckConfig{cfg}
	if a.p.Baseline {
		// The reference answers twice, so its own run-to-run agreement is known: all at once in
		// order, then last first in batches of half the size (another order and batch shape).
		half := cfg
		half.Reverse, half.Concurrency = true, max(1, len(prompts)/2)
		passes = []workload.CheckConfig{cfg, half}
	}
	var answerErr error
	activity := new(atomic.Int64)
	fail := r.watch(ctx, a, activity, func(wctx context.Context) {
		for _, pc := range passes {
			texts, err := r.cfg.Answer(wctx, pc)
			if err != nil {
				answerErr = err
				return
			}
			activity.Store(r.cfg.Clock.Now().UnixNano())
			ans.Runs = append(ans.Runs, texts)
		}
	})
	if fail != nil || ctx.Err() != nil {
		return nil, fail, nil
	}
	if answerErr != nil {
		// The load that follows tells what is wrong with the server; the check just has no answer.
		a.event(r, ctx, "output_check_failed", answerErr.Error())
		return nil, nil, nil
	}
	raw, err := json.Marshal(ans)
	if err != nil {
		return nil, nil, fmt.Errorf("orchestrator: encode the output check's answers: %w", err)
	}
	if err := a.sr.outputs.st.SetPointOutputs(ctx, a.sr.id, a.p.ID, a.p.Attempts, raw); err != nil {
		return nil, nil, err
	}
	results, err := r.compareOutputs(ctx, a.sr, a.p.TP)
	if err != nil {
		return nil, nil, err
	}
	if c, ok := results[a.p.ID]; ok && c.Result == store.OutputCheckMismatch && oc.FailOnMismatch {
		return &store.PointFinish{State: store.PointFailed, FailureClass: store.FailOutputMismatch,
			FailureDetail: "output check: " + checkWords(c)}, nil, nil
	}
	return nil, nil, nil
}

// compareOutputs compares every point of tp whose answers are stored and not yet compared with the
// reference (the first baseline of tp with its answers), and returns what it recorded by point id.
func (r *Runner) compareOutputs(ctx context.Context, sr *sweepRun, tp int) (map[string]store.OutputCheck, error) {
	oc := sr.outputs
	oc.mu.Lock()
	defer oc.mu.Unlock()
	pts, err := oc.st.OutputChecks(ctx, sr.id)
	if err != nil {
		return nil, fmt.Errorf("orchestrator: output check of sweep %d: %w", sr.id, err)
	}
	var ref *store.PointOutputs
	var refAns checkAnswers
	for i := range pts {
		p := &pts[i]
		if p.TP == tp && p.Baseline && len(p.Outputs) > 0 {
			if json.Unmarshal(p.Outputs, &refAns) == nil && len(refAns.Runs) >= 2 {
				ref = p
				break
			}
		}
	}
	if ref == nil {
		return nil, nil // compared once the reference has answered
	}
	selfCmp, err := workload.Compare(refAns.Runs[0], refAns.Runs[1])
	if err != nil {
		return nil, nil
	}
	self := selfCmp.Agreement
	out := map[string]store.OutputCheck{}
	record := func(p store.PointOutputs, c store.OutputCheck) error {
		c.Attempt = p.Attempt
		err := oc.st.SetOutputCheck(ctx, sr.id, p.PointID, c)
		if errors.Is(err, store.ErrStaleAttempt) {
			return nil // the point is running again: its new answers are compared when they come
		}
		if err != nil {
			return fmt.Errorf("orchestrator: output check of sweep %d: %w", sr.id, err)
		}
		out[p.PointID] = c
		return nil
	}
	if ref.Check == "" {
		if err := record(*ref, check(store.OutputCheckReference, self, selfCmp, refAns.Prompts, self)); err != nil {
			return out, err
		}
	}
	for _, p := range pts {
		if p.TP != tp || p.Baseline || len(p.Outputs) == 0 || p.Check != "" {
			continue
		}
		var ans checkAnswers
		if json.Unmarshal(p.Outputs, &ans) != nil || len(ans.Runs) == 0 {
			continue
		}
		cmp, err := workload.Compare(refAns.Runs[0], ans.Runs[0])
		if err != nil {
			continue // answers to other prompts (a spec changed under a resume cannot happen: its hash)
		}
		result := store.OutputCheckOK
		if workload.Mismatch(cmp.Agreement, self) {
			result = store.OutputCheckMismatch
		}
		if err := record(p, check(result, cmp.Agreement, cmp, ans.Prompts, self)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// check builds a stored check: its result, agreement and evidence.
func check(result string, agreement float64, cmp workload.Comparison, prompts []string, self float64) store.OutputCheck {
	ev := checkEvidence{Comparison: cmp, Reference: self, Threshold: workload.MismatchThreshold(self)}
	if cmp.Diverged && cmp.Prompt < len(prompts) {
		ev.PromptText = prompts[cmp.Prompt]
	}
	raw, _ := json.Marshal(ev) // strings and numbers always encode
	return store.OutputCheck{Result: result, Agreement: &agreement, Evidence: raw}
}

// checkWords says a stored check in one line.
func checkWords(c store.OutputCheck) string {
	var ev checkEvidence
	_ = json.Unmarshal(c.Evidence, &ev)
	return fmt.Sprintf("%s: %s; the reference agrees with itself %.2f, threshold %.2f", c.Result, ev.Comparison.Words(),
		ev.Reference, ev.Threshold)
}

// compareAll compares what can be compared at every tp (a resume may find answers of points whose
// reference came after them).
func (r *Runner) compareAll(ctx context.Context, sr *sweepRun) error {
	seen := map[int]bool{}
	for _, tp := range sr.spec.Matrix.TP {
		if seen[tp] {
			continue
		}
		seen[tp] = true
		if _, err := r.compareOutputs(ctx, sr, tp); err != nil {
			return err
		}
	}
	return nil
}
