package hostctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/specsweep/specsweep/internal/argparse"
)

// reNearReady matches log lines SGLang prints just before (or as) its port
// opens: polling speeds up when one appears. The end of a graph capture reads
// "Capture cuda graph end" (0.4 to 0.5), "Capture draft cuda graph end",
// "Capture npu graph end" and, on 2026 main, "Capture target decode CUDA graph
// end" (also target verify/prefill, draft decode/extend, NPU): up to three
// words between "Capture" and "graph end", any case (docs/sglang-versions.md).
var reNearReady = regexp.MustCompile(`max_total_num_tokens=|(?i:\bCapture (?:[a-z0-9]+ ){0,3}graph end\b)|Started server process|Uvicorn running|Application startup complete`)

// maxLines bounds the log lines an instance keeps.
const maxLines = 10000

// serverProc is the server process an instance follows, as a driver knows
// it: a systemd unit's invocation on a remote host (unitProc), a child
// process here (localProc).
type serverProc interface {
	// poll reads the state and the log lines that are new since the last poll.
	poll(ctx context.Context) (State, []string, error)
	// follow watches the process while WaitReady runs, calling wake on news
	// worth a poll at once (its death, a line that tells of a crash or of
	// the port opening soon); it returns its stop, and a channel open while
	// it watches (nil: no watcher), closed when the watcher ends: while it
	// is open, WaitReady polls only on a wake and as a safety net.
	follow(ctx context.Context, wake func()) (stop func(), watching <-chan struct{})
	// sendStop begins the stop (SIGTERM), without waiting for it.
	sendStop(ctx context.Context) error
	// afterStop tidies up once the process is gone.
	afterStop(ctx context.Context)
}

// instance is the driver-independent half of an Instance: readiness,
// classification, logs and the stop loop, over the driver's serverProc.
type instance struct {
	proc      serverProc
	clock     Clock
	id        string
	launch    Launch
	startedAt time.Time
	client    *http.Client
	baseURL   string
	addr      string
	wake      chan struct{} // a send when there is news (see serverProc.follow): WaitReady looks at once

	pollMu sync.Mutex // one poll at a time: lines are appended in order

	mu      sync.Mutex
	lines   []string
	dropped int
	ready   bool
}

func newInstance(p serverProc, clock Clock, id string, l Launch, startedAt time.Time, client *http.Client, baseURL, addr string) *instance {
	return &instance{proc: p, clock: clock, id: id, launch: l, startedAt: startedAt, client: client, baseURL: baseURL, addr: addr,
		wake: make(chan struct{}, 1)}
}

func (in *instance) notify() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// poll reads the state and appends the new log lines.
func (in *instance) poll(ctx context.Context) (State, error) {
	in.pollMu.Lock()
	defer in.pollMu.Unlock()
	st, lines, err := in.proc.poll(ctx)
	in.appendLines(lines)
	return st, err
}

func (in *instance) ID() string               { return in.id }
func (in *instance) HTTPClient() *http.Client { return in.client }
func (in *instance) BaseURL() string          { return in.baseURL }
func (in *instance) Address() string          { return in.addr }

func (in *instance) appendLines(ls []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.lines = append(in.lines, ls...)
	if over := len(in.lines) - maxLines; over > 0 {
		in.lines = append(in.lines[:0:0], in.lines[over:]...)
		in.dropped += over
	}
}

func (in *instance) Logs(ctx context.Context) ([]string, error) {
	if _, err := in.poll(ctx); err != nil {
		return in.snapshot(0), err
	}
	return in.snapshot(0), nil
}

// snapshot copies the lines from absolute index from.
func (in *instance) snapshot(from int) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	i := max(0, from-in.dropped)
	if i > len(in.lines) {
		i = len(in.lines)
	}
	return append([]string(nil), in.lines[i:]...)
}

func (in *instance) lineCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.dropped + len(in.lines)
}

func (in *instance) State(ctx context.Context) (State, error) { return in.poll(ctx) }

// LogMark is the position of the instance's log now (once what is new was read): LogsSince(mark)
// later gives the lines logged in between, e.g. those of one load level.
func (in *instance) LogMark(ctx context.Context) (int, error) {
	if _, err := in.poll(ctx); err != nil {
		return 0, err
	}
	return in.lineCount(), nil
}

// LogsSince returns the lines logged after mark (those still kept: at most the last 10000).
func (in *instance) LogsSince(ctx context.Context, mark int) ([]string, error) {
	_, err := in.poll(ctx)
	return in.snapshot(mark), err
}

