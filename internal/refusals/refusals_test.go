package refusals

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeTimers struct {
	mu  sync.Mutex
	fns []func()
	at  []time.Duration
}

func (f *fakeTimers) after(d time.Duration, fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fns, f.at = append(f.fns, fn), append(f.at, d)
}

func (f *fakeTimers) fire() {
	f.mu.Lock()
	fns := f.fns
	f.fns = nil
	f.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func lines(b *bytes.Buffer) []string {
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

// TestThousandsOfRefusalsAreOneLineAndASummary: 3000 refusals from one client in a second are the
// first refusal's line and, when the window ends, one line that counts the rest; another client's
// first refusal still gets its own line.
func TestThousandsOfRefusalsAreOneLineAndASummary(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	timers := &fakeTimers{}
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now }, timers.after)
	for i := 0; i < 3000; i++ {
		l.Refused("API request refused", fmt.Sprintf("127.0.0.1:%d000", i%10), "GET", "/api/sweeps", 401, "missing token")
	}
	l.Refused("API request refused", "[::1]:5000", "POST", "/api/sweeps", 403, "origin")
	if got := lines(&buf); len(got) != 2 || !strings.Contains(got[0], "remote=127.0.0.1:0000") || !strings.Contains(got[1], "::1") {
		t.Fatalf("before the window ends: %d lines\n%s", len(got), buf.String())
	}
	if len(timers.at) != 1 || timers.at[0] != Window {
		t.Fatalf("timers %v, want one at the window's end", timers.at)
	}
	now = now.Add(Window)
	timers.fire()
	got := lines(&buf)
	if len(got) != 3 || !strings.Contains(got[2], "2999 more refused request(s) from 127.0.0.1 in the last 1m0s") ||
		!strings.Contains(got[2], "last_status=401") {
		t.Fatalf("after the window: %d lines\n%s", len(got), buf.String())
	}
	// A new window: the next refusal is logged whole again.
	l.Refused("API request refused", "127.0.0.1:1", "GET", "/x", 401, "r")
	if got := lines(&buf); len(got) != 4 {
		t.Fatalf("a new window's first refusal: %d lines\n%s", len(got), buf.String())
	}
}

// TestRefusalsBeyondTheTrackedAddressesShareOneCount: the log's memory is bounded too.
func TestRefusalsBeyondTheTrackedAddressesShareOneCount(t *testing.T) {
	var buf bytes.Buffer
	timers := &fakeTimers{}
	now := time.Unix(1000, 0)
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now }, timers.after)
	for i := 0; i < maxAddrs+500; i++ {
		l.Refused("refused", fmt.Sprintf("10.231.%d.%d:1", i/256, i%256), "GET", "/", 401, "r")
	}
	if n := len(l.addrs); n > maxAddrs+1 {
		t.Fatalf("%d addresses tracked", n)
	}
	if n := len(lines(&buf)); n != maxAddrs+1 {
		t.Errorf("%d lines, want one per tracked address and one for the others", n)
	}
}
