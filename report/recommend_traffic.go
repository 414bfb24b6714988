package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/sweep"
)

// A traffic mix (docs/report.md, "Recommendation"): the share of a server's time spent at each
// concurrency, written `c=1:0.2,c=16:0.5,c=64:0.3`. `specsweep recommend --traffic` reads it and
// `specsweep observe` writes it, so an observed mix is a file recommend reads as it is.

// Share is one term of a traffic mix: the share of the time a server spends at a concurrency.
type Share struct {
	Concurrency int     `json:"concurrency"`
	Share       float64 `json:"share"`
}

// Traffic is a traffic mix: its terms by concurrency, ascending, the shares summing to 1.
type Traffic []Share

// Bounds on what a user may type as a mix or SLOs.
const (
	// MaxTrafficTerms: one term per concurrency a sweep may measure (sweep.Limits,
	// workload.concurrency[]) at most.
	MaxTrafficTerms = 4096
	// MaxTrafficBytes bounds a mix's text (a --traffic @FILE): 4096 terms of c=4096:0.0001 and a
	// comment per line fit in it many times.
	MaxTrafficBytes = 256 << 10
	// ShareTolerance is how far from 1 the shares of a mix may sum.
	ShareTolerance = 1e-6
	// MaxSLO bounds an SLO's latency: a minute past any latency target a server is run to.
	MaxSLO = time.Hour
)

// maxConcurrency is the largest concurrency a sweep may measure (sweep.Limits).
func maxConcurrency() int {
	for _, l := range sweep.Limits() {
		if l.Key == sweep.LimitConcurrency {
			return int(l.Max)
		}
	}
	return MaxTrafficTerms
}

// ParseTraffic reads a traffic mix: terms `c=CONCURRENCY:SHARE` separated by commas, spaces or
// new lines, `#` starting a comment to the end of its line. Each concurrency is given once, from 1
// to the largest a sweep measures; each share is a number in (0, 1]; the shares sum to 1 (within
// ShareTolerance). The result is sorted by concurrency. Errors name the term (and its line when the
// text has several) and what is wrong with it.
func ParseTraffic(text string) (Traffic, error) {
	if len(text) > MaxTrafficBytes {
		return nil, fmt.Errorf("%d bytes, above the limit of %d (a mix has at most %d terms)", len(text), MaxTrafficBytes, MaxTrafficTerms)
	}
	lines := strings.Split(text, "\n")
	limit := maxConcurrency()
	var out Traffic
	seen := map[int]bool{}
	n := 0
	for ln, line := range lines {
		line, _, _ = strings.Cut(line, "#")
		for _, term := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			n++
			where := fmt.Sprintf("term %d %q", n, term)
			if len(lines) > 1 {
				where = fmt.Sprintf("line %d: term %q", ln+1, term)
			}
			if n > MaxTrafficTerms {
				return nil, fmt.Errorf("%s: more than %d terms (one per concurrency at most)", where, MaxTrafficTerms)
			}
			c, share, err := parseShare(term, limit)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if seen[c] {
				return nil, fmt.Errorf("%s: concurrency %d is given twice", where, c)
			}
			seen[c] = true
			out = append(out, Share{Concurrency: c, Share: share})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no term: want c=CONCURRENCY:SHARE terms, e.g. c=1:0.2,c=16:0.5,c=64:0.3")
	}
	sum := 0.0
	for _, s := range out {
		sum += s.Share
	}
	if math.Abs(sum-1) > ShareTolerance {
		return nil, fmt.Errorf("the shares sum to %s, not 1 (within %g): each is the share of the time at its concurrency", strconv.FormatFloat(sum, 'g', 10, 64), ShareTolerance)
	}
	slices.SortFunc(out, func(a, b Share) int { return a.Concurrency - b.Concurrency })
	return out, nil
}

// parseShare reads one term, c=CONCURRENCY:SHARE.
func parseShare(term string, limit int) (int, float64, error) {
	const want = "want c=CONCURRENCY:SHARE, e.g. c=16:0.5"
	rest, ok := strings.CutPrefix(term, "c=")
	if !ok {
		return 0, 0, errors.New(want)
	}
	cs, ss, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, 0, fmt.Errorf("no share after the concurrency: %s", want)
	}
	c, err := strconv.Atoi(cs)
	if err != nil || c < 1 || c > limit {
		return 0, 0, fmt.Errorf("concurrency %q is not an integer from 1 to %d", cs, limit)
	}
	share, err := strconv.ParseFloat(ss, 64)
	if err != nil || math.IsNaN(share) || share <= 0 || share > 1 {
		return 0, 0, fmt.Errorf("share %q is not a number above 0 and at most 1", ss)
	}
	return c, share, nil
}

