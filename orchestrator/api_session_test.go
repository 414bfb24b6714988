package orchestrator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/store"
)

// fakeSessions admits the cookie "s=good", and a POST only with X-CSRF: ok; it fails the test on a
// login code it was not expected to make.
type fakeSessions struct {
	t     *testing.T
	codes int
}

func (f *fakeSessions) Admit(r *http.Request) (bool, string) {
	c, err := r.Cookie("s")
	if err != nil {
		return false, ""
	}
	if c.Value != "good" {
		return false, "session expired: log in again"
	}
	if r.Method != http.MethodGet && r.Header.Get("X-CSRF") != "ok" {
		return false, "missing or wrong CSRF token"
	}
	return true, ""
}

func (f *fakeSessions) LoginCode() (string, time.Time, error) {
	f.codes++
	return "c0de", time.UnixMilli(1_800_000_000_000), nil
}

func asBrowser(cookie, csrf string) func(r *http.Request) {
	return func(r *http.Request) {
		r.Header.Del("Authorization")
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: "s", Value: cookie})
		}
		if csrf != "" {
			r.Header.Set("X-CSRF", csrf)
		}
	}
}

func TestSessionsBesideTheToken(t *testing.T) {
	fs := &fakeSessions{t: t}
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the page") })
	a := newAPIHarness(t, APIConfig{Sessions: fs, Routes: []Route{
		{Pattern: "GET /{$}", Handler: page, Page: true},
		{Pattern: "GET /login", Handler: page, Open: true},
		{Pattern: "GET /api/events", Handler: page},
	}})
	if w := a.do("POST", "/api/sweeps", apiSpec(""), nil); w.Code != http.StatusCreated {
		t.Fatalf("submit: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct {
		name, method, path, cookie, csrf string
		code                             int
		body                             string
	}{
		{"a session reads the API", "GET", "/api/sweeps", "good", "", 200, `"name": "api"`},
		{"a session reads a stream route", "GET", "/api/events", "good", "", 200, "the page"},
		{"no credential", "GET", "/api/sweeps", "", "", 401, "bearer token"},
		{"an expired session", "GET", "/api/sweeps", "stale", "", 403, "session expired"},
		{"a session's POST without its CSRF token", "POST", "/api/sweeps/1/cancel", "good", "", 403, "CSRF"},
		{"a session's POST with it", "POST", "/api/sweeps/1/cancel", "good", "ok", 200, `"state": "cancelled"`},
		{"resume by a session", "POST", "/api/sweeps/1/resume", "good", "ok", 200, `"state": "queued"`},
		{"resume of a queued sweep", "POST", "/api/sweeps/1/resume", "good", "ok", 409, "not resumable"},
		{"resume of no sweep", "POST", "/api/sweeps/9/resume", "good", "ok", 404, "no sweep 9"},
		{"a session cannot make login codes", "POST", "/api/login-codes", "good", "ok", 401, "bearer token"},
		{"the page without a session", "GET", "/", "", "", 401, "specsweep dashboard"},
		{"the page with one", "GET", "/", "good", "", 200, "the page"},
		{"the login route is open", "GET", "/login?code=x", "", "", 200, "the page"},
	} {
		w := a.do(c.method, c.path, "", asBrowser(c.cookie, c.csrf))
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, w.Code, w.Body, c.code, c.body)
		}
	}
	if fs.codes != 0 {
		t.Fatalf("%d login codes made for sessions", fs.codes)
	}
	w := a.do("POST", "/api/login-codes", "", nil)
	var lc LoginCodeJSON
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &lc) != nil || lc.Path != "/login?code=c0de" || lc.ExpiresAt != 1_800_000_000_000 {
		t.Fatalf("login code with the token: %d %s", w.Code, w.Body)
	}
	sw, err := a.db.Sweep(context.Background(), 1)
	if err != nil || sw.State != store.SweepQueued {
		t.Fatalf("sweep after resume: %+v %v", sw, err)
	}
}

// TestNoSessionsNoLoginCodes: a daemon without a dashboard makes no login codes.
func TestNoSessionsNoLoginCodes(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	if w := a.do("POST", "/api/login-codes", "", nil); w.Code != http.StatusNotFound {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := a.do("GET", "/api/sweeps", "", asBrowser("good", "")); w.Code != http.StatusUnauthorized {
		t.Fatalf("a cookie without sessions configured: %d", w.Code)
	}
}
