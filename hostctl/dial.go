// The SSH connection: dial (through ProxyJump hops), keepalive, reconnect with backoff, TCP tunnels.

package hostctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Conn is one SSH connection to a host, shared by every command, SFTP and
// tunnel; it reconnects transparently with a bounded backoff.
type Conn struct {
	o   SSHOptions
	t   target
	cfg *ssh.ClientConfig

	mu         sync.Mutex
	client     *ssh.Client
	jumps      []*ssh.Client
	gen        int // bumped by every successful dial
	sftp       *sftp.Client
	sftpGen    int
	closed     bool
	lostGen    int    // the connection lostWhy is of
	lostWhy    string // why this side closed connection lostGen (setLost)
	reconnects atomic.Int64
	sessions   atomic.Int64 // sessions opened (each costs the host a process and PAM's session)
	shellCmds  atomic.Int64 // commands sent to the persistent shell (round trips)
	shMu       sync.Mutex
	sh         *shell // root's: `sudo -n sh` for a non-root login
	ush        *shell // the login user's, for a non-root login (Slurm's commands); root's serves root
	dialMu     sync.Mutex
	closeAgent func()
}

// DialSSH connects (handshake bounded by ctx and HandshakeTimeout).
func DialSSH(ctx context.Context, o SSHOptions) (*Conn, error) {
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.KeepaliveInterval == 0 {
		o.KeepaliveInterval = time.Second
	}
	if o.KeepaliveTimeout == 0 {
		o.KeepaliveTimeout = 3 * time.Second
	}
	if o.ReconnectFor == 0 {
		o.ReconnectFor = 15 * time.Second
	}
	o.Clock = orRealClock(o.Clock)
	t, err := o.resolve()
	if err != nil {
		return nil, err
	}
	signers, closeAgent, err := o.signers(t)
	if err != nil {
		closeAgent()
		return nil, err
	}
	// ProxyJump hops may name their own IdentityFile in ~/.ssh/config.
	for _, hop := range t.jump {
		ho := o
		ho.Address, ho.IdentityFile, ho.noAgent = hop, "", true
		if u, h, ok := strings.Cut(hop, "@"); ok {
			ho.User, ho.Address = u, h
		}
		if ht, herr := ho.resolve(); herr == nil {
			if hs, hclose, herr := ho.signers(ht); herr == nil {
				signers = append(signers, hs...)
				hclose()
			}
		}
	}
	// The host key callback is made at every dial (dial), from known_hosts as it is then.
	c := &Conn{o: o, t: t, closeAgent: closeAgent, cfg: &ssh.ClientConfig{
		User:    t.user,
		Auth:    []ssh.AuthMethod{ssh.PublicKeys(signers...)},
		Timeout: o.HandshakeTimeout,
	}}
	if err := c.dial(ctx); err != nil {
		closeAgent()
		return nil, err
	}
	return c, nil
}

// User is the login user.
func (c *Conn) User() string { return c.t.user }

// Addr is the dialled host:port.
func (c *Conn) Addr() string { return c.t.addr }

// Reconnects counts reconnections since DialSSH.
func (c *Conn) Reconnects() int64 { return c.reconnects.Load() }

