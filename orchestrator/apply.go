package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
	"github.com/specsweep/specsweep/workload"
)

// Apply (issue 29; docs/cli.md "apply"): a configuration of a sweep made a host's server durably,
// then checked as the sweep measured it — the output check against the answers the sweep's baseline
// gave, and one load level against the sweep's figure — and rolled back to what ran before on any
// failure. The host keeps what is applied and what to roll back to (hostctl.Applier); the store keeps
// the history (store.BeginApply).

// applier is what Apply needs of a host (hostctl's *Remote satisfies it).
type applier interface {
	Apply(ctx context.Context, l hostctl.Launch, rec hostctl.AppliedRecord) (hostctl.Instance, error)
	Rollback(ctx context.Context) error
	Commit(ctx context.Context) error
}

// applyStore is what Apply needs of the store (*store.DB satisfies it).
type applyStore interface {
	BeginApply(ctx context.Context, a store.NewApply) (int64, error)
	FinishApply(ctx context.Context, id int64, e store.ApplyEnd) error
	OutputChecks(ctx context.Context, sweepID int64) ([]store.PointOutputs, error)
}

// ApplyRequest is one configuration to apply, and what its checks compare with.
type ApplyRequest struct {
	SweepID  int64
	Sweep    string      // the sweep's name
	SpecHash string      // the stored spec's hash: the prompt sets must be unchanged since
	Spec     *sweep.Spec // the sweep's spec, as stored
	Host     string      // the spec's host name
	Unit     string
	Point    sweep.Point // the planned point (argv, env, files); Files may hold more (an adaptive schedule)
	Choice   string      // recommended, adaptive or point
	Label    string
	By       string
	// Level is the concurrency of the speed check; Expected the sweep's output tok/s of this
	// configuration there (its median and lowest repeat); Tolerance how far below the lowest repeat
	// the check may measure (0.1: 10%).
	Level     int
	Expected  sweep.Stat
	Tolerance float64
	// Progress, when set, hears each step in a line for people.
	Progress func(string)
}

// ApplyFailure is which check failed (store.ApplyEnd.Failure).
type ApplyFailure string

// Apply failures.
const (
	ApplyStartFailed  ApplyFailure = "start"
	ApplyOutputFailed ApplyFailure = "output"
	ApplySpeedFailed  ApplyFailure = "speed"
	ApplyHostFailed   ApplyFailure = "host"
)

// ApplyOutcome is how an apply ended.
type ApplyOutcome struct {
	ID      int64        // the history row
	Result  string       // store.ApplyApplied, ApplyRolledBack, ApplyRollbackFailed, ApplyFailed
	Failure ApplyFailure // "" when applied
	Detail  string
	// Evidence: the failure's log lines, or the checks' figures.
	Evidence []string
	// Engine is the engine version the applied server reported ("" when it never answered).
	Engine string
	// TokS is the speed check's output tok/s (0 when not measured); Agreement the output check's
	// agreement with the baseline's answers (nil when not checked).
	TokS      float64
	Agreement *float64
}

// applyEvidence is what the history keeps of an apply (store.ApplyEnd.Evidence).
type applyEvidence struct {
	Lines     []string `json:"lines,omitempty"`
	Level     int      `json:"level,omitempty"`
	TokS      float64  `json:"tok_s,omitempty"`
	Expected  float64  `json:"expected_tok_s,omitempty"`
	Floor     float64  `json:"floor_tok_s,omitempty"`
	Agreement *float64 `json:"agreement,omitempty"`
	Reference float64  `json:"reference_agreement,omitempty"`
}

