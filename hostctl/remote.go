package hostctl

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/specsweep/specsweep/internal/defaults"
	"github.com/specsweep/specsweep/sweep"
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
	GPUWait    time.Duration // how long to wait for GPUs to be free before a start, unless the launch says (default 2 min)
	// DBus drives the unit through systemd's D-Bus API over the SSH-forwarded
	// bus socket instead of systemctl (root logins only); the journal is
	// still read with journalctl.
	DBus bool
	// TryDBus is DBus for a root login whose bus is reached, else systemctl (an event says why):
	// a spec's host that says nothing (each systemctl is a process on the host, 15-30 ms).
	TryDBus bool
	// Event, if set, receives notable events (reconnects, stops ending in SIGKILL) for the event log.
	Event func(kind, detail string)
	// Clock times the host's servers (readiness, stops), the GPU wait and markers, and is the SSH
	// connection's too (it replaces SSH.Clock); nil: the real clock.
	Clock Clock
}

// Remote drives a unit on a host over SSH. Use one per host.
type Remote struct {
	o    RemoteOptions
	conn *Conn
	unit unitControl // systemctl, or D-Bus with DBus

	mu      sync.Mutex
	current *instance
	onHost  sweepFiles      // what this handle last wrote of the sweep's files (Start)
	slots   map[int]*Remote // packing: the slots' handles (slots.go)
	facts   *hostFacts      // Provenance's facts of the machine (the host's handle; machineFacts)
	file    unitFile        // this handle's unit file, for Provenance

	// A slot's handle: the host it is a slot of, and its number; nil and 0 for the host itself.
	parent *Remote
	slotNo int

	prepMu     sync.Mutex
	slotText   []byte      // the slots' unit file, once prepareSlots read it
	slotMode   os.FileMode // and its mode (slotUnitMode)
	slotsSwept bool        // an earlier sweep's slot servers were stopped
}

var _ Host = (*Remote)(nil)

// DialRemote connects to the host.
func DialRemote(ctx context.Context, o RemoteOptions) (*Remote, error) {
	if o.Unit == "" {
		o.Unit = defaults.Unit
	}
	if !strings.Contains(o.Unit, ".") {
		o.Unit += ".service"
	}
	if err := checkUnitName(o.Unit); err != nil {
		return nil, err
	}
	if o.GPUWait == 0 {
		o.GPUWait = defaults.GPUWait
	}
	o.Clock = orRealClock(o.Clock)
	o.SSH.Clock = o.Clock
	if o.Event != nil && o.SSH.OnReconnect == nil {
		o.SSH.OnReconnect = func(attempts int, down time.Duration) {
			o.Event("reconnect", fmt.Sprintf("SSH connection to %s re-established after %d attempt(s), %v", o.SSH.Address, attempts, down.Round(time.Millisecond)))
		}
	}
	c, err := DialSSH(ctx, o.SSH)
	if err != nil {
		return nil, err
	}
	r := &Remote{o: o, conn: c, unit: &systemctlUnit{conn: c, unit: o.Unit}}
	switch {
	case o.DBus:
		if r.unit, err = dialDBus(ctx, c, o.Unit); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: systemd's D-Bus API over SSH (dbus: true; a root login, and sshd allowing stream-local forwarding): %w", o.Name, err)
		}
	case o.TryDBus && c.User() == "root":
		u, err := dialDBus(ctx, c, o.Unit)
		if err == nil {
			r.unit = u
			break
		}
		if o.Event != nil {
			o.Event("dbus_unavailable", fmt.Sprintf("systemd's D-Bus API is not reachable over SSH on %s (%v): its unit is driven with systemctl (set dbus: false to skip the attempt)", o.Name, err))
		}
	}
	return r, nil
}

// Conn is the host's SSH connection (for doctor and tests).
func (r *Remote) Conn() *Conn { return r.conn }

// Name implements Host.
func (r *Remote) Name() string { return r.o.Name }

