package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/store"
)

// The dashboard's first hour (issue 26), in Chromium against the real daemon: a loading state until
// the data arrives, a best per level marked provisional until its level is measured, the GPUs and
// phase columns, the live chart, finished sweeps linking to their results, and a running sweep whose
// process died shown as interrupted.

// pageText is the text of the first element a selector matches ("" when none).
func pageText(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
	if err != nil {
		t.Fatalf("the text of %s: %v", sel, err)
	}
	return s
}

// screenshot writes the page to DIR/name.png when SPECSWEEP_SCREENSHOT_DIR names a folder.
func screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SPECSWEEP_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Until the sweeps are read the page says it is loading: never "No sweep is running." and empty
// tables while it connects. The page's requests for the sweeps are held (the DevTools protocol's
// Fetch domain) while the test reads the page; the first is then answered 503, the rest let
// through, and the page reads again by itself.
func testDashboardSaysLoadingUntilTheSweepsArrive(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ctx := browser(t)
	db := filepath.Join(t.TempDir(), "d.db")
	d := startDaemon(t, db)
	held := make(chan fetch.RequestID, 64)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			held <- ev.RequestID
		}
	}()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/api/sweeps*"}}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(within(t, ctx, time.Minute), chromedp.Navigate(loginURL(t, db, d.addr))); err != nil {
		t.Fatal(err)
	}
	var first fetch.RequestID
	select {
	case first = <-held:
	case <-time.After(time.Minute):
		t.Fatal("the page asked for no sweeps")
	}
	for sel, what := range map[string]string{"#running": "the running sweeps", "#queue tbody": "the queue", "#finished tbody": "the finished sweeps"} {
		if s := pageText(t, ctx, sel); !strings.Contains(s, "Loading") || strings.Contains(s, "No sweep") || strings.Contains(s, "Nothing") || strings.Contains(s, "None") {
			t.Errorf("%s while the sweeps are on their way: %q, want a loading state", what, s)
		}
	}
	// The first read fails (the daemon answers 503): the page reads again, though no event comes
	// from an idle daemon to make it (a tab stayed empty so once, beside a sweep whose last point
	// loaded for hours).
	if _, err := chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: first, ResponseCode: 503,
		ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"error":"busy"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	for len(held) > 0 {
		_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: <-held})
	}
	waitFor(t, time.Minute, "the empty daemon's page", func() bool {
		return strings.Contains(pageText(t, ctx, "#running"), "No sweep is running.") &&
			strings.Contains(pageText(t, ctx, "#queue tbody"), "Nothing queued.") &&
			strings.Contains(pageText(t, ctx, "#finished tbody"), "None yet.")
	})
	if s := pageText(t, ctx, "main"); strings.Contains(s, "Loading") {
		t.Errorf("the page still says it is loading once the sweeps arrived: %q", s)
	}
}

// A sweep stored as running whose process died (a `specsweep run` killed with -9) shows as
// interrupted: since when, which process, how to resume. The sweep is made in the database the
// daemon serves after the daemon started (a daemon requeues the running sweeps it finds only when
// it starts).
func testDashboardShowsASweepWhoseProcessDiedAsInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ctx := browser(t)
	db := filepath.Join(t.TempDir(), "d.db")
	d := startDaemon(t, db)
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bg := context.Background()
	// Queued not before 2099, so the daemon does not start it before it is marked running.
	id, err := st.CreateSweep(bg, store.NewSweep{Name: "orphan", SpecHash: "h", SpecText: "version: 1\nname: orphan\n",
		NotBefore: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)},
		[]store.NewHost{{Name: "gpu-a", Address: "gpu-a.example", GPUs: 4, Unit: "sglang.service"}},
		[]store.NewPoint{{ID: "base", Method: "baseline", Baseline: true, TP: 4, Runs: 1, Argv: []string{"/bin/python", "-m", "sglang.launch_server"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetSweepState(bg, id, store.SweepRunning, "test"); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if err := st.HoldSweep(bg, id, store.Holder{Kind: store.HolderRun, PID: dead.Process.Pid, Host: host}); err != nil {
		t.Fatal(err)
	}
	card := fmt.Sprintf(`article.sweep[data-sweep="%d"]`, id)
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(loginURL(t, db, d.addr)),
		chromedp.WaitVisible(chromedp.CSS(card+" .orphan")),
	); err != nil {
		t.Fatalf("the orphaned sweep's card: %v", err)
	}
	text := pageText(t, ctx, card+" .orphan")
	for _, want := range []string{"Interrupted: no process has held it since ", " UTC", fmt.Sprintf("specsweep run, pid %d on %s", dead.Process.Pid, host), "run the same `specsweep run` command again"} {
		if !strings.Contains(text, want) {
			t.Errorf("the card says %q, want %q in it", text, want)
		}
	}
	if b := pageText(t, ctx, card+" .state"); b != "interrupted" {
		t.Errorf("the card's badge says %q, want interrupted", b)
	}
	if f := pageText(t, ctx, card+" .facts"); strings.Contains(f, "ETA") {
		t.Errorf("the card of a sweep nobody runs gives an ETA: %q", f)
	}
	if sweepState(db, id) != "running" {
		t.Errorf("the store's state changed to %s: the page was to word it, not the daemon", sweepState(db, id))
	}
}

// watchScript records, in the page, what the hosts table, the best table and the chart of a card
// show at every change: each value is seen even when it lasts a moment between two polls of the
// test. window.__seen holds the phases, GPUs and details of the hosts, the best column's texts,
// and the chart's number of measured points.
const watchScript = `(() => {
  const seen = window.__seen = { phases: [], gpus: [], pairs: [], best: [], points: [] };
  const add = (list, v) => { if (!list.includes(v)) list.push(v); };
  const scan = () => {
    const card = document.querySelector(%q);
    if (!card) return;
    for (const tr of card.querySelectorAll("table.hosts tbody tr[data-host]")) {
      const td = tr.children;
      add(seen.phases, td[2].textContent);
      add(seen.gpus, td[1].textContent);
      add(seen.pairs, td[2].textContent + " | " + td[4].textContent);
    }
    for (const tr of card.querySelectorAll(".best table tbody tr")) add(seen.best, tr.children[2].textContent);
    add(seen.points, card.querySelectorAll("svg.chart circle.pt").length);
  };
  new MutationObserver(scan).observe(document.body, { subtree: true, childList: true, characterData: true });
  scan();
  return true;
})()`

// seen reads one list of window.__seen.
func seen[T any](t testing.TB, ctx context.Context, list string) []T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]T]("window.__seen."+list))
	if err != nil {
		t.Fatalf("window.__seen.%s: %v", list, err)
	}
	return v
}

