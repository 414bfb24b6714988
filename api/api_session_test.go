package api

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

// fakeSessions admits the header "X-Session: good" (package web's real sessions are tested there);
// it counts the login codes made and the revocations.
type fakeSessions struct {
	t       *testing.T
	codes   int
	revoked int
}

func (f *fakeSessions) Admit(r *http.Request) (bool, string) {
	switch r.Header.Get("X-Session") {
	case "":
		return false, ""
	case "good":
		return true, ""
	default:
		return false, "session expired: log in again"
	}
}

func (f *fakeSessions) LoginCode() (string, time.Time, error) {
	f.codes++
	return "c0de", time.UnixMilli(1_800_000_000_000), nil
}

func (f *fakeSessions) LoginPath(code string) string { return "/#code=" + code }

func (f *fakeSessions) RevokeAll() int { f.revoked++; return 2 }

func asBrowser(session string) func(r *http.Request) {
	return func(r *http.Request) {
		r.Header.Del("Authorization")
		if session != "" {
			r.Header.Set("X-Session", session)
		}
	}
}

func TestSessionsBesideTheToken(t *testing.T) {
	fs := &fakeSessions{t: t}
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the page") })
	a := newAPIHarness(t, APIConfig{Sessions: fs, Routes: []Route{
		{Pattern: "GET /{$}", Handler: page, Open: true},
		{Pattern: "GET /sweeps/{id}/report", Handler: page, Page: true},
		{Pattern: "GET /api/events", Handler: page},
	}})
	if w := a.do("POST", "/api/sweeps", apiSpec(""), nil); w.Code != http.StatusCreated {
		t.Fatalf("submit: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct {
		name, method, path, session string
		code                        int
		body                        string
	}{
		{"a session reads the API", "GET", "/api/sweeps", "good", 200, `"name": "api"`},
		{"a session reads a stream route", "GET", "/api/events", "good", 200, "the page"},
		{"no credential", "GET", "/api/sweeps", "", 401, "bearer token"},
		{"an expired session", "GET", "/api/sweeps", "stale", 403, "session expired"},
		{"a session's cancel", "POST", "/api/sweeps/1/cancel", "good", 200, `"state": "cancelled"`},
		{"resume by a session", "POST", "/api/sweeps/1/resume", "good", 200, `"state": "queued"`},
		{"resume of a queued sweep", "POST", "/api/sweeps/1/resume", "good", 409, "not resumable"},
		{"resume of no sweep", "POST", "/api/sweeps/9/resume", "good", 404, "no sweep 9"},
		{"a session cannot make login codes", "POST", "/api/login-codes", "good", 401, "bearer token"},
		{"a session cannot revoke sessions", "POST", "/api/sessions/revoke", "good", 401, "bearer token"},
		{"a page route without a session", "GET", "/sweeps/1/report", "", 401, "specsweep dashboard"},
		{"a page route with one", "GET", "/sweeps/1/report", "good", 200, "the page"},
		{"an open route", "GET", "/", "", 200, "the page"},
	} {
		w := a.do(c.method, c.path, "", asBrowser(c.session))
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, w.Code, w.Body, c.code, c.body)
		}
	}
	if fs.codes != 0 || fs.revoked != 0 {
		t.Fatalf("%d login codes made and %d revocations for sessions", fs.codes, fs.revoked)
	}
	w := a.do("POST", "/api/login-codes", "", nil)
	var lc LoginCodeJSON
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &lc) != nil || lc.Path != "/#code=c0de" || lc.ExpiresAt != 1_800_000_000_000 {
		t.Fatalf("login code with the token: %d %s", w.Code, w.Body)
	}
	w = a.do("POST", "/api/sessions/revoke", "", nil)
	var rv RevokeJSON
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &rv) != nil || rv.Ended != 2 || fs.revoked != 1 {
		t.Fatalf("revoke with the token: %d %s", w.Code, w.Body)
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
	if w := a.do("GET", "/api/sweeps", "", asBrowser("good")); w.Code != http.StatusUnauthorized {
		t.Fatalf("a session without sessions configured: %d", w.Code)
	}
	if w := a.do("POST", "/api/sessions/revoke", "", nil); w.Code != http.StatusNotFound {
		t.Fatalf("revoke without sessions: %d %s", w.Code, w.Body)
	}
}
