package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/specsweep/specsweep/internal/testhost"
)

// The dashboard's benchmarks (issue 17; bench/dashboard.sh, docs/benchmarks.md "Dashboard"): the page's
// load on a store of 100 finished sweeps and 100,000 runs, and the daemon's CPU with 10 pages open
// during a sweep on real test hosts. Real daemon binary, real SQLite, headless Chromium; they print
// figures and assert no timing.
//
// The e2e helpers of the tests (startDaemon, browser, loginURL, within, submit, waitFor) take a
// *testing.T, which a benchmark does not have: the bench* functions below are their testing.TB twins.

const dashBenchSweeps = 100

// dashboardBenchDB writes the benchmark's store with the store package's generator
// (TestWriteDashboardBenchDB: 100 finished sweeps nightly-001..100, 100,000 runs) and returns its path.
func dashboardBenchDB(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "dashboard.db")
	t0 := time.Now()
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestWriteDashboardBenchDB$", "github.com/specsweep/specsweep/store")
	cmd.Env = append(os.Environ(), "SPECSWEEP_DASHBOARD_DB="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("writing the dashboard benchmark's store: %v\n%s", err, tail(string(out), 30))
	}
	sweeps := countRows(path, "SELECT count(*) FROM sweeps WHERE state = 'done'")
	runs := countRows(path, "SELECT count(*) FROM runs")
	if sweeps != dashBenchSweeps || runs != 100_000 {
		tb.Fatalf("the generated store has %d finished sweeps and %d runs", sweeps, runs)
	}
	fmt.Printf("store: %d finished sweeps, %d runs (written in %s)\n", sweeps, runs, time.Since(t0).Round(100*time.Millisecond))
	return path
}

// pageProbe runs in every document of a tab before the page's own scripts: it records (in
// window.__dash, in ms of performance.now(), from the navigation's start) when the event stream
// opened and when the Finished table first had every finished sweep's row, and keeps every
// resource timing entry (the page's API requests).
const pageProbe = `(() => {
  const d = window.__dash = {};
  performance.setResourceTimingBufferSize(100000);
  const ES = window.EventSource;
  window.EventSource = class extends ES {
    constructor(u, o) {
      super(u, o);
      this.addEventListener("open", () => { if (d.open === undefined) d.open = performance.now(); });
    }
  };
  const check = () => {
    if (d.data !== undefined) return;
    const n = document.querySelectorAll("#finished tbody tr[data-sweep]").length;
    if (n >= %d) {
      d.data = performance.now();
      d.rows = n;
      requestAnimationFrame(() => { d.frame = performance.now(); });
    }
  };
  new MutationObserver(check).observe(document, { childList: true, subtree: true });
})()`

// addProbe installs pageProbe in the tab of ctx for its next documents.
func addProbe(tb testing.TB, ctx context.Context) {
	tb.Helper()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: fmt.Sprintf(pageProbe, dashBenchSweeps)}); err != nil {
		tb.Fatalf("installing the page probe: %v", err)
	}
}

// pageLoad is one load of the page as the browser timed it, in ms from the navigation's start.
type pageLoad struct {
	Response   float64 `json:"response"`    // the HTML's last byte
	FirstPaint float64 `json:"fp"`          // first-paint
	FCP        float64 `json:"fcp"`         // first-contentful-paint
	DOMReady   float64 `json:"dom"`         // DOMContentLoaded handled (app.js is deferred: it has run)
	Load       float64 `json:"load"`        // the load event handled
	Open       float64 `json:"open"`        // /api/events open (the page then asks for /api/sweeps)
	ListStart  float64 `json:"list_start"`  // GET /api/sweeps sent
	ListEnd    float64 `json:"list_end"`    // its response's last byte
	Data       float64 `json:"data"`        // the Finished table has every row (DOM)
	Frame      float64 `json:"frame"`       // the animation frame after that: the rows on screen
	Rows       int     `json:"rows"`        // rows of the Finished table then
	Requests   int     `json:"requests"`    // resources the page fetched by then
	ListBytes  float64 `json:"list_bytes"`  // /api/sweeps's transfer size
	AppJSEnd   float64 `json:"app_js_end"`  // app.js's last byte
	AppCSSEnd  float64 `json:"app_css_end"` // app.css's last byte
}