// Close implements Host. A slot's Close leaves the host's connection open.
func (r *Remote) Close() error {
	r.unit.close()
	if r.parent != nil {
		return nil
	}
	return r.conn.Close()
}

// run runs a shell script as root (sudo -n for a non-root login).
func (r *Remote) run(ctx context.Context, script string, timeout time.Duration) (Output, error) {
	return r.conn.RunShell(ctx, script, timeout, 1<<20)
}

// UnitState reads the unit's state.
func (r *Remote) UnitState(ctx context.Context) (State, error) { return r.unit.state(ctx) }

// newInstance follows invocation id of the unit. fromEnd starts reading its
// journal at the newest entry (a server specsweep did not start may have
// logged for days: only what it says from now on matters).
func (r *Remote) newInstance(id string, l Launch, startedAt time.Time, fromEnd bool) *instance {
	return r.instanceOf(r.unitProc(id, l, fromEnd), l, startedAt)
}

// unitProc is the process of invocation id of the unit, its journal read from
// the start of the invocation or, with fromEnd, from the newest entry.
func (r *Remote) unitProc(id string, l Launch, fromEnd bool) *unitProc {
	return &unitProc{conn: r.conn, unit: r.unit, unitName: r.o.Unit, id: id,
		followFor: l.ReadyTimeout + 30*time.Second, atEnd: !fromEnd}
}

// instanceOf is the instance of p: probes go through the SSH connection to
// the server's address on the host.
func (r *Remote) instanceOf(p *unitProc, l Launch, startedAt time.Time) *instance {
	host, external := serverEndpoint(l.Argv, l.Port)
	tunnel := hostPort(host, l.Port)
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return r.conn.DialTCP(ctx, tunnel)
		},
		MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second, DisableCompression: true,
	}}
	addr := ""
	if external {
		h, _, _ := net.SplitHostPort(r.conn.Addr())
		if host != "127.0.0.1" {
			h = host
		}
		addr = hostPort(h, l.Port)
	}
	return newInstance(p, r.o.Clock, p.id, l, startedAt, client, "http://"+tunnel, addr)
}

// sweepFiles is what a handle knows of the files of its sweep on the host, as it wrote them: a
// point's start rewrites the drop-in (and reloads systemd) and the environment file only when they
// change. The handle's sweep owns them while its marker is there (docs/hostctl.md, "The launch
// script"); a restore, or a start that failed on its way, forgets them.
type sweepFiles struct {
	dropIn   []byte // the drop-in written and loaded by a daemon-reload; nil: unknown
	env      []byte // the environment file written (nil with envKnown: none)
	envKnown bool
}

// markerStale tells whether a restore marker no longer describes the unit in state st: specsweep
// runs the unit only with its drop-in in place, so a unit running without one is the operator's,
// started after the marker was written (the drop-in removed by hand, or a restore that died before
// removing the marker).
func (r *Remote) markerStale(ctx context.Context, st State) (bool, error) {
	if !st.Running() {
		return false, nil
	}
	_, err := r.conn.Stat(ctx, DropInPath(r.o.Unit))
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	return false, err
}

// preStart reads, once and in one round trip, the unit's state and the GPUs (gpuScript's output
// and exit status) for a start: the marker, the stop check and the GPU wait's first look use them.
// A server stopped since makes the GPUs' stale. Read where the state was read before (after the
// marker file), so that a sudo asking for a password is still the marker read's error.
type preStart struct {
	read      bool
	st        State
	gpus      string
	gpuCode   int
	gpusStale bool
}

// state is the unit's state (pre nil: read now, alone).
func (p *preStart) state(ctx context.Context, r *Remote) (State, error) {
	if p == nil {
		return r.UnitState(ctx)
	}
	if !p.read {
		st, out, err := r.unit.stateAnd(ctx, gpuScript)
		if err != nil {
			return State{}, fmt.Errorf("reading the state of %s and the GPUs: %w", r.o.Unit, err)
		}
		p.read, p.st, p.gpus, p.gpuCode = true, st, string(out.Stdout), out.Code
	}
	return p.st, nil
}

