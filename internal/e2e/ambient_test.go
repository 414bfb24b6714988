package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/specsweep/specsweep/internal/testhost"
)

// The dashboard's credential and the other servers of the machine (issue 23, item 1): a browser
// sends a host's cookies to every port of it, so a session cookie reached any local user's server
// on 127.0.0.1, which could replay it. Here a logged-in Chromium visits a second loopback server
// (another port, as localhost and as 127.0.0.1) that records everything it receives; every recorded
// header set, replayed by this process against every path of the daemon, must read and change
// nothing.

// quietSpec is a sweep that waits (scheduled for 2099): it exists for the paths, runs nothing.
const quietSpec = `version: 1
name: quiet
hosts: [{name: gpu, address: gpu.example, gpus: 4}]
server:
  command: [/opt/sglang/.venv/bin/python, -m, sglang.launch_server]
  args: [--model-path, /models/target, --port, "30000"]
methods: {baseline: []}
matrix: {method: [baseline], tp: [4]}
workload: {concurrency: [1], requests: 8, input_tokens: 16, output_tokens: 16}
`

// recorded is one request the other server received.
type recorded struct {
	url    string
	header http.Header
}

// recorder is a loopback web server of another "user": its page makes the browser send it every
// kind of request (images, scripts, fetches with credentials, a redirect between localhost and
// 127.0.0.1, a navigation), and it keeps all of them.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	port string
	done chan struct{} // a token per visit that reached its last step
}

func newRecorder(t *testing.T) *recorder {
	rc := &recorder{done: make(chan struct{}, 16)}
	// A port from below the ephemeral range, as every server of the package's tests (testhost.FreePort).
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(testhost.FreePort(t))))
	if err != nil {
		t.Fatal(err)
	}
	_, rc.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return rc
}

