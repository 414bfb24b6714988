package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/workload"
)

func observeCmd() command {
	return newCommand("observe", "URL",
		"Sample a running SGLang server's requests in flight and write its traffic mix for `specsweep recommend --traffic @FILE`.", observeRun).
		withExamples("specsweep observe http://10.0.0.5:30000 --for 30m -o mix.txt",
			"specsweep observe http://10.0.0.5:30000 --for 2h --every 5s --levels 1,16,64 -o mix.txt  # counted at the sweep's levels",
			"specsweep recommend nightly --traffic @mix.txt")
}

type observeOptions struct {
	URL    string        // URL: the server's base URL
	For    time.Duration // --for
	Every  time.Duration // --every
	APIKey string        // --api-key: "" for $SPECSWEEP_API_KEY
	Levels string        // --levels: comma-separated levels, "" for each sample's own count
	Out    string        // -o: the file, "" or "-" for stdout
}

func (o *observeOptions) flags(fs *flag.FlagSet) {
	fs.DurationVar(&o.For, "for", 0, "observe for this `DURATION`, e.g. 30m (required; Ctrl-C stops early and writes what was observed)")
	fs.DurationVar(&o.Every, "every", time.Second, "sample every `INTERVAL`")
	fs.StringVar(&o.APIKey, "api-key", "", "bearer `TOKEN` for a server started with --api-key (default $SPECSWEEP_API_KEY)")
	fs.StringVar(&o.Levels, "levels", "", "comma-separated `LEVELS`, e.g. a sweep's 1,16,64: each sample counts at the nearest (a tie: the larger); default: at its own count")
	fs.StringVar(&o.Out, "o", "", "write the mix to `FILE` (default stdout)")
}

func (o *observeOptions) args(pos []string) (err error) {
	o.URL, err = oneArg(pos, "URL")
	return err
}

// Bounds of observe's flags.
const (
	minObserveEvery = 10 * time.Millisecond
	maxObserveFor   = 7 * 24 * time.Hour
	maxSamples      = 1_000_000 // --for / --every: one sample each, kept until the end
	maxLevels       = 64        // as a spec's workload.concurrency#
	metricsLimit    = 32 << 20  // bytes of one /metrics answer
	scrapeTimeout   = 10 * time.Second
)

// observeRun samples o.URL's /metrics every o.Every for o.For and writes the observed mix.
func observeRun(ctx context.Context, env Env, o *observeOptions) error {
	metricsURL, shown, err := metricsURLOf(o.URL)
	if err != nil {
		return err
	}
	switch {
	case o.For <= 0:
		return usagef("--for is required: how long to observe, e.g. 30m")
	case o.For > maxObserveFor:
		return usagef("--for %s is above the limit %s", o.For, maxObserveFor)
	case o.Every < minObserveEvery:
		return usagef("--every %s is below the minimum %s", o.Every, minObserveEvery)
	case o.Every > o.For:
		return usagef("--every %s is longer than --for %s: not one sample", o.Every, o.For)
	case o.For/o.Every > maxSamples:
		return usagef("--for %s at --every %s is %d samples, above the limit %d: sample less often", o.For, o.Every, o.For/o.Every, maxSamples)
	}
	var levels []int
	if o.Levels != "" {
		if levels, err = observeLevels(o.Levels); err != nil {
			return err
		}
	}
	key := o.APIKey
	if key == "" {
		key = env.Getenv("SPECSWEEP_API_KEY")
	}
	// The file is made before the first sample, so a path that cannot be written fails now, not
	// after --for.
	var out io.Writer = env.Stdout
	var file *os.File
	if o.Out != "" && o.Out != "-" {
		if file, err = os.Create(o.Out); err != nil {
			return fmt.Errorf("-o: creating the mix's file: %w", err)
		}
		out = file
	}
	fail := func(err error) error {
		if file != nil {
			file.Close()
			os.Remove(file.Name())
		}
		return err
	}
	client := &http.Client{Timeout: scrapeTimeout}
	fmt.Fprintf(env.Stderr, "observing %s for %s, a sample every %s (Ctrl-C stops early and writes what was observed)\n", shown, o.For, o.Every)
	ob, err := observe(ctx, client, metricsURL, shown, key, o.For, o.Every)
	if err != nil {
		return fail(err)
	}
	mix, err := report.ObservedTraffic(ob.samples, levels)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", shown, err))
	}
	text := observedText(shown, o, levels, ob, mix)
	if _, err := io.WriteString(out, text); err != nil {
		return fail(fmt.Errorf("writing the mix: %w", err))
	}
	if file != nil {
		if err := file.Close(); err != nil {
			return fail(fmt.Errorf("writing the mix to %s: %w", o.Out, err))
		}
		fmt.Fprintf(env.Stderr, "wrote %s: %s\n", o.Out, mix.Traffic)
	}
	fmt.Fprintln(env.Stderr, observedNote(ob, mix))
	return nil
}