func (c *Conn) handshake(ctx context.Context, nc net.Conn, addr string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	dl := ioDeadline(c.o.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = nc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	stop()
	if err != nil {
		nc.Close()
		var hke *HostKeyError
		if errors.As(err, &hke) {
			return nil, hke
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, &AuthError{Msg: fmt.Sprintf("login to %s as %s failed: %v (is the key in %s's authorized_keys?)", addr, cfg.User, err, cfg.User)}
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &UnreachableError{Addr: addr, Err: fmt.Errorf("ssh handshake: %w", err)}
	}
	_ = nc.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

func (c *Conn) dial(ctx context.Context) error {
	var jumps []*ssh.Client
	var via *ssh.Client
	for _, hop := range c.t.jump {
		o := c.o
		o.Address = hop
		if u, h, ok := strings.Cut(hop, "@"); ok {
			o.User, o.Address = u, h
		}
		jt, err := o.resolve()
		if err != nil {
			return err
		}
		hk, algos, err := o.hostKeyCallback(jt.alias)
		if err != nil {
			closeAll(jumps)
			return err
		}
		cfg := *c.cfg
		cfg.User, cfg.HostKeyCallback, cfg.HostKeyAlgorithms = jt.user, hk, algos
		nc, err := c.dialTCP(ctx, via, jt.addr)
		if err != nil {
			closeAll(jumps)
			return err
		}
		cl, err := c.handshake(ctx, nc, jt.addr, &cfg)
		if err != nil {
			closeAll(jumps)
			return err
		}
		jumps = append(jumps, cl)
		via = cl
	}
	nc, err := c.dialTCP(ctx, via, c.t.addr)
	if err != nil {
		closeAll(jumps)
		return err
	}
	hk, algos, err := c.o.hostKeyCallback(c.t.alias)
	if err != nil {
		nc.Close()
		closeAll(jumps)
		return err
	}
	cfg := *c.cfg
	cfg.HostKeyCallback, cfg.HostKeyAlgorithms = hk, algos
	cl, err := c.handshake(ctx, nc, c.t.alias, &cfg)
	if err != nil {
		closeAll(jumps)
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cl.Close()
		closeAll(jumps)
		return errors.New("connection closed")
	}
	c.client, c.jumps = cl, jumps
	c.gen++
	gen := c.gen
	c.mu.Unlock()
	go c.keepalive(cl, gen)
	return nil
}

func closeAll(cs []*ssh.Client) {
	for _, c := range cs {
		c.Close()
	}
}

func (c *Conn) dialTCP(ctx context.Context, via *ssh.Client, addr string) (net.Conn, error) {
	var nc net.Conn
	var err error
	if via != nil {
		nc, err = via.DialContext(ctx, "tcp", addr)
	} else {
		d := net.Dialer{Timeout: c.o.HandshakeTimeout, KeepAlive: 5 * time.Second}
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, &UnreachableError{Addr: addr, Err: err}
	}
	return nc, nil
}

// keepalive pings the server; an unanswered ping closes the connection, so
// blocked commands fail fast and the next command reconnects.
func (c *Conn) keepalive(cl *ssh.Client, gen int) {
	tick, stopTick := c.o.Clock.NewTicker(c.o.KeepaliveInterval)
	defer stopTick()
	done := make(chan struct{})
	go func() { _ = cl.Wait(); close(done) }()
	for {
		select {
		case <-done:
			c.markDead(gen)
			return
		case <-tick:
		}
		res := make(chan error, 1)
		go func() {
			_, _, err := cl.SendRequest("keepalive@openssh.com", true, nil)
			res <- err
		}()
		select {
		case err := <-res:
			if err != nil {
				cl.Close()
			}
		case <-c.o.Clock.After(c.o.KeepaliveTimeout):
			c.setLost(gen, fmt.Sprintf("closed after no answer to a keepalive within %v", c.o.KeepaliveTimeout))
			cl.Close()
		case <-done:
		}
	}
}

// setLost records why connection gen was closed, for the errors of what then fails on it.
func (c *Conn) setLost(gen int, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lostGen, c.lostWhy = gen, why
}

// unreachable is the error of an operation that failed on connection gen because it broke, with why
// this side closed it when it did (a keepalive unanswered: an operation's own error is a bare EOF).
// Every error of a broken connection is made here: a command, the persistent shell, SFTP, a tunnel.
func (c *Conn) unreachable(gen int, err error) *UnreachableError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lostGen == gen && c.lostWhy != "" {
		err = fmt.Errorf("%s: %w", c.lostWhy, err)
	}
	return &UnreachableError{Addr: c.t.addr, Err: err}
}

// broken says whether cl's transport is gone: a request on a closed connection fails at once.
func broken(cl *ssh.Client) bool {
	_, _, err := cl.SendRequest("keepalive@openssh.com", true, nil)
	return err != nil
}

func (c *Conn) markDead(gen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen && c.client != nil {
		c.client.Close()
		closeAll(c.jumps)
		c.client, c.jumps = nil, nil
		if c.sftp != nil {
			c.sftp.Close()
			c.sftp = nil
		}
	}
}

// Client returns the live connection, reconnecting with a bounded backoff
// (100 ms doubling to 2 s, for at most ReconnectFor) when it broke.
func (c *Conn) Client(ctx context.Context) (*ssh.Client, int, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, 0, errors.New("connection closed")
	}
	if c.client != nil {
		cl, gen := c.client, c.gen
		c.mu.Unlock()
		return cl, gen, nil
	}
	c.mu.Unlock()
	// One reconnect at a time: callers that find the connection down wait
	// for the same dial instead of racing (and leaking) their own.
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	c.mu.Lock()
	if c.client != nil || c.closed {
		cl, gen, closed := c.client, c.gen, c.closed
		c.mu.Unlock()
		if closed {
			return nil, 0, errors.New("connection closed")
		}
		return cl, gen, nil
	}
	c.mu.Unlock()
	clock := c.o.Clock
	t0 := clock.Now()
	deadline := t0.Add(c.o.ReconnectFor)
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		// The dial is network I/O: bounded on the real clock by what the clock leaves of ReconnectFor.
		actx, cancel := context.WithTimeout(ctx, deadline.Sub(clock.Now()))
		err := c.dial(actx)
		cancel()
		if err == nil {
			c.reconnects.Add(1)
			if c.o.OnReconnect != nil {
				c.o.OnReconnect(attempt, clock.Now().Sub(t0))
			}
			c.mu.Lock()
			cl, gen := c.client, c.gen
			c.mu.Unlock()
			return cl, gen, nil
		}
		var hke *HostKeyError
		var ae *AuthError
		if errors.As(err, &hke) || errors.As(err, &ae) || ctx.Err() != nil || clock.Now().Add(wait).After(deadline) {
			return nil, 0, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, err
		case <-clock.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.sftp != nil {
		c.sftp.Close()
	}
	if c.client != nil {
		c.client.Close()
	}
	closeAll(c.jumps)
	c.client, c.jumps, c.sftp = nil, nil, nil
	if c.closeAgent != nil {
		c.closeAgent()
	}
	return nil
}

// UnreachableError means the host could not be reached or the connection
// broke (host_unreachable).
type UnreachableError struct {
	Addr string
	Err  error
}

func (e *UnreachableError) Error() string { return "host " + e.Addr + " unreachable: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// DialTCP opens a TCP connection from the host (through the SSH
// connection), e.g. to a server bound to 127.0.0.1 there.
func (c *Conn) DialTCP(ctx context.Context, addr string) (net.Conn, error) {
	cl, gen, err := c.Client(ctx)
	if err != nil {
		return nil, err
	}
	nc, err := cl.DialContext(ctx, "tcp", addr)
	if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "connect failed") {
		c.markDead(gen)
		return nil, c.unreachable(gen, err)
	}
	return nc, err
}

// newSession opens a session on cl, counted: the persistent shell exists so that a point's commands
// open none (a test counts them).
func (c *Conn) newSession(cl *ssh.Client) (*ssh.Session, error) {
	c.sessions.Add(1)
	return cl.NewSession()
}
