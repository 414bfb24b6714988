// Unit control: the small interface a remote host drives its systemd unit through, and its systemctl
// implementation (the persistent shell); the D-Bus one is in dbus.go.

package hostctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// unitControl drives one systemd unit of a host. DialRemote chooses the
// implementation once: systemctlUnit (systemctl in the persistent remote
// shell) or dbusUnit (systemd's D-Bus API over the SSH connection). The
// journal is read with journalctl either way.
type unitControl interface {
	// state reads the unit's state (the properties of systemctl show).
	state(ctx context.Context) (State, error)
	// stateAnd reads the state and runs script (a read: the journal) in the
	// persistent shell, in one round trip where the transport allows; out is
	// the script's output.
	stateAnd(ctx context.Context, script string) (st State, out Output, err error)
	// start is daemon-reload (with reload), reset-failed (with resetFailed)
	// and start, returning once the process was started, with the state then
	// (InvocationID, MainPID, ExecMainPID; possibly partial when the start
	// failed). Systemd refusing the start is a *startRefused.
	start(ctx context.Context, reload, resetFailed bool) (State, error)
	// stop queues a stop of the unit and returns (the caller follows it).
	stop(ctx context.Context) error
	// stopWait, with send, reads the state (pre) and, when it says the
	// process runs (State.Running), queues the unit's stop and waits up to
	// upTo for its end (the stop job's: every process of the unit gone);
	// without send, it runs wait (a bounded wait on the host: a script, or
	// "": waitScript).
	// Then it reads the state, forgets a failed state once the unit is stopped
	// (reset-failed, after the state was read: tidied) and runs script as
	// stateAnd does. One round trip with systemctl: the look before, the stop,
	// its end and the tidying cost no separate command, and the state is read
	// the moment the wait ends.
	stopWait(ctx context.Context, send bool, upTo time.Duration, wait, script string) (pre, st State, tidied bool, out Output, err error)
	// resetFailedAnd is resetFailed, then script (a read: the journal) in the
	// persistent shell, in one round trip where the transport allows.
	resetFailedAnd(ctx context.Context, script string) (Output, error)
	// resetFailed forgets a failed state (errors ignored: the unit may not be failed).
	resetFailed(ctx context.Context)
	// reload is daemon-reload.
	reload(ctx context.Context) error
	close()
}

// startRefused is systemd refusing to start the unit as configured
// (systemctl start exited non-zero, or the D-Bus start job failed).
type startRefused struct {
	stderr string // what systemd said
	code   int    // systemctl's exit status (1 over D-Bus)
	err    error
}

func (e *startRefused) Error() string { return e.err.Error() }
func (e *startRefused) Unwrap() error { return e.err }

// systemctlUnit drives the unit with systemctl in the persistent remote shell.
type systemctlUnit struct {
	conn *Conn
	unit string
}

var (
	_ unitControl = (*systemctlUnit)(nil)
	_ unitControl = (*dbusUnit)(nil)
)

func (u *systemctlUnit) run(ctx context.Context, script string, timeout time.Duration) (Output, error) {
	return u.conn.RunShell(ctx, script, timeout, 1<<20)
}

func (u *systemctlUnit) state(ctx context.Context) (State, error) {
	out, err := u.run(ctx, showCmd(u.unit), 15*time.Second)
	if err != nil {
		return State{}, err
	}
	return parseShow(out.Stdout, u.conn.o.Clock.Now()), nil
}

func (u *systemctlUnit) stateAnd(ctx context.Context, script string) (State, Output, error) {
	show, out, err := readAlongside(ctx, u.conn, showCmd(u.unit)+"; ", script)
	if err != nil {
		return State{}, Output{}, err
	}
	return parseShow(show, u.conn.o.Clock.Now()), out, nil
}

func (u *systemctlUnit) start(ctx context.Context, reload, resetFailed bool) (State, error) {
	q := ShellQuote(u.unit)
	// Each systemctl is a process of its own on the host (15-20 ms on an idle test host, a
	// daemon-reload 90 ms): only what the start needs runs.
	script := "{ "
	if reload {
		script = "systemctl daemon-reload && { "
	}
	if resetFailed {
		script += "systemctl reset-failed -- " + q + " 2>/dev/null; "
	}
	out, err := u.run(ctx, script+"systemctl start -- "+q+"; rc=$?; systemctl show -p InvocationID,MainPID,ExecMainPID -- "+q+"; exit $rc; }", 60*time.Second)
	st := parseShow(out.Stdout, u.conn.o.Clock.Now())
	var ee *ExitError
	if errors.As(err, &ee) {
		return st, &startRefused{stderr: string(out.Stderr), code: ee.Out.Code, err: err}
	}
	return st, err
}

func (u *systemctlUnit) stop(ctx context.Context) error {
	_, err := u.run(ctx, "systemctl stop --no-block -- "+ShellQuote(u.unit), 15*time.Second)
	return err
}

// tidiedLine is what stopWait's script prints after its reset-failed (a line systemctl show never
// prints).
const tidiedLine = "@@specsweep-reset-failed@@"

