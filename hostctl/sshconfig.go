// SSH options and their resolution: ~/.ssh/config, login keys (agent, identity files), known_hosts checks and pinning.

package hostctl

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kevinburke/ssh_config"
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
	// Clock times the keepalive and the reconnect's backoff (nil: the real clock; DialRemote and
	// DialSlurm set their own). The handshake's timeout is network I/O's: always the real clock.
	Clock   Clock
	noAgent bool // tests: ignore SSH_AUTH_SOCK
}

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
