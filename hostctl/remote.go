package hostctl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RemoteOptions configure an ssh-driven host.
type RemoteOptions struct {
	Name       string
	SSH        SSHOptions
	Unit       string        // default sglang.service
	CreateUnit bool          // create a managed unit when the host has none
	GPUWait    time.Duration // how long to wait for GPUs to be free before a start (default 2 min)
	// DBus drives the unit through systemd's D-Bus API over the SSH-forwarded
	// bus socket instead of systemctl (root logins only); the journal is
	// still read with journalctl.
	DBus bool
	// Event, if set, receives notable events (reconnects, stops ending in SIGKILL) for the event log.
	Event func(kind, detail string)
}

// Remote drives a unit on a host over SSH. Use one per host.
type Remote struct {
	o    RemoteOptions
	conn *Conn

	busMu sync.Mutex
	bus   *dbusUnit // with DBus

	mu      sync.Mutex
	current *instance
	dropIn  []byte
}

var _ Host = (*Remote)(nil)

// DialRemote connects to the host.
func DialRemote(ctx context.Context, o RemoteOptions) (*Remote, error) {
	if o.Unit == "" {
		o.Unit = "sglang.service"
	}
	if !strings.Contains(o.Unit, ".") {
		o.Unit += ".service"
	}
	if err := checkUnitName(o.Unit); err != nil {
		return nil, err
	}
	if o.GPUWait == 0 {
		o.GPUWait = 2 * time.Minute
	}
	if o.Event != nil && o.SSH.OnReconnect == nil {
		o.SSH.OnReconnect = func(attempts int, down time.Duration) {
			o.Event("reconnect", fmt.Sprintf("SSH connection to %s re-established after %d attempt(s), %v", o.SSH.Address, attempts, down.Round(time.Millisecond)))
		}
	}
	c, err := DialSSH(ctx, o.SSH)
	if err != nil {
		return nil, err
	}
	r := &Remote{o: o, conn: c}
	if o.DBus {
		if r.bus, err = dialDBus(ctx, c, o.Unit); err != nil {
			c.Close()
			return nil, err
		}
	}
	return r, nil
}

// withBus runs fn on the D-Bus connection, re-dialling the bus once when a
// call fails (the SSH connection under it may have been re-established).
func (r *Remote) withBus(ctx context.Context, fn func(*dbusUnit) error) error {
	r.busMu.Lock()
	defer r.busMu.Unlock()
	err := fn(r.bus)
	if err == nil || ctx.Err() != nil {
		return err
	}
	if r.bus.c.Connected() {
		return err
	}
	r.bus.close()
	nb, derr := dialDBus(ctx, r.conn, r.o.Unit)
	if derr != nil {
		return derr
	}
	r.bus = nb
	return fn(r.bus)
}

// Conn is the host's SSH connection (for doctor and tests).
func (r *Remote) Conn() *Conn { return r.conn }

// Name implements Host.
func (r *Remote) Name() string { return r.o.Name }

// Close implements Host.
func (r *Remote) Close() error {
	r.busMu.Lock()
	if r.bus != nil {
		r.bus.close()
	}
	r.busMu.Unlock()
	return r.conn.Close()
}

// run runs a shell script as root (sudo -n for a non-root login).
func (r *Remote) run(ctx context.Context, script string, timeout time.Duration) (Output, error) {
	return r.conn.RunShell(ctx, script, timeout, 1<<20)
}

var showProps = []string{"ActiveState", "SubState", "Result", "ExecMainCode", "ExecMainStatus", "MainPID", "ExecMainPID",
	"NRestarts", "InvocationID", "LoadState", "UnitFileState", "ActiveEnterTimestamp", "InactiveEnterTimestamp",
	"ExecMainStartTimestamp", "ExecMainExitTimestamp"}

func (r *Remote) showCmd() string {
	return "systemctl show --timestamp=unix -p " + strings.Join(showProps, ",") + " -- " + ShellQuote(r.o.Unit)
}

