package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// world is a dashboard over a real SQLite store with one sweep of two points, served by an
// httptest server (the routes alone: credentials are the API's, tested in package api), and a
// logged-in session.
type world struct {
	t       *testing.T
	db      *store.DB
	srv     *Server
	ts      *httptest.Server
	sweep   int64
	ss      *Sessions
	clk     *clock
	secret  string
	attempt map[string]int
}

func newWorld(t *testing.T) *world { t.Helper(); return newWorldKeepalive(t, 50*time.Millisecond) }

// newWorldKeepalive is newWorld with the stream's keepalive interval: an hour shows that a stream
// closes when its session ends, not at its next keepalive.
func newWorldKeepalive(t *testing.T, keepalive time.Duration) *world {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	steps := 1
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "nightly", SpecHash: "h", SpecText: "version: 1\nname: nightly\n"},
		[]store.NewHost{{Name: "gpu-a", Address: "gpu-a.example", GPUs: 4, Unit: "sglang.service"}},
		[]store.NewPoint{
			{ID: "base", Method: "baseline", Baseline: true, TP: 4, Runs: 1, Argv: []string{"/bin/python", "-m", "sglang.launch_server"}},
			{ID: "e3", Method: "eagle3", TP: 4, Runs: 1, NumSteps: &steps, TopK: &steps, Argv: []string{"/bin/python", "-m", "sglang.launch_server"}},
		})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	ss := NewSessions(clk.now)
	srv, err := New(Config{Store: db, Sessions: ss, Poll: 20 * time.Millisecond, Keepalive: keepalive})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go srv.Run(rctx)
	mux := http.NewServeMux()
	for _, r := range srv.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	w := &world{t: t, db: db, srv: srv, ts: ts, sweep: id, ss: ss, clk: clk, attempt: map[string]int{}}
	w.secret = w.login()
	return w
}

// login trades a fresh login code for a session's secret, as the page does.
func (w *world) login() string {
	w.t.Helper()
	code, _, _ := w.ss.LoginCode()
	resp, err := http.Post(w.ts.URL+"/api/sessions", "application/json", strings.NewReader(`{"code":"`+code+`"}`))
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var s SessionJSON
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&s) != nil || len(s.Secret) != 64 || s.Header != SessionHeader {
		w.t.Fatalf("login: %d %+v", resp.StatusCode, s)
	}
	if len(resp.Cookies()) != 0 || resp.Header.Get("Set-Cookie") != "" {
		w.t.Fatalf("login set a cookie: %v", resp.Header)
	}
	return s.Secret
}

func (w *world) req(method, path string) *http.Request {
	return w.reqAs(method, path, w.secret)
}