// HostLost implements Instance: a local child's or a unit's host is lost when its SSH connection is
// (a host_unreachable failure of Check), nothing more to ask.
func (in *instance) HostLost(ctx context.Context) error { return nil }

func unreachable(err error, st State) *Failure {
	return &Failure{Class: ClassHostUnreachable, Detail: err.Error(), Err: err, State: st}
}

func isUnreachable(err error) bool {
	var ue *UnreachableError
	return errors.As(err, &ue)
}

// Readiness polling: bounded exponential backoff from 50 ms, capped at
// 500 ms while the port is closed and 50 ms once it answers (the server is
// warming up: ready is imminent). While a watcher on the host follows the
// process (serverProc.follow), a poll of the host (a remote command: the
// state, the journal) runs on its wake and otherwise once a second, and the
// probe (through the connection, no process on the host) every 100 ms at
// most while the port is closed.
const (
	backoffStart     = 50 * time.Millisecond
	backoffCap       = 500 * time.Millisecond
	backoffCapWarm   = 50 * time.Millisecond
	watchedProbeCap  = 100 * time.Millisecond
	watchedPollEvery = time.Second
	probeTimeout     = 3 * time.Second
)

// WaitReady: see Instance.
func (in *instance) WaitReady(ctx context.Context) (Ready, error) {
	deadline := in.startedAt.Add(in.launch.ReadyTimeout)
	stop, watching := in.proc.follow(ctx, in.notify)
	defer stop()
	watched := func() bool {
		if watching == nil {
			return false
		}
		select {
		case <-watching:
			return false
		default:
			return true
		}
	}
	var (
		probeAt, pollAt     time.Time // when each is next due (zero: now)
		probeWait, pollWait = backoffStart, backoffStart
		warm                bool // the port answers, or the log says it opens next
		probes              int
		st                  State
	)
	type polled struct {
		st  State
		err error
	}
	for {
		now := in.clock.Now()
		w := watched()
		pollDue, probeDue := !now.Before(pollAt), !now.Before(probeAt)
		// The state/journal poll and the HTTP probe run side by side: a ready
		// server is reported without waiting for the poll, a dead one without
		// waiting for a probe timeout.
		seen := in.lineCount()
		var pc chan polled
		if pollDue {
			pc = make(chan polled, 1)
			go func() {
				st, err := in.poll(ctx)
				pc <- polled{st, err}
			}()
		}
		var perr error = errors.New("not probed")
		if probeDue {
			probes++
			// A probe never outlives ready_timeout (a hung server answers nothing): it gets what the
			// clock leaves of it, as a timeout of network I/O (on the real clock, see ioDeadline).
			pctx, pcancel := context.WithTimeout(ctx, deadline.Sub(in.clock.Now())+50*time.Millisecond)
			var code int
			code, perr = in.get(pctx, "/health")
			var gerr error = errors.New("not probed")
			if perr == nil && code == http.StatusOK {
				gerr = nil
				if !in.launch.HealthOnly {
					gerr = in.generateOne(pctx)
				}
			}
			pcancel()
			if perr == nil && code == http.StatusOK && gerr == nil {
				r := Ready{At: in.clock.Now(), StartedAt: in.startedAt, Probes: probes}
				r.Elapsed = r.At.Sub(in.startedAt)
				if pc != nil {
					<-pc
				}
				if !in.launch.HealthOnly {
					info, _ := in.serverInfo(ctx)
					r.ServerInfo = RedactServerInfo(info)
				}
				in.mu.Lock()
				in.ready = true
				in.mu.Unlock()
				return r, nil
			}
		}
		dying, nearReady := false, perr == nil
		if pc != nil {
			p := <-pc
			st = p.st
			if err := p.err; err != nil {
				if ctx.Err() != nil {
					return Ready{}, ctx.Err()
				}
				if isUnreachable(err) {
					return Ready{}, unreachable(err, st)
				}
				return Ready{}, err
			}
			if f := in.classifySettled(ctx, st, false); f != nil {
				return Ready{}, f
			}
			fresh := in.snapshot(seen)
			dying = anyMatch(fresh, reCrash) || anyMatch(fresh, reOOM)
			nearReady = nearReady || anyMatch(fresh, reNearReady)
		}
		if nearReady && !warm {
			// Listening (warming up), or the log says the port opens next: ready is imminent.
			warm, probeWait = true, backoffStart
			if !w {
				pollWait = backoffStart
			}
		}
		if dying {
			// The process is dying: its exit follows within moments.
			probeWait, pollWait = backoffStart, backoffStart
		}
		now = in.clock.Now()
		if now.After(deadline) {
			lines := in.snapshot(0)
			return Ready{}, &Failure{Class: ClassReadyTimeout, State: st,
				Detail:   fmt.Sprintf("not ready after %v (still %s/%s)", in.launch.ReadyTimeout, st.ActiveState, st.SubState),
				Evidence: evidence(lines, reCrash, 4)}
		}
		probeCap, pollCap := backoffCap, backoffCap
		switch {
		case warm && w:
			probeCap, pollCap = backoffCapWarm, watchedPollEvery
		case warm:
			probeCap, pollCap = backoffCapWarm, backoffCapWarm
		case w:
			probeCap, pollCap = watchedProbeCap, watchedPollEvery
		}
		if probeDue {
			probeAt = now.Add(min(probeWait, probeCap))
			probeWait = min(2*probeWait, probeCap)
		}
		if pollDue {
			if w && !dying {
				// The watcher tells of news: this poll is a safety net.
				pollWait = pollCap
			}
			pollAt = now.Add(min(pollWait, pollCap))
			pollWait = min(2*pollWait, pollCap)
		}
		next := probeAt
		if pollAt.Before(next) {
			next = pollAt
		}
		sleep := min(next.Sub(now), deadline.Sub(now)+time.Millisecond)
		if sleep > 0 {
			select {
			case <-ctx.Done():
				return Ready{}, ctx.Err()
			case <-in.clock.After(sleep):
			case <-in.wake: // news: look now
				probeAt, pollAt = time.Time{}, time.Time{}
			}
		}
	}
}