const pageLoadJS = `(() => {
  const nav = performance.getEntriesByType("navigation")[0] || {};
  const paint = name => (performance.getEntriesByType("paint").find(e => e.name === name) || {}).startTime || 0;
  const res = performance.getEntriesByType("resource");
  const one = suffix => res.find(e => new URL(e.name).pathname === suffix) || {};
  const list = one("/api/sweeps");
  const d = window.__dash || {};
  return { response: nav.responseEnd || 0, fp: paint("first-paint"), fcp: paint("first-contentful-paint"),
    dom: nav.domContentLoadedEventEnd || 0, load: nav.loadEventEnd || 0, open: d.open || 0,
    list_start: list.startTime || 0, list_end: list.responseEnd || 0, list_bytes: list.transferSize || 0,
    app_js_end: one("/static/app.js").responseEnd || 0, app_css_end: one("/static/app.css").responseEnd || 0,
    data: d.data || 0, frame: d.frame || 0, rows: d.rows || 0, requests: res.length };
})()`

// loadPage opens url afresh in the tab of ctx (from about:blank) and returns the browser's timings once
// the Finished table shows every finished sweep.
func loadPage(tb testing.TB, ctx context.Context, url string) pageLoad {
	tb.Helper()
	if err := chromedp.Do(within(tb, ctx, 30*time.Second),
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(url),
	); err != nil {
		tb.Fatalf("opening %s: %v", url, err)
	}
	waitFor(tb, 30*time.Second, "the Finished table's rows", func() bool {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(window.__dash && window.__dash.frame)`))
		return err == nil && ok
	})
	// first-contentful-paint can be reported a frame after the paint: wait for it too.
	waitFor(tb, 10*time.Second, "the paint timings", func() bool {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType("paint").length`))
		return err == nil && n >= 2
	})
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](pageLoadJS))
	if err != nil {
		tb.Fatal(err)
	}
	var l pageLoad
	if err := json.Unmarshal(raw, &l); err != nil {
		tb.Fatalf("%v: %s", err, raw)
	}
	if l.Rows != dashBenchSweeps || l.FCP <= 0 || l.Data <= 0 {
		tb.Fatalf("the page's timings are incomplete: %s", raw)
	}
	return l
}

// medMax is the median (the upper one of an even count) and the maximum of xs.
func medMax(xs []float64) (float64, float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}

// timeGET times n requests of path with the daemon's bearer token: median, max (ms) and the body's bytes.
func timeGET(tb testing.TB, d *daemonProc, path string, n int) (float64, float64, int) {
	tb.Helper()
	var ms []float64
	size := 0
	for range n {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+d.token)
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
		if err != nil || resp.StatusCode != http.StatusOK {
			tb.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		size = len(body)
	}
	med, hi := medMax(ms)
	return med, hi, size
}

