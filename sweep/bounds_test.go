package sweep

import (
	"os"
	"strings"
	"testing"
)

// TestLimitsTable: every bound has a key, a reason and a reader; keys are unique; docs/spec.md's
// "Limits" table has a row per bound with the same key, range and reason.
func TestLimitsTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range Limits() {
		if l.Key == "" || l.Why == "" || l.values == nil || l.Min > l.Max || seen[l.Key] {
			t.Errorf("bad or duplicate limit %+v", l)
		}
		seen[l.Key] = true
		row := "| `" + l.Key + "` | " + describeLimit(l) + " | " + l.Why + " |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/spec.md has no row\n%s", row)
		}
	}
}

// TestLimitsAtTheirBounds: limits.good.yaml holds every bound's maximum and limits-min.good.yaml
// every minimum (both validate), so the bounds are inclusive and the files test what they claim.
func TestLimitsAtTheirBounds(t *testing.T) {
	hi, err := Load("testdata/limits.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lo, err := Load("testdata/limits-min.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// What the files cannot hold at once: the plan's sizes (points-limit.good.yaml has 10000
	// points) and the spec's own size.
	skipMax := map[string]bool{LimitSpecBytes: true, LimitCombinations: true, LimitPoints: true, LimitRuns: true, LimitEveryMin: true,
		LimitDatasets: true, LimitLengths: true, LimitPhases: true, LimitPhaseFor: true}
	skipMin := map[string]bool{LimitPhases: true, LimitPhaseFor: true, LimitSpecBytes: true, LimitHosts: true, LimitCombinations: true, LimitPoints: true, LimitRuns: true,
		LimitLevels: true, LimitEveryMin: true}
	for _, l := range Limits() {
		if !skipMax[l.Key] && !holds(l.Values(hi), l.Max) {
			t.Errorf("limits.good.yaml: %s holds %v, not the maximum %s", l.Key, l.Values(hi), l.Format(l.Max))
		}
		if !skipMin[l.Key] && !holds(l.Values(lo), l.Min) {
			t.Errorf("limits-min.good.yaml: %s holds %v, not the minimum %s", l.Key, l.Values(lo), l.Format(l.Min))
		}
	}
	sources, err := Load("testdata/sources-limit.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{LimitDatasets, LimitLengths} {
		l := limitOf(t, key)
		if !holds(l.Values(sources), l.Max) {
			t.Errorf("sources-limit.good.yaml: %s holds %v, not the maximum %s", key, l.Values(sources), l.Format(l.Max))
		}
	}
	phases, err := Load("testdata/phases-limit.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{LimitPhases, LimitPhaseFor} {
		l := limitOf(t, key)
		if !holds(l.Values(phases), l.Max) {
			t.Errorf("phases-limit.good.yaml: %s holds %v, not the maximum %s", key, l.Values(phases), l.Format(l.Max))
		}
	}
	if l := limitOf(t, LimitPhaseFor); !holds(l.Values(phases), l.Min) {
		t.Errorf("phases-limit.good.yaml: %s holds %v, not the minimum %s", LimitPhaseFor, l.Values(phases), l.Format(l.Min))
	}
	if d, ok := everyOf(hi.Schedule.Cron); !ok || d != MinEvery {
		t.Errorf("limits.good.yaml: schedule %q is not @every %s", hi.Schedule.Cron, MinEvery)
	}
	pts, err := Load("testdata/points-limit.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pts.Plan().Points); n != maxPointsPerSpec {
		t.Errorf("points-limit.good.yaml plans %d points, want %d", n, maxPointsPerSpec)
	}
}

func holds(vs []int64, v int64) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// TestSpecSizeBound: a spec larger than the API's body limit is refused before it is decoded.
func TestSpecSizeBound(t *testing.T) {
	big := []byte("# " + strings.Repeat("x", 1<<20) + "\n")
	_, err := Parse("big.yaml", big)
	if err == nil || !strings.Contains(err.Error(), "big.yaml:1:1: spec: 1048579 bytes, above the limit 1048576") {
		t.Errorf("Parse of %d bytes: %v", len(big), err)
	}
}

func limitOf(t *testing.T, key string) Limit {
	t.Helper()
	for _, l := range Limits() {
		if l.Key == key {
			return l
		}
	}
	t.Fatalf("no limit %s", key)
	return Limit{}
}
