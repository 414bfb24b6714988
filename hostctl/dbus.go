package hostctl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"golang.org/x/crypto/ssh"
)

// SystemBusSocket is the system bus socket forwarded over SSH.
const SystemBusSocket = "/run/dbus/system_bus_socket"

// dbusUnit drives the unit through systemd's D-Bus API on the system bus,
// reached through the SSH connection (direct-streamlocal to the bus socket,
// EXTERNAL auth as the remote uid: root logins only, a non-root caller would
// need polkit). It replaces systemctl for reload, start, stop, reset-failed
// and the unit state; the journal is still read with journalctl (in the
// persistent shell, beside a state read on the bus).
type dbusUnit struct {
	conn *Conn
	unit string

	mu sync.Mutex // the bus, re-dialled when the SSH connection under it was
	c  *sdbus.Conn
}

func dialDBus(ctx context.Context, conn *Conn, unit string) (*dbusUnit, error) {
	if conn.User() != "root" {
		return nil, errors.New("the D-Bus transport needs a root login (systemd would ask polkit for a non-root caller)")
	}
	c, err := dialBus(ctx, conn)
	if err != nil {
		return nil, err
	}
	return &dbusUnit{conn: conn, unit: unit, c: c}, nil
}

// dialBus connects to the system bus through the SSH connection.
func dialBus(ctx context.Context, conn *Conn) (*sdbus.Conn, error) {
	dial := func() (*godbus.Conn, error) {
		cl, _, err := conn.Client(ctx)
		if err != nil {
			return nil, err
		}
		nc, err := cl.Dial("unix", SystemBusSocket)
		var refused *ssh.OpenChannelError
		if errors.As(err, &refused) {
			// sshd said no (AllowStreamLocalForwarding, a missing socket): no retry changes that.
			return nil, fmt.Errorf("system bus: sshd refused to forward %s: %w", SystemBusSocket, err)
		}
		if err != nil {
			return nil, &UnreachableError{Addr: conn.Addr(), Err: fmt.Errorf("system bus: %w", err)}
		}
		dc, err := godbus.NewConn(nc)
		if err != nil {
			nc.Close()
			return nil, err
		}
		if err := dc.Auth([]godbus.Auth{godbus.AuthExternal("0")}); err != nil {
			dc.Close()
			return nil, fmt.Errorf("system bus auth: %w", err)
		}
		if err := dc.Hello(); err != nil {
			dc.Close()
			return nil, fmt.Errorf("system bus hello: %w", err)
		}
		return dc, nil
	}
	return sdbus.NewConnection(dial)
}

// with runs fn on the bus, re-dialling it once when a call fails and the
// bus is gone (the SSH connection under it may have been re-established).
// A unit made without a bus (a slot's, slotDBusUnit) dials it at its first call.
func (d *dbusUnit) with(ctx context.Context, fn func(*sdbus.Conn) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		c, err := dialBus(ctx, d.conn)
		if err != nil {
			return err
		}
		d.c = c
	}
	err := fn(d.c)
	if err == nil || ctx.Err() != nil {
		return err
	}
	if d.c.Connected() {
		return err
	}
	d.c.Close()
	nc, derr := dialBus(ctx, d.conn)
	if derr != nil {
		return derr
	}
	d.c = nc
	return fn(d.c)
}

func (d *dbusUnit) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil {
		d.c.Close()
	}
}

// slotDBusUnit is a packed slot's unit on the bus of a host driven over D-Bus: its own bus
// connection (another channel of the host's SSH connection), dialled at its first call.
func slotDBusUnit(conn *Conn, unit string) *dbusUnit {
	return &dbusUnit{conn: conn, unit: unit}
}

func (d *dbusUnit) state(ctx context.Context) (State, error) {
	var st State
	err := d.with(ctx, func(c *sdbus.Conn) (err error) { st, err = busState(ctx, c, d.unit, d.conn.o.Clock.Now()); return err })
	return st, err
}

// stateAnd reads the state on the bus while script runs in the shell.
func (d *dbusUnit) stateAnd(ctx context.Context, script string) (State, Output, error) {
	var st State
	var serr error
	done := make(chan struct{})
	go func() { st, serr = d.state(ctx); close(done) }()
	_, out, err := readAlongside(ctx, d.conn, "", script)
	<-done
	if err != nil {
		return State{}, Output{}, err
	}
	if serr != nil {
		return State{}, Output{}, serr
	}
	return st, out, nil
}