// metricsURLOf is the /metrics URL of a server's base URL (one already ending in /metrics is
// kept), and the URL as shown (without a password).
func metricsURLOf(raw string) (string, string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", "", usagef("bad URL %q: want the server's base URL, http://HOST:PORT (or https://)", raw)
	}
	shown := u.Redacted()
	if !strings.HasSuffix(u.Path, "/metrics") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/metrics"
	}
	return u.String(), shown, nil
}

// observeLevels reads --levels: distinct concurrencies from 1 to the largest a sweep measures.
func observeLevels(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > report.MaxTrafficTerms {
			return nil, usagef("bad --levels %q: %q is not a concurrency from 1 to %d", s, f, report.MaxTrafficTerms)
		}
		for _, l := range out {
			if l == n {
				return nil, usagef("bad --levels %q: %d is given twice", s, n)
			}
		}
		out = append(out, n)
	}
	if len(out) > maxLevels {
		return nil, usagef("bad --levels %q: %d levels, above the limit %d", s, len(out), maxLevels)
	}
	return out, nil
}

// observation is what observe sampled.
type observation struct {
	samples      []report.ObservedSample
	failed       int   // samples that got no answer after the first
	lastErr      error // the last such failure
	queue        bool  // the server exports its queue gauge (counted in flight)
	start, end   time.Time
	stoppedEarly bool // ctx ended before --for
}

// maxScrapes bounds the scrapes awaiting an answer at once: a tick that finds that many is skipped
// (the sample before it holds on).
const maxScrapes = 8

// attempt is one scrape, kept small (up to maxSamples of them are kept until the end): when it was
// sent, after the start, and what it found.
type attempt struct {
	at       time.Duration
	inFlight int32
	state    attemptState
	queue    bool
}

type attemptState uint8

const (
	attemptSent     attemptState = iota
	attemptAnswered              // a sample
	attemptFailed                // counted, holds no time
	attemptDropped               // cut short by ctx's end: counts as never made
)

// observe samples until forD has passed or ctx ends. The first sample must succeed: its failure
// (an unreachable server, no /metrics, no gauge) is the error; a later one is counted and holds no
// time. The samples after the first are sent on the clock, every `every`, each without waiting for
// the answers before it, and each holds from its sending to the next one's (the last: to the end).
// Sending the next only after an answer let the answer's latency decide how long a sample held: a
// server slower to answer at a higher count had its samples there hold longer, and that level count
// for more than its time (a loaded run of the test: c=4 0.444 where the server had 0.503).
func observe(ctx context.Context, client *http.Client, metricsURL, shown, key string, forD, every time.Duration) (*observation, error) {
	ob := &observation{start: time.Now()}
	end := ob.start.Add(forD)
	n, queue, err := scrape(ctx, client, metricsURL, key)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("observing %s: stopped before the first sample", shown)
		}
		return nil, fmt.Errorf("observing %s: %w", shown, err)
	}
	attempts := []attempt{{inFlight: int32(n), state: attemptAnswered, queue: queue}}
	type answer struct {
		i        int
		inFlight int
		queue    bool
		err      error
	}
	answers := make(chan answer, maxScrapes)
	pending := 0
	lastFailed := -1 // the index of the last failure, whose error is kept
	record := func(r answer) {
		pending--
		a := &attempts[r.i]
		switch {
		case r.err != nil && ctx.Err() != nil:
			a.state = attemptDropped
		case r.err != nil:
			a.state = attemptFailed
			if r.i > lastFailed {
				lastFailed, ob.lastErr = r.i, r.err
			}
		default:
			a.state, a.inFlight, a.queue = attemptAnswered, int32(r.inFlight), r.queue
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	done := time.NewTimer(time.Until(end))
	defer done.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			ob.stoppedEarly = true
			break loop
		case <-done.C:
			break loop
		case r := <-answers:
			record(r)
		case <-tick.C:
			at := time.Now()
			if pending >= maxScrapes || !at.Before(end) {
				continue
			}
			i := len(attempts)
			attempts = append(attempts, attempt{at: at.Sub(ob.start)})
			pending++
			go func() {
				n, queue, err := scrape(ctx, client, metricsURL, key)
				answers <- answer{i, n, queue, err}
			}()
		}
	}
	ob.end = time.Now()
	if ob.end.After(end) {
		ob.end = end
	}
	// The scrapes still out are answered (they were sent before the end) or, ctx ended, cut
	// short; each ends within the client's timeout.
	for pending > 0 {
		record(<-answers)
	}
	// Each sample holds until the next attempt not dropped (the last: until the end); a failure's
	// time counts for nothing.
	prev := -1 // the last sample in ob.samples, until the next attempt tells how long it held
	var prevAt time.Duration
	for _, a := range attempts {
		if a.state == attemptDropped {
			continue
		}
		if prev >= 0 {
			ob.samples[prev].Held = max(a.at-prevAt, 0)
			prev = -1
		}
		if a.state == attemptFailed {
			ob.failed++
			continue
		}
		ob.queue = ob.queue || a.queue
		ob.samples = append(ob.samples, report.ObservedSample{InFlight: int(a.inFlight)})
		prev, prevAt = len(ob.samples)-1, a.at
	}
	if prev >= 0 {
		ob.samples[prev].Held = max(ob.end.Sub(ob.start)-prevAt, 0)
	}
	return ob, nil
}