func (in *instance) get(ctx context.Context, path string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.baseURL+path, nil)
	resp, err := in.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (in *instance) getBody(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.baseURL+path, nil)
	if k := APIKey(in.launch); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	return b, err
}

// serverInfo reads the server's effective arguments and version: from
// /server_info, which newer releases serve (their /get_server_info is a
// deprecated alias that logs a warning at every call), else from
// /get_server_info, the only one of older releases.
func (in *instance) serverInfo(ctx context.Context) ([]byte, error) {
	b, err := in.getBody(ctx, "/server_info")
	if err == nil {
		return b, nil
	}
	if ctx.Err() != nil {
		return b, err
	}
	return in.getBody(ctx, "/get_server_info")
}

// generateOne asks for one token (older servers answer /health 200 before
// they can generate).
func (in *instance) generateOne(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	body := []byte(`{"text":"ping","sampling_params":{"max_new_tokens":1,"temperature":0}}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, in.baseURL+"/generate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if k := APIKey(in.launch); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/generate: HTTP %d", resp.StatusCode)
	}
	return nil
}

// Check: see Instance.
func (in *instance) Check(ctx context.Context) (*Failure, error) {
	st, err := in.poll(ctx)
	if err != nil {
		if isUnreachable(err) {
			return unreachable(err, st), nil
		}
		return nil, err
	}
	in.mu.Lock()
	ready := in.ready
	in.mu.Unlock()
	return in.classifySettled(ctx, st, ready), nil
}

// classifySettled classifies; a generic crash is re-examined once the log
// has settled: the journal can deliver the last lines a process wrote (the
// end of a traceback, an argparse error) well after systemd saw it exit on
// a busy host. Settled: no new line for 150 ms and no traceback left
// unfinished, within 2 s.
func (in *instance) classifySettled(ctx context.Context, st State, ready bool) *Failure {
	f := classify(st, in.snapshot(0), ready)
	// Settle a generic crash (the lines may refine it), and any failure whose evidence holds none
	// of the server's own lines yet, or ends inside a traceback or a usage block (its telling line,
	// the exception or argparse's error, still to come: a long usage reaches the journal in parts).
	if lines := in.snapshot(0); f == nil || (f.Class != ClassCrashDuringStart && f.Class != ClassCrashDuringLoad &&
		lastServerLine(lines) != "" && !unfinishedOutput(lines)) {
		return f
	}
	t0, changed := in.clock.Now(), in.clock.Now()
	for in.clock.Now().Sub(t0) < 2*time.Second {
		n := in.lineCount()
		select {
		case <-ctx.Done():
			return f
		case <-in.clock.After(50 * time.Millisecond):
		}
		if _, err := in.poll(ctx); err != nil {
			break
		}
		if in.lineCount() != n {
			changed = in.clock.Now()
			continue
		}
		// Quiet for 150 ms ends the wait once the server's own lines have come; with none yet, a
		// busy journald may still be delivering them: wait up to the 2 s bound.
		lines := in.snapshot(0)
		if in.clock.Now().Sub(changed) >= 150*time.Millisecond && !unfinishedOutput(lines) && lastServerLine(lines) != "" {
			break
		}
	}
	if g := classify(st, in.snapshot(0), ready); g != nil {
		return g
	}
	return f
}

// Stop: see Instance.
func (in *instance) Stop(ctx context.Context, progress func(State)) (StopResult, error) {
	t0 := in.clock.Now()
	since := func() time.Duration { return in.clock.Now().Sub(t0) }
	if w, ok := in.proc.(exitWaiter); ok {
		return in.stopWaiting(ctx, w, t0, progress)
	}
	st, err := in.poll(ctx)
	if err != nil {
		return StopResult{Final: st}, err
	}
	if !st.Running() {
		r := StopResult{Final: st, Already: true, Duration: since()}
		in.proc.afterStop(ctx)
		return r, nil
	}
	from := in.lineCount()
	if err := in.proc.sendStop(ctx); err != nil {
		return StopResult{Final: st}, err
	}
	wait := 20 * time.Millisecond
	for {
		st, err = in.poll(ctx)
		if err != nil {
			return StopResult{Final: st, Duration: since()}, err
		}
		if progress != nil {
			progress(st)
		}
		if !st.Running() {
			break
		}
		select {
		case <-ctx.Done():
			return StopResult{Final: st, Duration: since()}, ctx.Err()
		case <-in.clock.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
	// The last lines of a stop (systemd's "Failed with result") may trail the state by a moment.
	_, _ = in.poll(ctx)
	r := stopOutcome(st, in.snapshot(from))
	r.Duration = since()
	in.proc.afterStop(ctx)
	return r, nil
}

// exitWaiter is a serverProc that waits for its process's end on its host: the stop loop then sees
// the end within moments of it, where a loop sleeping between polls would see it up to a sleep
// later, and the stop itself, the waits and the reads share round trips.
type exitWaiter interface {
	// waitPoll, with send, reads the state (pre) and, when the process runs, sends the stop and
	// waits on the host until it ends; without, it waits until the process pid ends (pid 0: no
	// process to wait for); at most upTo either way; then it polls. tidied says a stopped unit was
	// tidied too (afterStop), and the lines read after it, so no finish follows.
	waitPoll(ctx context.Context, send bool, pid int, upTo time.Duration) (pre, st State, lines []string, tidied bool, err error)
	// finish is afterStop, and reads the lines logged since the last poll.
	finish(ctx context.Context) []string
}

// stopWaitStep bounds one wait on the host during a stop: the persistent shell it holds is shared
// with the host's other slots (their polls wait behind it), and progress is reported between waits.
const stopWaitStep = 250 * time.Millisecond

// stopWaiting is Stop's loop over an exitWaiter: its first round trip reads the state and, when the
// process runs, sends the stop and waits on the host for its end (a poll before it was a round trip
// of every stop); each later one waits for the main process (or briefly, when it has none) and reads
// the state and the journal.
func (in *instance) stopWaiting(ctx context.Context, w exitWaiter, t0 time.Time, progress func(State)) (StopResult, error) {
	since := func() time.Duration { return in.clock.Now().Sub(t0) }
	from := in.lineCount()
	var st State
	send, tidied := true, false
	// With no main process (it exited, the unit's other processes still stopping) there is nothing
	// to wait for on the host: the wait backs off from 10 ms to 200 ms, as polls did.
	idle := 10 * time.Millisecond
	for {
		upTo := stopWaitStep
		if !send && st.MainPID <= 0 {
			upTo, idle = idle, min(2*idle, 200*time.Millisecond)
		}
		in.pollMu.Lock()
		pre, next, lines, t, err := w.waitPoll(ctx, send, st.MainPID, upTo)
		in.appendLines(lines)
		in.pollMu.Unlock()
		tidied = t
		if err != nil {
			if send {
				return StopResult{Final: pre}, err
			}
			return StopResult{Final: next, Duration: since()}, err
		}
		if send && !pre.Running() {
			// Nothing ran: no stop was sent (the unit was reset all the same when failed).
			if !tidied {
				in.proc.afterStop(ctx)
			}
			return StopResult{Final: pre, Already: true, Duration: since()}, nil
		}
		send, st = false, next
		if progress != nil {
			progress(st)
		}
		if !st.Running() {
			break
		}
		if ctx.Err() != nil {
			return StopResult{Final: st, Duration: since()}, ctx.Err()
		}
	}
	// The last lines of a stop (systemd's "Failed with result") may trail the state by a moment:
	// read with the reset-failed, in the last round trip when it ran there.
	if !tidied {
		in.pollMu.Lock()
		in.appendLines(w.finish(ctx))
		in.pollMu.Unlock()
	}
	r := stopOutcome(st, in.snapshot(from))
	r.Duration = since()
	return r, nil
}

// serverEndpoint finds --host/--port in argv: the address probes dial on
// the host (loopback for a wildcard bind) and whether it is reachable from
// outside.
func serverEndpoint(argv []string, port int) (host string, external bool) {
	host = "127.0.0.1"
	if v, ok := argparse.Last(argv, argparse.Host); ok {
		host = v
	}
	switch host {
	case "0.0.0.0", "::", "[::]", "":
		return "127.0.0.1", true
	case "127.0.0.1", "localhost", "::1":
		return host, false
	}
	return host, true
}

// APIKey is the server's --api-key as the server sees it (a reference
// ${NAME} to the launch's environment substituted; the last one wins, as in
// argparse), or "".
func APIKey(l Launch) string {
	key, _ := argparse.Last(ExpandArgv(l.Argv, l.Env), argparse.APIKey)
	return key
}

func hostPort(h string, port int) string { return net.JoinHostPort(h, strconv.Itoa(port)) }

// engineVersion asks a ready instance for its version ("" otherwise).
func (in *instance) engineVersion(ctx context.Context) string {
	in.mu.Lock()
	ready := in.ready
	in.mu.Unlock()
	if !ready {
		return ""
	}
	b, err := in.serverInfo(ctx)
	if err != nil {
		return ""
	}
	return EngineVersion(b)
}

// EffectiveSpec reads the speculative parameters a server reports it runs with from its server info
// (flat server args at the top, as every release serves them, or under "server_args"): SGLang forces
// some (topk 1: draft tokens = steps+1; DFLASH: topk 1) and chooses the ones not given, so they can
// differ from the requested ones. nil where the server says nothing (or null: no speculation).
func EffectiveSpec(serverInfo []byte) (steps, topk, draft *int) {
	type specArgs struct {
		Steps *int `json:"speculative_num_steps"`
		TopK  *int `json:"speculative_eagle_topk"`
		Draft *int `json:"speculative_num_draft_tokens"`
	}
	var v struct {
		specArgs
		ServerArgs *specArgs `json:"server_args"`
	}
	if json.Unmarshal(serverInfo, &v) != nil {
		return nil, nil, nil
	}
	a := v.specArgs
	if a.Steps == nil && a.TopK == nil && a.Draft == nil && v.ServerArgs != nil {
		a = *v.ServerArgs
	}
	return a.Steps, a.TopK, a.Draft
}

// EngineVersion extracts "version" from a server-info body (/server_info or /get_server_info).
func EngineVersion(serverInfo []byte) string {
	var v struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(serverInfo, &v)
	return v.Version
}

// secretArgs are the server arguments whose values are credentials: the
// effective arguments a server reports are stored and shown in reports, so
// these are replaced by "<redacted>" (null and "" kept: they say "none").
var secretArgs = []string{"api_key", "admin_api_key", "hf_token", "ssl_keyfile_password"}

// RedactServerInfo returns the server-info body with the values of
// secretArgs replaced, at the top level and under "server_args"; a body that
// is not a JSON object is returned as is.
func RedactServerInfo(b []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	changed := redactArgs(m)
	if sa, ok := m["server_args"]; ok {
		var inner map[string]json.RawMessage
		if json.Unmarshal(sa, &inner) == nil && redactArgs(inner) {
			m["server_args"], _ = json.Marshal(inner)
			changed = true
		}
	}
	if !changed {
		return b
	}
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}

func redactArgs(m map[string]json.RawMessage) bool {
	changed := false
	for _, k := range secretArgs {
		v, ok := m[k]
		if !ok {
			continue
		}
		if t := strings.TrimSpace(string(v)); t == "null" || t == `""` {
			continue
		}
		m[k] = json.RawMessage(`"<redacted>"`)
		changed = true
	}
	return changed
}
