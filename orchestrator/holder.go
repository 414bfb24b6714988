package orchestrator

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/specsweep/specsweep/store"
)

// HolderTimeout is how long a running sweep's heartbeat may be silent before the sweep is taken as
// having lost the process that held it (six missed heartbeats of DefaultHeartbeat).
const HolderTimeout = 30 * time.Second

// Liveness is what Orphaned compares a sweep's holder against: the time now, this host's name, and
// whether a pid is a live process here.
type Liveness struct {
	Now   time.Time
	Host  string
	Alive func(pid int) bool
}

// LocalLiveness is the liveness seen from this process at now.
func LocalLiveness(now time.Time) Liveness {
	host, _ := os.Hostname()
	return Liveness{Now: now, Host: host, Alive: ProcessAlive}
}

// ProcessAlive reports whether pid is a process on this machine (0 or less: false). Signal 0
// checks that it exists without touching it; EPERM means it exists under another user.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Orphaned reports whether sweep sw is stored as running while no process runs it any more: its
// holder ran on this host and its pid is gone, or its heartbeat is older than HolderTimeout. since
// is the holder's last heartbeat. A sweep that never had a holder (recorded by a version before
// holders) is never called orphaned: nothing tells.
func (l Liveness) Orphaned(sw store.Sweep) (orphan bool, since time.Time) {
	h := sw.Holder
	if sw.State != store.SweepRunning || h.Kind == "" || h.Heartbeat.IsZero() {
		return false, time.Time{}
	}
	if h.Host != "" && h.Host == l.Host && l.Alive != nil && !l.Alive(h.PID) {
		return true, h.Heartbeat
	}
	return l.Now.Sub(h.Heartbeat) > HolderTimeout, h.Heartbeat
}