// count evaluates a count in the page (-1 on an error).
func count(ctx context.Context, expr string) int {
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
	if err != nil {
		return -1
	}
	return n
}

// A sweep on two 4-GPU test hosts (one point at a time each): the hosts table gives a phase word and
// the host's GPUs; the best per level is provisional, with how many of its points are measured, until
// the level is; the chart draws output tok/s against num_steps per level with the baseline dashed,
// growing as runs arrive without a reload; once done, the sweep's row in Finished links to its
// results card, also as a link of its own (#sweep=ID).
func testDashboardLiveChartProvisionalBestAndHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	ctx := browser(t)
	hosts := boot(t, 2, testhost.Options{})
	db := filepath.Join(t.TempDir(), "d.db")
	d := startDaemon(t, db)
	base := "http://" + d.addr
	url := loginURL(t, db, d.addr)
	// Log in on an empty daemon, so the page is there before the sweep's first run.
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS("#finished tbody td.muted")),
	); err != nil {
		t.Fatal(err)
	}
	id := submit(t, db, smallSpec("live", hosts, "1, 2, 3, 4, 5", ""))
	card := fmt.Sprintf(`#running article.sweep[data-sweep="%d"]`, id)
	if err := chromedp.Do(within(t, ctx, time.Minute), chromedp.WaitVisible(chromedp.CSS(card))); err != nil {
		t.Fatalf("the running sweep's card: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(watchScript, card))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__sameDocument = 7`)); err != nil {
		t.Fatal(err)
	}
	// A few runs in, for the screenshot of a sweep in its course (the checks below read what the
	// page showed all along).
	waitFor(t, 3*time.Minute, "half the sweep's runs", func() bool {
		return countRows(db, fmt.Sprintf("SELECT count(*) FROM run_summary WHERE sweep_id = %d", id)) >= 6
	})
	time.Sleep(time.Second)
	screenshot(t, ctx, "running-wide")
	waitState(t, db, id, "done", 5*time.Minute)
	// The card left Running with the sweep; its last figures are the Finished row's to open.
	waitFor(t, time.Minute, "the done sweep in Finished", func() bool {
		return count(ctx, fmt.Sprintf(`document.querySelectorAll('#finished tr[data-sweep="%d"]').length`, id)) == 1
	})
	if n := count(ctx, `window.__sameDocument`); n != 7 {
		t.Fatalf("the page was reloaded during the sweep")
	}

	// Phase: one word, the detail in its own column.
	phases := seen[string](t, ctx, "phases")
	words := regexp.MustCompile(`^(starting|ready|load|stopping|done|failed|retry|idle|restored)$`)
	for _, p := range phases {
		if !words.MatchString(p) {
			t.Errorf("the phase column said %q, want one phase word (seen %q)", p, phases)
		}
	}
	if !strings.Contains(strings.Join(phases, " "), "load") {
		t.Errorf("the phase column never said load: %q", phases)
	}
	pairs := seen[string](t, ctx, "pairs")
	if !slices.ContainsFunc(pairs, func(p string) bool { return regexp.MustCompile(`^load \| concurrency [14], repeat 1`).MatchString(p) }) {
		t.Errorf("no host row said load with the level in its detail: %q", pairs)
	}
	// GPUs: the 4-GPU hosts run one point at a time, a tp=4 point holding all 4.
	gpus := seen[string](t, ctx, "gpus")
	if len(gpus) == 0 {
		t.Error("no host row seen")
	}
	for _, g := range gpus {
		if g != "all 4" {
			t.Errorf("the GPUs column said %q, want all 4 (seen %q)", g, gpus)
		}
	}
	// Provisional: a best seen while its level was not measured by every point, none at the end.
	prov := regexp.MustCompile(`provisional: [1-5] of 6 points measured$`)
	sawProv := false
	for _, b := range seen[string](t, ctx, "best") {
		sawProv = sawProv || prov.MatchString(b)
	}
	if !sawProv {
		t.Errorf("no best was marked provisional while the sweep ran: %q", seen[string](t, ctx, "best"))
	}
	// The chart grew as runs arrived, in the same document.
	pts := seen[int](t, ctx, "points")
	grew := 0
	for _, n := range pts {
		if n > 0 && n < 10 {
			grew++
		}
	}
	if grew == 0 {
		t.Errorf("the chart's measured points were %v: it did not grow run by run", pts)
	}

	// Finished: the row's link opens the sweep's results card.
	opened := fmt.Sprintf(`#opened article.sweep[data-sweep="%d"]`, id)
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#finished tr[data-sweep="%d"] a.open`, id))),
		chromedp.WaitVisible(chromedp.CSS(opened+" .best table")),
		chromedp.WaitVisible(chromedp.CSS(opened+" svg.chart")),
	); err != nil {
		t.Fatalf("opening the finished sweep from its row: %v", err)
	}
	if h, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`)); err != nil || h != fmt.Sprintf("#sweep=%d", id) {
		t.Errorf("the address's fragment after opening: %q (%v), want #sweep=%d", h, err, id)
	}
	checkFinishedCard(t, ctx, opened)
	screenshot(t, ctx, "finished-wide")

	// The link itself, in a new tab, opens the card straight away.
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	if err := chromedp.Do(within(t, tab, time.Minute),
		chromedp.Navigate(fmt.Sprintf("%s/#sweep=%d", base, id)),
		chromedp.WaitVisible(chromedp.CSS(opened+" .best table")),
		chromedp.WaitVisible(chromedp.CSS(opened+" svg.chart circle.pt")),
	); err != nil {
		t.Fatalf("the link #sweep=%d in a new tab: %v", id, err)
	}
	checkFinishedCard(t, tab, opened)

	// On a phone-sized screen the card with its chart fits the width.
	if err := chromedp.Do(within(t, tab, time.Minute),
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(fmt.Sprintf("%s/#sweep=%d", base, id)),
		chromedp.WaitVisible(chromedp.CSS(opened+" svg.chart circle.pt")),
	); err != nil {
		t.Fatal(err)
	}
	fits, err := chromedp.Run(tab, chromedp.Evaluate[bool](fmt.Sprintf(`document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1 &&
		document.querySelector('%s svg.chart').getBoundingClientRect().right <= document.documentElement.clientWidth`, opened)))
	if err != nil || !fits {
		w, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.scrollWidth + " (viewport " + document.documentElement.clientWidth + ")"`))
		t.Errorf("on a 390 px wide screen the page with the chart is %s px wide (%v)", w, err)
	}
	screenshot(t, tab, "finished-phone")
}