// ensureMarker records the unit's pre-sweep state on the host, once.
func (r *Remote) ensureMarker(ctx context.Context) (Marker, error) {
	return r.ensureMarkerFrom(ctx, nil)
}

// ensureMarkerFrom is ensureMarker with the unit's state read already (pre; nil: read it).
func (r *Remote) ensureMarkerFrom(ctx context.Context, pre *preStart) (Marker, error) {
	b, err := r.conn.ReadFile(ctx, MarkerPath(r.o.Unit))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Marker{}, err
	}
	st, serr := pre.state(ctx, r)
	if serr != nil {
		return Marker{}, serr
	}
	if err == nil {
		m, err := DecodeMarker(b)
		if err != nil {
			return m, err
		}
		if stale, err := r.markerStale(ctx, st); err != nil || !stale {
			return m, err
		}
		if r.o.Event != nil { // recorded afresh below
			r.o.Event("stale_marker", fmt.Sprintf("restore marker of %s (written %s) ignored: the unit runs without specsweep's drop-in",
				r.o.Unit, m.CreatedAt.Format(time.RFC3339)))
		}
	}
	m := Marker{Unit: r.o.Unit, DropIn: DropInPath(r.o.Unit), CreatedAt: r.o.Clock.Now().UTC(), By: r.by()}
	if st.LoadState == "not-found" || st.LoadState == "" {
		if !r.o.CreateUnit {
			return Marker{}, fmt.Errorf("unit %s does not exist on %s (install it, or set create_unit: true)", r.o.Unit, r.o.Name)
		}
		m.UnitCreated = true
	} else {
		m.WasActive = active(st)
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
	return r.stopRunningFrom(ctx, l, nil)
}

// stopRunningFrom is stopRunning with the unit's state read already (pre; nil: read it).
func (r *Remote) stopRunningFrom(ctx context.Context, l Launch, pre *preStart) (StopResult, error) {
	st, err := pre.state(ctx, r)
	if err != nil {
		return StopResult{}, err
	}
	if !st.Running() {
		return StopResult{Already: true, Final: st}, nil
	}
	if pre != nil {
		pre.gpusStale = true
	}
	in := r.newInstance(st.InvocationID, l, r.o.Clock.Now(), true)
	res, err := in.Stop(ctx, nil)
	if err == nil && res.Class == ClassStopTimeoutSIGKILL && r.o.Event != nil {
		r.o.Event(string(ClassStopTimeoutSIGKILL), fmt.Sprintf("stop of %s took %v and ended in SIGKILL", st.InvocationID, res.Duration.Round(time.Millisecond)))
	}
	return res, err
}

// stopLeftover stops the unit when a sweep's marker says specsweep changed it and it runs: a rank a
// killed run left on a node of a group that this run's next point does not span.
func (r *Remote) stopLeftover(ctx context.Context) error {
	if _, err := r.conn.ReadFile(ctx, MarkerPath(r.o.Unit)); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	_, err := r.stopRunning(ctx, Launch{}.withDefaults())
	return err
}

// gpuFree waits (bounded) until no compute process holds a GPU the launch runs on; a host
// without nvidia-smi has nothing to wait for.
func (r *Remote) gpuFree(ctx context.Context, l Launch) error { return r.gpuFreeFrom(ctx, l, nil) }

// gpuScript prints the GPUs' compute processes, or no-nvidia-smi.
var gpuScript = "command -v nvidia-smi >/dev/null 2>&1 || { echo no-nvidia-smi; exit 0; }; " + gpuQuery

