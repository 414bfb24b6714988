package hostctl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kevinburke/ssh_config"
	"github.com/pkg/sftp"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// SSHOptions say how to reach and log in to a host.
type SSHOptions struct {
	Address           string // host[:port] or a ~/.ssh/config Host alias
	User              string // default: ~/.ssh/config, then $USER
	IdentityFile      string // default: ssh-agent, then ~/.ssh/config IdentityFile, then ~/.ssh/id_*
	KnownHosts        string // default ~/.ssh/known_hosts
	AcceptNewHostKeys bool   // add unknown host keys to KnownHosts (never changed ones)
	ConfigFile        string // default ~/.ssh/config; "none" ignores it
	HandshakeTimeout  time.Duration
	KeepaliveInterval time.Duration // default 1 s
	KeepaliveTimeout  time.Duration // default 3 s: no answer closes the connection
	ReconnectFor      time.Duration // how long a reconnect is retried (default 15 s)
	// OnReconnect, if set, is called after the connection was re-established
	// (attempts: dials it took; down: how long the host was without a connection).
	OnReconnect func(attempts int, down time.Duration)
	Getenv      func(string) string
	noAgent     bool // tests: ignore SSH_AUTH_SOCK
}

// UnreachableError means the host could not be reached or the connection
// broke (host_unreachable).
type UnreachableError struct {
	Addr string
	Err  error
}

func (e *UnreachableError) Error() string { return "host " + e.Addr + " unreachable: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// HostKeyError is an unknown or changed host key: never retried.
type HostKeyError struct {
	Addr    string
	Changed bool
	Msg     string
}

func (e *HostKeyError) Error() string { return e.Msg }

// AuthError is a failed login: never retried.
type AuthError struct{ Msg string }

func (e *AuthError) Error() string { return e.Msg }

// ErrSudoPassword means a non-root login whose sudo asks for a password.
var ErrSudoPassword = errors.New("sudo needs a password: allow passwordless sudo for systemctl, journalctl, install and sftp-server for this user (NOPASSWD), or log in as root")

// target is the resolved connection target.
type target struct {
	addr       string // host:port dialled
	alias      string // the name known_hosts is checked against (host[:port] as configured)
	user       string
	identities []string
	jump       []string // ProxyJump hops, user@host:port
}

func (o SSHOptions) getenv(k string) string {
	if o.Getenv != nil {
		return o.Getenv(k)
	}
	return os.Getenv(k)
}

func (o SSHOptions) home() string {
	if h := o.getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// resolve applies ~/.ssh/config to o.Address.
func (o SSHOptions) resolve() (target, error) {
	home := o.home()
	host, port := o.Address, ""
	if h, p, err := net.SplitHostPort(o.Address); err == nil {
		host, port = h, p
	}
	var us *ssh_config.UserSettings
	if o.ConfigFile != "none" {
		cf := o.ConfigFile
		if cf == "" {
			cf = filepath.Join(home, ".ssh", "config")
		}
		cf = expandHome(cf, home)
		us = &ssh_config.UserSettings{IgnoreErrors: true}
		us.ConfigFinder(func() string { return cf })
	}
	get := func(k string) string {
		if us == nil {
			return ""
		}
		return strings.TrimSpace(us.Get(host, k))
	}
	t := target{user: o.User}
	hostname := host
	if hn := get("HostName"); hn != "" {
		hostname = hn
	}
	if port == "" {
		port = get("Port")
	}
	if port == "" || port == "22" && get("Port") == "" {
		port = "22"
	}
	if _, err := strconv.Atoi(port); err != nil {
		return t, fmt.Errorf("bad port %q", port)
	}
	t.addr = net.JoinHostPort(hostname, port)
	t.alias = t.addr
	if t.user == "" {
		t.user = get("User")
	}
	if t.user == "" {
		t.user = o.getenv("USER")
	}
	if t.user == "" {
		t.user = "root"
	}
	if o.IdentityFile != "" {
		t.identities = []string{expandHome(o.IdentityFile, home)}
	} else {
		if us != nil {
			for _, f := range us.GetAll(host, "IdentityFile") {
				if f = strings.TrimSpace(f); f != "" && f != "~/.ssh/identity" {
					t.identities = append(t.identities, expandHome(f, home))
				}
			}
		}
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			t.identities = append(t.identities, filepath.Join(home, ".ssh", n))
		}
	}
	if j := get("ProxyJump"); j != "" && !strings.EqualFold(j, "none") {
		t.jump = strings.Split(j, ",")
	}
	return t, nil
}

// signers collects the login keys: ssh-agent first, then identity files.
func (o SSHOptions) signers(t target) ([]ssh.Signer, func(), error) {
	var out []ssh.Signer
	closer := func() {}
	if sock := o.getenv("SSH_AUTH_SOCK"); sock != "" && !o.noAgent {
		if c, err := net.DialTimeout("unix", sock, 2*time.Second); err == nil {
			if s, err := agent.NewClient(c).Signers(); err == nil {
				out = append(out, s...)
			}
			closer = func() { c.Close() }
		}
	}
	var problems []string
	for _, f := range t.identities {
		b, err := os.ReadFile(f)
		if err != nil {
			if o.IdentityFile != "" {
				return nil, closer, fmt.Errorf("identity_file: %w", err)
			}
			continue
		}
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			var pp *ssh.PassphraseMissingError
			if errors.As(err, &pp) {
				problems = append(problems, f+" is passphrase-protected: load it into ssh-agent")
				continue
			}
			problems = append(problems, f+": "+err.Error())
			continue
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		msg := "no SSH key: start ssh-agent with a key, set identity_file, or create ~/.ssh/id_ed25519"
		if len(problems) > 0 {
			msg += " (" + strings.Join(problems, "; ") + ")"
		}
		return nil, closer, &AuthError{Msg: msg}
	}
	return out, closer, nil
}

// knownHostsFile is the known_hosts file of o, created (empty, 0600) when it
// is missing and unknown keys may be accepted.
func (o SSHOptions) knownHostsFile(alias string) (string, error) {
	file := o.KnownHosts
	if file == "" {
		file = filepath.Join(o.home(), ".ssh", "known_hosts")
	}
	file = expandHome(file, o.home())
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		if !o.AcceptNewHostKeys {
			return "", &HostKeyError{Addr: alias, Msg: fmt.Sprintf(
				"known_hosts file %s does not exist: add the host's key with `%s >> %s` (after checking its fingerprint), or use --accept-new-host-keys",
				file, keyscanLine(alias), file)}
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return "", fmt.Errorf("known_hosts: cannot create %s: %w", filepath.Dir(file), err)
		}
		f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return "", fmt.Errorf("known_hosts: cannot create %s: %w", file, err)
		}
		f.Close()
	}
	return file, nil
}

