package web

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func withCookie(method, value, csrf string) *http.Request {
	r := httptest.NewRequest(method, "/api/sweeps", nil)
	if value != "" {
		r.AddCookie(&http.Cookie{Name: CookieName, Value: value})
	}
	if csrf != "" {
		r.Header.Set(CSRFHeader, csrf)
	}
	return r
}

func TestLoginCodeWorksOnceAndExpires(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)}
	s := NewSessions(clk.now)
	code, until, err := s.LoginCode()
	if err != nil || len(code) != 64 || !until.Equal(clk.now().Add(CodeTTL)) {
		t.Fatalf("code %q until %v: %v", code, until, err)
	}
	cookie, csrf, ok := s.redeem(code)
	if !ok || cookie == "" || csrf == "" || cookie == code {
		t.Fatalf("redeem: %q %q %v", cookie, csrf, ok)
	}
	if _, _, ok := s.redeem(code); ok {
		t.Fatal("a login code worked twice")
	}
	late, _, _ := s.LoginCode()
	clk.add(CodeTTL)
	if _, _, ok := s.redeem(late); ok {
		t.Fatal("an expired login code worked")
	}
	if _, _, ok := s.redeem(""); ok {
		t.Fatal("an empty code worked")
	}
}

func TestAdmitNeedsALiveSessionAndCSRFOnPOST(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)}
	s := NewSessions(clk.now)
	code, _, _ := s.LoginCode()
	cookie, csrf, _ := s.redeem(code)
	for _, c := range []struct {
		name    string
		r       *http.Request
		ok      bool
		refusal bool
	}{
		{"no cookie", withCookie("GET", "", ""), false, false},
		{"a GET with the session", withCookie("GET", cookie, ""), true, false},
		{"a POST without its CSRF token", withCookie("POST", cookie, ""), false, true},
		{"a POST with another token", withCookie("POST", cookie, "x"+csrf[1:]), false, true},
		{"a POST with its token", withCookie("POST", cookie, csrf), true, false},
		{"an unknown cookie", withCookie("GET", "feed", ""), false, true},
	} {
		ok, refusal := s.Admit(c.r)
		if ok != c.ok || (refusal != "") != c.refusal {
			t.Errorf("%s: admitted %v, refusal %q", c.name, ok, refusal)
		}
	}
	if got := s.csrfOf(withCookie("GET", cookie, "")); got != csrf {
		t.Errorf("the page's CSRF token %q, want the session's", got)
	}
	// Idle for less than SessionIdle keeps it; SessionIdle of silence ends it.
	clk.add(SessionIdle - time.Minute)
	if ok, _ := s.Admit(withCookie("GET", cookie, "")); !ok {
		t.Fatal("a session used within its idle time ended")
	}
	clk.add(SessionIdle)
	if ok, refusal := s.Admit(withCookie("GET", cookie, "")); ok || refusal == "" {
		t.Fatalf("an idle session still admitted (%v %q)", ok, refusal)
	}
}

func TestSessionsEndAtTheirMaximumAge(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)}
	s := NewSessions(clk.now)
	code, _, _ := s.LoginCode()
	cookie, _, _ := s.redeem(code)
	for clk.now().Before(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC).Add(SessionMax - time.Hour)) {
		clk.add(time.Hour)
		if ok, _ := s.Admit(withCookie("GET", cookie, "")); !ok {
			t.Fatalf("session ended at %v", clk.now())
		}
	}
	clk.add(2 * time.Hour)
	if ok, _ := s.Admit(withCookie("GET", cookie, "")); ok {
		t.Fatal("a session outlived SessionMax")
	}
}

func TestUnusedCodesAreBounded(t *testing.T) {
	s := NewSessions(nil)
	first, _, _ := s.LoginCode()
	for range maxPending {
		if _, _, err := s.LoginCode(); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.codes) != maxPending {
		t.Fatalf("%d codes kept, want at most %d", len(s.codes), maxPending)
	}
	if _, _, ok := s.redeem(first); ok {
		t.Fatal("the oldest code should have been dropped")
	}
}