// gpuFreeFrom is gpuFree taking its first look from pre (read before a start) when nothing was
// stopped since and the query succeeded there.
func (r *Remote) gpuFreeFrom(ctx context.Context, l Launch, pre *preStart) error {
	first := pre != nil && pre.read && !pre.gpusStale && pre.gpuCode == 0
	return waitGPUs(ctx, r.o.Clock, func(ctx context.Context) (string, bool, error) {
		var s string
		if first {
			first, s = false, pre.gpus
		} else {
			out, err := r.run(ctx, gpuScript, 30*time.Second)
			if err != nil {
				return "", false, err
			}
			s = string(out.Stdout)
		}
		return s, strings.TrimSpace(s) == "no-nvidia-smi", nil
	}, gpuSet(l), cmp.Or(l.GPUWait, r.o.GPUWait), gpuPoll)
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
	launch, err := RenderLaunchScript(l)
	if err != nil {
		return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
	}
	var envFile []byte
	if len(l.Env) > 0 {
		if envFile, err = RenderEnvFile(l.Env); err != nil {
			return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
		}
	}
	// The host's own unit's state and GPUs are read once, in one round trip (preStart); a slot's
	// unit may be made by prepare, and its first start stops the operator's server: read apart.
	var pre *preStart
	if r.parent == nil {
		pre = &preStart{}
	}
	if err := r.prepareFrom(ctx, pre); err != nil {
		return nil, wrapUnreachable(err)
	}
	prev, err := r.stopRunningFrom(ctx, l, pre)
	if err != nil {
		return nil, wrapUnreachable(err)
	}
	if err := r.gpuFreeFrom(ctx, l, pre); err != nil {
		return nil, wrapUnreachable(err)
	}
	// The launch's files (the server reads them at start); SFTP creates their missing directories.
	for _, f := range l.Files {
		if err := r.conn.WriteFileAtomic(ctx, f.Path, f.Data, 0o644); err != nil {
			return nil, filesFailed(fmt.Errorf("sftp: cannot write %q: %w", f.Path, err))
		}
	}
	r.mu.Lock()
	known := r.onHost
	r.onHost = sweepFiles{} // until the files below are written
	r.mu.Unlock()
	// The environment first (root only: it may hold tokens), then the drop-in that names it; a
	// point without environment leaves no file of an earlier one behind.
	switch {
	case known.envKnown && bytes.Equal(known.env, envFile):
	case envFile != nil:
		if err := r.conn.WriteFileAtomic(ctx, EnvFilePath(r.o.Unit), envFile, 0o600); err != nil {
			return nil, wrapUnreachable(fmt.Errorf("writing the environment file: %w", err))
		}
	default:
		if err := r.conn.Remove(ctx, EnvFilePath(r.o.Unit)); err != nil {
			return nil, wrapUnreachable(fmt.Errorf("removing the environment file: %w", err))
		}
	}
	if err := r.conn.WriteFileAtomic(ctx, LaunchFilePath(r.o.Unit), launch, 0o644); err != nil {
		return nil, wrapUnreachable(fmt.Errorf("writing the launch script: %w", err))
	}
	// With an applied configuration (apply.go) beside it, its environment file would add to the
	// point's: EnvironmentFile= accumulates across drop-ins.
	if dropIn, err = r.sweepDropIn(ctx, l, dropIn); err != nil {
		return nil, wrapUnreachable(err)
	}
	// The points of a sweep share their drop-in (the command line is the launch script's): systemd
	// reloads only when it changed, which takes a daemon-reload (90 ms on an idle test host, 0.5 s
	// loaded, more with a real host's generators) off every other point's start.
	reload := !bytes.Equal(known.dropIn, dropIn)
	if reload {
		if err := r.conn.WriteFileAtomic(ctx, DropInPath(r.o.Unit), dropIn, 0o644); err != nil {
			return nil, wrapUnreachable(fmt.Errorf("writing the drop-in: %w", err))
		}
	}
	// A stop ends in reset-failed (unitControl.stopWait, or unitProc.finish), so a unit found
	// inactive needs none: only a failed one (or one not read) is reset, which also resets systemd's
	// start rate limit.
	resetFailed := pre == nil || !pre.read || pre.st.ActiveState == "failed"
	in, err := r.startUnit(ctx, l, prev.Final.InvocationID, reload, resetFailed)
	var sr *startRefused
	if err == nil || errors.As(err, &sr) {
		// systemd read the drop-in (a refusal is the launch's, with the files in place)
		r.mu.Lock()
		r.onHost = sweepFiles{dropIn: dropIn, env: envFile, envKnown: true}
		r.mu.Unlock()
	}
	return in, err
}