// stopWait reads the state over the bus and, with send and a running process, queues the stop; it
// runs the wait in the shell (for the main process: a stop job's end would take a job watcher),
// reads the state, resets a stopped unit and reads the script.
func (d *dbusUnit) stopWait(ctx context.Context, send bool, upTo time.Duration, wait, script string) (State, State, bool, Output, error) {
	var pre State
	if send {
		var err error
		if pre, err = d.state(ctx); err != nil {
			return State{}, State{}, false, Output{}, err
		}
		wait = ""
		if pre.Running() {
			if err := d.stop(ctx); err != nil {
				return pre, State{}, false, Output{}, err
			}
			wait = waitScript(pre.MainPID, upTo)
		}
	}
	if wait != "" {
		if _, err := d.conn.RunShell(ctx, wait+"true", 15*time.Second, 1<<10); err != nil {
			return pre, State{}, false, Output{}, err
		}
	}
	st, err := d.state(ctx)
	if err != nil {
		return pre, State{}, false, Output{}, err
	}
	tidied := st.ActiveState == "inactive" || st.ActiveState == "failed"
	if tidied {
		d.resetFailed(ctx)
	}
	_, out, err := readAlongside(ctx, d.conn, "", script)
	if err != nil {
		return pre, State{}, false, Output{}, err
	}
	return pre, st, tidied, out, nil
}

func (d *dbusUnit) resetFailedAnd(ctx context.Context, script string) (Output, error) {
	d.resetFailed(ctx)
	_, out, err := readAlongside(ctx, d.conn, "", script)
	return out, err
}

// start is daemon-reload and reset-failed (as asked), start (waiting for the job: for
// Type=simple, "done" only means the process was started), then the state.
// Any failure of the start is systemd's refusal (a *startRefused).
func (d *dbusUnit) start(ctx context.Context, reload, resetFailed bool) (State, error) {
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err := d.with(sctx, func(c *sdbus.Conn) error { return reloadStart(sctx, c, d.unit, reload, resetFailed) })
	cancel()
	st, serr := d.state(ctx)
	if err != nil {
		if serr != nil {
			st = State{}
		}
		return st, &startRefused{stderr: err.Error(), code: 1, err: err}
	}
	if serr != nil {
		return State{}, serr
	}
	return st, nil
}

func reloadStart(ctx context.Context, c *sdbus.Conn, unit string, reload, resetFailed bool) error {
	if reload {
		if err := c.ReloadContext(ctx); err != nil {
			return fmt.Errorf("daemon-reload: %w", err)
		}
	}
	if resetFailed {
		_ = c.ResetFailedUnitContext(ctx, unit)
	}
	done := make(chan string, 1) // buffered: go-systemd's dispatcher must never block on it
	if _, err := c.StartUnitContext(ctx, unit, "replace", done); err != nil {
		return fmt.Errorf("start %s: %w", unit, err)
	}
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("start %s: job %s", unit, r)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop queues a stop job and returns (the caller follows the state).
func (d *dbusUnit) stop(ctx context.Context) error {
	return d.with(ctx, func(c *sdbus.Conn) error {
		_, err := c.StopUnitContext(ctx, d.unit, "replace", make(chan string, 1))
		return err
	})
}

func (d *dbusUnit) resetFailed(ctx context.Context) {
	_ = d.with(ctx, func(c *sdbus.Conn) error { _ = c.ResetFailedUnitContext(ctx, d.unit); return nil })
}

func (d *dbusUnit) reload(ctx context.Context) error {
	return d.with(ctx, func(c *sdbus.Conn) error { return c.ReloadContext(ctx) })
}

// busState reads the same properties as `systemctl show`, at at.
func busState(ctx context.Context, c *sdbus.Conn, unit string, at time.Time) (State, error) {
	u, err := c.GetUnitPropertiesContext(ctx, unit)
	if err != nil {
		return State{}, err
	}
	st := State{At: at}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	st.ActiveState, st.SubState = str(u, "ActiveState"), str(u, "SubState")
	st.LoadState, st.UnitFileState = str(u, "LoadState"), str(u, "UnitFileState")
	if b, ok := u["InvocationID"].([]byte); ok && len(b) > 0 {
		st.InvocationID = fmt.Sprintf("%x", b)
	}
	usec := func(m map[string]any, k string) time.Time {
		if v, ok := m[k].(uint64); ok && v > 0 {
			return time.UnixMicro(int64(v))
		}
		return time.Time{}
	}
	st.ActiveEnter, st.InactiveEnter = usec(u, "ActiveEnterTimestamp"), usec(u, "InactiveEnterTimestamp")
	if st.LoadState != "loaded" {
		return st, nil
	}
	s, err := c.GetUnitTypePropertiesContext(ctx, unit, "Service")
	if err != nil {
		return st, err
	}
	st.Result = str(s, "Result")
	if v, ok := s["ExecMainCode"].(int32); ok {
		st.ExecMainCode = int(v)
	}
	if v, ok := s["ExecMainStatus"].(int32); ok {
		st.ExecMainStatus = int(v)
	}
	if v, ok := s["MainPID"].(uint32); ok {
		st.MainPID = int(v)
	}
	if v, ok := s["ExecMainPID"].(uint32); ok {
		st.ExecMainPID = int(v)
	}
	if v, ok := s["NRestarts"].(uint32); ok {
		st.NRestarts = int(v)
	}
	st.ExecMainStart, st.ExecMainExit = usec(s, "ExecMainStartTimestamp"), usec(s, "ExecMainExitTimestamp")
	return st, nil
}
