// The server process of a remote host: one invocation of the systemd unit, its state from the unit
// control, its lines from the journal (read by cursor), a follower that wakes readiness polling.

package hostctl

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// unitProc is one invocation of the unit on a remote host (a serverProc).
type unitProc struct {
	conn      *Conn
	unit      unitControl
	unitName  string
	id        string        // the InvocationID
	mainPID   int           // at start: for the death watcher
	execPID   int           // the main process's PID: its journal lines, see journalMatch
	followFor time.Duration // the follower session's bound

	mu     sync.Mutex // one read at a time: the cursor
	cursor string     // of the last journal entry read
	atEnd  bool       // false: find the journal's end first (the cursor of its newest entry)
}

var _ serverProc = (*unitProc)(nil)

// journalMatch selects the journal entries of one invocation: the
// process's output (_SYSTEMD_INVOCATION_ID) and systemd's lines about it
// (INVOCATION_ID), plus the output of the main process by unit and PID:
// journald takes the invocation ID from the process's cgroup, which it
// cannot read any more once a short-lived process has exited (a server
// rejecting its arguments), and such lines would be missed.
func journalMatch(unit, id string, pid int) string {
	m := "_SYSTEMD_INVOCATION_ID=" + ShellQuote(id) + " + INVOCATION_ID=" + ShellQuote(id)
	if pid > 0 {
		m += " + _SYSTEMD_UNIT=" + ShellQuote(unit) + " _PID=" + strconv.Itoa(pid)
	}
	return m
}

// poll reads the unit's state and the journal entries after the cursor, in
// one round trip with systemctl.
func (p *unitProc) poll(ctx context.Context) (State, []string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	match := journalMatch(p.unitName, p.id, p.execPID)
	if !p.atEnd {
		out, err := p.conn.RunShell(ctx, journalLast(match), 15*time.Second, 1<<20)
		if err != nil {
			return State{}, nil, err
		}
		_, p.cursor = parseJournal(out.Stdout, out.Truncated)
		p.atEnd = true
	}
	st, out, err := p.unit.stateAnd(ctx, journalRead(match, p.cursor))
	if err != nil {
		return State{}, nil, err
	}
	lines, c := parseJournal(out.Stdout, atCap(out))
	if c != "" {
		p.cursor = c
	}
	// A read that reached its cap (a server that logged a megabyte or more since the last poll):
	// read on, so that a poll returns what was logged before it (Logs right after WaitReady had only
	// the first megabyte once polls became rarer). Bounded: a server logging faster than this reads
	// is read on at the next poll.
	for i := 0; atCap(out) && c != "" && i < maxJournalReads; i++ {
		if out, err = p.conn.RunShell(ctx, journalRead(match, p.cursor), 15*time.Second, 1<<20); err != nil {
			return State{}, nil, err
		}
		var more []string
		more, c = parseJournal(out.Stdout, atCap(out))
		lines = append(lines, more...)
		if c != "" {
			p.cursor = c
		}
	}
	return st, lines, nil
}

// atCap: a journal read's output reached journalReadCap (head -c cut it there): its last entry may
// be unfinished, and more may follow.
func atCap(out Output) bool { return out.Truncated || len(out.Stdout) >= journalReadCap }

// maxJournalReads bounds the reads of one poll after the first (each up to journalReadCap bytes).
const maxJournalReads = 16