// startUnit starts the unit as its drop-ins now say (daemon-reload with reload, reset-failed with
// resetFailed, start) and follows the new invocation of l; prevID is the invocation stopped before
// (a failed start's evidence is a new invocation's only).
func (r *Remote) startUnit(ctx context.Context, l Launch, prevID string, reload, resetFailed bool) (Instance, error) {
	started, err := r.unit.start(ctx, reload, resetFailed)
	startedAt := r.o.Clock.Now()
	id := started.InvocationID
	if err != nil {
		var sr *startRefused
		if !errors.As(err, &sr) {
			return nil, wrapUnreachable(fmt.Errorf("starting %s: %w", r.o.Unit, err))
		}
		// The start itself failed (no new invocation: InvocationID may be the previous one's):
		// systemd refused the unit as configured.
		ev := strings.Split(strings.TrimSpace(sr.stderr), "\n")
		if id != "" && id != prevID { // a new invocation ran (ExecStartPre=...): its lines
			if jr, jerr := r.run(ctx, refusedStartJournal(r.o.Unit, id), 15*time.Second); jerr == nil {
				ev = append(ev, strings.Split(strings.TrimSpace(string(jr.Stdout)), "\n")...)
			}
		}
		class := ClassCrashDuringStart
		if strings.Contains(sr.stderr, "bad unit file setting") || strings.Contains(sr.stderr, "Invalid argument") {
			class = ClassBadArgs
		}
		return nil, &Failure{Class: class, Detail: fmt.Sprintf("systemctl start %s failed (exit %d)", r.o.Unit, sr.code),
			Evidence: evidence(ev, regexp.MustCompile(`.`), 8), Err: sr.err}
	}
	p := r.unitProc(id, l, false)
	p.mainPID, p.execPID = started.MainPID, started.ExecMainPID
	in := r.instanceOf(p, l, startedAt)
	r.mu.Lock()
	r.current = in
	r.mu.Unlock()
	return in, nil
}

// refusedStartJournal is the script that reads a refused start's journal lines: its control
// processes' output (ExecCondition=, ExecStartPre=, ExecStartPost=) and systemd's lines about the
// invocation id. journald reads a process's output stream apart from PID 1's own messages, so
// systemd's "Control process exited" may be in the journal before the line the process wrote last
// (CI saw it): it waits up to 5 s for one of the process's lines (2 s were not enough on a loaded
// machine). And journald takes a line's invocation id from its writer's cgroup, which it cannot
// read once a short-lived process has exited (it falls back to the unit its stream named:
// client_context_read_cgroup in systemd's src/journal/journald-context.c), so under load an
// ExecStartPre's last words came without one (CI, 2026-12-07): each control process's lines are
// matched by unit and PID too, the PIDs from systemctl show.
func refusedStartJournal(unit, id string) string {
	u, q := ShellQuote(unit), ShellQuote(id)
	return "set -- _SYSTEMD_INVOCATION_ID=" + q + "; " +
		"for p in $(systemctl show -p ExecCondition -p ExecStartPre -p ExecStartPost -- " + u +
		" | grep -o ' ; pid=[1-9][0-9]* ; ' | tr -cd '0-9\\n'); do set -- \"$@\" + _SYSTEMD_UNIT=" + u + " _PID=\"$p\"; done; " +
		"i=0; while [ $i -lt 25 ]; do i=$((i+1)); [ -n \"$(journalctl --no-pager -q -o cat -n 1 \"$@\")\" ] && break; " +
		"journalctl --sync 2>/dev/null; sleep 0.2; done; " +
		"journalctl --no-pager -q -o cat -n 20 \"$@\" + INVOCATION_ID=" + q
}