// Apply makes req's configuration the host's server, checks it and rolls it back on a failure. The
// error is for what went wrong outside the host and its server (the store); the outcome says how the
// apply went.
func Apply(ctx context.Context, st applyStore, h applier, req ApplyRequest) (ApplyOutcome, error) {
	say := func(format string, a ...any) {
		if req.Progress != nil {
			req.Progress(fmt.Sprintf(format, a...))
		}
	}
	id, err := st.BeginApply(ctx, store.NewApply{Action: store.ApplyActionApply, Host: req.Host, Unit: req.Unit, SweepID: req.SweepID,
		PointID: req.Point.ID, Choice: req.Choice, Label: req.Label, By: req.By})
	if err != nil {
		return ApplyOutcome{}, err
	}
	out := ApplyOutcome{ID: id}
	ev := applyEvidence{Level: req.Level}
	rd := newRedactor(req.Spec) // a server's log lines may print its environment
	// A failure from here rolls back; the rollback runs even when ctx was cancelled (Ctrl-C during
	// the checks must not leave an unchecked configuration applied).
	fail := func(f ApplyFailure, detail string, lines []string) (ApplyOutcome, error) {
		for i, l := range lines {
			lines[i] = rd.text(l)
		}
		out.Failure, out.Detail, out.Evidence = f, rd.text(detail), lines
		ev.Lines = lines
		say("%s check failed: %s; rolling back", f, detail)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		out.Result = store.ApplyRolledBack
		if err := h.Rollback(rctx); err != nil {
			out.Result = store.ApplyRollbackFailed
			out.Detail += "; the rollback failed too: " + rd.text(err.Error())
			say("rollback failed: %v", err)
		} else {
			say("rolled back: the host runs what it ran before")
		}
		return out, finishApply(rctx, st, id, out, ev)
	}

	// Not Kill (server.stop is for a sweep's own servers): the applied server serves the host's
	// traffic, and its stops (the operator's, a rollback's) drain it.
	launch := hostctl.Launch{Argv: req.Point.Argv, Env: req.Point.Env, Port: req.Spec.Server.Port, Tag: req.Point.ID,
		ReadyTimeout: req.Spec.Server.ReadyTimeout, StopTimeout: req.Spec.Server.StopTimeout, GPUWait: req.Spec.Server.GPUWait}
	for _, f := range req.Point.Files {
		launch.Files = append(launch.Files, hostctl.File{Path: f.Path, Data: []byte(f.Content)})
	}
	rec := hostctl.AppliedRecord{Sweep: req.Sweep, SweepID: req.SweepID, Point: req.Point.ID, Label: req.Label, Choice: req.Choice, By: req.By,
		AppliedAt: time.Now().UTC()}
	say("applying %s on %s", req.Label, req.Host)
	inst, err := h.Apply(ctx, launch, rec)
	if err != nil {
		var f *hostctl.Failure
		if errors.As(err, &f) {
			if f.Class == hostctl.ClassHostUnreachable {
				return fail(ApplyHostFailed, f.Detail, f.Evidence)
			}
			return fail(ApplyStartFailed, string(f.Class)+": "+f.Detail, f.Evidence)
		}
		return fail(ApplyHostFailed, err.Error(), nil)
	}
	say("waiting for the server to be ready")
	ready, err := inst.WaitReady(ctx)
	if err != nil {
		var f *hostctl.Failure
		if errors.As(err, &f) {
			return fail(ApplyStartFailed, string(f.Class)+": "+f.Detail, f.Evidence)
		}
		return fail(ApplyStartFailed, err.Error(), nil)
	}
	out.Engine = hostctl.EngineVersion(ready.ServerInfo)
	say("ready in %s", ready.Elapsed.Round(time.Second))

	url, client := inst.BaseURL(), inst.HTTPClient()
	if addr := inst.Address(); addr != "" {
		url, client = "http://"+addr, workload.NewHTTPClient(max(req.Level, 1))
		defer client.CloseIdleConnections()
	}
	apiKey := hostctl.APIKey(launch)

	// The output check, against the answers the sweep's baseline of the same tp gave.
	if oc := req.Spec.Workload.OutputCheck; oc.Enabled {
		ref, self, err := referenceAnswers(ctx, st, req.SweepID, req.Point.TP)
		switch {
		case err != nil:
			return fail(ApplyHostFailed, err.Error(), nil)
		case ref == nil:
			say("output check skipped: the sweep has no baseline answers at tp %d", req.Point.TP)
		default:
			say("output check: %d prompts", len(ref.Prompts))
			got, err := workload.Answer(ctx, workload.CheckConfig{URL: url, API: req.Spec.Workload.API, APIKey: apiKey, HTTPClient: client,
				Prompts: ref.Prompts, MaxTokens: oc.MaxTokens, Concurrency: len(ref.Prompts)})
			if err != nil {
				return fail(ApplyOutputFailed, "the server did not answer the output check: "+err.Error(), serverTrouble(ctx, inst))
			}
			cmp, err := workload.Compare(ref.Runs[0], got)
			if err != nil {
				return fail(ApplyOutputFailed, err.Error(), nil)
			}
			out.Agreement, ev.Agreement, ev.Reference = &cmp.Agreement, &cmp.Agreement, self
			if workload.Mismatch(cmp.Agreement, self) {
				return fail(ApplyOutputFailed, fmt.Sprintf("%s; the baseline agreed with itself %.2f, threshold %.2f",
					cmp.Words(), self, workload.MismatchThreshold(self)), nil)
			}
		}
	}

	// One load level, against the sweep's figure for this configuration there.
	if req.Level > 0 && req.Expected.OK() {
		sources, err := sourcesOf(ctx, req.Spec, req.SpecHash)
		if err != nil {
			return fail(ApplySpeedFailed, err.Error(), nil)
		}
		w := req.Spec.Workload
		requests := w.Requests
		if requests == 0 { // a sweep of phases: as many requests as streams, four times over
			requests = 4 * req.Level
		}
		cs := sources[0]
		cfg := workload.Config{URL: url, API: w.API, Concurrency: req.Level, Requests: requests, Warmup: w.WarmupRequests,
			InputTokens: cs.source.InputTokens, OutputTokens: w.OutputTokens, Dataset: w.Dataset, Seed: uint64(w.Seed),
			HTTPClient: client, APIKey: apiKey, Temperature: w.Temperature}
		if cs.prompts != nil {
			if cfg.Prompts, err = cs.prompts(cfg.Seed); err != nil {
				return fail(ApplySpeedFailed, err.Error(), nil)
			}
		}
		say("speed check: concurrency %d, %d requests", req.Level, requests)
		res, err := workload.Run(ctx, cfg)
		if err != nil || res == nil || res.Completed == 0 || res.Failed > 0 {
			detail := "the load level failed"
			if err != nil {
				detail += ": " + err.Error()
			} else if res != nil {
				detail += fmt.Sprintf(": %d of %d requests failed", res.Failed, res.Sent)
			}
			return fail(ApplySpeedFailed, detail, serverTrouble(ctx, inst))
		}
		floor := math.Min(req.Expected.Median, req.Expected.Min) * (1 - req.Tolerance)
		out.TokS, ev.TokS, ev.Expected, ev.Floor = res.OutputThroughput, res.OutputThroughput, req.Expected.Median, floor
		if res.OutputThroughput < floor {
			return fail(ApplySpeedFailed, fmt.Sprintf("%.1f output tok/s at concurrency %d, below %.1f (the sweep's %.1f, lowest repeat %.1f, less %.0f%%)",
				res.OutputThroughput, req.Level, floor, req.Expected.Median, req.Expected.Min, 100*req.Tolerance), nil)
		}
		say("speed check: %.1f output tok/s (the sweep measured %.1f)", res.OutputThroughput, req.Expected.Median)
	}
	if err := h.Commit(ctx); err != nil {
		return fail(ApplyHostFailed, "committing the apply: "+err.Error(), nil)
	}
	out.Result = store.ApplyApplied
	out.Detail = fmt.Sprintf("%s applied on %s", req.Label, req.Host)
	return out, finishApply(ctx, st, id, out, ev)
}