// String is the mix in ParseTraffic's syntax: "c=1:0.2,c=16:0.5,c=64:0.3".
func (t Traffic) String() string {
	terms := make([]string, len(t))
	for i, s := range t {
		terms[i] = fmt.Sprintf("c=%d:%s", s.Concurrency, strconv.FormatFloat(s.Share, 'g', -1, 64))
	}
	return strings.Join(terms, ",")
}

// Levels are the mix's concurrencies, ascending.
func (t Traffic) Levels() []int {
	out := make([]int, len(t))
	for i, s := range t {
		out[i] = s.Concurrency
	}
	return out
}

// EqualTraffic is the mix of equal shares over levels (the default: each measured level as
// much of the time as the others).
func EqualTraffic(levels []int) Traffic {
	out := make(Traffic, len(levels))
	for i, c := range levels {
		out[i] = Share{Concurrency: c, Share: 1 / float64(len(levels))}
	}
	slices.SortFunc(out, func(a, b Share) int { return a.Concurrency - b.Concurrency })
	return out
}

// SLO is a latency target every level of the mix must meet: the median over repeats of a
// per-run percentile (run_summary's) at most Max.
type SLO struct {
	Metric string // one of SLOMetrics
	Max    time.Duration
}

// String is the SLO as --slo writes it: "ttft_p99=2s".
func (o SLO) String() string { return o.Metric + "=" + o.Max.String() }

// SLOMetrics are the latencies an SLO may bound: the percentiles run_summary records that the
// one aggregation keeps per level (Cell).
var sloMetrics = []string{"ttft_p99", "ttft_p50", "tpot_p50", "itl_p50"}

// SLOMetrics returns the names an SLO may bound, in the order --help lists them.
func SLOMetrics() []string { return slices.Clone(sloMetrics) }

// sloValue is a cell's figure for an SLO metric (ms).
func sloValue(c *Cell, metric string) Stat {
	switch metric {
	case "ttft_p99":
		return c.TTFTP99
	case "ttft_p50":
		return c.TTFTP50
	case "tpot_p50":
		return c.TPOTP50
	case "itl_p50":
		return c.ITLP50
	}
	return Stat{}
}

// ParseSLOs reads SLOs: `METRIC=DURATION` terms separated by commas (ttft_p99=2s,itl_p50=30ms),
// each metric once, each duration with its unit, above 0 and at most MaxSLO.
func ParseSLOs(text string) ([]SLO, error) {
	if len(text) > 1024 {
		return nil, fmt.Errorf("%d bytes, above the limit of 1024", len(text))
	}
	var out []SLO
	n := 0
	for _, term := range strings.Split(text, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		n++
		where := fmt.Sprintf("term %d %q", n, term)
		if n > len(sloMetrics) {
			return nil, fmt.Errorf("%s: more than %d terms (one per metric: %s)", where, len(sloMetrics), strings.Join(sloMetrics, ", "))
		}
		m, d, ok := strings.Cut(term, "=")
		if !ok {
			return nil, fmt.Errorf("%s: want METRIC=DURATION, e.g. ttft_p99=2s", where)
		}
		if !slices.Contains(sloMetrics, m) {
			return nil, fmt.Errorf("%s: unknown metric %q (known: %s)", where, m, strings.Join(sloMetrics, ", "))
		}
		if slices.ContainsFunc(out, func(o SLO) bool { return o.Metric == m }) {
			return nil, fmt.Errorf("%s: %s is given twice", where, m)
		}
		v, err := time.ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a duration with its unit (e.g. 2s, 30ms)", where, d)
		}
		if v <= 0 || v > MaxSLO {
			return nil, fmt.Errorf("%s: %s is not above 0 and at most %s", where, d, MaxSLO)
		}
		out = append(out, SLO{Metric: m, Max: v})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no term: want METRIC=DURATION terms, e.g. ttft_p99=2s,itl_p50=30ms (metrics: %s)", strings.Join(sloMetrics, ", "))
	}
	return out, nil
}

