package hostctl

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// exportText is one journal entry in journalctl's export format.
func exportText(cursor, msg string) string {
	return "__CURSOR=" + cursor + "\n__REALTIME_TIMESTAMP=1\n_BOOT_ID=b\nMESSAGE=" + msg + "\n\n"
}

func exportBinary(cursor, msg string) string {
	var size [8]byte
	binary.LittleEndian.PutUint64(size[:], uint64(len(msg)))
	return "__CURSOR=" + cursor + "\nMESSAGE\n" + string(size[:]) + msg + "\n_PID=1\n\n"
}

func TestParseJournal(t *testing.T) {
	out := exportText("c1", "one") + exportBinary("c2", "hi\x01\nthere\xff") + exportText("c3", "") +
		"__CURSOR=c4\n_PID=3\n\n" + exportText("c5", "five")
	lines, cur := parseJournal([]byte(out), false)
	if want := []string{"one", "hi\x01\nthere\uFFFD", "", "five"}; !slices.Equal(lines, want) || cur != "c5" {
		t.Fatalf("got %q cursor %q", lines, cur)
	}
	// Output cut at the cap: the unfinished last entry is left for the next read, and the
	// cursor is that of the last whole entry (nothing lost, nothing read twice).
	for cutAt := len(out) - len(exportText("c5", "five")) + 1; cutAt < len(out); cutAt++ {
		lines, cur = parseJournal([]byte(out[:cutAt]), true)
		if len(lines) != 3 || cur != "c4" {
			t.Fatalf("cut at %d: got %q cursor %q", cutAt, lines, cur)
		}
	}
	// One entry larger than a read: taken as far as it goes, so the reader moves on.
	big := exportText("c9", strings.Repeat("é", MaxLogLine))
	lines, cur = parseJournal([]byte(big[:100000]), true)
	if cur != "c9" || len(lines) != 1 || !strings.HasPrefix(lines[0], "éé") || !strings.HasSuffix(lines[0], "é [line cut]") ||
		len(lines[0]) > MaxLogLine+20 {
		t.Fatalf("cut entry: cursor %q, %d lines", cur, len(lines))
	}
	lines, _ = parseJournal([]byte(big), false)
	if len(lines) != 1 || !strings.HasSuffix(lines[0], fmt.Sprintf(" [line cut: %d more bytes]", MaxLogLine)) {
		t.Fatalf("long entry: %d lines, ends %q", len(lines), lines[0][len(lines[0])-40:])
	}
	if lines, cur := parseJournal(nil, false); lines != nil || cur != "" {
		t.Fatalf("empty: %q %q", lines, cur)
	}
}

func FuzzParseJournal(f *testing.F) {
	f.Add([]byte(exportText("c1", "one")+exportBinary("c2", "two\n")), false)
	f.Add([]byte(exportText("c1", "a line")[:30]), true)
	f.Add([]byte("MESSAGE\n\xff\xff\xff\xff\xff\xff\xff\xff"), true)
	f.Fuzz(func(t *testing.T, b []byte, cut bool) {
		lines, cur := parseJournal(b, cut)
		if cur == "" && len(lines) > 0 {
			t.Fatalf("lines without a cursor: %q", lines)
		}
		for _, l := range lines {
			if len(l) > 4*MaxLogLine {
				t.Fatalf("line of %d bytes", len(l))
			}
		}
	})
}

