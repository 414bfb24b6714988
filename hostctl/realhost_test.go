package hostctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// The drivers on real test hosts (and the local child) in setups the contract suite does not cover:
// a non-root login with sudo, agent and ProxyJump, a unit created by specsweep, ExecStart quoting on
// systemd, no leftover followers, systemd refusing a start, a local child outliving its parent, GPU
// busy, D-Bus after a reconnect.

// addUser creates a login user on the host authorised with the test key,
// with a sudoers rule (none when rule is "").
func addUser(t *testing.T, ctx context.Context, h *testhost.Host, name, rule string) {
	t.Helper()
	if out, err := h.Nsenter(ctx, "useradd", "-m", "-s", "/bin/bash", name); err != nil {
		t.Fatalf("useradd: %v %s", err, out)
	}
	if err := h.WriteFile("/home/"+name+"/.ssh/authorized_keys", ssh.MarshalAuthorizedKey(h.Signer.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Nsenter(ctx, "chown", "-R", name+":"+name, "/home/"+name+"/.ssh"); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	if rule != "" {
		if err := h.WriteFile("/etc/sudoers.d/"+name, []byte(name+" "+rule+"\n"), 0o440); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNonRootLoginWithSudo(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	if _, err := os.Stat("/usr/bin/sudo"); err != nil {
		t.Skip("sudo missing: apt-get install -y sudo")
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv})[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	addUser(t, ctx, h, "deploy", "ALL=(ALL) NOPASSWD: ALL")
	addUser(t, ctx, h, "askpw", "ALL=(ALL) ALL")
	dial := func(user string) *Remote {
		r, err := DialRemote(ctx, RemoteOptions{Name: h.Name, SSH: SSHOptions{Address: h.Addr, User: user,
			IdentityFile: h.KeyFile, KnownHosts: h.KnownHosts, ConfigFile: "none", noAgent: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	before, _ := h.ReadFile(testhost.UnitPath)
	r := dial("deploy")
	in, err := r.Start(ctx, launch(driver{simBin: testhost.SimPath}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(h.Root, DropInPath("sglang.service")))
	if err != nil || fi.Sys() == nil {
		t.Fatalf("drop-in: %v", err)
	}
	if res, err := in.Stop(ctx, nil); err != nil || !res.Clean {
		t.Fatalf("stop: %+v %v", res, err)
	}
	if err := r.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := h.ReadFile(testhost.UnitPath)
	if string(before) != string(after) {
		t.Fatal("unit changed")
	}
	// The login user's persistent shell (Slurm's commands) is the user's, not root's, and apart
	// from root's: each keeps its own, and neither opens a session per command.
	who := func(user bool) string {
		t.Helper()
		var out Output
		var err error
		if user {
			out, err = r.conn.RunUserShell(ctx, "id -un", nil, 10*time.Second, 1<<10)
		} else {
			out, err = r.conn.RunShell(ctx, "id -un", 10*time.Second, 1<<10)
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out.Stdout))
	}
	who(true)
	sessions := r.conn.sessions.Load()
	for range 3 {
		if u, root := who(true), who(false); u != "deploy" || root != "root" {
			t.Fatalf("the user's shell runs as %q, root's as %q", u, root)
		}
	}
	if out, err := r.conn.RunUserShell(ctx, "wc -c", []byte("12345"), 10*time.Second, 1<<10); err != nil || strings.TrimSpace(string(out.Stdout)) != "5" {
		t.Errorf("stdin through the user's shell: %q %v", out.Stdout, err)
	}
	if n := r.conn.sessions.Load() - sessions; n != 0 {
		t.Errorf("%d sessions opened by commands in the persistent shells", n)
	}
	// The D-Bus transport refuses non-root logins (systemd would ask polkit).
	if _, err := DialRemote(ctx, RemoteOptions{Name: h.Name, DBus: true, SSH: SSHOptions{Address: h.Addr, User: "deploy",
		IdentityFile: h.KeyFile, KnownHosts: h.KnownHosts, ConfigFile: "none", noAgent: true}}); err == nil || !strings.Contains(err.Error(), "root login") {
		t.Fatalf("D-Bus with a non-root login: %v", err)
	}
	// sudo asking for a password: a clear error, not a hang.
	r2 := dial("askpw")
	_, err = r2.Start(ctx, launch(driver{simBin: testhost.SimPath}, nil))
	if err == nil || !strings.Contains(err.Error(), "sudo") || !strings.Contains(err.Error(), "password") {
		t.Fatalf("want the sudo password error, got %v", err)
	}
	st, err := r2.conn.Run(ctx, Cmd{Args: []string{"systemctl", "is-active", "sglang.service"}, Sudo: true})
	if !errors.Is(err, ErrSudoPassword) {
		t.Fatalf("Run with sudo: %v %q", err, st.Stderr)
	}
}

func TestAgentAndProxyJump(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{})[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// An in-process ssh-agent holding the test key.
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	keyring := agent.NewKeyring()
	pemBytes, _ := os.ReadFile(h.KeyFile)
	raw, err := ssh.ParseRawPrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := keyring.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	home := filepath.Join(dir, "home")
	env := func(k string) string {
		switch k {
		case "SSH_AUTH_SOCK":
			return sock
		case "HOME":
			return home
		}
		return ""
	}
	// No identity file anywhere: only the agent can log in.
	c, err := DialSSH(ctx, SSHOptions{Address: h.Addr, User: "root", KnownHosts: h.KnownHosts, ConfigFile: "none", Getenv: env})
	if err != nil {
		t.Fatalf("agent login: %v", err)
	}
	c.Close()
	// Without the agent and without keys: a clear error.
	_, err = DialSSH(ctx, SSHOptions{Address: h.Addr, User: "root", KnownHosts: h.KnownHosts, ConfigFile: "none",
		Getenv: func(k string) string { return map[string]string{"HOME": home}[k] }})
	var ae *AuthError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "no SSH key") {
		t.Fatalf("no keys: %v", err)
	}
	// ~/.ssh/config: an alias with HostName, User, IdentityFile and a ProxyJump through the host
	// itself to its own loopback sshd (a second hop without routing between namespaces).
	kh := filepath.Join(dir, "known_hosts")
	line := h.Addr + " " + string(ssh.MarshalAuthorizedKey(h.HostKey))
	if err := os.WriteFile(kh, []byte(line+"127.0.0.1 "+string(ssh.MarshalAuthorizedKey(h.HostKey))), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config")
	conf := "Host gpu-inner\n  HostName 127.0.0.1\n  User root\n  IdentityFile " + h.KeyFile + "\n  ProxyJump root@jumpbox\n" +
		"Host jumpbox\n  HostName " + h.Addr + "\n  IdentityFile " + h.KeyFile + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = DialSSH(ctx, SSHOptions{Address: "gpu-inner", KnownHosts: kh, ConfigFile: cfg, noAgent: true, Getenv: env})
	if err != nil {
		t.Fatalf("ProxyJump: %v", err)
	}
	defer c.Close()
	out, err := c.Run(ctx, Cmd{Args: []string{"sh", "-c", "echo $SSH_CONNECTION"}})
	if err != nil || !strings.HasPrefix(string(out.Stdout), "127.0.0.1 ") {
		t.Fatalf("second hop: %q %v", out.Stdout, err)
	}
}

func TestCreateUnitAndGPUs(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{NoUnit: true, GPUs: 8})[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	opts := RemoteOptions{Name: h.Name, SSH: rootSSH(h), GPUWait: 1500 * time.Millisecond}
	r, err := DialRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l := launch(driver{simBin: testhost.SimPath}, nil)
	if _, err := r.Start(ctx, l); err == nil || !strings.Contains(err.Error(), "create_unit") {
		t.Fatalf("missing unit: %v", err)
	}
	opts.CreateUnit = true
	r2, err := DialRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	in, err := r2.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := in.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// sglangsim's nvidia-smi stand-in (the test machine has no GPU): 8 GPUs of 80 GB, and the
	// servers that really run on them.
	p, err := r2.Provenance(ctx)
	if err != nil || len(p.GPUs) != 8 || p.GPUs[0].MemoryMB != 81559 || p.GPUs[0].Name != "NVIDIA H100 80GB HBM3" || p.EngineVer == "" {
		t.Fatalf("provenance: %+v %v", p, err)
	}
	_ = ready
	// An orphan (started outside any unit) holds GPUs 0 and 1: a tp 4 point on GPUs 0-3 waits for
	// them and is gpu_busy; the same point on GPUs 4-7 starts.
	out, err := h.Run(ctx, "CUDA_VISIBLE_DEVICES=0,1 SGLANGSIM_LOAD_SECONDS=600 setsid "+testhost.SimPath+
		" --model-path /models/Qwen3.6-27B --tp-size 2 --port 31999 </dev/null >/dev/null 2>&1 & echo $!")
	if err != nil {
		t.Fatal(err)
	}
	orphan := strings.TrimSpace(string(out))
	defer h.Run(context.WithoutCancel(ctx), "kill -9 "+orphan)
	waitUntil(t, 20*time.Second, "nvidia-smi to list the orphan", func() bool {
		out, _ := h.Run(ctx, "nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader")
		return strings.Count(string(out), orphan+", GPU-") == 2
	})
	_, err = r2.Start(ctx, l)
	f, ok := AsFailure(err)
	if !ok || f.Class != ClassGPUBusy || !strings.Contains(strings.Join(f.Evidence, "\n"), "pid "+orphan+" holds") ||
		!strings.Contains(f.Detail, "GPU 0,1,2,3") {
		t.Fatalf("want gpu_busy naming the orphan on GPUs 0-3: %v", err)
	}
	l2 := l
	l2.Env = maps.Clone(l.Env)
	l2.Env["CUDA_VISIBLE_DEVICES"] = "4,5,6,7"
	in2, err := r2.Start(ctx, l2)
	if err != nil {
		t.Fatalf("a point on the free GPUs 4-7: %v", err)
	}
	if _, err := in2.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := in2.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := r2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReadFile("/etc/systemd/system/sglang.service"); err == nil {
		t.Fatal("the created unit was not removed")
	}
	out, _ = h.Nsenter(ctx, "systemctl", "show", "-p", "LoadState", "--value", "sglang.service")
	if strings.TrimSpace(string(out)) != "not-found" {
		t.Fatalf("unit still loaded: %s", out)
	}
}

// waitUntil polls cond until it holds or the timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExecStartQuotingOnRealSystemd: whatever argv a launch carries,
// the process gets exactly that argv (read back from /proc/PID/cmdline),
// with ${NAME} of the launch's environment substituted as systemd does in
// ExecStart= (the sweep's launch script), long arguments included.
func TestExecStartQuotingOnRealSystemd(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r, ctx := bootOne(t, testhost.Options{})
	nasty := []string{"50%", "%n%i%%", "$HOME", "${X}", "$$", `back\slash`, `\\double`, `"quoted"`, "it's", ";", "a;b", "tab\there",
		"\x01ctl", "ünïcode ✓", "", " lead", "trail ", "--flag=va lue", "*", "~", "`id`", "$(id)", "\\;", "${P}", "x${P}y", "${P", "$P"}
	long := strings.Repeat("L", 3000)
	for _, args := range [][]string{nasty, {long, long, "x"}} {
		argv := append([]string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.2; done", "sh"}, args...)
		in, err := r.Start(ctx, Launch{Argv: argv, Env: map[string]string{"P": "50% $HOME \"q\" \\"}, StopTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		pid, err := h.Nsenter(ctx, "systemctl", "show", "-p", "MainPID", "--value", "sglang.service")
		if err != nil {
			t.Fatalf("%v %q", err, pid)
		}
		p := strings.TrimSpace(string(pid))
		out, err := h.Nsenter(ctx, "cat", "/proc/"+p+"/cmdline")
		if err != nil {
			t.Fatalf("%v %q", err, out)
		}
		cmdline := string(out)
		out, _ = h.Nsenter(ctx, "sh", "-c", "tr '\\0' '\\n' < /proc/"+p+"/environ | grep '^P='")
		env := string(out)
		got := strings.Split(strings.TrimSuffix(cmdline, "\x00"), "\x00")
		if want := ExpandArgv(argv, map[string]string{"P": "50% $HOME \"q\" \\"}); !slices.Equal(got, want) {
			t.Errorf("argv seen by the process:\n got %q\nwant %q", got, want)
		}
		if strings.TrimSpace(env) != `P=50% $HOME "q" \` {
			t.Errorf("Environment= value: %q", env)
		}
		if _, err := in.Stop(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFollowerLeavesNothing: the journal follower and the death watcher of
// WaitReady end with it; no remote process lingers.
func TestFollowerLeavesNothing(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r, ctx := bootOne(t, testhost.Options{})
	in, err := r.Start(ctx, benchLaunch(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for range 20 {
		out, _ = h.Nsenter(ctx, "sh", "-c", "ps -eo args | grep -E '^(journalctl -f|tail --pid|cat$)' || true")
		if len(strings.TrimSpace(string(out))) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("left on the host after WaitReady: %q", out)
	}
	if _, err := in.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// TestStartRefusedBySystemd: `systemctl start` itself fails (an operator
// ExecStartPre= check): a failure with systemd's words, never the previous
// invocation's state.
func TestStartRefusedBySystemd(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r := bootRemote(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l := launch(driver{simBin: testhost.SimPath}, nil)
	in, err := r.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile("/etc/systemd/system/sglang.service.d/10-operator.conf",
		[]byte("[Service]\nExecStartPre=/bin/sh -c 'echo GPU health check failed >&2; exit 3'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := func(when string) {
		t.Helper()
		_, err = r.Start(ctx, l)
		f, ok := AsFailure(err)
		if !ok || f.Class != ClassCrashDuringStart || !strings.Contains(strings.Join(f.Evidence, "\n"), "GPU health check failed") {
			t.Fatalf("%s: want crash_during_start with the ExecStartPre output, got %v (%q)", when, err, func() []string {
				if f != nil {
					return f.Evidence
				}
				return nil
			}())
		}
	}
	refused("a refused start")
	// journald paused across the start: it reads the ExecStartPre's stream once the process has
	// exited, and the line has no invocation id (what a loaded host did now and then, CI
	// 2026-12-07); the line is the evidence all the same.
	if out, err := h.Run(ctx, `j=$(systemctl show -p MainPID --value systemd-journald.service) && [ "$j" -gt 0 ] && kill -STOP "$j" && { setsid sh -c "sleep 3; kill -CONT $j" </dev/null >/dev/null 2>&1 & }`); err != nil {
		t.Fatalf("pausing journald: %v %s", err, out)
	}
	refused("a refused start with journald paused")
	if out, err := h.Run(ctx, `journalctl -q -o export -n 1 MESSAGE='GPU health check failed' | grep -c '^_SYSTEMD_INVOCATION_ID=' || true`); err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Logf("the paused start's line has an invocation id (%v %q): journald read its cgroup in time, and this run did not test the fallback", err, out)
	}
	if err := r.Restore(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLocalChildDiesWithSpecsweep: a local server is not orphaned when
// specsweep itself is killed (parent-death signal SIGTERM: the server drains
// and exits).
func TestLocalChildDiesWithSpecsweep(t *testing.T) {
	if os.Getenv("HOSTCTL_HELPER") == "1" {
		return // the helper's work is in TestHelperLocalParent
	}
	sim := testhost.SimBinary(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLocalParent$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOSTCTL_HELPER=1", "HOSTCTL_SIM="+sim, "HOSTCTL_PORT="+strconv.Itoa(testhost.FreePort(t)))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var child int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CHILD "); ok {
			child, _ = strconv.Atoi(v)
			break
		}
	}
	if child == 0 {
		t.Fatal("the helper did not report its server")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL) // specsweep dies without cleaning up
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(child, 0) != nil {
			return
		}
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return // exited, waiting for its (new) parent to reap it
		}
	}
	_ = syscall.Kill(-child, syscall.SIGKILL)
	t.Fatalf("server %d outlived its parent", child)
}

func TestHelperLocalParent(t *testing.T) {
	if os.Getenv("HOSTCTL_HELPER") != "1" {
		t.Skip("helper process of TestLocalChildDiesWithSpecsweep")
	}
	l := NewLocal(LocalOptions{})
	e := map[string]string{}
	for k, v := range fastEnv {
		e[k] = v
	}
	port, _ := strconv.Atoi(os.Getenv("HOSTCTL_PORT"))
	in, err := l.Start(context.Background(), Launch{Argv: []string{os.Getenv("HOSTCTL_SIM"), "--model-path", "/models/Qwen3.5-122B-A10B",
		"--tp-size", "4", "--port", strconv.Itoa(port)}, Env: e, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, _ := in.State(context.Background())
	fmt.Printf("CHILD %d\n", st.MainPID)
	select {}
}

func TestLocalGPUBusy(t *testing.T) {
	// sglangsim's nvidia-smi stand-in on PATH, and a registry of the GPUs its servers hold.
	dir := t.TempDir()
	sim := testhost.SimBinary(t)
	if err := os.Symlink(sim, filepath.Join(dir, "nvidia-smi")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	t.Setenv("SGLANGSIM_STATE_DIR", filepath.Join(dir, "gpus"))
	t.Setenv("SGLANGSIM_GPUS", "8")
	// An orphan holds GPU 2: a tp 4 point (GPUs 0-3) is gpu_busy naming it.
	orphan := exec.Command(sim, "--model-path", "/models/Qwen3.6-27B", "--tp-size", "1", "--port", strconv.Itoa(testhost.FreePort(t)))
	orphan.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES=2", "SGLANGSIM_LOAD_SECONDS=600")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orphan.Process.Kill(); _ = orphan.Wait() })
	pid := strconv.Itoa(orphan.Process.Pid)
	waitUntil(t, 20*time.Second, "nvidia-smi to list the orphan", func() bool {
		out, _ := exec.Command("nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader").Output()
		return strings.Contains(string(out), pid)
	})
	l := NewLocal(LocalOptions{GPUWait: 300 * time.Millisecond})
	ln := launch(localDriver(t), nil)
	_, err := l.Start(t.Context(), ln)
	if f, ok := AsFailure(err); !ok || f.Class != ClassGPUBusy || !strings.Contains(strings.Join(f.Evidence, " "), "pid "+pid+" holds") ||
		!strings.Contains(strings.Join(f.Evidence, " "), "on GPU 2") {
		t.Fatalf("want gpu_busy naming the orphan on GPU 2: %v", err)
	}
	// Once the orphan is gone the GPUs are free.
	_ = orphan.Process.Kill()
	_ = orphan.Wait()
	in, err := l.Start(t.Context(), ln)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestDBusAfterReconnect: the D-Bus transport re-dials the bus when the SSH
// connection under it was re-established.
func TestDBusAfterReconnect(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv})[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := DialRemote(ctx, RemoteOptions{Name: h.Name, DBus: true, SSH: rootSSH(h)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.UnitState(ctx); err != nil {
		t.Fatal(err)
	}
	_, _ = h.Nsenter(ctx, "pkill", "-KILL", "-f", "^sshd: root")
	var st State
	for i := 0; i < 50; i++ {
		if st, err = r.UnitState(ctx); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || st.LoadState != "loaded" {
		t.Fatalf("state over D-Bus after a reconnect: %+v %v", st, err)
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
}

// TestSFTPStartsAfterAStalledConnection: the connection's sshd stops answering while the SFTP
// client starts on it; the keepalive closes the connection after 3 s, and the file is written over
// a new one, as a command's session is. Before, the write failed with "sftp: EOF" (the SFTP start
// was not retried; a CI run under load failed so, 2026-12-07).
func TestSFTPStartsAfterAStalledConnection(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{NoUnit: true})[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := DialSSH(ctx, rootSSH(h))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Run(ctx, Cmd{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	stopConnection(ctx, t, h, c)
	if err := c.WriteFileAtomic(ctx, "/tmp/after-a-stall", []byte("written\n"), 0o644); err != nil {
		t.Fatalf("a write while the connection's sshd is stopped: %v", err)
	}
	if b, err := h.ReadFile("/tmp/after-a-stall"); err != nil || string(b) != "written\n" {
		t.Fatalf("the file: %q %v", b, err)
	}
	// At least the one: on a loaded machine the keepalive may close the new connection too.
	if n := c.Reconnects(); n < 1 {
		t.Errorf("%d reconnects; want the one after the stalled connection", n)
	}
	// A command cut off by the keepalive is not run again: its error says why the connection went,
	// a session's and the persistent shell's alike.
	for name, run := range map[string]func() error{
		"a command":       func() error { _, err := c.Run(ctx, Cmd{Args: []string{"sleep", "30"}}); return err },
		"a shell command": func() error { _, err := c.RunShell(ctx, "sleep 30", time.Minute, 1<<10); return err },
	} {
		if _, err := c.Run(ctx, Cmd{Args: []string{"true"}}); err != nil { // a live connection again
			t.Fatal(err)
		}
		res := make(chan error, 1)
		go func() { res <- run() }()
		time.Sleep(time.Second)
		stopConnection(ctx, t, h, c)
		err := <-res
		var ue *UnreachableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "closed after no answer to a keepalive within 3s") {
			t.Errorf("%s on a connection the keepalive closed: %v; want host_unreachable saying so", name, err)
		}
	}
}

// stopConnection stops (SIGSTOP) the host's processes that hold c's connection, sshd's for its
// login, and kills them when the test ends.
func stopConnection(ctx context.Context, t *testing.T, h *testhost.Host, c *Conn) {
	cl, _, err := c.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(cl.LocalAddr().String())
	out, err := h.Nsenter(ctx, "ss", "-Htnp", "state", "established", "( sport = :22 and dport = :"+port+" )")
	if err != nil {
		t.Fatalf("ss: %v %s", err, out)
	}
	pids := regexp.MustCompile(`pid=(\d+)`).FindAllStringSubmatch(string(out), -1)
	if len(pids) == 0 {
		t.Fatalf("no process holds the connection from port %s: %q", port, out)
	}
	for _, p := range pids {
		if out, err := h.Nsenter(ctx, "kill", "-STOP", p[1]); err != nil {
			t.Fatalf("kill -STOP %s: %v %s", p[1], err, out)
		}
		t.Cleanup(func() { _, _ = h.Nsenter(context.Background(), "kill", "-KILL", p[1]) })
	}
}
