package web

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Browser sessions (docs/daemon.md, "Dashboard"; docs/security.md, "The dashboard's sessions").
// Nothing a browser attaches by itself (a cookie, HTTP authentication) is a credential: a browser
// sends a host's cookies to every port of it, so any local user's server on 127.0.0.1 would get
// them. The page holds its session secret itself and sends it in SessionHeader:
//   - a one-time login code travels in the URL's fragment (/#code=...), which the browser never
//     sends to a server (no request line, no log, no Referer);
//   - the page trades it (POST /api/sessions, JSON, open) for a session secret;
//   - the page keeps the secret in localStorage (per origin, port included) and sends it as a header
//     on every request, the event stream too (fetch, not EventSource);
//   - a link that is a navigation (report, export) cannot carry a header: the page asks for a ticket
//     (POST /api/tickets), good once, for one path, for TicketTTL.
// The daemon reads no cookie at all. A header no other page can make the browser send also does
// what a CSRF token did, so there is none.

const (
	// SessionHeader carries a session's secret on every request of the page.
	SessionHeader = "X-Specsweep-Session"
	// CodeTTL is how long a login code may wait to be used.
	CodeTTL = 15 * time.Minute
	// SessionIdle ends a session not used for that long; SessionMax ends any.
	SessionIdle = 12 * time.Hour
	SessionMax  = 7 * 24 * time.Hour
	// TicketTTL is how long a navigation's ticket may wait: the page uses it at once.
	TicketTTL = time.Minute
	// maxPending bounds the unused login codes kept (the oldest go first); maxTickets the unused
	// tickets.
	maxPending = 64
	maxTickets = 256
)

// LoginPath is the path of a login URL for code: the code in the fragment, never sent to a server.
func LoginPath(code string) string { return "/#code=" + code }

// Sessions holds the login codes, sessions and tickets of one daemon, in memory: a restart logs
// everyone out. Secrets are kept as SHA-256 digests, so a dump of the maps holds none.
type Sessions struct {
	now func() time.Time

	mu       sync.Mutex
	codes    map[[32]byte]time.Time // digest of an unused code -> its expiry
	sessions map[[32]byte]*session
	tickets  map[[32]byte]ticket
}

type session struct {
	created time.Time
	seen    time.Time
	ended   chan struct{} // closed when the session ends (logout, revoke, found expired)
}

type ticket struct {
	path    string
	session [32]byte
	until   time.Time
}