// hostKeyCallback verifies against known_hosts, with clear messages. The
// file is read at every handshake (DialSSH and every reconnect), so a key
// accepted since, by this process or another, is pinned: any other key for
// the host is then a changed key, refused. Accepting an unknown key happens
// under an exclusive lock of the file and re-checks it first, so two
// processes meeting the same new host cannot pin two different keys.
func (o SSHOptions) hostKeyCallback(alias string) (ssh.HostKeyCallback, []string, error) {
	file, err := o.knownHostsFile(alias)
	if err != nil {
		return nil, nil, err
	}
	db, err := knownhosts.NewDB(file)
	if err != nil {
		return nil, nil, fmt.Errorf("known_hosts %s: %w", file, err)
	}
	var mu sync.Mutex // one accept at a time in this process (flock is per open file)
	cb := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := db.HostKeyCallback()(hostname, remote, key)
		if err == nil {
			return nil
		}
		if knownhosts.IsHostUnknown(err) && o.AcceptNewHostKeys {
			mu.Lock()
			defer mu.Unlock()
			err = acceptNewHostKey(file, hostname, remote, key)
			if err == nil {
				return nil
			}
		}
		return o.hostKeyError(alias, file, key, err)
	}
	return cb, db.HostKeyAlgorithms(alias), nil
}

