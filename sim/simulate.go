package sim

import "time"

// SimResult is the outcome of a closed-loop load run in virtual time.
type SimResult struct {
	Concurrency    int
	Requests       int
	OutputTokS     float64 // completion tokens / makespan
	PerStreamTokS  float64 // mean over requests of decode tokens / decode time
	AcceptLen      float64 // completion tokens per verify step (decode only)
	MeanTTFT       time.Duration
	MeanRunning    float64
	Makespan       time.Duration
	CompletionToks int
	// StepsUsed[k] counts the decode batches an adaptive server ran at num_steps k (all 0 for a
	// server of fixed steps); an array keeps SimResult comparable.
	StepsUsed [MaxAdaptiveSteps + 1]int
}

// Simulate drives the same scheduler the server runs, in virtual time (no
// sleeping): concurrency clients each send a request of input prompt tokens
// asking for output tokens with ignore_eos, and send the next one as soon as
// theirs finishes, until requests have been sent. seed picks the requests'
// seeds and the speed noise's (Profile.Noise): the same seed gives the same
// result. The prompts are neutral text (the random dataset's); past the
// profile's CtxKnee their length lowers the acceptance.
func Simulate(m *Model, concurrency, requests, input, output int, seed uint64) SimResult {
	return SimulateContent(m, ContentNeutral, concurrency, requests, input, output, seed)
}

// SimulateContent is Simulate with prompts of content class class: what a
// server measures for a load whose prompts ContentScore puts in that class.
func SimulateContent(m *Model, class ContentClass, concurrency, requests, input, output int, seed uint64) SimResult {
	return simulate(m, class, concurrency, requests, input, output, seed, nil)
}

// Completion is one request of a virtual-time run as SimulateEach reports it: offsets from the
// run's start of its sending, its first token and its end, and its tokens.
type Completion struct {
	Sent, FirstToken, End time.Duration
	Tokens                int
}

// SimulateEach is Simulate telling each request as it completes, in completion order, to each,
// which returns whether to go on sending: once it says false no request is sent any more and those
// in flight finish (told too; what they return is ignored). It measures a client's rule on the
// simulator's own scheduler and noise without a clock: the load generator's precision test.
func SimulateEach(m *Model, concurrency, requests, input, output int, seed uint64, each func(Completion) bool) SimResult {
	return simulate(m, ContentNeutral, concurrency, requests, input, output, seed, each)
}

func simulate(m *Model, class ContentClass, concurrency, requests, input, output int, seed uint64, each func(Completion) bool) SimResult {
	e := NewEngine(m, 1, nil)
	e.seedNoise(seed)
	now := time.Unix(1_000_000, 0)
	t0 := now
	sent := 0
	var active []*Request
	res := SimResult{Concurrency: concurrency}
	var ttft time.Duration
	var streamSum float64
	var runWeighted float64
	submit := func() {
		r := NewRequest("sim", input, output, true, 0, seed+uint64(sent)*7919)
		r.Arrival = now
		r.Content.Class = class
		sent++
		e.Submit(r)
		active = append(active, r)
	}
	for sent < min(concurrency, requests) {
		submit()
	}
	for len(active) > 0 {
		d, commit := e.Iterate(now)
		if commit == nil {
			break
		}
		runWeighted += float64(len(e.running)) * d.Seconds()
		now = now.Add(d)
		commit(now)
		keep := active[:0]
		for _, r := range active {
			_, total, verify, done, _ := r.Take(nil)
			if !done {
				keep = append(keep, r)
				continue
			}
			res.Requests++
			res.CompletionToks += total
			first := r.FirstGen()
			if each != nil && !each(Completion{Sent: r.Arrival.Sub(t0), FirstToken: first.Sub(t0), End: now.Sub(t0), Tokens: total}) {
				requests = sent // stop sending; those in flight finish
			}
			ttft += first.Sub(r.Arrival)
			if dec := now.Sub(first).Seconds(); dec > 0 && total > 1 {
				streamSum += float64(total-1) / dec
			}
			if verify > 0 {
				res.AcceptLen += float64(total-1) / float64(verify)
			}
		}
		done := len(active) - len(keep)
		active = keep
		for i := 0; i < done && sent < requests; i++ {
			submit()
		}
	}
	res.Makespan = now.Sub(t0)
	for k, n := range e.StepsUsed() {
		res.StepsUsed[k] = n
	}
	if res.Requests > 0 {
		res.OutputTokS = float64(res.CompletionToks) / res.Makespan.Seconds()
		res.PerStreamTokS = streamSum / float64(res.Requests)
		res.AcceptLen /= float64(res.Requests)
		res.MeanTTFT = ttft / time.Duration(res.Requests)
		res.MeanRunning = runWeighted / res.Makespan.Seconds()
	}
	return res
}
