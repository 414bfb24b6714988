package workload

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/sim"
)

// BenchmarkPrecisionAgainstFixedCounts answers the question workload.precision is for: on the
// simulator's built-in profiles and the synthetic ones of sim/testdata/profiles (speed noise 0.1
// added), does a precision-targeted level find the
// same best configuration per concurrency level as fixed counts four times larger, and for how much
// of their measurement time? Each level runs in virtual time on the simulator's own scheduler
// (sim.SimulateEach) with the level's own interval and stopping rule (intervalAcc.decide), so the
// figures are the method's, not the machine's. A level's figure is what a sweep stores (completion
// tokens over the level's time, sim's OutputTokS), its time the level's makespan. Run it with
// bench/precision.sh; the figures are in docs/benchmarks.md.
func BenchmarkPrecisionAgainstFixedCounts(b *testing.B) {
	const (
		base          = 200 // a usual fixed count per level
		input, output = 256, 256
		noise         = 0.1
		target, conf  = 0.02, 0.95
	)
	levels := []int{1, 16, 64}
	points := []struct {
		name string
		args []string
	}{{"baseline", nil}}
	for s := 1; s <= 5; s++ {
		points = append(points, struct {
			name string
			args []string
		}{fmt.Sprintf("eagle3 s=%d", s), []string{"--speculative-algorithm", "EAGLE3", "--speculative-num-steps", fmt.Sprint(s),
			"--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", fmt.Sprint(s + 1)}})
	}
	profiles := map[string]*sim.Profile{}
	for n, p := range sim.Profiles {
		profiles[n] = p
	}
	// The synthetic shapes the search is measured on too (bench/search.sh).
	files, _ := filepath.Glob("../sim/testdata/profiles/*.json")
	for _, f := range files {
		p, err := sim.LoadProfile(f)
		if err != nil {
			b.Fatal(err)
		}
		profiles[strings.TrimSuffix(filepath.Base(f), ".json")] = p
	}
	var names []string
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for range b.N {
		var out strings.Builder
		fmt.Fprintf(&out, "\nfixed %d and %d requests against precision ±%g%% at %g (cap %d) per level; speed noise %g\n",
			base, 4*base, 100*target, conf, 4*base, noise)
		fmt.Fprintf(&out, "%-22s %5s  %-14s %-14s %-14s %9s %9s\n", "profile", "level", "best fixed x4", "best precision", "best fixed x1", "time", "requests")
		var same, same1, total int
		var tPrec, tFixed float64
		for _, name := range names {
			p := *profiles[name]
			p.Noise = noise
			for _, c := range levels {
				type fig struct {
					tok, secs float64
					reqs      int
				}
				fixed4, fixed1, prec := map[string]fig{}, map[string]fig{}, map[string]fig{}
				for i, pt := range points {
					a, _, err := sim.ParseArgs(append([]string{"--model-path", "/models/x", "--tp-size", "4"}, pt.args...))
					if err != nil {
						b.Fatal(err)
					}
					m := sim.NewModel(a, &p, 96)
					seed := uint64(1000*c + 10*i)
					r4 := sim.Simulate(m, c, 4*base, input, output, seed+1)
					r1 := sim.Simulate(m, c, base, input, output, seed+2)
					fixed4[pt.name] = fig{r4.OutputTokS, r4.Makespan.Seconds(), r4.Requests}
					fixed1[pt.name] = fig{r1.OutputTokS, r1.Makespan.Seconds(), r1.Requests}
					pr := Precision{Metric: MetricOutputTokS, Target: target, Confidence: conf}.normalized(c, 4*base)
					acc := newIntervalAcc(MetricOutputTokS, c)
					var next time.Duration
					stopped, completed := false, 0
					rp := sim.SimulateEach(m, c, pr.MaxRequests, input, output, seed+3, func(x sim.Completion) bool {
						completed++
						acc.add(x.FirstToken, x.End, int64(x.Tokens), x.FirstToken-x.Sent, x.End-x.Sent)
						if stopped {
							return false
						}
						for ; next <= x.End; next += precisionCheckEvery {
							if _, ok := acc.decide(next, completed, pr); ok {
								stopped = true
								return false
							}
						}
						return true
					})
					prec[pt.name] = fig{rp.OutputTokS, rp.Makespan.Seconds(), rp.Requests}
				}
				best := func(f map[string]fig) string {
					var ns []string
					for n := range f {
						ns = append(ns, n)
					}
					slices.Sort(ns)
					return slices.MaxFunc(ns, func(x, y string) int {
						switch {
						case f[x].tok < f[y].tok:
							return -1
						case f[x].tok > f[y].tok:
							return 1
						}
						return 0
					})
				}
				b4, bp, b1 := best(fixed4), best(prec), best(fixed1)
				var s4, sp float64
				var rq4, rqp int
				for _, pt := range points {
					s4 += fixed4[pt.name].secs
					sp += prec[pt.name].secs
					rq4 += fixed4[pt.name].reqs
					rqp += prec[pt.name].reqs
				}
				total++
				if bp == b4 {
					same++
				}
				if b1 == b4 {
					same1++
				}
				tPrec += sp
				tFixed += s4
				mark := func(x string) string {
					if x == b4 {
						return x
					}
					return x + " (!)"
				}
				fmt.Fprintf(&out, "%-22s %5d  %-14s %-14s %-14s %8.2fx %8.2fx\n", name, c, b4, mark(bp), mark(b1), sp/s4, float64(rqp)/float64(rq4))
			}
		}
		fmt.Fprintf(&out, "precision: same best as fixed x4 at %d of %d levels, in %.2f of its measurement time; fixed x1: same best at %d of %d\n",
			same, total, tPrec/tFixed, same1, total)
		b.Log(out.String())
	}
}