// acceptNewHostKey appends key for hostname to file unless, read again
// under the lock, the file knows the host by now: then that key decides.
func acceptNewHostKey(file, hostname string, remote net.Addr, key ssh.PublicKey) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("known_hosts: cannot open %s to add a key: %w", file, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("known_hosts: cannot lock %s: %w", file, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	db, err := knownhosts.NewDB(file)
	if err != nil {
		return fmt.Errorf("known_hosts %s: %w", file, err)
	}
	if err := db.HostKeyCallback()(hostname, remote, key); !knownhosts.IsHostUnknown(err) {
		return err // nil: pinned meanwhile with this key; else changed
	}
	if err := knownhosts.WriteKnownHost(f, hostname, remote, key); err != nil {
		return fmt.Errorf("known_hosts: cannot add the key of %s to %s: %w", hostname, file, err)
	}
	return nil
}

// hostKeyError words a failed host key check.
func (o SSHOptions) hostKeyError(alias, file string, key ssh.PublicKey, err error) error {
	fp := ssh.FingerprintSHA256(key)
	if knownhosts.IsHostKeyChanged(err) {
		var where []string
		var kerr *xknownhosts.KeyError
		if errors.As(err, &kerr) {
			for _, w := range kerr.Want {
				where = append(where, fmt.Sprintf("%s:%d", w.Filename, w.Line))
			}
		}
		return &HostKeyError{Addr: alias, Changed: true, Msg: fmt.Sprintf(
			"HOST KEY OF %s HAS CHANGED: the host offered %s %s, but %s holds another key (%s). "+
				"Someone may be intercepting the connection, or the host was reinstalled. Refusing to connect; "+
				"if the change is expected, remove the old line (ssh-keygen -R %s -f %s) and add the new key.",
			alias, key.Type(), fp, file, strings.Join(where, ", "), knownhosts.Normalize(alias), file)}
	}
	if knownhosts.IsHostUnknown(err) {
		return &HostKeyError{Addr: alias, Msg: fmt.Sprintf(
			"host key of %s is unknown (%s %s): refusing to connect. Check the fingerprint out of band, then add it: `%s >> %s`, or use --accept-new-host-keys",
			alias, key.Type(), fp, keyscanLine(alias), file)}
	}
	return err
}

func keyscanLine(hostport string) string {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "ssh-keyscan " + hostport
	}
	if p == "22" {
		return "ssh-keyscan " + h
	}
	return "ssh-keyscan -p " + p + " " + h
}

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
	reconnects atomic.Int64
	shMu       sync.Mutex
	sh         *shell
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
	dl := time.Now().Add(c.o.HandshakeTimeout)
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
	tick := time.NewTicker(c.o.KeepaliveInterval)
	defer tick.Stop()
	done := make(chan struct{})
	go func() { _ = cl.Wait(); close(done) }()
	for {
		select {
		case <-done:
			c.markDead(gen)
			return
		case <-tick.C:
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
		case <-time.After(c.o.KeepaliveTimeout):
			cl.Close()
		case <-done:
		}
	}
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
	t0 := time.Now()
	deadline := t0.Add(c.o.ReconnectFor)
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := c.dial(actx)
		cancel()
		if err == nil {
			c.reconnects.Add(1)
			if c.o.OnReconnect != nil {
				c.o.OnReconnect(attempt, time.Since(t0))
			}
			c.mu.Lock()
			cl, gen := c.client, c.gen
			c.mu.Unlock()
			return cl, gen, nil
		}
		var hke *HostKeyError
		var ae *AuthError
		if errors.As(err, &hke) || errors.As(err, &ae) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return nil, 0, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, err
		case <-time.After(wait):
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

// ShellQuote quotes s for a POSIX shell (the remote login shell).
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("@%+=:,./_-", c) >= 0) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Cmd is one remote command.
type Cmd struct {
	Args      []string      // argv; each argument shell-quoted
	Timeout   time.Duration // remote `timeout`; default 30 s
	Sudo      bool          // prefix `sudo -n` for a non-root login
	Stdin     []byte
	MaxOutput int // bytes kept of stdout and of stderr each (default 1 MiB)
}

// Output of a remote command.
type Output struct {
	Stdout, Stderr []byte
	Code           int
	Truncated      bool
}

// CommandLine renders the shell command line of cmd for a login as user.
func (cmd Cmd) CommandLine(user string) string {
	to := cmd.Timeout
	if to == 0 {
		to = 30 * time.Second
	}
	var b strings.Builder
	if cmd.Sudo && user != "root" {
		b.WriteString("sudo -n ")
	}
	fmt.Fprintf(&b, "timeout --kill-after=5s %ss", strconv.FormatFloat(to.Round(time.Millisecond).Seconds(), 'f', -1, 64))
	for _, a := range cmd.Args {
		b.WriteByte(' ')
		b.WriteString(ShellQuote(a))
	}
	return b.String()
}

