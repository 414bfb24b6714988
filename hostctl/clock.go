// The clock: hostctl's time source, injected (Options.Clock and each driver's options) so tests
// can move time themselves instead of waiting out stop timeouts, ready timeouts and polls.

package hostctl

import "time"

// Clock is the time source of hostctl's waits and timestamps: readiness and stop loops, the
// GPU wait, a Slurm job's polls, the SSH keepalive and reconnect. nil, wherever a Clock is
// taken, means the real clock. The orchestrator's Clock is a subset of it.
type Clock interface {
	Now() time.Time
	// After is time.After on this clock.
	After(d time.Duration) <-chan time.Time
	// NewTicker is time.NewTicker on this clock: ticks on c until stop is called.
	NewTicker(d time.Duration) (c <-chan time.Time, stop func())
}

// realClock is the wall clock; this file is the only one of hostctl that reads the time package's
// clock (TestClockIsInjected holds the rest to the Clock).
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (realClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// orRealClock is the one place a nil Clock becomes the real clock; every constructor of a driver
// or connection (NewLocal, DialRemote, DialSlurm, DialSSH) passes its options' Clock through it.
func orRealClock(c Clock) Clock {
	if c == nil {
		return realClock{}
	}
	return c
}

// ioDeadline is d from now on the real clock, for a socket's SetDeadline. Bounds of network I/O
// (socket deadlines, net.Dialer, http.Client and SSH handshake timeouts, the context timeouts of
// commands run over SSH) stay on the real clock whatever Clock is injected: the kernel and the
// runtime measure them, and a remote command's own timeout runs on the remote host's clock.
func ioDeadline(d time.Duration) time.Time { return time.Now().Add(d) }