// finishApply records an apply's end; out's detail and evidence lines are already redacted.
func finishApply(ctx context.Context, st applyStore, id int64, out ApplyOutcome, ev applyEvidence) error {
	raw, _ := json.Marshal(ev) // strings and numbers always encode
	return st.FinishApply(ctx, id, store.ApplyEnd{Result: out.Result, Failure: string(out.Failure), Detail: out.Detail,
		Evidence: raw, EngineVersion: out.Engine})
}

// referenceAnswers are the answers of the sweep's first baseline of tp that answered twice (the
// output check's reference) and its agreement with itself; nil when there is none.
func referenceAnswers(ctx context.Context, st applyStore, sweepID int64, tp int) (*checkAnswers, float64, error) {
	pts, err := st.OutputChecks(ctx, sweepID)
	if err != nil {
		return nil, 0, fmt.Errorf("orchestrator: the output check's reference of sweep %d: %w", sweepID, err)
	}
	for _, p := range pts {
		var ans checkAnswers
		if p.TP != tp || !p.Baseline || len(p.Outputs) == 0 || json.Unmarshal(p.Outputs, &ans) != nil || len(ans.Runs) < 2 {
			continue
		}
		self, err := workload.Compare(ans.Runs[0], ans.Runs[1])
		if err != nil {
			continue
		}
		return &ans, self.Agreement, nil
	}
	return nil, 0, nil
}

// serverTrouble is the server's failure, when a check's requests failed because it died (its log
// lines as evidence), else nothing.
func serverTrouble(ctx context.Context, inst hostctl.Instance) []string {
	if f, err := inst.Check(ctx); err == nil && f != nil {
		return append([]string{string(f.Class) + ": " + f.Detail}, f.Evidence...)
	}
	return nil
}
