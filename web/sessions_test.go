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

func withSecret(method, secret string) *http.Request {
	r := httptest.NewRequest(method, "/api/sweeps", nil)
	if secret != "" {
		r.Header.Set(SessionHeader, secret)
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
	if p := s.LoginPath(code); p != "/#code="+code {
		t.Errorf("login path %q: the code belongs in the fragment", p)
	}
	sec, ok := s.redeem(code)
	if !ok || len(sec) != 64 || sec == code {
		t.Fatalf("redeem: %q %v", sec, ok)
	}
	if _, ok := s.redeem(code); ok {
		t.Fatal("a login code worked twice")
	}
	late, _, _ := s.LoginCode()
	clk.add(CodeTTL)
	if _, ok := s.redeem(late); ok {
		t.Fatal("an expired login code worked")
	}
	if _, ok := s.redeem(""); ok {
		t.Fatal("an empty code worked")
	}
}

// TestSessionAdmitsOnlyItsHeaderNeverACookie: the secret admits in SessionHeader, for any method
// (no CSRF token: no other origin can make a browser send that header); the same secret in a cookie
// or in HTTP authentication admits nothing.
func TestSessionAdmitsOnlyItsHeaderNeverACookie(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)}
	s := NewSessions(clk.now)
	code, _, _ := s.LoginCode()
	sec, _ := s.redeem(code)
	asCookie := func(name string) *http.Request {
		r := withSecret("GET", "")
		r.AddCookie(&http.Cookie{Name: name, Value: sec})
		return r
	}
	basic := withSecret("GET", "")
	basic.SetBasicAuth("specsweep", sec)
	for _, c := range []struct {
		name    string
		r       *http.Request
		ok      bool
		refusal bool
	}{
		{"nothing", withSecret("GET", ""), false, false},
		{"a GET with the secret", withSecret("GET", sec), true, false},
		{"a POST with the secret", withSecret("POST", sec), true, false},
		{"another secret", withSecret("GET", "x"+sec[1:]), false, true},
		{"the secret as the old cookie", asCookie("specsweep_session"), false, false},
		{"the secret as a cookie of the header's name", asCookie(SessionHeader), false, false},
		{"the secret in HTTP basic authentication", basic, false, false},
	} {
		ok, refusal := s.Admit(c.r)
		if ok != c.ok || (refusal != "") != c.refusal {
			t.Errorf("%s: admitted %v, refusal %q", c.name, ok, refusal)
		}
	}
	// Idle for less than SessionIdle keeps it; SessionIdle of silence ends it.
	clk.add(SessionIdle - time.Minute)
	if ok, _ := s.Admit(withSecret("GET", sec)); !ok {
		t.Fatal("a session used within its idle time ended")
	}
	clk.add(SessionIdle)
	if ok, refusal := s.Admit(withSecret("GET", sec)); ok || refusal == "" {
		t.Fatalf("an idle session still admitted (%v %q)", ok, refusal)
	}
}

func TestSessionsEndAtTheirMaximumAge(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)}
	s := NewSessions(clk.now)
	code, _, _ := s.LoginCode()
	sec, _ := s.redeem(code)
	for clk.now().Before(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC).Add(SessionMax - time.Hour)) {
		clk.add(time.Hour)
		if ok, _ := s.Admit(withSecret("GET", sec)); !ok {
			t.Fatalf("session ended at %v", clk.now())
		}
	}
	clk.add(2 * time.Hour)
	if ok, _ := s.Admit(withSecret("GET", sec)); ok {
		t.Fatal("a session outlived SessionMax")
	}
}

func TestSessionRevokeAllEndsEverySessionAndCode(t *testing.T) {
	s := NewSessions(nil)
	var secs []string
	for range 3 {
		code, _, _ := s.LoginCode()
		sec, _ := s.redeem(code)
		secs = append(secs, sec)
	}
	unused, _, _ := s.LoginCode()
	_, ended, _ := s.streamOf(withSecret("GET", secs[0]))
	if n := s.RevokeAll(); n != 3 {
		t.Fatalf("revoke ended %d sessions, want 3", n)
	}
	select {
	case <-ended:
	default:
		t.Error("a revoked session's stream was not told")
	}
	for _, sec := range secs {
		if ok, _ := s.Admit(withSecret("GET", sec)); ok {
			t.Error("a revoked session admitted")
		}
	}
	if _, ok := s.redeem(unused); ok {
		t.Error("a login code made before the revoke worked after it")
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
	if _, ok := s.redeem(first); ok {
		t.Fatal("the oldest code should have been dropped")
	}
}