func (rc *recorder) serve(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, recorded{url: "http://" + r.Host + r.URL.String(), header: r.Header.Clone()})
	rc.mu.Unlock()
	local, loop := "http://localhost:"+rc.port, "http://127.0.0.1:"+rc.port
	switch r.URL.Path {
	case "/start":
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>innocent</title>
<img src="%[1]s/img-localhost.png"><img src="%[2]s/img-127.png"><img src="/img-self.png">
<script src="%[1]s/script-localhost.js"></script><script src="%[2]s/script-127.js"></script>
<iframe src="%[1]s/redirect"></iframe>
<form id="f" method="POST" action="%[2]s/form" target="sink"><input name="x" value="1"></form><iframe name="sink"></iframe>
<script>
document.getElementById("f").submit();
Promise.allSettled([
  fetch("%[1]s/fetch-localhost", {credentials: "include"}),
  fetch("%[2]s/fetch-127", {credentials: "include"}),
  fetch("/fetch-self", {credentials: "include"}),
  fetch("%[2]s/fetch-127-post", {method: "POST", credentials: "include", body: "x"}),
]).then(() => setTimeout(() => { location.href = "%[2]s/navigated"; }, 300));
</script>`, local, loop)
	case "/redirect":
		http.Redirect(w, r, loop+"/innocent", http.StatusFound)
	case "/navigated":
		io.WriteString(w, "ok")
		select {
		case rc.done <- struct{}{}:
		default:
		}
	case "/fetch-localhost", "/fetch-127", "/fetch-self", "/fetch-127-post":
		// Allow the credentialed fetch, so that the browser sends what it would.
		w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		io.WriteString(w, "ok")
	default:
		io.WriteString(w, "ok")
	}
}

func (rc *recorder) all() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.reqs...)
}

// metaTag is a <meta name content> of a page.
var metaTag = regexp.MustCompile(`<meta name="([^"]+)" content="([^"]*)">`)

// replayAttempt is one replay of a recorded header set against the daemon.
type replayAttempt struct {
	method, path, ctype, body string
}

// send is the status and body of one request to the daemon with the given headers (Host set by the
// client to the daemon's address, as a replaying process would).
func sendAs(t *testing.T, addr string, h http.Header, a replayAttempt) (int, string) {
	t.Helper()
	var body io.Reader
	if a.body != "" {
		body = strings.NewReader(a.body)
	}
	req, err := http.NewRequest(a.method, "http://"+addr+a.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		if k == "Content-Length" || k == "Host" {
			continue
		}
		req.Header[k] = append([]string(nil), vs...)
	}
	if a.ctype != "" {
		req.Header.Set("Content-Type", a.ctype)
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", a.method, a.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// withoutBrowserHints is h without what tells the daemon a browser sent it from elsewhere
// (Origin, Referer, Sec-Fetch-*): a replaying process leaves those out.
func withoutBrowserHints(h http.Header) http.Header {
	out := h.Clone()
	for k := range out {
		if k == "Origin" || k == "Referer" || strings.HasPrefix(k, "Sec-") {
			delete(out, k)
		}
	}
	return out
}

func testDashboardCredentialNeverReachesAnotherPort(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ctx := browser(t)
	db := t.TempDir() + "/a.db"
	d := startDaemon(t, db)
	id := submit(t, db, quietSpec, "--at", "2099-01-01T00:00:00Z")
	row := fmt.Sprintf(`#queue tr[data-sweep="%d"]`, id)

	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(loginURL(t, db, d.addr)),
		chromedp.WaitVisible(chromedp.CSS(row)),
	); err != nil {
		t.Fatalf("the logged-in page: %v", err)
	}
	secret, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem("specsweep.session") || ""`))
	if err != nil || len(secret) != 64 {
		t.Fatalf("the page's session secret %q: %v", secret, err)
	}
	// The secret itself works (so the refusals below are not for want of a working session).
	if code, body := sendAs(t, d.addr, http.Header{"X-Specsweep-Session": {secret}}, replayAttempt{method: "GET", path: "/api/sweeps"}); code != 200 || !strings.Contains(body, "quiet") {
		t.Fatalf("the page's secret: %d %s", code, body)
	}

	// The same browser, the dashboard open in another tab, visits the other server.
	rc := newRecorder(t)
	for _, start := range []string{"http://localhost:" + rc.port + "/start", "http://127.0.0.1:" + rc.port + "/start"} {
		tab, cancel := chromedp.NewContext(ctx)
		if err := chromedp.Do(within(t, tab, time.Minute), chromedp.Navigate(start)); err != nil {
			t.Fatalf("visiting %s: %v", start, err)
		}
		select {
		case <-rc.done:
		case <-time.After(time.Minute):
			t.Fatalf("the page at %s never navigated on", start)
		}
		cancel()
	}
	reqs := rc.all()
	paths := map[string]bool{}
	for _, r := range reqs {
		paths[strings.SplitN(strings.SplitN(r.url, "/", 4)[3], "?", 2)[0]] = true
	}
	for _, p := range []string{"img-localhost.png", "img-127.png", "img-self.png", "script-localhost.js", "script-127.js", "innocent", "form", "fetch-localhost", "fetch-127", "fetch-self", "fetch-127-post", "navigated"} {
		if !paths[p] {
			t.Errorf("the other server never got /%s (got %v)", p, paths)
		}
	}
	for _, r := range reqs {
		if strings.Contains(fmt.Sprint(r.url, r.header), secret) {
			t.Errorf("the other server received the session's secret: %s %v", r.url, r.header)
		}
	}

	// Replays: every header set, as received and without the browser's hints, on every path.
	open := map[string]string{}
	for _, p := range []string{"/", "/static/app.js"} {
		_, open[p] = sendAs(t, d.addr, http.Header{}, replayAttempt{method: "GET", path: p})
	}
	attempts := []replayAttempt{
		{method: "GET", path: "/"},
		{method: "GET", path: "/static/app.js"},
		{method: "GET", path: "/api/sweeps"},
		{method: "GET", path: fmt.Sprintf("/api/sweeps/%d", id)},
		{method: "GET", path: fmt.Sprintf("/api/sweeps/%d/results", id)},
		{method: "GET", path: "/api/events"},
		{method: "GET", path: "/api/watches"},
		{method: "GET", path: fmt.Sprintf("/sweeps/%d/report", id)},
		{method: "GET", path: fmt.Sprintf("/sweeps/%d/export", id)},
		{method: "POST", path: fmt.Sprintf("/api/sweeps/%d/cancel", id)},
		{method: "POST", path: "/api/sweeps?at=2099-01-01T00:00:00Z", ctype: "application/yaml", body: quietSpec},
		{method: "POST", path: "/api/tickets", ctype: "application/json", body: fmt.Sprintf(`{"path":"/sweeps/%d/report"}`, id)},
		{method: "POST", path: "/api/login-codes"},
		{method: "POST", path: "/api/sessions/revoke"},
		{method: "POST", path: "/api/logout"},
	}
	for _, r := range reqs {
		for _, h := range []http.Header{r.header, withoutBrowserHints(r.header)} {
			// An attacker also sends whatever the replayed page hands out (the cookie design's page
			// carried its CSRF token and the header to send it in).
			h = h.Clone()
			if _, page := sendAs(t, d.addr, h, replayAttempt{method: "GET", path: "/"}); page != "" {
				metas := map[string]string{}
				for _, m := range metaTag.FindAllStringSubmatch(page, -1) {
					metas[m[1]] = m[2]
				}
				if metas["csrf-header"] != "" && metas["csrf-token"] != "" {
					h.Set(metas["csrf-header"], metas["csrf-token"])
				}
			}
			for _, a := range attempts {
				code, body := sendAs(t, d.addr, h, a)
				if want, isOpen := open[a.path]; isOpen {
					// The page holds no data: what everyone gets, or refused (a foreign Origin).
					if (code != 200 || body != want) && code != http.StatusForbidden {
						t.Errorf("%s %s with the headers the other server got at %s: %d, not the page everyone gets", a.method, a.path, r.url, code)
					}
					continue
				}
				if code != http.StatusUnauthorized && code != http.StatusForbidden {
					t.Errorf("%s %s with the headers the other server got at %s (%v): %d %.200s, want 401 or 403",
						a.method, a.path, r.url, h, code, body)
				}
			}
		}
	}
	if n := countRows(db, "SELECT count(*) FROM sweeps"); n != 1 || sweepState(db, id) != "queued" {
		t.Errorf("after the replays: %d sweeps, sweep %d %s; want it alone and queued", n, id, sweepState(db, id))
	}

	// Logout in the page: the secret is forgotten and refused from then on.
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Click(chromedp.CSS("#logout")),
		chromedp.WaitVisible(chromedp.CSS(`#live.off`)),
	); err != nil {
		t.Fatalf("logout: %v", err)
	}
	waitFor(t, 30*time.Second, "the page to say it is logged out", func() bool {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("live").textContent + "|" + (localStorage.getItem("specsweep.session") || "")`))
		return err == nil && strings.HasPrefix(s, "logged out") && strings.HasSuffix(s, "|")
	})
	if code, _ := sendAs(t, d.addr, http.Header{"X-Specsweep-Session": {secret}}, replayAttempt{method: "GET", path: "/api/sweeps"}); code != http.StatusForbidden {
		t.Errorf("the secret after logout: %d, want 403", code)
	}

	// `specsweep dashboard --revoke` ends a logged-in browser's session, and its stream closes.
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate("about:blank"), // a login URL differs from the page's only in its fragment
		chromedp.Navigate(loginURL(t, db, d.addr)),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS(`#live.on`)),
	); err != nil {
		t.Fatalf("the second login: %v", err)
	}
	secret, err = chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem("specsweep.session") || ""`))
	if err != nil || len(secret) != 64 {
		t.Fatalf("the second session's secret %q: %v", secret, err)
	}
	stream := openStream(t, d.addr, secret)
	r := specsweep(t, 30*time.Second, "dashboard", "--revoke", "--db", db, "--listen", d.addr)
	if r.code != 0 || !strings.Contains(r.stdout, "session(s) ended") {
		t.Fatalf("dashboard --revoke:\n%s", r)
	}
	select {
	case <-stream:
	case <-time.After(30 * time.Second):
		t.Error("a revoked session's event stream is still open")
	}
	waitFor(t, 30*time.Second, "the page to say it is logged out after --revoke", func() bool {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("live").textContent`))
		return err == nil && strings.HasPrefix(s, "logged out")
	})
	if code, _ := sendAs(t, d.addr, http.Header{"X-Specsweep-Session": {secret}}, replayAttempt{method: "GET", path: "/api/sweeps"}); code != http.StatusForbidden {
		t.Errorf("the secret after --revoke: %d, want 403", code)
	}
}

// openStream opens the event stream with a session's secret, reads its hello, and returns a
// channel closed when the daemon ends the stream.
func openStream(t *testing.T, addr, secret string) <-chan struct{} {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/events", nil)
	req.Header.Set("X-Specsweep-Session", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("the event stream: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: hello" {
	}
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(ended)
	}()
	return ended
}
