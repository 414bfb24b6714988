package hostctl

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
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

// TestSecretsStayOffTheUnit: environment values reach the server through a
// root-only environment file, never the 0644 drop-in or `systemctl show`;
// --api-key ${NAME} is substituted by systemd (the server requires the key
// and readiness, which sends it, still works); restore removes the file.
func TestSecretsStayOffTheUnit(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r := bootRemote(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const token, key = `hf_s3cret "q" $HOME \ ` + "`id`", "sk-apikey-42"
	l := launch(driver{simBin: testhost.SimPath}, map[string]string{"HF_TOKEN": token, "SGLANG_API_KEY": key},
		"--api-key", "${SGLANG_API_KEY}")
	in, err := r.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := in.WaitReady(ctx)
	if err != nil {
		t.Fatalf("readiness with --api-key from the environment: %v", err)
	}
	// Server info needs the key too: effective args and version, not {"error": "Unauthorized"}.
	if v := EngineVersion(ready.ServerInfo); v == "" {
		t.Errorf("no engine version in the server info read with the API key: %.200s", ready.ServerInfo)
	}
	dropIn, err := h.ReadFile(DropInPath("sglang.service"))
	if err != nil {
		t.Fatal(err)
	}
	launchFile, err := h.ReadFile(LaunchFilePath("sglang.service"))
	if err != nil {
		t.Fatal(err)
	}
	show, err := h.Nsenter(ctx, "systemctl", "show", "-p", "Environment,ExecStart", "--", "sglang.service")
	if err != nil {
		t.Fatalf("%v %s", err, show)
	}
	for what, text := range map[string][]byte{"drop-in": dropIn, "launch script": launchFile, "systemctl show": show} {
		for _, secret := range []string{"hf_s3cret", key} {
			if bytes.Contains(text, []byte(secret)) {
				t.Errorf("%s shows the secret %q:\n%s", what, secret, text)
			}
		}
	}
	fi, err := os.Stat(filepath.Join(h.Root, EnvFilePath("sglang.service")))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("environment file: mode %v uid %d, want 0600 root", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid)
	}
	// The server got the values byte for byte, and the key as an argument.
	st, err := in.State(ctx)
	if err != nil || st.MainPID == 0 {
		t.Fatalf("state: %+v %v", st, err)
	}
	environ, err := h.Nsenter(ctx, "cat", "/proc/"+strconv.Itoa(st.MainPID)+"/environ")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(environ), "\x00"), "HF_TOKEN="+token) {
		t.Errorf("the server's environment lacks HF_TOKEN=%q", token)
	}
	cmdline, _ := h.Nsenter(ctx, "cat", "/proc/"+strconv.Itoa(st.MainPID)+"/cmdline")
	if !bytes.Contains(cmdline, []byte("\x00--api-key\x00"+key+"\x00")) {
		t.Errorf("cmdline lacks the substituted key: %q", cmdline)
	}
	// A later point without environment leaves no environment file behind.
	l2 := launch(driver{simBin: testhost.SimPath}, nil)
	l2.Env = nil
	if _, err := r.Start(ctx, l2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.Root, EnvFilePath("sglang.service"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("environment file of the previous point still there: %v", err)
	}
	if _, err := r.Start(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{DropInPath("sglang.service"), EnvFilePath("sglang.service"), LaunchFilePath("sglang.service"), MarkerPath("sglang.service")} {
		if _, err := os.Stat(filepath.Join(h.Root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after restore: %v", p, err)
		}
	}
}

// TestLongLogLines: a server printing a line of 3 MB before it starts is read
// to the end (the local driver's reader used to stop at 1 MiB, the pipe
// filled and the server blocked until ready_timeout); the line is kept cut,
// and every later line is read once (a remote journal read cut at its size
// cap used to lose the cursor and read the same range again).
func TestLongLogLines(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	for _, d := range []driver{localDriver(t), sshDriver(t)} {
		t.Run(d.name, func(t *testing.T) {
			if d.name != "local" {
				if msg := testhost.Requirements(); msg != "" {
					t.Skip(msg)
				}
			}
			host := d.host(t)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			l := launch(d, nil)
			script := `head -c 3000000 /dev/zero | tr '\0' x; echo; echo specsweep-after-the-long-line; exec "$0" "$@"`
			l.Argv = append([]string{"/bin/sh", "-c", script}, l.Argv...)
			in, err := host.Start(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			defer host.Restore(context.WithoutCancel(ctx))
			if _, err := in.WaitReady(ctx); err != nil {
				t.Fatalf("readiness after a 3 MB log line: %v", err)
			}
			logs, err := in.Logs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			after, long := 0, 0
			for _, line := range logs {
				if line == "specsweep-after-the-long-line" {
					after++
				}
				if strings.HasPrefix(line, "xxxx") {
					long++
				}
				if len(line) > MaxLogLine+64 {
					t.Errorf("a log line of %d bytes was kept", len(line))
				}
			}
			if after != 1 || long == 0 {
				t.Fatalf("want the line after the long one once (got %d) and the long one cut (%d pieces); %d lines", after, long, len(logs))
			}
			if _, err := in.Stop(ctx, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestForeignServerJournalFromEnd: stopping a server specsweep did not start
// reads its journal from now on, not from the start of its invocation.
func TestForeignServerJournalFromEnd(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	_, r, ctx := operatorHost(t)
	var st State
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st, err = r.UnitState(ctx); err == nil && st.ActiveState == "active" {
			break
		}
	}
	if st.ActiveState != "active" {
		t.Fatalf("operator unit: %+v %v", st, err)
	}
	old := r.newInstance(st.InvocationID, Launch{}.withDefaults(), time.Now(), false)
	all, err := old.Logs(ctx)
	if err != nil || len(all) == 0 {
		t.Fatalf("the operator server's journal: %d lines, %v", len(all), err)
	}
	in := r.newInstance(st.InvocationID, Launch{}.withDefaults(), time.Now(), true)
	if lines, err := in.Logs(ctx); err != nil || len(lines) != 0 {
		t.Fatalf("from the end: want no line before the stop, got %d (%v)", len(lines), err)
	}
	if _, err := in.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	lines, _ := in.Logs(ctx)
	for _, l := range lines {
		if l == all[0] {
			t.Fatalf("the first line of the invocation was read again: %q", l)
		}
	}
}

// TestStaleMarker: a marker left behind while the operator's unit runs
// without specsweep's drop-in (removed by hand, as the drop-in's note said)
// is ignored: the unit runs again after the sweep's restore.
func TestStaleMarker(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r, ctx := operatorHost(t)
	stale := Marker{Unit: "sglang.service", WasActive: false, DropIn: DropInPath("sglang.service"), CreatedAt: time.Now().Add(-48 * time.Hour)}
	if err := h.WriteFile(MarkerPath("sglang.service"), stale.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	// restore on its own leaves the running operator server be and drops the marker.
	if err := r.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := r.UnitState(ctx); err != nil || st.ActiveState != "active" {
		t.Fatalf("restore with a stale marker stopped the operator's server: %+v %v", st, err)
	}
	if _, err := h.ReadFile(MarkerPath("sglang.service")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale marker kept: %v", err)
	}
	// A sweep that meets a stale marker records the unit afresh.
	if err := h.WriteFile(MarkerPath("sglang.service"), stale.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := r.Start(ctx, launch(driver{simBin: testhost.SimPath}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := r.UnitState(ctx); err != nil || st.ActiveState != "active" {
		t.Fatalf("after the sweep's restore the operator's server should run again: %+v %v", st, err)
	}
}

// operatorHost boots a host whose operator unit runs, and connects to it.
func operatorHost(t *testing.T) (*testhost.Host, *Remote, context.Context) {
	t.Helper()
	return bootOne(t, testhost.Options{Env: fastEnv, UnitEnabled: true})
}

// bootOne boots one test host with opts (skipping where test hosts cannot run) and connects to
// it; the context ends with the test, after a minute at most.
func bootOne(t *testing.T, opts testhost.Options) (*testhost.Host, *Remote, context.Context) {
	t.Helper()
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, opts)[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return h, dialTestHost(t, h), ctx
}

// TestPrivateWriteOpensNoSession: a private file (the environment file, 0600) is written through
// the persistent shell, its bytes as the shell's input: byte for byte (binary, no final newline, a
// line like a here-document's end), created 0600, and no SSH session opened for it (each cost a
// point's start a session of its own: sshd, PAM and a login shell, seconds on a loaded host).
func TestPrivateWriteOpensNoSession(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r, ctx := bootOne(t, testhost.Options{})
	if _, err := r.run(ctx, "true", 10*time.Second); err != nil { // the persistent shell, opened once
		t.Fatal(err)
	}
	data := []byte("A=1\nEOF\n@@specsweep-end\n'\"$x`id`\\\n")
	for i := range 70000 {
		data = append(data, byte(i*7))
	}
	data = append(data, "no newline"...)
	const p = "/etc/systemd/system/sglang.service.d/priv test.env"
	before := r.conn.sessions.Load()
	if err := r.conn.WriteFileAtomic(ctx, p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := r.conn.sessions.Load() - before; n != 0 {
		t.Errorf("a private write opened %d SSH session(s), want none", n)
	}
	got, err := os.ReadFile(filepath.Join(h.Root, p))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("written %d bytes, read back %d, different", len(data), len(got))
	}
	fi, err := os.Stat(filepath.Join(h.Root, p))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// The shell still answers in step after the here-document.
	if out, err := r.run(ctx, "echo still", 10*time.Second); err != nil || strings.TrimSpace(string(out.Stdout)) != "still" {
		t.Errorf("the shell after a write: %q %v", out.Stdout, err)
	}
}
