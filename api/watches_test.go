package api

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/specsweep/specsweep/store"
)

// GET /api/watches: each watched host's latest watch, its verdict and its regressions' sentences;
// [] before any watch; the token or a session required, as on every /api/ path.
func TestAPIWatchesGiveEachHostsLatestVerdict(t *testing.T) {
	t.Parallel()
	a := newAPIHarness(t, APIConfig{Sessions: &fakeSessions{t: t}})
	w := a.do("GET", "/api/watches", "", nil)
	if w.Code != http.StatusOK || w.Body.String() != "[]\n" {
		t.Fatalf("no watch yet: %d %q, want 200 []", w.Code, w.Body)
	}
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	watch := func(name string) int64 {
		id, err := a.db.CreateSweep(ctx, store.NewSweep{Name: name, SpecHash: "h", SpecText: "name: " + name, State: store.SweepDone}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	old, gpu1, gpu2 := watch("watch-old"), watch("watch-gpu1"), watch("watch-gpu2")
	sentence := "accept_length at c=1 fell from 3.40 to 1.40 (floor 2.97), SGLang 0.5.9 -> 0.5.10"
	for _, e := range []store.Event{
		// gpu1's earlier watch found a regression; its latest did too, another one.
		{SweepID: old, Host: "gpu1", At: t0, Kind: store.EventRegression, Detail: "tok_s at c=4 fell", Data: []byte(`{"measure":"tok_s"}`)},
		{SweepID: old, Host: "gpu1", At: t0, Kind: store.EventWatch, Detail: "1 regression(s) against sweep 1"},
		{SweepID: gpu1, Host: "gpu1", At: t0.Add(time.Hour), Kind: "state", Detail: "not a watch's"},
		{SweepID: gpu1, Host: "gpu1", At: t0.Add(time.Hour), Kind: store.EventRegression, Detail: sentence,
			Data: []byte(`{"measure":"accept_length","concurrency":1,"before":3.4,"floor":2.97,"after":1.4,"engine_before":"0.5.9","engine_after":"0.5.10","detail":""}`)},
		{SweepID: gpu1, Host: "gpu1", At: t0.Add(time.Hour), Kind: store.EventWatch, Detail: "1 regression(s) against sweep 1"},
		{SweepID: gpu2, Host: "gpu2", At: t0.Add(2 * time.Hour), Kind: store.EventWatch, Detail: "no regression: 4 figure(s) within 10% of sweep 1's"},
	} {
		if err := a.db.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	w = a.do("GET", "/api/watches", "", nil)
	var got []WatchJSON
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil {
		t.Fatalf("GET /api/watches: %d %s", w.Code, w.Body)
	}
	want := []WatchJSON{
		{Host: "gpu1", SweepID: gpu1, Sweep: "watch-gpu1", At: t0.Add(time.Hour).UnixMilli(), Verdict: "1 regression(s) against sweep 1",
			Regressions: []RegressionJSON{{Measure: "accept_length", Detail: sentence}}},
		{Host: "gpu2", SweepID: gpu2, Sweep: "watch-gpu2", At: t0.Add(2 * time.Hour).UnixMilli(), Verdict: "no regression: 4 figure(s) within 10% of sweep 1's",
			Regressions: []RegressionJSON{}},
	}
	if g, _ := json.Marshal(got); string(g) != mustJSON(t, want) {
		t.Errorf("GET /api/watches:\n got %s\nwant %s", g, mustJSON(t, want))
	}
	// The shape's field names, as the page reads them.
	var raw []map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &raw)
	for _, k := range []string{"host", "sweep_id", "sweep", "at", "verdict", "regressions"} {
		if _, ok := raw[0][k]; !ok {
			t.Errorf("no %q in %s", k, w.Body)
		}
	}
	// A session reads it; without a credential, or with a wrong token, it is refused.
	if w := a.do("GET", "/api/watches", "", asBrowser("good")); w.Code != http.StatusOK {
		t.Errorf("a session: %d %s", w.Code, w.Body)
	}
	for _, edit := range []func(*http.Request){asBrowser(""), func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong") }} {
		if w := a.do("GET", "/api/watches", "", edit); w.Code != http.StatusUnauthorized {
			t.Errorf("without the credential: %d %s, want 401", w.Code, w.Body)
		}
	}
	if w := a.do("GET", "/api/watches", "", asBrowser("stale")); w.Code != http.StatusForbidden {
		t.Errorf("an expired session: %d %s, want 403", w.Code, w.Body)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
