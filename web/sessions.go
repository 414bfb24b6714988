package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Browser sessions (docs/daemon.md, "Dashboard"): a one-time login code, printed by the daemon or
// made by `specsweep dashboard` with the API's token, is traded at /login for a session cookie
// (HttpOnly, SameSite=Strict); a request that changes something also sends the session's CSRF token
// in a header, which a page of another origin cannot read.

const (
	// CookieName is the session cookie's name.
	CookieName = "specsweep_session"
	// CSRFHeader carries the session's CSRF token on a POST.
	CSRFHeader = "X-CSRF-Token"
	// CodeTTL is how long a login code may wait to be used.
	CodeTTL = 15 * time.Minute
	// SessionIdle ends a session not used for that long; SessionMax ends any.
	SessionIdle = 12 * time.Hour
	SessionMax  = 7 * 24 * time.Hour
	// maxPending bounds the unused login codes kept (the oldest go first).
	maxPending = 64
)

// Sessions holds the login codes and sessions of one daemon, in memory: a restart logs everyone
// out. Secrets are kept as SHA-256 digests, so a dump of the map holds none.
type Sessions struct {
	now func() time.Time

	mu       sync.Mutex
	codes    map[[32]byte]time.Time // digest of an unused code -> its expiry
	sessions map[[32]byte]*session
}

type session struct {
	csrf    string
	created time.Time
	seen    time.Time
}

// NewSessions makes an empty set; now is the clock (nil: time.Now).
func NewSessions(now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	return &Sessions{now: now, codes: map[[32]byte]time.Time{}, sessions: map[[32]byte]*session{}}
}

func secret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("web: making a secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func digest(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// LoginCode makes a one-time login code valid for CodeTTL.
func (s *Sessions) LoginCode() (string, time.Time, error) {
	code, err := secret()
	if err != nil {
		return "", time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.pruneLocked(now)
	for len(s.codes) >= maxPending {
		var oldest [32]byte
		first := true
		for k, exp := range s.codes {
			if first || exp.Before(s.codes[oldest]) {
				oldest, first = k, false
			}
		}
		delete(s.codes, oldest)
	}
	until := now.Add(CodeTTL)
	s.codes[digest(code)] = until
	return code, until, nil
}

// redeem trades a login code (once) for a new session: the cookie value and its CSRF token.
func (s *Sessions) redeem(code string) (cookie, csrf string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	d := digest(code)
	exp, found := s.codes[d]
	if !found {
		return "", "", false
	}
	delete(s.codes, d)
	if !now.Before(exp) {
		return "", "", false
	}
	c, err := secret()
	if err != nil {
		return "", "", false
	}
	t, err := secret()
	if err != nil {
		return "", "", false
	}
	s.sessions[digest(c)] = &session{csrf: t, created: now, seen: now}
	return c, t, true
}

// lookup is the live session of r's cookie (its last use moved to now), or nil.
func (s *Sessions) lookup(r *http.Request) (*session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	d := digest(c.Value)
	ss := s.sessions[d]
	if ss == nil {
		return nil, true
	}
	if now.Sub(ss.seen) >= SessionIdle || now.Sub(ss.created) >= SessionMax {
		delete(s.sessions, d)
		return nil, true
	}
	ss.seen = now
	return ss, true
}

// Admit implements orchestrator.SessionAuth: a live session, and for any method but GET and HEAD
// its CSRF token in X-CSRF-Token.
func (s *Sessions) Admit(r *http.Request) (bool, string) {
	ss, had := s.lookup(r)
	if ss == nil {
		if had {
			return false, "the session ended (expired, or the daemon restarted): log in again with a URL from `specsweep dashboard`"
		}
		return false, ""
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true, ""
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(CSRFHeader)), []byte(ss.csrf)) != 1 {
		return false, "missing or wrong CSRF token (" + CSRFHeader + ")"
	}
	return true, ""
}

// csrfOf is the CSRF token of r's session, for the page ("" without one).
func (s *Sessions) csrfOf(r *http.Request) string {
	ss, _ := s.lookup(r)
	if ss == nil {
		return ""
	}
	return ss.csrf
}

// pruneLocked forgets expired codes and sessions (s.mu held).
func (s *Sessions) pruneLocked(now time.Time) {
	for k, exp := range s.codes {
		if !now.Before(exp) {
			delete(s.codes, k)
		}
	}
	for k, ss := range s.sessions {
		if now.Sub(ss.seen) >= SessionIdle || now.Sub(ss.created) >= SessionMax {
			delete(s.sessions, k)
		}
	}
}
