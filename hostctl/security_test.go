package hostctl

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// rotateHostKey gives the host a new ed25519 key and restarts sshd, killing
// the sessions of the old one so that clients must reconnect.
func rotateHostKey(t *testing.T, ctx context.Context, h *testhost.Host) {
	t.Helper()
	out, err := h.Nsenter(ctx, "sh", "-c", "rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub && "+
		"ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key && systemctl restart ssh.service")
	if err != nil {
		t.Fatalf("rotating the host key: %v %s", err, out)
	}
	_, _ = h.Nsenter(ctx, "pkill", "-KILL", "-f", "^sshd: root")
}

// TestAcceptedHostKeyIsPinned: a key accepted with AcceptNewHostKeys is the
// host's key from then on; another key offered later, on a reconnect of the
// same connection or by a new process, is a changed key and refused, and
// known_hosts keeps only the first key.
func TestAcceptedHostKeyIsPinned(t *testing.T) {
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv})[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := SSHOptions{Address: h.Addr, User: "root", IdentityFile: h.KeyFile, KnownHosts: kh,
		AcceptNewHostKeys: true, ConfigFile: "none", noAgent: true, ReconnectFor: 5 * time.Second}
	c, err := DialSSH(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pinned, _ := os.ReadFile(kh)
	if n := bytes.Count(pinned, []byte("\n")); n != 1 {
		t.Fatalf("known_hosts after accepting: %d lines:\n%s", n, pinned)
	}

	rotateHostKey(t, ctx, h)
	// The same connection reconnects: the new key must be refused as changed.
	var hke *HostKeyError
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err = c.Run(ctx, Cmd{Args: []string{"true"}})
		if errors.As(err, &hke) || time.Now().After(deadline) {
			break
		}
	}
	if hke == nil || !hke.Changed || !strings.Contains(err.Error(), "CHANGED") {
		t.Fatalf("reconnect to a host with another key: want a changed host key error, got %v", err)
	}
	// A new process (a new dial) refuses it too, even with AcceptNewHostKeys.
	if _, err := DialSSH(ctx, o); !errors.As(err, &hke) || !hke.Changed {
		t.Fatalf("new dial to a host with another key: want a changed host key error, got %v", err)
	}
	if now, _ := os.ReadFile(kh); !bytes.Equal(now, pinned) {
		t.Fatalf("known_hosts changed:\nbefore %s\nafter  %s", pinned, now)
	}
}