// BenchmarkDashboardPageLoad: the daemon on a store of 100 finished sweeps and 100,000 runs; one
// Chromium tab logged in once opens the dashboard afresh (from about:blank) 10 times per op. It prints
// the median and max of first contentful paint (target < 1 s) and of the time until the Finished
// table shows all 100 sweeps, with where the time goes (the HTML, the scripts, the event stream's
// open, GET /api/sweeps), and GET /api/sweeps timed directly with the token.
// Run: bench/dashboard.sh (go test -run '^$' -bench DashboardPageLoad -benchtime 1x ./internal/e2e).
func BenchmarkDashboardPageLoad(b *testing.B) {
	if testing.Short() {
		b.Skip("end-to-end")
	}
	ctx := browser(b)
	db := dashboardBenchDB(b)
	d := startDaemon(b, db)
	base := "http://" + d.addr
	addProbe(b, ctx)
	if err := chromedp.Do(within(b, ctx, time.Minute),
		chromedp.Navigate(loginURL(b, db, d.addr)),
		chromedp.WaitVisible(chromedp.CSS(`#finished tbody tr[data-sweep="100"]`)),
	); err != nil {
		b.Fatalf("logging in: %v", err)
	}
	const loads = 10
	for b.Loop() {
		warm := loadPage(b, ctx, base+"/")
		var ls []pageLoad
		for range loads {
			ls = append(ls, loadPage(b, ctx, base+"/"))
		}
		col := func(f func(pageLoad) float64) (float64, float64) {
			var xs []float64
			for _, l := range ls {
				xs = append(xs, f(l))
			}
			return medMax(xs)
		}
		fcpMed, fcpMax := col(func(l pageLoad) float64 { return l.FCP })
		dataMed, dataMax := col(func(l pageLoad) float64 { return l.Frame })
		fmt.Printf("dashboard page load, %d sweeps / 100,000 runs in the store, %d fresh loads (after one not counted: fcp %.0f ms, rows on screen %.0f ms)\n",
			dashBenchSweeps, loads, warm.FCP, warm.Frame)
		fmt.Printf("  first contentful paint:         median %6.1f ms, max %6.1f ms (target < 1000 ms)\n", fcpMed, fcpMax)
		fmt.Printf("  all %d finished sweeps on screen: median %6.1f ms, max %6.1f ms\n", dashBenchSweeps, dataMed, dataMax)
		fmt.Println("  where the time goes (median ms from the navigation's start):")
		for _, p := range []struct {
			what string
			f    func(pageLoad) float64
		}{
			{"HTML received (responseEnd)", func(l pageLoad) float64 { return l.Response }},
			{"app.css received", func(l pageLoad) float64 { return l.AppCSSEnd }},
			{"app.js received", func(l pageLoad) float64 { return l.AppJSEnd }},
			{"first paint", func(l pageLoad) float64 { return l.FirstPaint }},
			{"first contentful paint", func(l pageLoad) float64 { return l.FCP }},
			{"DOMContentLoaded handled (app.js has run)", func(l pageLoad) float64 { return l.DOMReady }},
			{"load event handled", func(l pageLoad) float64 { return l.Load }},
			{"/api/events open", func(l pageLoad) float64 { return l.Open }},
			{"GET /api/sweeps sent", func(l pageLoad) float64 { return l.ListStart }},
			{"GET /api/sweeps received", func(l pageLoad) float64 { return l.ListEnd }},
			{"Finished table complete (DOM)", func(l pageLoad) float64 { return l.Data }},
			{"next animation frame (on screen)", func(l pageLoad) float64 { return l.Frame }},
		} {
			med, hi := col(p.f)
			fmt.Printf("    %-42s %6.1f (max %6.1f)\n", p.what, med, hi)
		}
		listMed, listMax := col(func(l pageLoad) float64 { return l.ListEnd - l.ListStart })
		fmt.Printf("  GET /api/sweeps in the page: median %.1f ms, max %.1f ms, %.0f bytes transferred; %d requests per load\n",
			listMed, listMax, ls[0].ListBytes, ls[0].Requests)
		apiMed, apiMax, apiSize := timeGET(b, d, "/api/sweeps", 20)
		fmt.Printf("  GET /api/sweeps with the token, 20 requests: median %.1f ms, max %.1f ms, %d bytes\n", apiMed, apiMax, apiSize)
		resMed, resMax, resSize := timeGET(b, d, fmt.Sprintf("/api/sweeps/%d/results", dashBenchSweeps), 5)
		fmt.Printf("  GET /api/sweeps/%d/results (opening one finished sweep of 1000 runs), 5 requests: median %.1f ms, max %.1f ms, %d bytes\n",
			dashBenchSweeps, resMed, resMax, resSize)
		b.ReportMetric(fcpMed, "fcp-ms")
		b.ReportMetric(fcpMax, "fcp-max-ms")
		b.ReportMetric(dataMed, "data-ms")
		b.ReportMetric(dataMax, "data-max-ms")
		b.ReportMetric(apiMed, "api-sweeps-ms")
	}
}

// clockTicks is the kernel's USER_HZ (getconf CLK_TCK), 100 when getconf fails.
func clockTicks() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || n <= 0 {
		return 100
	}
	return float64(n)
}

// cpuTicks is a process's CPU time so far, utime + stime of /proc/PID/stat, in clock ticks.
func cpuTicks(tb testing.TB, pid int) int64 {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(raw)
	// Fields after "(comm)": state is field 3, utime 14 and stime 15.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		tb.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	return u + st
}

// treeTicks is the CPU time so far of pid and its descendants alive now (Chromium's renderers are
// children of its zygote), in clock ticks.
func treeTicks(pid int) int64 {
	parent := map[int]int{}
	ticks := map[int]int64{}
	dirs, _ := os.ReadDir("/proc")
	for _, e := range dirs {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		parent[p], ticks[p] = pp, u+st
	}
	var sum int64
	for p, t := range ticks {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				sum += t
				break
			}
		}
	}
	return sum
}

// machineTicks is the machine's busy CPU time so far (all cores; /proc/stat less idle and iowait).
func machineTicks() int64 {
	raw, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(raw), "\n")
	var busy int64
	for i, f := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseInt(f, 10, 64)
		if i != 3 && i != 4 && i < 8 { // not idle, iowait, guest (counted in user already)
			busy += n
		}
	}
	return busy
}