// fmtMs is a latency in ms as a duration is written: "2.41s", "30ms", "0.85ms".
func fmtMs(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(math.Round(ms)/1000, 'f', -1, 64) + "s"
	}
	return strconv.FormatFloat(math.Round(ms*100)/100, 'f', -1, 64) + "ms"
}

// ObservedSample is one sample of a running server: how many requests it had in flight (running
// and queued) and for how long that held (until the next sample).
type ObservedSample struct {
	InFlight int
	Held     time.Duration
}

// Observation is what ObservedTraffic made of the samples.
type Observation struct {
	Traffic Traffic
	// Samples counts the samples, Idle those with nothing in flight (left out of the mix), and
	// IdleShare is the idle samples' share of the time observed.
	Samples, Idle int
	IdleShare     float64
	// Clamped counts busy samples above the largest concurrency a sweep measures (counted at it;
	// only without levels). Tiny lists the levels whose share rounds to 0 (left out).
	Clamped int
	Tiny    []int
}

// ShareDigits is the precision of an observed mix's shares (0.0001: 0.18 s of 30 minutes).
const ShareDigits = 4

// ObservedTraffic is the mix of the samples: each level's share of the busy time (the time with
// something in flight), each sample holding for its Held. A sample with nothing in flight is left
// out: an idle server produces no tokens whatever its configuration, so idle time adds nothing to
// any configuration's time-weighted tok/s and changes no ranking. With levels, a sample counts at
// the nearest level (a tie goes to the larger one, the heavier load); without, at its own count
// (clamped to the largest concurrency a sweep measures). Shares are rounded to ShareDigits so that
// they sum to exactly 1 (largest remainder); a level whose share rounds to 0 is left out (Tiny).
func ObservedTraffic(samples []ObservedSample, levels []int) (Observation, error) {
	var ob Observation
	limit := maxConcurrency()
	levels = slices.Sorted(slices.Values(levels))
	levels = slices.Compact(levels)
	held := map[int]time.Duration{}
	var busy, total time.Duration
	busySamples := 0
	for _, s := range samples {
		ob.Samples++
		total += s.Held
		if s.InFlight <= 0 {
			ob.Idle++
			continue
		}
		c := s.InFlight
		if len(levels) > 0 {
			c = nearest(levels, c)
		} else if c > limit {
			c = limit
			ob.Clamped++
		}
		held[c] += s.Held
		busy += s.Held
		busySamples++
	}
	if total > 0 {
		ob.IdleShare = float64(total-busy) / float64(total)
	}
	switch {
	case busySamples == 0:
		return ob, fmt.Errorf("the server had nothing in flight in any of the %d sample(s): no traffic to weigh", ob.Samples)
	case busy <= 0:
		return ob, fmt.Errorf("the %d busy sample(s) hold no time: no traffic to weigh", busySamples)
	}
	// Largest remainder: units of 10^-ShareDigits summing to exactly 10^ShareDigits.
	unit := int64(math.Pow10(ShareDigits))
	type part struct {
		c     int
		units int64
		rem   float64
	}
	var parts []part
	var given int64
	for c, h := range held {
		exact := float64(h) / float64(busy) * float64(unit)
		u := int64(math.Floor(exact))
		parts = append(parts, part{c, u, exact - float64(u)})
		given += u
	}
	slices.SortFunc(parts, func(a, b part) int {
		if a.rem != b.rem {
			if a.rem > b.rem {
				return -1
			}
			return 1
		}
		return a.c - b.c
	})
	for i := 0; given < unit; i = (i + 1) % len(parts) {
		parts[i].units++
		given++
	}
	slices.SortFunc(parts, func(a, b part) int { return a.c - b.c })
	for _, p := range parts {
		if p.units == 0 {
			ob.Tiny = append(ob.Tiny, p.c)
			continue
		}
		ob.Traffic = append(ob.Traffic, Share{Concurrency: p.c, Share: float64(p.units) / float64(unit)})
	}
	return ob, nil
}

// nearest is the level of levels (ascending, not empty) nearest to c; a tie goes to the larger.
func nearest(levels []int, c int) int {
	best := levels[0]
	for _, l := range levels[1:] {
		if d, bd := abs(l-c), abs(best-c); d <= bd {
			best = l
		}
	}
	return best
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