type capWriter struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		if len(p) > room {
			w.buf.Write(p[:room])
			w.truncated = true
		} else {
			w.buf.Write(p)
		}
	} else if len(p) > 0 {
		w.truncated = true
	}
	return len(p), nil
}

// Run runs cmd; a non-zero exit is an *ExitError with the output. A
// connection that breaks gives an *UnreachableError. Opening the session is
// retried once after a reconnect (the command had not run).
func (c *Conn) Run(ctx context.Context, cmd Cmd) (Output, error) {
	if cmd.MaxOutput == 0 {
		cmd.MaxOutput = 1 << 20
	}
	line := cmd.CommandLine(c.t.user)
	var out Output
	for attempt := 0; ; attempt++ {
		cl, gen, err := c.Client(ctx)
		if err != nil {
			return out, err
		}
		s, err := cl.NewSession()
		if err != nil {
			c.markDead(gen)
			if attempt == 0 && ctx.Err() == nil {
				continue
			}
			return out, &UnreachableError{Addr: c.t.addr, Err: err}
		}
		stdout := &capWriter{max: cmd.MaxOutput}
		stderr := &capWriter{max: cmd.MaxOutput}
		s.Stdout, s.Stderr = stdout, stderr
		if cmd.Stdin != nil {
			s.Stdin = bytes.NewReader(cmd.Stdin)
		}
		stop := context.AfterFunc(ctx, func() { _ = s.Signal(ssh.SIGKILL); s.Close() })
		err = s.Run(line)
		stop()
		s.Close()
		out = Output{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(), Truncated: stdout.truncated || stderr.truncated}
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			out.Code = ee.ExitStatus()
			if cmd.Sudo && c.t.user != "root" && bytes.Contains(out.Stderr, []byte("sudo: a password is required")) {
				return out, ErrSudoPassword
			}
			return out, &ExitError{Line: line, Out: out}
		}
		// The channel closed without an exit status: the connection broke.
		c.markDead(gen)
		return out, &UnreachableError{Addr: c.t.addr, Err: err}
	}
}

// ExitError is a remote command that exited non-zero.
type ExitError struct {
	Line string
	Out  Output
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(string(e.Out.Stderr))
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	if e.Out.Code == 124 {
		return fmt.Sprintf("remote command timed out: %s", e.Line)
	}
	return fmt.Sprintf("remote command exited %d: %s: %s", e.Out.Code, e.Line, msg)
}

// sftpClient returns the SFTP client on the current connection; a non-root
// login runs sftp-server under `sudo -n`.
func (c *Conn) sftpClient(ctx context.Context) (*sftp.Client, int, error) {
	cl, gen, err := c.Client(ctx)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	if c.sftp != nil && c.sftpGen == gen {
		s := c.sftp
		c.mu.Unlock()
		return s, gen, nil
	}
	c.mu.Unlock()
	var sc *sftp.Client
	if c.t.user == "root" {
		sc, err = sftp.NewClient(cl)
	} else {
		var s *ssh.Session
		s, err = cl.NewSession()
		if err == nil {
			var w io.WriteCloser
			var r io.Reader
			if w, err = s.StdinPipe(); err == nil {
				if r, err = s.StdoutPipe(); err == nil {
					if err = s.Start("sudo -n /usr/lib/openssh/sftp-server"); err == nil {
						sc, err = sftp.NewClientPipe(r, w)
					}
				}
			}
			if err != nil {
				s.Close()
			}
		}
	}
	if err != nil {
		if c.t.user != "root" {
			// sftp-server under sudo died: say why if it is sudo's password.
			if _, serr := c.Run(ctx, Cmd{Args: []string{"true"}, Sudo: true, Timeout: 10 * time.Second}); errors.Is(serr, ErrSudoPassword) {
				return nil, 0, serr
			}
		}
		return nil, 0, &UnreachableError{Addr: c.t.addr, Err: fmt.Errorf("sftp: %w", err)}
	}
	c.mu.Lock()
	if c.sftp != nil {
		c.sftp.Close()
	}
	c.sftp, c.sftpGen = sc, gen
	c.mu.Unlock()
	return sc, gen, nil
}

