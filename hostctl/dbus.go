package hostctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// SystemBusSocket is the system bus socket forwarded over SSH.
const SystemBusSocket = "/run/dbus/system_bus_socket"

// dbusUnit drives the unit through systemd's D-Bus API on the system bus,
// reached through the SSH connection (direct-streamlocal to the bus socket,
// EXTERNAL auth as the remote uid: root logins only, a non-root caller would
// need polkit). It replaces systemctl for reload, start, stop, reset-failed
// and the unit state; the journal is still read with journalctl.
type dbusUnit struct {
	c    *sdbus.Conn
	unit string
}

func dialDBus(ctx context.Context, conn *Conn, unit string) (*dbusUnit, error) {
	if conn.User() != "root" {
		return nil, errors.New("the D-Bus transport needs a root login (systemd would ask polkit for a non-root caller)")
	}
	dial := func() (*godbus.Conn, error) {
		cl, _, err := conn.Client(ctx)
		if err != nil {
			return nil, err
		}
		nc, err := cl.Dial("unix", SystemBusSocket)
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
	c, err := sdbus.NewConnection(dial)
	if err != nil {
		return nil, err
	}
	return &dbusUnit{c: c, unit: unit}, nil
}

func (d *dbusUnit) close() { d.c.Close() }

// state reads the same properties as `systemctl show`.
func (d *dbusUnit) state(ctx context.Context) (State, error) {
	u, err := d.c.GetUnitPropertiesContext(ctx, d.unit)
	if err != nil {
		return State{}, err
	}
	st := State{At: time.Now()}
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
	s, err := d.c.GetUnitTypePropertiesContext(ctx, d.unit, "Service")
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

// reloadStart is daemon-reload, reset-failed, start (waiting for the job:
// for Type=simple, "done" only means the process was started).
func (d *dbusUnit) reloadStart(ctx context.Context) error {
	if err := d.c.ReloadContext(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	_ = d.c.ResetFailedUnitContext(ctx, d.unit)
	done := make(chan string, 1) // buffered: go-systemd's dispatcher must never block on it
	if _, err := d.c.StartUnitContext(ctx, d.unit, "replace", done); err != nil {
		return fmt.Errorf("start %s: %w", d.unit, err)
	}
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("start %s: job %s", d.unit, r)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop queues a stop job and returns (the caller follows the state).
func (d *dbusUnit) stop(ctx context.Context) error {
	_, err := d.c.StopUnitContext(ctx, d.unit, "replace", make(chan string, 1))
	return err
}

func (d *dbusUnit) resetFailed(ctx context.Context) {
	_ = d.c.ResetFailedUnitContext(ctx, d.unit)
}