// prepareFrom readies the unit for a start: a slot's unit made from the operator's (ensureSlot);
// the operator's unit marked for its restore (its state from pre, nil: read it), with the servers
// of an earlier packed sweep's slots stopped (which makes pre's GPUs stale).
func (r *Remote) prepareFrom(ctx context.Context, pre *preStart) error {
	if r.parent != nil {
		return r.ensureSlot(ctx)
	}
	if _, err := r.ensureMarkerFrom(ctx, pre); err != nil {
		return err
	}
	r.prepMu.Lock()
	defer r.prepMu.Unlock()
	stopped, err := r.stopLeftoverSlots(ctx)
	if stopped && pre != nil {
		pre.gpusStale = true
	}
	return err
}

func wrapUnreachable(err error) error {
	if isUnreachable(err) {
		return unreachable(err, State{})
	}
	return err
}

// Restore implements Host. The host's Restore restores its slots first (every slot with a
// marker, this sweep's or one left by a crash), then the operator's unit, whose server may want
// their GPUs.
func (r *Remote) Restore(ctx context.Context) error {
	r.mu.Lock()
	r.onHost = sweepFiles{} // whatever the restore gets to remove, the next start writes again
	r.mu.Unlock()
	if r.parent == nil {
		if err := r.restoreSlots(ctx); err != nil {
			return err
		}
	}
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
			return r.removeFiles(ctx, EnvFilePath(r.o.Unit), LaunchFilePath(r.o.Unit))
		}
		m = Marker{Unit: r.o.Unit}
	default:
		return err
	}
	if !m.UnitCreated {
		// With a stale marker the unit is as the operator has it now: leave it be.
		if st, serr := r.UnitState(ctx); serr == nil {
			if stale, err := r.markerStale(ctx, st); err != nil {
				return err
			} else if stale {
				return r.removeFiles(ctx, EnvFilePath(r.o.Unit), LaunchFilePath(r.o.Unit), MarkerPath(r.o.Unit))
			}
		}
	}
	if _, err := r.stopRunning(ctx, Launch{}.withDefaults()); err != nil {
		return err
	}
	if err := r.removeFiles(ctx, DropInPath(r.o.Unit), EnvFilePath(r.o.Unit), LaunchFilePath(r.o.Unit)); err != nil {
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
	r.current, r.onHost = nil, sweepFiles{}
	r.mu.Unlock()
	return nil
}