func (w *world) reqAs(method, path, secret string) *http.Request {
	r, err := http.NewRequest(method, w.ts.URL+path, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	if secret != "" {
		r.Header.Set(SessionHeader, secret)
	}
	return r
}

func (w *world) get(path string) (int, string, http.Header) {
	w.t.Helper()
	resp, err := http.DefaultClient.Do(w.req("GET", path))
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// record claims point (once) and records one ok run at concurrency c.
func (w *world) record(point string, c int, tok float64) {
	w.t.Helper()
	ctx := context.Background()
	if w.attempt[point] == 0 {
		att, err := w.db.ClaimPoint(ctx, w.sweep, point, "gpu-a")
		if err != nil {
			w.t.Fatal(err)
		}
		w.attempt[point] = att
	}
	now := time.Now()
	m := &store.Metrics{Requests: 8, Completed: 8, DurationS: 2, TotalInputTokens: 256, TotalOutputTokens: 512,
		RequestS: 4, InputTokS: 128, OutputTokS: tok, TTFTMeanMs: 50, TTFTMedianMs: 50, TTFTP99Ms: 60,
		ITLMeanMs: 5, ITLMedianMs: 5, ITLP99Ms: 8, TPOTMeanMs: 5, TPOTMedianMs: 5, TPOTP99Ms: 8,
		E2EMeanMs: 400, E2EMedianMs: 400, E2EP99Ms: 500}
	if err := w.db.RecordRun(ctx, store.Run{SweepID: w.sweep, PointID: point, Attempt: w.attempt[point], Concurrency: c,
		Repeat: 1, Status: store.RunOK, Metrics: m, StartedAt: now.Add(-2 * time.Second), FinishedAt: now}); err != nil {
		w.t.Fatal(err)
	}
}

func TestSessionLoginTradesTheCodeForAHeaderSecretAndNoCookie(t *testing.T) {
	w := newWorld(t)
	code, _, _ := w.ss.LoginCode()
	for _, c := range []struct {
		name, ctype, body string
		want              int
	}{
		// Types a page of another origin may send without a preflight: refused before the code is read.
		{"text/plain", "text/plain", `{"code":"` + code + `"}`, 415},
		{"a form", "application/x-www-form-urlencoded", "code=" + code, 415},
		{"the code", "application/json", `{"code":"` + code + `"}`, 200},
		{"the code again", "application/json", `{"code":"` + code + `"}`, 401},
		{"no code", "application/json", `{}`, 401},
		{"not JSON", "application/json", `code`, 400},
	} {
		resp, err := http.Post(w.ts.URL+"/api/sessions", c.ctype, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s: %d %s %v, want %d and no cookie", c.name, resp.StatusCode, b, resp.Header, c.want)
		}
	}
}

func TestThePageHoldsNoDataAndNeedsNoCredential(t *testing.T) {
	w := newWorld(t)
	code, with, h := w.get("/")
	resp, err := http.Get(w.ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	without, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code != 200 || resp.StatusCode != 200 || with != string(without) || strings.Contains(with, w.secret) || strings.Contains(with, "nightly") {
		t.Fatalf("the page with a session (%d) and without (%d) differ, or hold data", code, resp.StatusCode)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	if code, _, _ := w.get("/static/app.js"); code != 200 {
		t.Errorf("app.js: %d", code)
	}
	if code, _, _ := w.get("/static/index.html"); code != 404 {
		t.Errorf("the page is served raw: %d", code)
	}
}

// ticket asks for a navigation's ticket with the world's session.
func (w *world) ticket(path string) (int, string) {
	w.t.Helper()
	r := w.req("POST", "/api/tickets")
	r.Header.Set("Content-Type", "application/json")
	r.Body = io.NopCloser(strings.NewReader(`{"path":"` + path + `"}`))
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var tk TicketJSON
	_ = json.NewDecoder(resp.Body).Decode(&tk)
	return resp.StatusCode, tk.URL
}

func TestTicketsOpenOnePathOnceForTheirSession(t *testing.T) {
	w := newWorld(t)
	if code, _ := w.ticket("/api/sweeps"); code != 400 {
		t.Errorf("a ticket for an API path: %d, want 400", code)
	}
	code, url := w.ticket("/sweeps/1/report")
	if code != 200 || !strings.HasPrefix(url, "/sweeps/1/report?ticket=") {
		t.Fatalf("ticket: %d %q", code, url)
	}
	tk := strings.TrimPrefix(url, "/sweeps/1/report?ticket=")
	get := func(path string) *http.Request { return w.reqAs("GET", path, "") }
	if ok, _ := w.ss.Admit(get("/sweeps/1/export?ticket=" + tk)); ok {
		t.Error("a report's ticket opened the export")
	}
	// That try used it up: a ticket is good once, whatever the path.
	_, url = w.ticket("/sweeps/1/report")
	if ok, _ := w.ss.Admit(get(url)); !ok {
		t.Error("a fresh ticket refused")
	}
	if ok, refusal := w.ss.Admit(get(url)); ok || refusal == "" {
		t.Error("a ticket worked twice")
	}
	_, url = w.ticket("/sweeps/1/export")
	w.clk.add(TicketTTL)
	if ok, _ := w.ss.Admit(get(url)); ok {
		t.Error("an expired ticket worked")
	}
	_, url = w.ticket("/sweeps/1/export")
	if ok, _ := w.ss.Admit(w.reqAs("POST", url, "")); ok {
		t.Error("a ticket admitted a POST")
	}
	_, url = w.ticket("/sweeps/1/export")
	w.ss.RevokeAll()
	if ok, _ := w.ss.Admit(get(url)); ok {
		t.Error("a ticket outlived its session")
	}
}

func TestLogoutEndsTheSessionAndItsStream(t *testing.T) {
	w := newWorldKeepalive(t, time.Hour)
	other := w.login()
	s := w.stream("")
	if e := s.next(); e.kind != "hello" {
		t.Fatalf("first event %+v", e)
	}
	resp, err := http.DefaultClient.Do(w.req("POST", "/api/logout"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	s.ended()
	if ok, refusal := w.ss.Admit(w.req("GET", "/api/sweeps")); ok || refusal == "" {
		t.Errorf("the secret after logout: admitted %v (%q)", ok, refusal)
	}
	if ok, _ := w.ss.Admit(w.reqAs("GET", "/api/sweeps", other)); !ok {
		t.Error("logout ended another session")
	}
}

func TestRevokeClosesOpenStreams(t *testing.T) {
	w := newWorldKeepalive(t, time.Hour)
	other := w.login()
	a := w.stream("")
	w.secret = other
	b := w.stream("")
	a.next()
	b.next()
	if n := w.ss.RevokeAll(); n != 2 {
		t.Errorf("revoke ended %d sessions, want 2", n)
	}
	a.ended()
	b.ended()
}

// TestExpiryClosesOpenStreams: a session that goes idle while only its stream is open ends, and
// its stream with it (the clock is the test's: the keepalive's check notices).
func TestExpiryClosesOpenStreams(t *testing.T) {
	w := newWorld(t)
	c := w.stream("")
	c.next()
	w.clk.add(SessionIdle)
	c.ended()
	if ok, _ := w.ss.Admit(w.req("GET", "/api/sweeps")); ok {
		t.Error("an idle session admitted")
	}
}

func TestStreamsPerCredentialAreCapped(t *testing.T) {
	w := newWorld(t)
	var open []*sse
	for range MaxStreams {
		s := w.stream("")
		s.next()
		open = append(open, s)
	}
	resp, err := http.DefaultClient.Do(w.req("GET", "/api/events"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		resp.Body.Close() // a stream: not read to its end
		t.Fatalf("stream %d of one session: %d, want 429", MaxStreams+1, resp.StatusCode)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "event streams") {
		t.Errorf("the refusal says %q", b)
	}
	// Another credential is not held to this one's streams.
	secret := w.secret
	w.secret = w.login()
	w.stream("").next()
	// One closed: a place again (the daemon sees the close when the connection goes).
	w.secret = secret
	open[0].body.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no stream admitted after one of the eight closed")
		}
		resp, err := http.DefaultClient.Do(w.req("GET", "/api/events"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		resp.Body.Close()
	}
}

func TestResultsReportAndExportComeFromTheStore(t *testing.T) {
	w := newWorld(t)
	w.record("base", 1, 100)
	w.record("e3", 1, 150)
	code, body, _ := w.get("/api/sweeps/1/results")
	var live report.Live
	if code != 200 || json.Unmarshal([]byte(body), &live) != nil {
		t.Fatalf("results: %d %s", code, body)
	}
	if live.Sweep != "nightly" || len(live.Results.Rows) != 2 || len(live.Best.Rows) != 1 || !strings.Contains(strings.Join(live.Best.Rows[0], " "), "1.50") {
		t.Errorf("results: best %v, results %v", live.Best.Rows, live.Results.Rows)
	}
	code, body, _ = w.get("/sweeps/1/report")
	if code != 200 || !strings.Contains(body, "<svg") || !strings.Contains(body, "nightly") {
		t.Errorf("report: %d, %d bytes", code, len(body))
	}
	code, body, h := w.get("/sweeps/1/export")
	if code != 200 || strings.Count(body, "\n") != 2 || !strings.Contains(h.Get("Content-Disposition"), "sweep-1.jsonl") {
		t.Errorf("export: %d %q %v", code, body, h)
	}
	for path, want := range map[string]int{"/sweeps/9/report": 404, "/sweeps/x/report": 400, "/api/sweeps/9/results": 404, "/sweeps/9/export": 404} {
		if code, _, _ := w.get(path); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
}

// sse reads one event stream.
type sse struct {
	t    *testing.T
	body io.ReadCloser
	sc   *bufio.Scanner
}

type event struct{ id, kind, data string }

func (w *world) stream(lastID string) *sse {
	w.t.Helper()
	r := w.req("GET", "/api/events")
	if lastID != "" {
		r.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		w.t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		w.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sse{t: w.t, body: resp.Body, sc: bufio.NewScanner(resp.Body)}
	w.t.Cleanup(func() { resp.Body.Close() })
	return s
}

// next is the next event (comments skipped); the test fails after 10 s without one.
func (s *sse) next() event {
	s.t.Helper()
	got := make(chan event, 1)
	go func() {
		var e event
		for s.sc.Scan() {
			l := s.sc.Text()
			switch {
			case l == "":
				if e.kind != "" {
					got <- e
					return
				}
			case strings.HasPrefix(l, "id: "):
				e.id = l[4:]
			case strings.HasPrefix(l, "event: "):
				e.kind = l[7:]
			case strings.HasPrefix(l, "data: "):
				e.data = l[6:]
			}
		}
		close(got)
	}()
	select {
	case e, ok := <-got:
		if !ok {
			s.t.Fatal("the stream ended")
		}
		return e
	case <-time.After(10 * time.Second):
		s.t.Fatal("no event within 10 s")
	}
	return event{}
}

// ended waits for the daemon to close the stream; the test fails after 10 s of events without that.
func (s *sse) ended() {
	s.t.Helper()
	got := make(chan struct{})
	go func() {
		for s.sc.Scan() {
		}
		close(got)
	}()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		s.t.Fatal("the stream is still open")
	}
}

// until reads events until one of kind whose data contains want.
func (s *sse) until(kind, want string) event {
	s.t.Helper()
	for {
		e := s.next()
		if e.kind == kind && strings.Contains(e.data, want) {
			return e
		}
	}
}

func TestEventsStreamRunsStatesActivityAndCatchUp(t *testing.T) {
	w := newWorld(t)
	s := w.stream("")
	if e := s.next(); e.kind != "hello" {
		t.Fatalf("first event %+v, want hello", e)
	}
	w.record("base", 1, 100)
	// The claim (a sweep's counts changed, a state event logged) and the run, in the order polled.
	var run event
	var sawSweep, sawLog bool
	for run.kind == "" || !sawSweep || !sawLog {
		switch e := s.next(); e.kind {
		case "run":
			run = e
		case "sweep":
			sawSweep = sawSweep || strings.Contains(e.data, `"id":1`)
		case "log":
			sawLog = sawLog || strings.Contains(e.data, `"kind":"state"`)
		}
	}
	if !strings.Contains(run.data, `"point":"base"`) || !strings.Contains(run.data, `"output_tok_s":100`) || !strings.Contains(run.data, `"sweep":1`) {
		t.Errorf("run event %s", run.data)
	}
	w.srv.Notify(1, "gpu-a/slot 0", map[string]any{"phase": "load", "gpus": []int{0}})
	if e := s.until("activity", `"key":"gpu-a/slot 0"`); !strings.Contains(e.data, `"phase":"load"`) {
		t.Errorf("activity %s", e.data)
	}
	// A page that was away: what it missed comes first when it reconnects with its last id.
	lastID := run.id
	s.body.Close()
	w.record("e3", 1, 150)
	w.record("e3", 4, 400)
	want, _, err := w.db.LastIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if run, _ := w.srv.hub.ids(); run >= want {
			break // the hub has seen them: a reconnect must catch up from the store
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub never saw the runs")
		}
	}
	r := w.stream(lastID)
	first, second := r.next(), r.next()
	if first.kind != "run" || !strings.Contains(first.data, `"concurrency":1`) || !strings.Contains(first.data, `"point":"e3"`) ||
		second.kind != "run" || !strings.Contains(second.data, `"concurrency":4`) {
		t.Errorf("after a reconnect from %s: %+v then %+v, want the two missed runs", lastID, first, second)
	}
}

func TestASlowPageIsDroppedNotWaitedFor(t *testing.T) {
	h := newHub(nil, nil)
	slow, fast := h.subscribe(), h.subscribe()
	for i := range cap(slow.ch) + 1 {
		h.publish(message{kind: "run", data: i})
		<-fast.ch
	}
	if _, open := <-drain(slow.ch); open {
		t.Fatal("a subscriber that fell behind is still subscribed")
	}
	h.mu.Lock()
	n := len(h.subs)
	h.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d subscribers, want the fast one", n)
	}
}

// drain empties ch and reports whether it is still open.
func drain(ch chan message) chan message {
	out := make(chan message, 1)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				close(out)
				return out
			}
			_ = m
		default:
			out <- message{}
			return out
		}
	}
}