// withSFTP runs fn on the SFTP client, bounded by ctx (SFTP calls have no
// context: the client is closed when ctx ends).
func (c *Conn) withSFTP(ctx context.Context, fn func(*sftp.Client) error) error {
	sc, gen, err := c.sftpClient(ctx)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fn(sc) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sc.Close()
		c.markDead(gen)
		return ctx.Err()
	}
	if errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.Is(err, io.EOF) {
		c.mu.Lock()
		if c.sftp == sc {
			c.sftp = nil
		}
		c.mu.Unlock()
		sc.Close()
		return &UnreachableError{Addr: c.t.addr, Err: err}
	}
	return err
}

// WriteFileAtomic writes data to p: a temp file in the same directory,
// written, fsynced, chmodded, closed, then PosixRename'd over p.
func (c *Conn) WriteFileAtomic(ctx context.Context, p string, data []byte, mode os.FileMode) error {
	if mode&0o077 == 0 {
		return c.writePrivateFile(ctx, p, data, mode)
	}
	return c.withSFTP(ctx, func(sc *sftp.Client) error {
		dir := path.Dir(p)
		if err := sc.MkdirAll(dir); err != nil {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		tmp := path.Join(dir, "."+path.Base(p)+".tmp-"+hex.EncodeToString(rnd[:]))
		f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		if err != nil {
			return fmt.Errorf("create %s: %w", tmp, err)
		}
		fail := func(err error) error {
			f.Close()
			_ = sc.Remove(tmp)
			return err
		}
		if _, err := f.Write(data); err != nil {
			return fail(fmt.Errorf("write %s: %w", tmp, err))
		}
		if err := f.Sync(); err != nil && !errors.Is(err, sftp.ErrSSHFxOpUnsupported) {
			return fail(fmt.Errorf("fsync %s: %w", tmp, err))
		}
		if err := f.Chmod(mode); err != nil {
			return fail(fmt.Errorf("chmod %s: %w", tmp, err))
		}
		if err := f.Close(); err != nil {
			_ = sc.Remove(tmp)
			return fmt.Errorf("close %s: %w", tmp, err)
		}
		if err := sc.PosixRename(tmp, p); err != nil {
			_ = sc.Remove(tmp)
			return fmt.Errorf("rename %s: %w", p, err)
		}
		return nil
	})
}

// writePrivateFile is WriteFileAtomic for a file only its owner may read:
// SFTP creates files with the server's default mode and chmods them only
// after the write, and a reader that opened the file in between keeps
// reading; mktemp creates the temporary file 0600 from the start.
func (c *Conn) writePrivateFile(ctx context.Context, p string, data []byte, mode os.FileMode) error {
	script := `umask 077 && mkdir -p -- "$(dirname -- "$1")" && t=$(mktemp -- "$(dirname -- "$1")/.$(basename -- "$1").tmp-XXXXXX") && ` +
		`{ cat >"$t" && chmod ` + strconv.FormatUint(uint64(mode.Perm()), 8) + ` -- "$t" && sync -- "$t" && mv -f -- "$t" "$1" || { rm -f -- "$t"; exit 1; }; }`
	if _, err := c.Run(ctx, Cmd{Args: []string{"sh", "-c", script, "sh", p}, Sudo: true, Stdin: data, Timeout: 30 * time.Second}); err != nil {
		return fmt.Errorf("writing %s (mode %o): %w", p, mode.Perm(), err)
	}
	return nil
}

// ReadFile reads a remote file; a missing file gives an error satisfying
// errors.Is(err, os.ErrNotExist).
func (c *Conn) ReadFile(ctx context.Context, p string) ([]byte, error) {
	var out []byte
	err := c.withSFTP(ctx, func(sc *sftp.Client) error {
		f, err := sc.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		out, err = io.ReadAll(io.LimitReader(f, 16<<20))
		return err
	})
	return out, err
}

// Remove removes a remote file; a missing file is not an error.
func (c *Conn) Remove(ctx context.Context, p string) error {
	return c.withSFTP(ctx, func(sc *sftp.Client) error {
		if err := sc.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
}

// Stat describes a remote file; a missing file gives an error satisfying
// errors.Is(err, os.ErrNotExist).
func (c *Conn) Stat(ctx context.Context, p string) (os.FileInfo, error) {
	var fi os.FileInfo
	err := c.withSFTP(ctx, func(sc *sftp.Client) (err error) {
		fi, err = sc.Stat(p)
		return err
	})
	return fi, err
}

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
		return nil, &UnreachableError{Addr: c.t.addr, Err: err}
	}
	return nc, err
}

// shell is one long-lived remote `sh` reading commands from stdin: a poll
// costs a round trip instead of a new session (sshd forks and starts the
// login shell for each session, ~100 ms on a busy host).
type shell struct {
	sess  *ssh.Session
	stdin io.WriteCloser
	out   *bufio.Reader
	gen   int
}

// RunShell runs script in the persistent shell (as root: `sudo -n sh` for a
// non-root login) and returns its output, stdout and stderr each bounded by
// maxOut bytes, like Run. Any trouble with the shell falls back to Run.
func (c *Conn) RunShell(ctx context.Context, script string, timeout time.Duration, maxOut int) (Output, error) {
	c.shMu.Lock()
	defer c.shMu.Unlock()
	out, sent, err := c.runShell(ctx, script, timeout, maxOut)
	if err == nil || ctx.Err() != nil {
		return out, err
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return out, err
	}
	if c.sh != nil {
		c.sh.sess.Close()
		c.sh = nil
	}
	if sent {
		// The command may have run: never run it twice. The connection (or the shell) broke.
		return out, &UnreachableError{Addr: c.t.addr, Err: fmt.Errorf("remote shell: %w", err)}
	}
	return c.Run(ctx, Cmd{Args: []string{"sh", "-c", script}, Sudo: true, Timeout: timeout, MaxOutput: maxOut})
}

func (c *Conn) runShell(ctx context.Context, script string, timeout time.Duration, maxOut int) (out Output, sent bool, err error) {
	cl, gen, err := c.Client(ctx)
	if err != nil {
		return Output{}, sent, err
	}
	if c.sh != nil && c.sh.gen != gen {
		c.sh.sess.Close()
		c.sh = nil
	}
	if c.sh == nil {
		s, err := cl.NewSession()
		if err != nil {
			return Output{}, sent, err
		}
		w, err := s.StdinPipe()
		if err != nil {
			s.Close()
			return Output{}, sent, err
		}
		r, err := s.StdoutPipe()
		if err != nil {
			s.Close()
			return Output{}, sent, err
		}
		cmd := "exec sh"
		if c.t.user != "root" {
			cmd = "exec sudo -n sh"
		}
		if err := s.Start(cmd); err != nil {
			s.Close()
			return Output{}, sent, err
		}
		c.sh = &shell{sess: s, stdin: w, out: bufio.NewReaderSize(r, 64<<10), gen: gen}
	}
	sh := c.sh
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	marker := "@@specsweep-end-" + hex.EncodeToString(nonce[:])
	// stderr goes to a temp file printed after stdout, between markers.
	line := "e=$(mktemp); " + Cmd{Args: []string{"sh", "-c", script}, Timeout: timeout}.CommandLine("root") +
		" </dev/null 2>\"$e\"; r=$?; printf '\\n" + marker + "-stderr\\n'; head -c " + strconv.Itoa(maxOut) +
		" \"$e\"; rm -f \"$e\"; printf '\\n" + marker + " %s\\n' $r\n"
	stop := context.AfterFunc(ctx, func() { sh.sess.Close() })
	defer stop()
	timer := time.AfterFunc(timeout+10*time.Second, func() { sh.sess.Close() })
	defer timer.Stop()
	if _, err := io.WriteString(sh.stdin, line); err != nil {
		return Output{}, false, err
	}
	sent = true
	var buf bytes.Buffer
	var stdout []byte
	truncated := false
	full := false // this stream reached maxOut: keep a prefix, never later pieces of it
	for {
		l, err := sh.out.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			if ctx.Err() != nil {
				return Output{}, sent, ctx.Err()
			}
			return Output{}, sent, err
		}
		if bytes.Equal(l, []byte(marker+"-stderr\n")) {
			stdout = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			buf, full = bytes.Buffer{}, false
			continue
		}
		if rest, ok := bytes.CutPrefix(l, []byte(marker+" ")); ok {
			code, _ := strconv.Atoi(strings.TrimSpace(string(rest)))
			stderr := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			out := Output{Stdout: stdout, Stderr: stderr, Code: code, Truncated: truncated}
			if code != 0 {
				return out, true, &ExitError{Line: script, Out: out}
			}
			return out, true, nil
		}
		if !full && buf.Len()+len(l) <= maxOut {
			buf.Write(l)
		} else {
			full, truncated = true, true
		}
	}
}