func TestReadLinesKeepsDraining(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	in := "first\n" + long + "\n\nünï" + strings.Repeat("ü", MaxLogLine) + "\nlast"
	var got []string
	readLines(strings.NewReader(in), MaxLogLine, func(s string) { got = append(got, s) })
	if len(got) != 5 || got[0] != "first" || got[2] != "" || got[4] != "last" {
		t.Fatalf("lines: %d %q", len(got), got[0])
	}
	if want := strings.Repeat("x", MaxLogLine) + fmt.Sprintf(" [line cut: %d more bytes]", 3<<20-MaxLogLine); got[1] != want {
		t.Fatalf("long line: %d bytes, ends %q", len(got[1]), got[1][len(got[1])-40:])
	}
	if !strings.HasPrefix(got[3], "ünïü") || !strings.Contains(got[3], "[line cut:") || strings.ContainsRune(got[3], '\uFFFD') {
		t.Fatalf("cut multibyte line: ends %q", got[3][len(got[3])-40:])
	}
	// Everything is read: a writer never blocks.
	r := &countReader{r: strings.NewReader(in)}
	readLines(r, 16, func(string) {})
	if r.n != len(in) {
		t.Fatalf("read %d of %d bytes", r.n, len(in))
	}
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestUnitNames(t *testing.T) {
	for _, u := range []string{"-H", "--help", "a b", "a/b", "x\n"} {
		if _, err := DialRemote(t.Context(), RemoteOptions{Unit: u, SSH: SSHOptions{Address: "127.0.0.1:1"}}); err == nil ||
			!strings.Contains(err.Error(), "unit name") {
			t.Errorf("unit %q: want a unit name error, got %v", u, err)
		}
	}
	if err := checkUnitName("sglang@1.service"); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(showCmd("x.service"))
	if !strings.Contains(b.String(), " -- 'x.service'") && !strings.Contains(b.String(), " -- x.service") {
		t.Fatalf("no -- before the unit: %s", b.String())
	}
}

func TestRedactServerInfo(t *testing.T) {
	in := `{"version":"0.5.4","api_key":"sk-1","admin_api_key":null,"server_args":{"hf_token":"hf_x","api_key":""},"tp_size":4}`
	got := string(RedactServerInfo([]byte(in)))
	for _, s := range []string{"sk-1", "hf_x"} {
		if strings.Contains(got, s) {
			t.Fatalf("secret %q kept: %s", s, got)
		}
	}
	if !strings.Contains(got, `"tp_size":4`) || !strings.Contains(got, `"admin_api_key":null`) || !strings.Contains(got, `"version":"0.5.4"`) {
		t.Fatalf("other fields changed: %s", got)
	}
	if got := string(RedactServerInfo([]byte(`{"version":"1"}`))); got != `{"version":"1"}` {
		t.Fatalf("unchanged body rewritten: %s", got)
	}
	if got := string(RedactServerInfo([]byte("not json"))); got != "not json" {
		t.Fatal(got)
	}
}

func TestEvidenceRedactsCredentials(t *testing.T) {
	lines := []string{
		"[2026-12-01 10:00:00] server_args=ServerArgs(model_path='/m', api_key='sk-live-123', admin_api_key=None, hf_token=\"hf_abc\", tp_size=4)",
		"launch_server.py: error: unrecognized arguments: --api-key=sk-live-123 --bogus",
		"Traceback (most recent call last):",
		"RuntimeError: boom",
	}
	ev := strings.Join(evidence(lines, regexp.MustCompile(`server_args|error|Error`), 8), "\n")
	for _, secret := range []string{"sk-live-123", "hf_abc"} {
		if strings.Contains(ev, secret) {
			t.Fatalf("evidence shows %q:\n%s", secret, ev)
		}
	}
	if !strings.Contains(ev, "admin_api_key=None") || !strings.Contains(ev, "tp_size=4") || !strings.Contains(ev, "--bogus") {
		t.Fatalf("evidence lost what is not secret:\n%s", ev)
	}
}

// lateJournal is a serverProc whose process has exited while the journal delivers its lines only
// after a delay (a busy journald).
type lateJournal struct {
	st    State
	lines []string
	at    time.Time
	sent  bool
}

func (l *lateJournal) poll(context.Context) (State, []string, error) {
	if l.sent || time.Now().Before(l.at) {
		return l.st, nil, nil
	}
	l.sent = true
	return l.st, l.lines, nil
}
func (l *lateJournal) follow(context.Context, func()) (func(), <-chan struct{}) {
	return func() {}, nil
}
func (l *lateJournal) sendStop(context.Context) error { return nil }
func (l *lateJournal) afterStop(context.Context)      {}

// TestSettleWaitsForTheServersLines: a server that exited at once (exit 2) while journald delivers its
// argparse lines 400 ms late: classification waits for them (the evidence names the cause) instead
// of ending the wait after 150 ms without any line.
func TestSettleWaitsForTheServersLines(t *testing.T) {
	st := State{ActiveState: "failed", SubState: "failed", Result: "exit-code", ExecMainCode: CodeExited, ExecMainStatus: 2}
	in := &instance{clock: realClock{}, proc: &lateJournal{st: st, at: time.Now().Add(400 * time.Millisecond),
		lines: []string{"usage: launch_server.py [-h] --model-path MODEL_PATH", "launch_server.py: error: unrecognized arguments: --bogus-flag 1"}}}
	f := in.classifySettled(t.Context(), st, false)
	if f == nil || f.Class != ClassBadArgs || !strings.Contains(strings.Join(f.Evidence, "\n"), "unrecognized arguments") {
		t.Fatalf("want bad_args with the argparse line as evidence, got %+v", f)
	}
}

func TestEffectiveSpec(t *testing.T) {
	for _, c := range []struct {
		info             string
		steps, topk, ndt string
	}{
		{`{"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "version": "0.5.4"}`, "3", "1", "4"},
		{`{"server_args": {"speculative_num_steps": 5, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}}`, "5", "4", "8"},
		{`{"speculative_num_steps": null, "speculative_eagle_topk": null, "speculative_num_draft_tokens": null}`, "-", "-", "-"},
		{`{"error": "Unauthorized"}`, "-", "-", "-"},
		{`not json`, "-", "-", "-"},
	} {
		s, k, n := EffectiveSpec([]byte(c.info))
		str := func(p *int) string {
			if p == nil {
				return "-"
			}
			return fmt.Sprint(*p)
		}
		if str(s) != c.steps || str(k) != c.topk || str(n) != c.ndt {
			t.Errorf("%s: got %s %s %s", c.info, str(s), str(k), str(n))
		}
	}
}

// lateTail is a serverProc whose journal delivers the first lines at once and the rest later.
type lateTail struct {
	st          State
	first, rest []string
	at          time.Time
	n           int
}

func (l *lateTail) poll(context.Context) (State, []string, error) {
	switch {
	case l.n == 0:
		l.n++
		return l.st, l.first, nil
	case l.n == 1 && !time.Now().Before(l.at):
		l.n++
		return l.st, l.rest, nil
	}
	return l.st, nil, nil
}
func (l *lateTail) follow(context.Context, func()) (func(), <-chan struct{}) { return func() {}, nil }
func (l *lateTail) sendStop(context.Context) error                           { return nil }
func (l *lateTail) afterStop(context.Context)                                {}

// TestSettleWaitsForTheErrorAfterAUsageBlock: exit 2 with only the start of argparse's long usage
// delivered: the classification waits for the rest, so the evidence holds the error line.
func TestSettleWaitsForTheErrorAfterAUsageBlock(t *testing.T) {
	st := State{ActiveState: "failed", SubState: "failed", Result: "exit-code", ExecMainCode: CodeExited, ExecMainStatus: 2}
	p := &lateTail{st: st, at: time.Now().Add(400 * time.Millisecond),
		first: []string{"usage: sglang serve [-h] --model-path MODEL_PATH", "                    [--hicache-size HICACHE_SIZE]"},
		rest:  []string{"                    [--tp-size TP_SIZE]", "sglang serve: error: argument --tp-size: invalid int value: 'four'"}}
	in := &instance{clock: realClock{}, proc: p}
	if _, err := in.poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := in.classifySettled(t.Context(), st, false)
	if f == nil || f.Class != ClassBadArgs || !strings.Contains(strings.Join(f.Evidence, "\n"), "invalid int value") {
		t.Fatalf("want bad_args with the argparse error as evidence, got %+v", f)
	}
}

// watchedProc is a serverProc with a watcher on the host: polls are counted, a death shows from
// the moment dies is closed, and the test wakes readiness polling as the watcher would.
type watchedProc struct {
	polls    atomic.Int64
	alive    atomic.Int64 // the polls before the death
	told     atomic.Bool  // the death's lines were returned (once, as a journal read by cursor would)
	dies     chan struct{}
	wake     chan func()
	watching chan struct{}
}

func (p *watchedProc) poll(context.Context) (State, []string, error) {
	p.polls.Add(1)
	select {
	case <-p.dies:
		st := State{ActiveState: "failed", SubState: "failed", Result: "exit-code", ExecMainCode: CodeExited, ExecMainStatus: 1}
		if p.told.Swap(true) {
			return st, nil, nil
		}
		return st, []string{"Traceback (most recent call last):", "RuntimeError: boom"}, nil
	default:
		p.alive.Add(1)
		return State{ActiveState: "active", SubState: "running"}, nil, nil
	}
}
func (p *watchedProc) follow(_ context.Context, wake func()) (func(), <-chan struct{}) {
	p.wake <- wake
	return func() {}, p.watching
}
func (p *watchedProc) sendStop(context.Context) error { return nil }
func (p *watchedProc) afterStop(context.Context)      {}

// TestReadinessPollsOnTheWatchersNews: while a watcher follows the server, WaitReady polls the host
// once a second at most, a wake (the watcher saw the process die) polls at once, and without the
// watcher (it ended) polls go back to the backoff's pace. On a fake clock advanced 50 ms at a time
// (the real one made it a test of the machine's load: under a clean-clone run's, a death 2.1 s in
// was classified 1.55 s after its wake, and timers fired late enough to drop a backoff poll).
func TestReadinessPollsOnTheWatchersNews(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every probe is refused, as while a server loads
	const dieAt = 2100 * time.Millisecond
	// run waits for readiness on a fake clock; the process dies at dieAt (then the watcher's wake),
	// and the clock stops at limit: a death not classified by then was not seen in time.
	run := func(watching chan struct{}, limit time.Duration) (*watchedProc, time.Duration, error) {
		clk := newFakeClock()
		p := &watchedProc{dies: make(chan struct{}), wake: make(chan func(), 1), watching: watching}
		in := newInstance(p, clk, "id", Launch{ReadyTimeout: time.Minute}, clk.Now(), &http.Client{}, "http://"+addr, addr)
		type result struct {
			at  time.Duration
			err error
		}
		done := make(chan result, 1)
		go func() {
			_, err := in.WaitReady(t.Context())
			done <- result{clk.elapsed(), err}
		}()
		wake := <-p.wake
		real := time.NewTimer(20 * time.Second)
		defer real.Stop()
		died := false
		for {
			select {
			case r := <-done:
				return p, r.at, r.err
			case <-real.C:
				t.Fatalf("WaitReady not done after 20 s of real time, %v on the fake clock (stopped at %v)", clk.elapsed(), limit)
			case <-clk.added:
			case <-time.After(2 * time.Millisecond):
			}
			if clk.waiting() == 0 {
				continue
			}
			if !died && clk.elapsed() >= dieAt {
				died = true
				close(p.dies)
				wake()
			}
			if clk.elapsed() < limit {
				clk.Advance(50 * time.Millisecond)
			}
		}
	}
	// Watched: polls at the start, after 1 s and 2 s; the death at 2.1 s wakes a poll at once, and
	// the classification's polls while the lines settle (150 ms of them, 50 ms apart) end it well
	// before the next safety net at 3 s, where the clock stops.
	p, at, err := run(make(chan struct{}), 2900*time.Millisecond)
	if f, ok := AsFailure(err); !ok || f.Class != ClassCrashDuringStart {
		t.Fatalf("want crash_during_start, got %v (at %v on the fake clock)", err, at)
	}
	t.Logf("watched: %d polls (%d before the death), the death classified %v after it", p.polls.Load(), p.alive.Load(), at-dieAt)
	if n := p.alive.Load(); n != 3 {
		t.Errorf("%d polls in the 2.1 s before the death with a watcher, want 3 (one a second)", n)
	}
	// Without a watcher (it has ended): the backoff's pace (50 ms doubling to 500 ms): polls at 0,
	// 0.05, 0.15, 0.35, 0.75, 1.25 and 1.75 s, 7 before the death; the next, at 2.25 s, sees it.
	ended := make(chan struct{})
	close(ended)
	p, at, err = run(ended, time.Minute)
	if f, ok := AsFailure(err); !ok || f.Class != ClassCrashDuringStart {
		t.Fatalf("want crash_during_start, got %v (at %v on the fake clock)", err, at)
	}
	t.Logf("not watched: %d polls (%d before the death), the death classified %v after it", p.polls.Load(), p.alive.Load(), at-dieAt)
	if n := p.alive.Load(); n != 7 {
		t.Errorf("%d polls in the 2.1 s before the death without a watcher, want the backoff's 7", n)
	}
}