// NewSessions makes an empty set; now is the clock (nil: time.Now).
func NewSessions(now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	return &Sessions{now: now, codes: map[[32]byte]time.Time{}, sessions: map[[32]byte]*session{}, tickets: map[[32]byte]ticket{}}
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

// LoginPath implements api.SessionAuth.
func (s *Sessions) LoginPath(code string) string { return LoginPath(code) }

// redeem trades a login code (once) for a new session's secret.
func (s *Sessions) redeem(code string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	d := digest(code)
	exp, found := s.codes[d]
	if !found {
		return "", false
	}
	delete(s.codes, d)
	if !now.Before(exp) {
		return "", false
	}
	c, err := secret()
	if err != nil {
		return "", false
	}
	s.sessions[digest(c)] = &session{created: now, seen: now, ended: make(chan struct{})}
	return c, true
}

func (ss *session) expired(now time.Time) bool {
	return now.Sub(ss.seen) >= SessionIdle || now.Sub(ss.created) >= SessionMax
}

// endLocked forgets a session and tells its streams (s.mu held).
func (s *Sessions) endLocked(d [32]byte) {
	if ss := s.sessions[d]; ss != nil {
		close(ss.ended)
		delete(s.sessions, d)
	}
	for k, t := range s.tickets {
		if t.session == d {
			delete(s.tickets, k)
		}
	}
}

// liveLocked is the live session of digest d (its last use moved to now), or nil; an expired one is
// ended (s.mu held).
func (s *Sessions) liveLocked(d [32]byte, now time.Time) *session {
	ss := s.sessions[d]
	if ss == nil {
		return nil
	}
	if ss.expired(now) {
		s.endLocked(d)
		return nil
	}
	ss.seen = now
	return ss
}

// headerSecret is r's session secret ("" without one).
func headerSecret(r *http.Request) string { return strings.TrimSpace(r.Header.Get(SessionHeader)) }

// Admit implements api.SessionAuth: a live session's secret in SessionHeader, or, for a
// GET of the one path it was made for, a ticket (?ticket=, used up). Cookies are never read.
func (s *Sessions) Admit(r *http.Request) (bool, string) {
	sec := headerSecret(r)
	tk := r.URL.Query().Get("ticket")
	if sec == "" && tk == "" {
		return false, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if sec != "" {
		if s.liveLocked(digest(sec), now) == nil {
			return false, "the session ended (logged out, revoked, expired, or the daemon restarted): log in again with a URL from `specsweep dashboard`"
		}
		return true, ""
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false, "a ticket opens a page (GET) only"
	}
	d := digest(tk)
	t, ok := s.tickets[d]
	delete(s.tickets, d)
	if !ok || !now.Before(t.until) || t.path != r.URL.Path || s.liveLocked(t.session, now) == nil {
		return false, "this link was used already or has expired: open it again from the dashboard"
	}
	return true, ""
}

// ticketFor makes a one-time ticket for a GET of path by r's session.
func (s *Sessions) ticketFor(r *http.Request, path string) (string, bool, error) {
	sec := headerSecret(r)
	if sec == "" {
		return "", false, nil
	}
	tk, err := secret()
	if err != nil {
		return "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	d := digest(sec)
	if s.liveLocked(d, now) == nil {
		return "", false, nil
	}
	s.pruneLocked(now)
	for len(s.tickets) >= maxTickets {
		for k := range s.tickets {
			delete(s.tickets, k) // any: a ticket lives a minute
			break
		}
	}
	s.tickets[digest(tk)] = ticket{path: path, session: d, until: now.Add(TicketTTL)}
	return tk, true, nil
}

// logout ends r's session; false when r has none that is live.
func (s *Sessions) logout(r *http.Request) bool {
	sec := headerSecret(r)
	if sec == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := digest(sec)
	if s.sessions[d] == nil {
		return false
	}
	s.endLocked(d)
	return true
}

// RevokeAll ends every session (and its streams, at once) and forgets every unused login code and
// ticket; it returns the number of sessions ended. api.SessionAuth, for `specsweep
// dashboard --revoke`.
func (s *Sessions) RevokeAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.sessions)
	for d := range s.sessions {
		s.endLocked(d)
	}
	clear(s.codes)
	clear(s.tickets)
	return n
}

// streamOf is what the event stream needs of r's session: a key to count streams by, a channel
// closed when the session ends, and alive (which ends an expired session). ok is false without a
// live session in r's header.
func (s *Sessions) streamOf(r *http.Request) (key string, ended <-chan struct{}, ok bool) {
	sec := headerSecret(r)
	if sec == "" {
		return "", nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := digest(sec)
	ss := s.liveLocked(d, s.now())
	if ss == nil {
		return "", nil, false
	}
	return "session " + hex.EncodeToString(d[:8]), ss.ended, true
}

// alive reports whether the session of r's header is live, without counting as a use: an open
// stream does not keep a session from going idle, the page's requests do.
func (s *Sessions) alive(r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := digest(headerSecret(r))
	ss := s.sessions[d]
	if ss == nil {
		return false
	}
	if ss.expired(s.now()) {
		s.endLocked(d)
		return false
	}
	return true
}

// deadline is when the session of r's header ends if it is not used before (zero without one).
func (s *Sessions) deadline(r *http.Request) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[digest(headerSecret(r))]
	if ss == nil {
		return time.Time{}
	}
	idle, max := ss.seen.Add(SessionIdle), ss.created.Add(SessionMax)
	if max.Before(idle) {
		return max
	}
	return idle
}

// pruneLocked forgets expired codes, tickets and sessions (s.mu held).
func (s *Sessions) pruneLocked(now time.Time) {
	for k, exp := range s.codes {
		if !now.Before(exp) {
			delete(s.codes, k)
		}
	}
	for k, t := range s.tickets {
		if !now.Before(t.until) {
			delete(s.tickets, k)
		}
	}
	for k, ss := range s.sessions {
		if ss.expired(now) {
			s.endLocked(k)
		}
	}
}