// parseShow parses systemctl show's KEY=VALUE lines.
func parseShow(out []byte) State {
	st := State{At: time.Now()}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(v)
		switch k {
		case "ActiveState":
			st.ActiveState = v
		case "SubState":
			st.SubState = v
		case "Result":
			st.Result = v
		case "ExecMainCode":
			st.ExecMainCode = n
		case "ExecMainStatus":
			st.ExecMainStatus = n
		case "MainPID":
			st.MainPID = n
		case "ExecMainPID":
			st.ExecMainPID = n
		case "NRestarts":
			st.NRestarts = n
		case "InvocationID":
			st.InvocationID = v
		case "LoadState":
			st.LoadState = v
		case "UnitFileState":
			st.UnitFileState = v
		case "ActiveEnterTimestamp":
			st.ActiveEnter = unixStamp(v)
		case "InactiveEnterTimestamp":
			st.InactiveEnter = unixStamp(v)
		case "ExecMainStartTimestamp":
			st.ExecMainStart = unixStamp(v)
		case "ExecMainExitTimestamp":
			st.ExecMainExit = unixStamp(v)
		}
	}
	return st
}

func unixStamp(v string) time.Time {
	if !strings.HasPrefix(v, "@") {
		return time.Time{}
	}
	n, err := strconv.ParseInt(v[1:], 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// UnitState reads the unit's state.
func (r *Remote) UnitState(ctx context.Context) (State, error) {
	if r.bus != nil {
		var st State
		err := r.withBus(ctx, func(b *dbusUnit) (err error) { st, err = b.state(ctx); return err })
		return st, err
	}
	out, err := r.run(ctx, r.showCmd(), 15*time.Second)
	if err != nil {
		return State{}, err
	}
	return parseShow(out.Stdout), nil
}

const journalSep = "@@specsweep-journal@@"

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

// newInstance follows invocation id of the unit. fromEnd starts reading its
// journal at the newest entry (a server specsweep did not start may have
// logged for days: only what it says from now on matters).
func (r *Remote) newInstance(id string, l Launch, startedAt time.Time, fromEnd bool) *instance {
	host, external := serverEndpoint(l.Argv, l.Port)
	in := &instance{id: id, launch: l, startedAt: startedAt}
	tunnel := hostPort(host, l.Port)
	in.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return r.conn.DialTCP(ctx, tunnel)
		},
		MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second, DisableCompression: true,
	}}
	in.baseURL = "http://" + tunnel
	if external {
		h, _, _ := net.SplitHostPort(r.conn.Addr())
		if host != "127.0.0.1" {
			h = host
		}
		in.addr = hostPort(h, l.Port)
	}
	var cursor string
	var cmu sync.Mutex
	atEnd := !fromEnd
	in.poll = func(ctx context.Context) (State, error) {
		cmu.Lock()
		defer cmu.Unlock()
		match := journalMatch(r.o.Unit, id, in.execPID)
		if !atEnd {
			out, err := r.run(ctx, journalLast(match), 15*time.Second)
			if err != nil {
				return State{}, err
			}
			_, cursor = parseJournal(out.Stdout, out.Truncated)
			atEnd = true
		}
		j := journalRead(match, cursor)
		script := r.showCmd() + "; echo " + journalSep + "; " + j
		var busState State
		var busErr error
		busDone := make(chan struct{})
		if r.bus != nil {
			script = "echo " + journalSep + "; " + j
			go func() { busState, busErr = r.UnitState(ctx); close(busDone) }()
		} else {
			close(busDone)
		}
		out, err := r.conn.RunShell(ctx, script, 15*time.Second, 1<<20)
		if isUnreachable(err) && ctx.Err() == nil {
			// A read: safe to repeat once on a fresh connection (sshd restarted, a blip).
			out, err = r.conn.RunShell(ctx, script, 15*time.Second, 1<<20)
		}
		if err != nil {
			var ee *ExitError
			if !errors.As(err, &ee) || !bytes.Contains(out.Stdout, []byte(journalSep)) {
				return State{}, err
			}
		}
		<-busDone
		show, jour, _ := bytes.Cut(out.Stdout, []byte(journalSep+"\n"))
		st := parseShow(show)
		if r.bus != nil {
			if busErr != nil {
				return State{}, busErr
			}
			st = busState
		}
		lines, c := parseJournal(jour, out.Truncated)
		if c != "" {
			cursor = c
		}
		in.appendLines(lines)
		return st, nil
	}
	in.wake = make(chan struct{}, 1)
	in.follow = func(ctx context.Context) func() {
		cl, _, err := r.conn.Client(ctx)
		if err != nil {
			return func() {}
		}
		s, err := cl.NewSession()
		if err != nil {
			return func() {}
		}
		stdin, err := s.StdinPipe()
		if err != nil {
			s.Close()
			return func() {}
		}
		out, err := s.StdoutPipe()
		if err == nil {
			// New journal lines, and the main process's death (tail --pid checks it every 50 ms on
			// the host; journalctl -f alone can lag: journald signals followers on a timer).
			// Both end when the session's stdin closes (cat returns): nothing lingers on the host.
			script := "journalctl -f -n 0 -q -o cat " + journalMatch(r.o.Unit, id, in.execPID) + " & j=$!; w=; "
			if pid := in.mainPID; pid > 0 {
				script += "{ tail --pid=" + strconv.Itoa(pid) + " -s 0.05 -f /dev/null </dev/null; echo @@exited; } & w=$!; "
			}
			// The port opening (the server then warms up for a few seconds): checked on the host
			// every 100 ms, so readiness polling speeds up without waiting for a journal line.
			script += "{ while ! ss -Htln 'sport = :" + strconv.Itoa(l.Port) + "' 2>/dev/null | grep -q .; do sleep 0.1; done; echo @@listening; } </dev/null & p=$!; "
			script += "cat >/dev/null; kill $j $w $p 2>/dev/null; true"
			cmd := Cmd{Args: []string{"sh", "-c", script}, Sudo: true, Timeout: l.ReadyTimeout + 30*time.Second}
			err = s.Start(cmd.CommandLine(r.conn.User()))
		}
		if err != nil {
			s.Close()
			return func() {}
		}
		go func() {
			br := bufio.NewReader(out)
			for {
				if _, err := br.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
					return
				}
				in.notify()
			}
		}()
		return func() { stdin.Close(); s.Close() }
	}
	in.sendStop = func(ctx context.Context) error {
		if r.bus != nil {
			return r.withBus(ctx, func(b *dbusUnit) error { return b.stop(ctx) })
		}
		_, err := r.run(ctx, "systemctl stop --no-block -- "+ShellQuote(r.o.Unit), 15*time.Second)
		return err
	}
	in.afterStop = func(ctx context.Context) {
		if r.bus != nil {
			_ = r.withBus(ctx, func(b *dbusUnit) error { b.resetFailed(ctx); return nil })
			return
		}
		_, _ = r.run(ctx, "systemctl reset-failed -- "+ShellQuote(r.o.Unit)+" 2>/dev/null; true", 15*time.Second)
	}
	return in
}