// follow runs a session on the host that prints the invocation's new journal lines and a line
// when the main process dies. A death, or a line that tells of a crash or of the port opening
// soon, wakes readiness polling at once; other lines wait for the next poll (once a second while
// the watcher runs): a poll is a command on the host (the state and the journal, several
// processes), the watcher one session for the whole wait. The port's opening is the probe's to see
// (every 100 ms, through the connection, no process on the host); a loop of ss checks on the host
// cost three processes every 100 ms of a server's load.
func (p *unitProc) follow(ctx context.Context, wake func()) (func(), <-chan struct{}) {
	cl, _, err := p.conn.Client(ctx)
	if err != nil {
		return func() {}, nil
	}
	s, err := p.conn.newSession(cl)
	if err != nil {
		return func() {}, nil
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return func() {}, nil
	}
	out, err := s.StdoutPipe()
	if err == nil {
		// New journal lines, and the main process's death (tail --pid checks it every 50 ms on
		// the host; journalctl -f alone can lag: journald signals followers on a timer).
		// Both end when the session's stdin closes (cat returns): nothing lingers on the host.
		script := "journalctl -f -n 0 -q -o cat " + journalMatch(p.unitName, p.id, p.execPID) + " & j=$!; w=; "
		if pid := p.mainPID; pid > 0 {
			script += "{ tail --pid=" + strconv.Itoa(pid) + " -s 0.05 -f /dev/null </dev/null; echo " + exitedMark + "; } & w=$!; "
		}
		script += "cat >/dev/null; kill $j $w 2>/dev/null; true"
		cmd := Cmd{Args: []string{"sh", "-c", script}, Sudo: true, Timeout: p.followFor}
		err = s.Start(cmd.CommandLine(p.conn.User()))
	}
	if err != nil {
		s.Close()
		return func() {}, nil
	}
	watching := make(chan struct{})
	go func() {
		defer func() {
			close(watching)
			wake() // polls go back to their own pace at once
		}()
		br := bufio.NewReader(out)
		for {
			l, err := br.ReadSlice('\n')
			if err != nil && err != bufio.ErrBufferFull {
				return
			}
			if urgentLine(l) {
				wake()
			}
		}
	}()
	return func() { stdin.Close(); s.Close() }, watching
}

// exitedMark is the watcher's line for the main process's death.
const exitedMark = "@@exited"

// urgentLine: a watcher's line that readiness polling looks at now: the main process's death, a
// crash or out-of-memory line (its exit follows), or a line that says the port opens next.
func urgentLine(l []byte) bool {
	l = bytes.TrimSuffix(l, []byte("\n"))
	return string(l) == exitedMark || reCrash.Match(l) || reOOM.Match(l) || reNearReady.Match(l)
}

var _ exitWaiter = (*unitProc)(nil)

// waitPoll: see exitWaiter. With send, the stop's decision is the host's, on the state it read
// (unitControl.stopWait). Without send the wait is on the host (waitScript).
func (p *unitProc) waitPoll(ctx context.Context, send bool, pid int, upTo time.Duration) (State, State, []string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := ""
	if !send {
		wait = waitScript(pid, upTo)
	}
	read := journalRead(journalMatch(p.unitName, p.id, p.execPID), p.cursor)
	pre, st, tidied, out, err := p.unit.stopWait(ctx, send, upTo, wait, read)
	if err != nil {
		if send {
			return pre, State{}, nil, false, fmt.Errorf("stopping %s: %w", p.unitName, err)
		}
		return pre, State{}, nil, false, fmt.Errorf("following the stop of %s: %w", p.unitName, err)
	}
	return pre, st, p.take(out), tidied, nil
}

// waitScript waits on the host until process pid ends (tail --pid checks it every 10 ms), at most
// upTo (its exit status is no matter); pid 0: a sleep of upTo.
func waitScript(pid int, upTo time.Duration) string {
	secs := strconv.FormatFloat(upTo.Seconds(), 'f', 3, 64)
	if pid <= 0 {
		return "sleep " + secs + "; "
	}
	return "timeout " + secs + " tail --pid=" + strconv.Itoa(pid) + " -s 0.01 -f /dev/null </dev/null >/dev/null 2>&1; "
}

// finish: see exitWaiter.
func (p *unitProc) finish(ctx context.Context) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out, err := p.unit.resetFailedAnd(ctx, journalRead(journalMatch(p.unitName, p.id, p.execPID), p.cursor))
	if err != nil {
		return nil
	}
	return p.take(out)
}

// take parses a journal read and moves the cursor past it.
func (p *unitProc) take(out Output) []string {
	lines, c := parseJournal(out.Stdout, out.Truncated)
	if c != "" {
		p.cursor = c
	}
	return lines
}

// sendStop queues the unit's stop.
func (p *unitProc) sendStop(ctx context.Context) error { return p.unit.stop(ctx) }

// afterStop is reset-failed: a unit that failed or was killed is not left failed.
func (p *unitProc) afterStop(ctx context.Context) { p.unit.resetFailed(ctx) }