// checkFinishedCard checks a done sweep's card: every best final (none provisional), and the chart's
// two levels (c=1, c=4) with five num_steps each and each level's baseline dashed.
func checkFinishedCard(t testing.TB, ctx context.Context, card string) {
	t.Helper()
	if n := count(ctx, fmt.Sprintf(`document.querySelectorAll('%s .best table tbody tr').length`, card)); n != 2 {
		t.Errorf("the done sweep's best table has %d rows, want 2 (c=1, c=4)", n)
	}
	if n := count(ctx, fmt.Sprintf(`document.querySelectorAll('%s .best .prov').length`, card)); n != 0 {
		t.Errorf("%d best(s) still provisional once every point is measured", n)
	}
	if n := count(ctx, fmt.Sprintf(`document.querySelectorAll('%s svg.chart polyline.curve').length`, card)); n != 2 {
		t.Errorf("the chart has %d lines, want one per level (2)", n)
	}
	if n := count(ctx, fmt.Sprintf(`document.querySelectorAll('%s svg.chart circle.pt').length`, card)); n != 10 {
		t.Errorf("the chart has %d points, want 5 num_steps at 2 levels", n)
	}
	if n := count(ctx, fmt.Sprintf(`[...document.querySelectorAll('%s svg.chart line.baseline')].filter(l => l.getAttribute('stroke-dasharray')).length`, card)); n != 2 {
		t.Errorf("the chart has %d dashed baselines, want one per level (2)", n)
	}
	legend := pageText(t, ctx, card+" .legend")
	if !strings.Contains(legend, "c=1") || !strings.Contains(legend, "c=4") || !strings.Contains(legend, "baseline") || strings.Contains(legend, "provisional") {
		t.Errorf("the chart's legend says %q", legend)
	}
}