// cpuWindow is what the daemon did in one measuring window.
type cpuWindow struct {
	what     string
	core     float64 // the daemon's CPU time over wall time, % of one core
	browser  float64 // Chromium's (every process), % of one core
	machine  float64 // the whole machine's, % of one core (all cores: up to 100 x cores)
	runs     int     // runs the sweep recorded in the window
	rssKB    int     // the daemon's RSS at the window's end
	requests map[string]int
}

// measureCPU samples the daemon's CPU time over d (and Chromium's, browserPID, and the machine's);
// runs counts the sweep's recorded runs.
func measureCPU(tb testing.TB, what string, pid, browserPID int, d time.Duration, hz float64, runs func() int) cpuWindow {
	tb.Helper()
	r0, c0, b0, m0, t0 := runs(), cpuTicks(tb, pid), treeTicks(browserPID), machineTicks(), time.Now()
	time.Sleep(d)
	c1, b1, m1, wall, r1 := cpuTicks(tb, pid), treeTicks(browserPID), machineTicks(), time.Since(t0), runs()
	pct := func(ticks int64) float64 { return 100 * float64(ticks) / hz / wall.Seconds() }
	return cpuWindow{what: what, core: pct(c1 - c0), browser: pct(max(b1-b0, 0)), machine: pct(m1 - m0),
		runs: r1 - r0, rssKB: rssKB(pid)}
}

// apiRequests counts, by kind, the API requests a tab made so far (resource timing, kept by pageProbe).
const apiRequestsJS = `(() => {
  const n = { list: 0, detail: 0, results: 0, other: 0 };
  for (const e of performance.getEntriesByType("resource")) {
    const p = new URL(e.name).pathname;
    if (p === "/api/sweeps") n.list++;
    else if (/^\/api\/sweeps\/\d+$/.test(p)) n.detail++;
    else if (/^\/api\/sweeps\/\d+\/results$/.test(p)) n.results++;
    else n.other++;
  }
  return n;
})()`

func cpuSpec(hosts []*testhost.Host) string {
	gpus := make([]int, len(hosts))
	for i := range gpus {
		gpus[i] = 4
	}
	steps := make([]string, 80)
	for i := range steps {
		steps[i] = strconv.Itoa(i + 1)
	}
	return fmt.Sprintf(`version: 1
name: dash-cpu
%s
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 0.0.0.0, --port, "30000", --enable-metrics]
  env: {SGLANGSIM_TIME_SCALE: "0.1", SGLANGSIM_LOAD_SECONDS: "10", SGLANGSIM_WARMUP_SECONDS: "2", SGL_FORCE_SHUTDOWN: "1"}
  port: 30000
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [%s], topk: [1], tp: [4]}
workload: {concurrency: [1, 4, 16], requests: 16, warmup_requests: 1, input_tokens: 128, output_tokens: 128}
`, hostsYAML(hosts, gpus), testhost.SimPath, strings.Join(steps, ", "))
}