// scrape reads the requests in flight from one /metrics answer: sglang:num_running_reqs and, when
// the server exports it, sglang:num_queue_reqs (a queued request is in flight for its client, as
// in the sweep's closed loop at that concurrency), each summed over its series (one per data
// parallel rank).
func scrape(ctx context.Context, client *http.Client, metricsURL, key string) (inFlight int, queue bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return 0, false, fmt.Errorf("GET %s: %w", metricsURL, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("cannot reach the server: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, metricsLimit+1))
	if err != nil {
		return 0, false, fmt.Errorf("reading /metrics: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return 0, false, errors.New("it serves no /metrics (404): the server was started without --enable-metrics (SGLang serves its metrics only with it)")
	case (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && key == "":
		return 0, false, fmt.Errorf("/metrics needs the server's API key (%s): give --api-key or set $SPECSWEEP_API_KEY", resp.Status)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return 0, false, fmt.Errorf("/metrics refused the API key (%s)", resp.Status)
	case resp.StatusCode != http.StatusOK:
		return 0, false, fmt.Errorf("/metrics answered %s", resp.Status)
	case len(b) > metricsLimit:
		return 0, false, fmt.Errorf("/metrics answered more than %d MiB", metricsLimit>>20)
	}
	running, hasRunning, queued, hasQueue, err := parseInFlight(b)
	if err != nil {
		return 0, false, err
	}
	if !hasRunning {
		return 0, false, errors.New("its /metrics has no sglang:num_running_reqs gauge: is it an SGLang server started with --enable-metrics?")
	}
	return running + queued, hasQueue, nil
}

// parseInFlight sums every series of the running and queued gauges of SGLang's /metrics
// (workload.SumMetrics, strictly: a sample that cannot be read is not a sample).
func parseInFlight(b []byte) (running int, hasRunning bool, queued int, hasQueue bool, err error) {
	sums, err := workload.SumMetrics(b, true, "sglang:num_running_reqs", "sglang:num_queue_reqs")
	if err != nil {
		return 0, false, 0, false, err
	}
	run, hasRunning := sums["sglang:num_running_reqs"]
	que, hasQueue := sums["sglang:num_queue_reqs"]
	for name, v := range map[string]float64{"sglang:num_running_reqs": run, "sglang:num_queue_reqs": que} {
		if v < 0 || v > math.MaxInt32 {
			return 0, false, 0, false, fmt.Errorf("/metrics: %s is %q, not a count", name, strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	return int(math.Round(run)), hasRunning, int(math.Round(que)), hasQueue, nil
}

// observedText is the file: comment lines saying what was observed, then the mix in --traffic's
// syntax.
func observedText(shown string, o *observeOptions, levels []int, ob *observation, mix report.Observation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# specsweep observe %s: %d sample(s) every %s from %s to %s\n", shown, mix.Samples, o.Every,
		ob.start.UTC().Format(time.RFC3339), ob.end.UTC().Format(time.RFC3339))
	what := "sglang:num_running_reqs"
	if ob.queue {
		what += " + sglang:num_queue_reqs"
	}
	fmt.Fprintf(&b, "# in flight = %s; the share of the busy time at each concurrency", what)
	if len(levels) > 0 {
		fmt.Fprintf(&b, ", each sample counted at the nearest of %s (a tie: the larger)", intList(levels))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "# %d idle sample(s) (nothing in flight, %.1f%% of the time) left out: an idle server serves no tokens whatever its configuration\n",
		mix.Idle, 100*mix.IdleShare)
	if ob.failed > 0 {
		fmt.Fprintf(&b, "# %d sample(s) got no answer and count for no time (the last: %v)\n", ob.failed, ob.lastErr)
	}
	if ob.stoppedEarly {
		fmt.Fprintf(&b, "# stopped early, after %s of %s\n", ob.end.Sub(ob.start).Round(time.Second), o.For)
	}
	if mix.Clamped > 0 {
		fmt.Fprintf(&b, "# %d sample(s) above %d in flight counted at %d\n", mix.Clamped, report.MaxTrafficTerms, report.MaxTrafficTerms)
	}
	if len(mix.Tiny) > 0 {
		fmt.Fprintf(&b, "# left out, their share below %g: c=%s\n", math.Pow10(-report.ShareDigits)/2, intList(mix.Tiny))
	}
	b.WriteString(mix.Traffic.String() + "\n")
	return b.String()
}

// observedNote is the line on stderr after the mix.
func observedNote(ob *observation, mix report.Observation) string {
	s := fmt.Sprintf("observed %d sample(s) over %s: %s", mix.Samples, ob.end.Sub(ob.start).Round(time.Millisecond), report.MixWords(mix.Traffic, false))
	if mix.Idle > 0 {
		s += fmt.Sprintf("; %d idle sample(s) (%.1f%% of the time) left out", mix.Idle, 100*mix.IdleShare)
	}
	if ob.failed > 0 {
		s += fmt.Sprintf("; %d sample(s) failed (the last: %v)", ob.failed, ob.lastErr)
	}
	return s
}