// ensureMarker records the unit's pre-sweep state on the host, once.
func (r *Remote) ensureMarker(ctx context.Context) (Marker, error) {
	b, err := r.conn.ReadFile(ctx, MarkerPath(r.o.Unit))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Marker{}, err
	}
	st, serr := r.UnitState(ctx)
	if serr != nil {
		return Marker{}, serr
	}
	if err == nil {
		m, err := DecodeMarker(b)
		if err != nil {
			return m, err
		}
		// specsweep runs the unit only with its drop-in in place: a running unit without one is the
		// operator's, started after the marker was written (the drop-in removed by hand, or a
		// restore that died before removing the marker). Such a marker is stale: record afresh.
		_, derr := r.conn.ReadFile(ctx, DropInPath(r.o.Unit))
		switch {
		case derr == nil || !st.Running():
			return m, nil
		case !errors.Is(derr, os.ErrNotExist):
			return m, derr
		}
		if r.o.Event != nil {
			r.o.Event("stale_marker", fmt.Sprintf("restore marker of %s (written %s) ignored: the unit runs without specsweep's drop-in",
				r.o.Unit, m.CreatedAt.Format(time.RFC3339)))
		}
	}
	m := Marker{Unit: r.o.Unit, DropIn: DropInPath(r.o.Unit), CreatedAt: time.Now().UTC(), By: "specsweep"}
	if hn, herr := os.Hostname(); herr == nil {
		m.By = "specsweep@" + hn
	}
	if st.LoadState == "not-found" || st.LoadState == "" {
		if !r.o.CreateUnit {
			return Marker{}, fmt.Errorf("unit %s does not exist on %s (install it, or set create_unit: true)", r.o.Unit, r.o.Name)
		}
		m.UnitCreated = true
	} else {
		m.WasActive = st.ActiveState == "active" || st.ActiveState == "activating" || st.ActiveState == "reloading"
	}
	if err := r.conn.WriteFileAtomic(ctx, MarkerPath(r.o.Unit), m.Encode(), 0o644); err != nil {
		return Marker{}, fmt.Errorf("writing the restore marker: %w", err)
	}
	if m.UnitCreated {
		if err := r.conn.WriteFileAtomic(ctx, "/etc/systemd/system/"+r.o.Unit, ManagedUnit(r.o.Unit), 0o644); err != nil {
			return Marker{}, err
		}
	}
	return m, nil
}