// BenchmarkDashboardCPU: the daemon (on the 100-sweep store) runs an 81-point sweep on 2 real test
// hosts; its CPU time (utime+stime of /proc/PID/stat) is sampled over 30 s with no page open, 30 s with
// 10 dashboard pages open in Chromium, and 30 s with none again, side by side in one run. Each page has
// a browser context of its own and its own login, as 10 people's browsers have (the tabs of one
// browser share one event stream: web/static/events.js). It prints each window as % of
// one core, with the runs the sweep recorded, Chromium's and the machine's CPU, the API requests the
// pages made, and the difference the pages make.
// Run: bench/dashboard.sh (go test -run '^$' -bench DashboardCPU -benchtime 1x ./internal/e2e).
func BenchmarkDashboardCPU(b *testing.B) {
	if testing.Short() {
		b.Skip("end-to-end")
	}
	if msg := testhost.Requirements(); msg != "" {
		b.Skip(msg)
	}
	ctx := browser(b)
	hosts := testhost.Boot(b, 2, testhost.Options{})
	db := dashboardBenchDB(b)
	d := startDaemon(b, db)
	base := "http://" + d.addr
	pid := d.cmd.Process.Pid
	browserPID := chromedp.FromContext(ctx).Browser.Process().Pid
	hz := clockTicks()
	const window = 30 * time.Second
	const pages = 10
	for b.Loop() {
		id := submit(b, db, cpuSpec(hosts))
		runsQ := fmt.Sprintf("SELECT count(*) FROM runs WHERE point_ref IN (SELECT id FROM points WHERE sweep_id = %d)", id)
		runs := func() int { return countRows(db, runsQ) }
		t0 := time.Now()
		waitFor(b, 2*time.Minute, "the sweep's first run", func() bool { return runs() > 0 })
		fmt.Printf("daemon CPU during a sweep (sweep %d on 2 test hosts, first run after %s), %s windows, CLK_TCK %.0f\n",
			id, time.Since(t0).Round(100*time.Millisecond), window, hz)

		before := measureCPU(b, "no page open", pid, browserPID, window, hz, runs)

		// Each page in a browser context of its own, logged in with its own code, as 10 browsers are:
		// tabs of one browser profile share its 6 HTTP/1.1 connections to the daemon, each page's
		// /api/events holds one, and a 6th page gets its stream but no data (docs/benchmarks.md).
		var tabs []context.Context
		var closers []context.CancelFunc
		for range pages {
			tctx, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
			closers = append(closers, cancel)
			if err := chromedp.Do(tctx); err != nil { // the tab, bound to tctx (no timeout)
				b.Fatal(err)
			}
			addProbe(b, tctx)
			if err := chromedp.Do(within(b, tctx, time.Minute),
				chromedp.Navigate(loginURL(b, db, d.addr)), // its page moves to "/"
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`article.sweep[data-sweep="%d"] table.hosts tbody tr[data-host]`, id))),
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#finished tbody tr[data-sweep="%d"]`, dashBenchSweeps))),
			); err != nil {
				b.Fatalf("opening page %d: %v", len(tabs)+1, err)
			}
			tabs = append(tabs, tctx)
		}
		count := func() map[string]int {
			sum := map[string]int{}
			for _, t := range tabs {
				n, err := chromedp.Run(t, chromedp.Evaluate[map[string]int](apiRequestsJS))
				if err != nil {
					b.Fatal(err)
				}
				for k, v := range n {
					sum[k] += v
				}
			}
			return sum
		}
		for i, t := range tabs {
			if u, err := chromedp.Run(t, chromedp.Location()); err != nil || u != base+"/" {
				b.Fatalf("page %d is at %q (%v)", i+1, u, err)
			}
		}
		req0 := count()
		with := measureCPU(b, fmt.Sprintf("%d pages open", pages), pid, browserPID, window, hz, runs)
		req1 := count()
		with.requests = map[string]int{}
		for k := range req1 {
			with.requests[k] = req1[k] - req0[k]
		}
		for _, c := range closers {
			c()
		}
		after := measureCPU(b, "no page open again", pid, browserPID, window, hz, runs)
		if s := sweepState(db, id); s != "running" {
			b.Fatalf("the sweep was %s before the last window ended: make it longer", s)
		}

		for _, w := range []cpuWindow{before, with, after} {
			fmt.Printf("  %-20s daemon %5.1f%% of one core (%3d runs recorded in the window, RSS %d kB); Chromium %5.1f%%, the machine %5.1f%% of %d%%\n",
				w.what, w.core, w.runs, w.rssKB, w.browser, w.machine, 100*runtime.NumCPU())
		}
		idle := (before.core + after.core) / 2
		fmt.Printf("  %d pages add %.1f%% of one core (against the mean of the windows without pages, %.1f%%)\n", pages, with.core-idle, idle)
		fmt.Printf("  the %d pages' API requests in their window: GET /api/sweeps %d, /api/sweeps/{id} %d, /api/sweeps/{id}/results %d, other %d\n",
			pages, with.requests["list"], with.requests["detail"], with.requests["results"], with.requests["other"])
		reqs := 0
		for _, n := range with.requests {
			reqs += n
		}
		perReq := 0.0
		if reqs > 0 {
			perReq = (with.core - idle) / 100 * window.Seconds() * 1000 / float64(reqs)
		}
		fmt.Printf("  that is %.1f ms of the daemon's CPU per API request of a page (%d requests, %.1f per page per second)\n",
			perReq, reqs, float64(reqs)/pages/window.Seconds())
		b.ReportMetric(idle, "cpu-idle-%core")
		b.ReportMetric(with.core, "cpu-10-pages-%core")
		b.ReportMetric(with.core-idle, "cpu-pages-delta-%core")
		b.ReportMetric(perReq, "cpu-ms/page-request")

		if code, body := d.api(b, http.MethodPost, fmt.Sprintf("/api/sweeps/%d/cancel", id), "", nil); code != http.StatusOK {
			b.Fatalf("cancel: %d %s", code, body)
		}
		waitFor(b, time.Minute, "the sweep cancelled", func() bool { return sweepState(db, id) == "cancelled" })
	}
}