// removeFiles removes the files at paths, in order (a missing one is no error).
func (r *Remote) removeFiles(ctx context.Context, paths ...string) error {
	for _, p := range paths {
		if err := r.conn.Remove(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// hostFacts are Provenance's facts of the machine: read once per SSH connection (a host that
// rebooted is reached over a new one), not at every point. They and the unit file's path were two
// thirds of the processes a point's provenance ran on the host (hostname, uname, systemctl
// --version, nvidia-smi, systemctl show, head, cut: 13 a point), and nvidia-smi alone is tens of
// milliseconds on a GPU host.
type hostFacts struct {
	reconnects                int64 // the connection's Reconnects when they were read
	hostname, kernel, systemd string
	gpus                      []GPU
}

// unitFile is the unit's FragmentPath ("" until read) and the connection's Reconnects when it was
// read.
type unitFile struct {
	reconnects int64
	path       string
}

// machineFacts returns the host's facts, reading them if connection generation gen (its
// Reconnects) has not yet.
func (r *Remote) machineFacts(ctx context.Context, gen int64) (hostFacts, error) {
	root := r
	if r.parent != nil {
		root = r.parent
	}
	root.mu.Lock()
	f := root.facts
	root.mu.Unlock()
	if f != nil && f.reconnects == gen {
		return *f, nil
	}
	out, err := r.run(ctx, "hostname; uname -r; systemctl --version | head -n1; "+
		"command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader,nounits; true", 30*time.Second)
	if err != nil {
		return hostFacts{}, err
	}
	lines := strings.Split(string(out.Stdout), "\n")
	nf := &hostFacts{reconnects: gen, hostname: lineOf(lines, 0), kernel: lineOf(lines, 1), systemd: lineOf(lines, 2)}
	for _, l := range lines[min(3, len(lines)):] {
		if g, ok := parseGPU(l); ok {
			nf.gpus = append(nf.gpus, g)
		}
	}
	root.mu.Lock()
	root.facts = nf
	root.mu.Unlock()
	return *nf, nil
}

// Provenance implements Host: the machine's facts (machineFacts), and at every point the hashes
// of the unit's file and of the drop-in with its launch script (what the unit runs under), read on
// the host.
func (r *Remote) Provenance(ctx context.Context) (Provenance, error) {
	p := Provenance{Driver: sweep.DriverSSH, Unit: r.o.Unit}
	gen := r.conn.Reconnects()
	facts, err := r.machineFacts(ctx, gen)
	if err != nil {
		return p, err
	}
	p.Hostname, p.Kernel, p.SystemdVer = facts.hostname, facts.kernel, facts.systemd
	p.GPUs = facts.gpus
	r.mu.Lock()
	cur := r.current
	file := r.file
	r.mu.Unlock()
	u := ShellQuote(r.o.Unit)
	f := "f=$(systemctl show -p FragmentPath --value -- " + u + "); "
	if file.path != "" && file.reconnects == gen {
		f = "f=" + ShellQuote(file.path) + "; "
	}
	script := f + "echo \"$f\"; if [ -n \"$f\" ] && [ -f \"$f\" ]; then sha256sum < \"$f\"; else echo; fi; " +
		// the drop-in and the launch script it runs: what the unit runs under
		"d=/etc/systemd/system/" + ShellQuote(r.o.Unit+".d/"+DropInName) + "; if [ -f \"$d\" ]; then cat \"$d\" /etc/systemd/system/" +
		ShellQuote(r.o.Unit+".d/"+LaunchFileName) + " 2>/dev/null | sha256sum; else echo; fi; "
	if cur == nil {
		script += "systemctl show -p ExecStart --value -- " + u + " | head -c 8192; echo; "
	}
	out, err := r.run(ctx, script+"true", 30*time.Second)
	if err != nil {
		return p, err
	}
	lines := strings.Split(string(out.Stdout), "\n")
	hash := func(i int) string { h, _, _ := strings.Cut(lineOf(lines, i), " "); return h } // sha256sum's "HASH  -"
	if path := lineOf(lines, 0); path != "" {
		r.mu.Lock()
		r.file = unitFile{reconnects: gen, path: path}
		r.mu.Unlock()
	}
	p.UnitHash, p.DropInHash = hash(1), hash(2)
	if cur == nil {
		p.ExecStart = lineOf(lines, 3)
		return p, nil
	}
	p.Argv = cur.launch.Argv
	p.EngineVer = cur.engineVersion(ctx)
	if line, err := ExecStartLine(cur.launch.Argv, cur.launch.Env); err == nil {
		p.ExecStart = line // the command line as an ExecStart= of it would be written
	} else {
		// as systemd has it
		if out, err := r.run(ctx, "systemctl show -p ExecStart --value -- "+u+" | head -c 8192", 30*time.Second); err == nil {
			p.ExecStart = strings.TrimSpace(string(out.Stdout))
		}
	}
	return p, nil
}

// lineOf is line i of a script's output, trimmed ("" past its end).
func lineOf(lines []string, i int) string {
	if i < len(lines) {
		return strings.TrimSpace(lines[i])
	}
	return ""
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

// leftoverPaths are the files specsweep puts on a host for unit during a sweep.
func leftoverPaths(unitName string) []string {
	return []string{DropInPath(unitName), EnvFilePath(unitName), LaunchFilePath(unitName), MarkerPath(unitName)}
}

// Leftovers lists the files of specsweep on the host for the unit (the
// drop-in, the environment file, the launch script, the restore marker, and the slot units of a
// packed sweep with theirs): none outside a sweep.
func (r *Remote) Leftovers(ctx context.Context) ([]string, error) {
	var out []string
	if r.parent == nil {
		var err error
		if out, err = r.slotLeftovers(ctx); err != nil {
			return nil, err
		}
	}
	for _, p := range leftoverPaths(r.o.Unit) {
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
