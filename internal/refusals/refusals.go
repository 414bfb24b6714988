// Package refusals logs refused requests without letting a client fill the log: the first refusal
// from an address in a window is logged whole, the rest are counted and logged as one line when the
// window ends ("N refused requests from ADDR in the last minute"). Unauthenticated clients can send
// thousands of requests a second; one WARN line each would let anyone flood the journal.
package refusals

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

const (
	// Window is how long the refusals of one address are counted before they are logged.
	Window = time.Minute
	// maxAddrs bounds the addresses tracked at once; refusals from more share one count, so the
	// log's own memory is bounded too.
	maxAddrs = 1024
	// others is the address the refusals beyond maxAddrs are counted under.
	others = "other addresses"
)

// Log aggregates refusals per remote address. Its zero value is not usable: use New.
type Log struct {
	log   *slog.Logger
	now   func() time.Time
	after func(time.Duration, func()) // time.AfterFunc, injected by tests

	mu    sync.Mutex
	addrs map[string]*count
}

type count struct {
	start      time.Time
	suppressed int
	// the last suppressed refusal, said in the summary line
	status       int
	method, path string
	reason       string
}

// New makes a Log writing to log; now and after may be nil (time.Now, time.AfterFunc).
func New(log *slog.Logger, now func() time.Time, after func(time.Duration, func())) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	if after == nil {
		after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	return &Log{log: log, now: now, after: after, addrs: map[string]*count{}}
}

// Refused records one refused request: logged at once (msg, with the remote address, method, path,
// status and reason) when it is the address's first in the window, else counted.
func (l *Log) Refused(msg, remote, method, path string, status int, reason string) {
	addr := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		addr = h
	}
	l.mu.Lock()
	now := l.now()
	c := l.live(addr, now)
	if c == nil && len(l.addrs) >= maxAddrs {
		addr = others
		c = l.live(addr, now)
	}
	if c == nil {
		l.addrs[addr] = &count{start: now}
		l.mu.Unlock()
		l.log.Warn(msg, "remote", remote, "method", method, "path", path, "status", status, "reason", reason)
		return
	}
	c.suppressed++
	c.status, c.method, c.path, c.reason = status, method, path, reason
	first, start := c.suppressed == 1, c.start
	l.mu.Unlock()
	if first {
		l.after(start.Add(Window).Sub(now), func() { l.flush(addr, start) })
	}
}

// live is addr's open window, nil when it has none (an ended one is logged and forgotten first).
func (l *Log) live(addr string, now time.Time) *count {
	c := l.addrs[addr]
	if c != nil && now.Sub(c.start) >= Window {
		l.flushLocked(addr, c)
		return nil
	}
	return c
}

// flush logs the count of addr's window that began at start, if that window is still open.
func (l *Log) flush(addr string, start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.addrs[addr]; c != nil && c.start.Equal(start) {
		l.flushLocked(addr, c)
	}
}

func (l *Log) flushLocked(addr string, c *count) {
	delete(l.addrs, addr)
	if c.suppressed == 0 {
		return
	}
	l.log.Warn(fmt.Sprintf("%d more refused request(s) from %s in the last %s", c.suppressed, addr,
		l.now().Sub(c.start).Round(time.Second)),
		"remote", addr, "count", c.suppressed, "last_method", c.method, "last_path", c.path,
		"last_status", c.status, "last_reason", c.reason)
}
