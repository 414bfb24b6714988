package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/specsweep/specsweep/store"
)

// Regressions on the dashboard (issue 29), in Chromium against the real daemon: no Watches section
// while no host was ever watched; once watches are recorded (stored in the daemon's database as
// `specsweep watch` records them: a done watch sweep, its `regression` and `watch` events), each
// watched host with its latest verdict, the host whose watch found a regression marked in the
// page's failure colour with the regression's sentence, without a reload; and again after one.
func testDashboardShowsWatchesAndRegressions(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ctx := browser(t)
	db := filepath.Join(t.TempDir(), "d.db")
	bg := context.Background()
	st, err := store.Open(bg, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	done := func(name string) int64 {
		id, err := st.CreateSweep(bg, store.NewSweep{Name: name, SpecHash: "h", SpecText: "version: 1\nname: " + name + "\n", State: store.SweepDone}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	done("decision") // a finished sweep, no watch yet
	d := startDaemon(t, db)

	// Without a session the watches are refused, as every path with data.
	resp, err := http.Get("http://" + d.addr + "/api/watches")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/watches without a session: %d, want 401", resp.StatusCode)
	}

	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(loginURL(t, db, d.addr)),
		chromedp.WaitVisible(chromedp.CSS(`#finished tbody tr[data-sweep]`)),
	); err != nil {
		t.Fatalf("the page: %v", err)
	}
	time.Sleep(time.Second) // the page's read of the watches (beside the sweeps') has answered
	if n := count(ctx, `document.querySelectorAll("#watches-section:not([hidden]), #watches tbody tr").length`); n != 0 {
		t.Errorf("the page shows a Watches section before any host was watched (%d elements)", n)
	}

	// Two watches, recorded while the page is open.
	sentence := "accept_length at c=1 fell from 3.40 to 1.40 (floor 2.97), SGLang 0.5.9 -> 0.5.10"
	verdict := "1 regression(s) against sweep 1"
	clean := "no regression: 4 figure(s) within 10% of sweep 1's"
	w1, w2 := done("decision-watch-gpu-w1"), done("decision-watch-gpu-w2")
	for _, e := range []store.Event{
		{SweepID: w1, Host: "gpu-w1", Kind: store.EventRegression, Detail: sentence,
			Data: []byte(`{"measure":"accept_length","concurrency":1,"before":3.4,"floor":2.97,"after":1.4,"engine_before":"0.5.9","engine_after":"0.5.10","detail":""}`)},
		{SweepID: w1, Host: "gpu-w1", Kind: store.EventWatch, Detail: verdict},
		{SweepID: w2, Host: "gpu-w2", Kind: store.EventWatch, Detail: clean},
	} {
		if err := st.AddEvent(bg, e); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		bad, ok := `#watches tbody tr[data-host="gpu-w1"]`, `#watches tbody tr[data-host="gpu-w2"]`
		if err := chromedp.Do(within(t, ctx, time.Minute),
			chromedp.WaitVisible(chromedp.CSS(bad+" ul.regressions li")),
			chromedp.WaitVisible(chromedp.CSS(ok)),
		); err != nil {
			t.Fatalf("%s: the watched hosts: %v", when, err)
		}
		for sel, want := range map[string]string{
			bad + " td.host": "gpu-w1", bad + " .badge": "regressed", bad + " .verdict": verdict,
			bad + " ul.regressions li": sentence, bad + " a.open": fmt.Sprintf("decision-watch-gpu-w1 (%d)", w1),
			ok + " td.host": "gpu-w2", ok + " .badge": "ok", ok + " .verdict": clean,
		} {
			if got := pageText(t, ctx, sel); got != want {
				t.Errorf("%s: %s says %q, want %q", when, sel, got, want)
			}
		}
		if s := pageText(t, ctx, ok); !strings.Contains(s, "None.") || strings.Contains(s, "fell") {
			t.Errorf("%s: the clean host's row %q, want no regression", when, s)
		}
		if s := pageText(t, ctx, "#watches-note"); !strings.Contains(s, "1 of 2 watched host(s) regressed: gpu-w1") {
			t.Errorf("%s: the section's note %q", when, s)
		}
		// The regression styling: the failure colour (--bad) on the host, its badge and its sentences;
		// none on the clean host.
		colours, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
			"#watches tr.regressed td.host", "#watches tr.regressed .badge", "#watches tr.regressed ul.regressions li",
			"#watches tr.clean td.host", "#watches tr.clean .badge",
			"#watches-note"].map(s => { const e = document.querySelector(s); return e ? getComputedStyle(e).color : "none"; })`))
		if err != nil {
			t.Fatal(err)
		}
		red := "rgb(207, 34, 46)"
		if colours[0] != red || colours[1] != red || colours[2] != red || colours[5] != red {
			t.Errorf("%s: the regressed host's colours %v, want %s (the failures')", when, colours, red)
		}
		if colours[3] == red || colours[4] == red {
			t.Errorf("%s: the clean host in the failure colour: %v", when, colours)
		}
	}
	check("recorded while the page was open")
	screenshot(t, ctx, "watches")
	if err := chromedp.Do(within(t, ctx, time.Minute), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	check("after a reload")
	// The watch sweep's link opens its card.
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Click(`#watches tr[data-host="gpu-w1"] a.open`),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#opened article.sweep[data-sweep="%d"]`, w1))),
	); err != nil {
		t.Errorf("the watch sweep's card: %v", err)
	}
}