// stopWait: the stop is `systemctl stop` itself, sent only when the state read just before says the
// process runs, bounded by timeout(1) (a stop job goes on when the
// client waiting for it ends): it returns the moment systemd has seen every process of the unit gone,
// where a wait for the main process saw the unit still deactivating until systemd caught up. When
// the bound cut it off, `systemctl --no-block stop` queues the stop: on a loaded host systemctl may
// not yet have asked systemd (TestStopWhenSystemctlStartsSlowly), and a stop already queued is the
// same job. A failed systemctl stop ends the script before the separator, an error as stop's. Sent
// again on a fresh connection by readAlongside when the first broke: queuing a stop twice is harmless.
func (u *systemctlUnit) stopWait(ctx context.Context, send bool, upTo time.Duration, wait, script string) (State, State, bool, Output, error) {
	q := ShellQuote(u.unit)
	if send {
		// State.Running, on the host: active, activating, deactivating or reloading, but not
		// waiting to restart (auto-restart).
		wait = "s=$(" + showCmd(u.unit) + "); printf '%s\\n' \"$s\"; echo " + preSep + "; case \"$s\" in *SubState=auto-restart*) ;; " +
			"*ActiveState=active*|*ActiveState=deactivating*|*ActiveState=reloading*) timeout " + strconv.FormatFloat(upTo.Seconds(), 'f', 3, 64) +
			" systemctl stop -- " + q + "; rc=$?; [ $rc -eq 124 ] && { systemctl --no-block stop -- " + q + " || exit $?; }; " +
			"[ $rc -eq 0 ] || [ $rc -eq 124 ] || exit $rc;; esac; "
	}
	pre := wait + "s=$(" + showCmd(u.unit) + "); printf '%s\\n' \"$s\"; " +
		"case \"$s\" in *ActiveState=inactive*|*ActiveState=failed*) systemctl reset-failed -- " + q + " 2>/dev/null; echo " + tidiedLine + ";; esac; "
	show, out, err := readAlongside(ctx, u.conn, pre, script)
	if err != nil {
		return State{}, State{}, false, Output{}, err
	}
	now := u.conn.o.Clock.Now()
	var before State
	if send {
		b, rest, ok := bytes.Cut(show, []byte(preSep+"\n"))
		if !ok {
			return State{}, State{}, false, Output{}, fmt.Errorf("stopping %s: no state read before the stop in %q", u.unit, show)
		}
		before, show = parseShow(b, now), rest
	}
	return before, parseShow(show, now), bytes.Contains(show, []byte(tidiedLine)), out, nil
}

// preSep ends the state stopWait reads before a stop.
const preSep = "@@specsweep-before-stop@@"

func (u *systemctlUnit) resetFailedAnd(ctx context.Context, script string) (Output, error) {
	_, out, err := readAlongside(ctx, u.conn, "systemctl reset-failed -- "+ShellQuote(u.unit)+" 2>/dev/null; ", script)
	return out, err
}

func (u *systemctlUnit) resetFailed(ctx context.Context) {
	_, _ = u.run(ctx, "systemctl reset-failed -- "+ShellQuote(u.unit)+" 2>/dev/null; true", 15*time.Second)
}

func (u *systemctlUnit) reload(ctx context.Context) error {
	_, err := u.run(ctx, "systemctl daemon-reload", 30*time.Second)
	return err
}

func (u *systemctlUnit) close() {}

// readSep separates what readAlongside runs before script from script's output.
const readSep = "@@specsweep-journal@@"

// readAlongside runs pre (a command, "" or ending in "; ") and then script in
// the persistent shell, as one read: repeated once on a fresh connection when
// the connection broke, and a non-zero exit tolerated once the separator was
// printed. It returns pre's output and script's.
func readAlongside(ctx context.Context, c *Conn, pre, script string) ([]byte, Output, error) {
	full := pre + "echo " + readSep + "; " + script
	out, err := c.RunShell(ctx, full, 15*time.Second, 1<<20)
	if isUnreachable(err) && ctx.Err() == nil {
		// A read: safe to repeat once on a fresh connection (sshd restarted, a blip).
		out, err = c.RunShell(ctx, full, 15*time.Second, 1<<20)
	}
	if err != nil {
		var ee *ExitError
		if !errors.As(err, &ee) || !bytes.Contains(out.Stdout, []byte(readSep)) {
			return nil, Output{}, err
		}
	}
	head, rest, _ := bytes.Cut(out.Stdout, []byte(readSep+"\n"))
	return head, Output{Stdout: rest, Stderr: out.Stderr, Code: out.Code, Truncated: out.Truncated}, nil
}

var showProps = []string{"ActiveState", "SubState", "Result", "ExecMainCode", "ExecMainStatus", "MainPID", "ExecMainPID",
	"NRestarts", "InvocationID", "LoadState", "UnitFileState", "ActiveEnterTimestamp", "InactiveEnterTimestamp",
	"ExecMainStartTimestamp", "ExecMainExitTimestamp"}

func showCmd(unit string) string {
	return "systemctl show --timestamp=unix -p " + strings.Join(showProps, ",") + " -- " + ShellQuote(unit)
}

// parseShow parses systemctl show's KEY=VALUE lines, read at at.
func parseShow(out []byte, at time.Time) State {
	st := State{At: at}
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