// stopRunning stops the unit if it runs (the previous point, or the
// operator's server), waiting for the stop to finish.
func (r *Remote) stopRunning(ctx context.Context, l Launch) (StopResult, error) {
	st, err := r.UnitState(ctx)
	if err != nil {
		return StopResult{}, err
	}
	if !st.Running() {
		return StopResult{Already: true, Final: st}, nil
	}
	in := r.newInstance(st.InvocationID, l, time.Now(), true)
	res, err := in.Stop(ctx, nil)
	if err == nil && res.Class == ClassStopTimeoutSIGKILL && r.o.Event != nil {
		r.o.Event(string(ClassStopTimeoutSIGKILL), fmt.Sprintf("stop of %s took %v and ended in SIGKILL", st.InvocationID, res.Duration.Round(time.Millisecond)))
	}
	return res, err
}

// gpuFree waits (bounded) until no compute process holds GPU memory; a host
// without nvidia-smi has nothing to wait for.
func (r *Remote) gpuFree(ctx context.Context) error {
	deadline := time.Now().Add(r.o.GPUWait)
	for {
		out, err := r.run(ctx, "command -v nvidia-smi >/dev/null 2>&1 || { echo no-nvidia-smi; exit 0; }; "+
			"nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader", 30*time.Second)
		if err != nil {
			return err
		}
		s := strings.TrimSpace(string(out.Stdout))
		if s == "" || s == "no-nvidia-smi" || strings.Contains(s, "No running") {
			return nil
		}
		if time.Now().After(deadline) {
			return &Failure{Class: ClassGPUBusy, Detail: fmt.Sprintf("GPU memory still held after %v", r.o.GPUWait),
				Evidence: strings.Split(s, "\n")}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// Start implements Host.
func (r *Remote) Start(ctx context.Context, l Launch) (Instance, error) {
	l = l.withDefaults()
	if err := l.Validate(); err != nil {
		return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
	}
	dropIn, err := RenderDropIn(r.o.Unit, l)
	if err != nil {
		return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
	}
	var envFile []byte
	if len(l.Env) > 0 {
		if envFile, err = RenderEnvFile(l.Env); err != nil {
			return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
		}
	}
	if _, err := r.ensureMarker(ctx); err != nil {
		return nil, wrapUnreachable(err)
	}
	prev, err := r.stopRunning(ctx, l)
	if err != nil {
		return nil, wrapUnreachable(err)
	}
	if err := r.gpuFree(ctx); err != nil {
		return nil, wrapUnreachable(err)
	}
	// The environment first (root only: it may hold tokens), then the drop-in that names it; a
	// point without environment leaves no file of an earlier one behind.
	if envFile != nil {
		if err := r.conn.WriteFileAtomic(ctx, EnvFilePath(r.o.Unit), envFile, 0o600); err != nil {
			return nil, wrapUnreachable(fmt.Errorf("writing the environment file: %w", err))
		}
	} else if err := r.conn.Remove(ctx, EnvFilePath(r.o.Unit)); err != nil {
		return nil, wrapUnreachable(fmt.Errorf("removing the environment file: %w", err))
	}
	if err := r.conn.WriteFileAtomic(ctx, DropInPath(r.o.Unit), dropIn, 0o644); err != nil {
		return nil, wrapUnreachable(fmt.Errorf("writing the drop-in: %w", err))
	}
	u := ShellQuote(r.o.Unit)
	var out Output
	var started State
	if r.bus != nil {
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = r.withBus(sctx, func(b *dbusUnit) error { return b.reloadStart(sctx) })
		cancel()
		if err != nil {
			out.Stderr = []byte(err.Error())
			err = &ExitError{Line: "StartUnit " + r.o.Unit, Out: Output{Stderr: out.Stderr, Code: 1}}
		}
		if st, serr := r.UnitState(ctx); serr == nil {
			started = st
		} else if err == nil {
			err = serr
		}
	} else {
		out, err = r.run(ctx, "systemctl daemon-reload && { systemctl reset-failed -- "+u+" 2>/dev/null; systemctl start -- "+u+
			"; rc=$?; systemctl show -p InvocationID,MainPID,ExecMainPID -- "+u+"; exit $rc; }", 60*time.Second)
		started = parseShow(out.Stdout)
	}
	startedAt := time.Now()
	id := started.InvocationID
	if err != nil {
		var ee *ExitError
		if !errors.As(err, &ee) {
			return nil, wrapUnreachable(fmt.Errorf("starting %s: %w", r.o.Unit, err))
		}
		// systemctl start itself failed (no new invocation: InvocationID may be the previous
		// one's): systemd refused the unit as configured.
		ev := strings.Split(strings.TrimSpace(string(out.Stderr)), "\n")
		if id != "" && id != prev.Final.InvocationID { // a new invocation ran (ExecStartPre=...): its lines
			q := ShellQuote(id)
			if jr, jerr := r.run(ctx, "journalctl --no-pager -q -o cat -n 20 _SYSTEMD_INVOCATION_ID="+q+" + INVOCATION_ID="+q, 15*time.Second); jerr == nil {
				ev = append(ev, strings.Split(strings.TrimSpace(string(jr.Stdout)), "\n")...)
			}
		}
		class := ClassCrashDuringStart
		if strings.Contains(string(out.Stderr), "bad unit file setting") || strings.Contains(string(out.Stderr), "Invalid argument") {
			class = ClassBadArgs
		}
		return nil, &Failure{Class: class, Detail: fmt.Sprintf("systemctl start %s failed (exit %d)", r.o.Unit, ee.Out.Code),
			Evidence: evidence(ev, regexp.MustCompile(`.`), 8), Err: err}
	}
	in := r.newInstance(id, l, startedAt, false)
	in.mainPID, in.execPID = started.MainPID, started.ExecMainPID
	r.mu.Lock()
	r.current, r.dropIn = in, dropIn
	r.mu.Unlock()
	return in, nil
}

func wrapUnreachable(err error) error {
	if isUnreachable(err) {
		return unreachable(err, State{})
	}
	return err
}

// Restore implements Host.
func (r *Remote) Restore(ctx context.Context) error {
	b, err := r.conn.ReadFile(ctx, MarkerPath(r.o.Unit))
	var m Marker
	switch {
	case err == nil:
		if m, err = DecodeMarker(b); err != nil {
			return err
		}
	case errors.Is(err, os.ErrNotExist):
		// No marker: nothing was changed, unless a drop-in was left by hand.
		if _, derr := r.conn.ReadFile(ctx, DropInPath(r.o.Unit)); derr != nil {
			return r.conn.Remove(ctx, EnvFilePath(r.o.Unit))
		}
		m = Marker{Unit: r.o.Unit}
	default:
		return err
	}
	if _, derr := r.conn.ReadFile(ctx, DropInPath(r.o.Unit)); errors.Is(derr, os.ErrNotExist) && !m.UnitCreated {
		// A running unit without the drop-in is the operator's (see ensureMarker): the marker is
		// stale, and the unit is as the operator has it now; leave it be.
		if st, serr := r.UnitState(ctx); serr == nil && st.Running() {
			if err := r.conn.Remove(ctx, EnvFilePath(r.o.Unit)); err != nil {
				return err
			}
			return r.conn.Remove(ctx, MarkerPath(r.o.Unit))
		}
	}
	if _, err := r.stopRunning(ctx, Launch{}.withDefaults()); err != nil {
		return err
	}
	if err := r.conn.Remove(ctx, DropInPath(r.o.Unit)); err != nil {
		return err
	}
	if err := r.conn.Remove(ctx, EnvFilePath(r.o.Unit)); err != nil {
		return err
	}
	u := ShellQuote(r.o.Unit)
	script := "rmdir /etc/systemd/system/" + ShellQuote(r.o.Unit+".d") + " 2>/dev/null; "
	if m.UnitCreated {
		script += "rm -f /etc/systemd/system/" + u + "; "
	}
	script += "systemctl daemon-reload && { systemctl reset-failed -- " + u + " 2>/dev/null; true; }"
	if m.WasActive {
		script += " && systemctl start -- " + u
	}
	if _, err := r.run(ctx, script, 60*time.Second); err != nil {
		return fmt.Errorf("restoring %s: %w", r.o.Unit, err)
	}
	if err := r.conn.Remove(ctx, MarkerPath(r.o.Unit)); err != nil {
		return err
	}
	r.mu.Lock()
	r.current, r.dropIn = nil, nil
	r.mu.Unlock()
	return nil
}

// Provenance implements Host.
func (r *Remote) Provenance(ctx context.Context) (Provenance, error) {
	u := ShellQuote(r.o.Unit)
	script := "hostname; uname -r; systemctl --version | head -n1; " +
		"f=$(systemctl show -p FragmentPath --value -- " + u + "); echo \"$f\"; " +
		"if [ -n \"$f\" ] && [ -f \"$f\" ]; then sha256sum \"$f\" | cut -d' ' -f1; else echo; fi; " +
		"d=/etc/systemd/system/" + ShellQuote(r.o.Unit+".d/"+DropInName) + "; if [ -f \"$d\" ]; then sha256sum \"$d\" | cut -d' ' -f1; else echo; fi; " +
		"systemctl show -p ExecStart --value -- " + u + " | head -c 8192; echo; " +
		"command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader,nounits; true"
	out, err := r.run(ctx, script, 30*time.Second)
	p := Provenance{Driver: "ssh", Unit: r.o.Unit}
	if err != nil {
		return p, err
	}
	lines := strings.Split(string(out.Stdout), "\n")
	get := func(i int) string {
		if i < len(lines) {
			return strings.TrimSpace(lines[i])
		}
		return ""
	}
	p.Hostname, p.Kernel, p.SystemdVer = get(0), get(1), get(2)
	p.UnitHash, p.DropInHash, p.ExecStart = get(4), get(5), get(6)
	for _, l := range lines[min(7, len(lines)):] {
		if g, ok := parseGPU(l); ok {
			p.GPUs = append(p.GPUs, g)
		}
	}
	r.mu.Lock()
	cur := r.current
	r.mu.Unlock()
	if cur != nil {
		p.Argv = cur.launch.Argv
		p.EngineVer = cur.engineVersion(ctx)
		if line, err := ExecStartLine(cur.launch.Argv, cur.launch.Env); err == nil {
			p.ExecStart = line // exactly as written in the drop-in
		}
	}
	return p, nil
}

func parseGPU(line string) (GPU, bool) {
	f := strings.Split(line, ",")
	if len(f) != 3 {
		return GPU{}, false
	}
	mem, err := strconv.Atoi(strings.TrimSpace(f[2]))
	if err != nil {
		return GPU{}, false
	}
	return GPU{Name: strings.TrimSpace(f[0]), Driver: strings.TrimSpace(f[1]), MemoryMB: mem}, true
}

// Leftovers lists the files of specsweep on the host for the unit (the
// drop-in, the environment file, the restore marker): none outside a sweep.
func (r *Remote) Leftovers(ctx context.Context) ([]string, error) {
	var out []string
	for _, p := range []string{DropInPath(r.o.Unit), EnvFilePath(r.o.Unit), MarkerPath(r.o.Unit)} {
		_, err := r.conn.Stat(ctx, p)
		switch {
		case err == nil:
			out = append(out, p)
		case !errors.Is(err, os.ErrNotExist):
			return out, fmt.Errorf("checking %s on %s: %w", p, r.o.Name, err)
		}
	}
	return out, nil
}
