// Package testhost boots real GPU-host stand-ins for tests: systemd as PID 1
// of its own PID namespace, on its own overlay root, with OpenSSH, journald
// and an operator-style sglang.service running sglangsim, reachable over a
// veth pair at 10.231.N.2 in a network namespace of its own
// (docs/testhosts.md, ../shared/design/TESTHOSTS.md).
//
// Hosts are torn down with t.Cleanup even when the test fails: the
// namespace's PID 1 is SIGKILLed by its pid, the network namespace and the
// veth deleted, the overlay unmounted and the scratch directory removed.
// Boot skips the test (with what to install) when not root or when a needed
// binary is missing.
package testhost

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Subnet is the /16 every test host address lives in: host N is 10.231.N.2,
// the machine's side of its veth 10.231.N.1.
const Subnet = "10.231."

// SimPath is where sglangsim is installed inside every host.
const SimPath = "/usr/local/bin/sglangsim"

// Options shape the hosts Boot creates.
type Options struct {
	// Env is added to the operator unit's Environment= (e.g. SGLANGSIM_TIME_SCALE).
	Env map[string]string
	// Args replaces the simulator arguments of the operator unit's ExecStart
	// (default: --model-path /models/Qwen3.5-122B-A10B --tp-size 4 --host 127.0.0.1 --port 30000).
	Args []string
	// UnitEnabled makes the operator unit enabled and started at boot.
	UnitEnabled bool
	// NoUnit leaves sglang.service out (a host where the unit does not exist).
	NoUnit bool
	// BootTimeout bounds each host's boot (default 90 s).
	BootTimeout time.Duration
	// GPUs, when positive, gives the host that many simulated GPUs of 80 GB: sglangsim's nvidia-smi
	// stand-in installed as /usr/local/bin/nvidia-smi, and a host file naming the GPU count and the
	// registry the servers (and orphans) record their GPUs in (docs/sglangsim.md). 0: no nvidia-smi.
	GPUs int
	// LoginSessions keeps pam_systemd in the host's PAM session stack, as on a stock Debian host:
	// each SSH login is then a logind session (a scope in PID 1, root's runtime directory mounted
	// at the first and unmounted after the last). Off by default: nothing specsweep does reads a
	// session, and each login cost about 100 ms of CPU more (40 logins to one host: 8.6-8.8
	// CPU-seconds with it, 4.0-4.8 without; docs/testhosts.md).
	LoginSessions bool
	// CPUGroup, when not nil, puts every process of the host in a cgroup of its own under that
	// group in the cpu controller's hierarchy (cpugroup.go): the host is served as the group's
	// other members are.
	CPUGroup *CPUGroup
}

// NvidiaSMIPath is where a host with GPUs has the nvidia-smi stand-in.
const NvidiaSMIPath = "/usr/local/bin/nvidia-smi"

// DefaultArgs are the simulator arguments of the operator unit.
var DefaultArgs = []string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--host", "127.0.0.1", "--port", "30000"}

// Host is one booted test host.
type Host struct {
	Name       string // hostname inside, also the netns name
	N          int    // subnet index: 10.231.N.0/24
	Addr       string // 10.231.N.2
	SSHAddr    string // 10.231.N.2:22
	Root       string // the host's root (overlay) as seen from the machine
	KeyFile    string // private test key (OpenSSH PEM) authorised for root
	KnownHosts string // known_hosts file holding this host's key (and only it)
	HostKey    ssh.PublicKey
	Signer     ssh.Signer
	UnitText   []byte // the operator's sglang.service as installed (nil with NoUnit)

	scratch   string
	vethHost  string
	vethPeer  string
	lock      *os.File    // the subnet lock of a Boot host (a cluster's is its network's)
	cnet      *clusterNet // the shared subnet of a BootCluster host, nil for Boot
	hostsFile []byte      // /etc/hosts of a cluster host (every member), nil for Boot
	pid1      int         // PID 1 of the host's PID namespace, as seen from the machine
	launcher  int         // the unshare process
	done      chan struct{}
	stopOnce  sync.Once
	runMu     sync.Mutex
	runConn   *ssh.Client // Run's shared connection, nil until its first command
	cgroups   []string    // the host's own cgroups, one per hierarchy its systemd uses (cgroup.go)
}

// UnitPath is the operator unit's path inside the host.
const UnitPath = "/etc/systemd/system/sglang.service"

var bootMu sync.Mutex // serialises the cheap setup steps across hosts of one process

// Requirements reports what is missing to boot hosts here, or "".
func Requirements() string {
	if os.Geteuid() != 0 {
		return "testhost: needs root (network namespaces, overlay mounts, systemd as PID 1); CI runs as root"
	}
	for _, b := range []struct{ path, pkg string }{
		{"/usr/sbin/sshd", "openssh-server"},
		{"/usr/lib/openssh/sftp-server", "openssh-server"},
		{"/lib/systemd/systemd", "systemd"},
		{"/usr/bin/unshare", "util-linux"},
		{"/usr/bin/nsenter", "util-linux"},
	} {
		if _, err := os.Stat(b.path); err != nil {
			return fmt.Sprintf("testhost: %s missing: apt-get install -y %s", b.path, b.pkg)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "testhost: ip missing: apt-get install -y iproute2"
	}
	return ""
}

// Boot boots n hosts in parallel and registers their teardown with t.Cleanup.
// It skips the test when Requirements reports something missing.
func Boot(t testing.TB, n int, o Options) []*Host {
	t.Helper()
	if msg := Requirements(); msg != "" {
		t.Skip(msg)
	}
	if testing.Short() {
		t.Skip("testhost: real hosts are skipped with -short")
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 90 * time.Second
	}
	reapStale()
	sim := SimBinary(t)
	key, signer := clientKey(t)
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	hosts := make([]*Host, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		h := &Host{KeyFile: keyFile, Signer: signer, done: make(chan struct{})}
		hosts[i] = h
		t.Cleanup(h.teardown)
		wg.Go(func() { errs[i] = h.boot(sim, o) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("testhost: booting host %d: %v\n%s", i, err, hosts[i].consoleTail())
		}
	}
	return hosts
}

var (
	simOnce sync.Once
	simPath string
	simErr  error
)

// simKeep is how long a simulator build is kept after its process is gone: longer than any test
// run (make test's packages have 60 minutes).
const simKeep = 2 * time.Hour

// SimBinary builds sglangsim once per test process and returns its path.
func SimBinary(t testing.TB) string {
	t.Helper()
	simOnce.Do(func() {
		// One directory per test process, removed by a later Boot once the process is gone.
		dir := fmt.Sprintf("/var/tmp/sst-sim-%d", os.Getpid())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			simErr = err
			return
		}
		simPath = filepath.Join(dir, "sglangsim")
		simErr = BuildCommand("sglangsim", simPath)
	})
	if simErr != nil {
		t.Fatalf("testhost: %v", simErr)
	}
	return simPath
}

// SimEras lists the SGLang release profiles the simulator knows (SGLANGSIM_VERSION=list), oldest
// first: tests run against the oldest and the newest.
func SimEras(t testing.TB) []string {
	t.Helper()
	cmd := exec.Command(SimBinary(t))
	cmd.Env = append(os.Environ(), "SGLANGSIM_VERSION=list")
	out, err := cmd.Output()
	eras := strings.Fields(string(out))
	if err != nil || len(eras) == 0 {
		t.Fatalf("testhost: SGLANGSIM_VERSION=list: %v (%q)", err, out)
	}
	return eras
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the specsweep module")
	}
	return filepath.Dir(mod), nil
}

func clientKey(t testing.TB) ([]byte, ssh.Signer) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "specsweep-test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(blk), signer
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// lockDir holds one lock file per subnet index in use by a live test process.
const lockDir = "/run/specsweep-testhost"

// allocate picks a free subnet index for a Boot host.
func (h *Host) allocate() error {
	f, n, err := allocateSubnet()
	if err != nil {
		return err
	}
	h.lock, h.N = f, n
	return nil
}

// allocateSubnet picks a free subnet index: its lock file is flocked by this
// process (released by the kernel if the process dies) and no interface of
// the machine holds an address in it.
func allocateSubnet() (*os.File, int, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, 0, err
	}
	for n := 1; n < 255; n++ {
		f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(n)+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, 0, err
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		out, _ := exec.Command("ip", "-o", "-4", "addr", "show", "to", fmt.Sprintf("%s%d.0/24", Subnet, n)).Output()
		if len(bytes.TrimSpace(out)) != 0 {
			f.Close() // a leftover we do not own: skip the index
			continue
		}
		return f, n, nil
	}
	return nil, 0, errors.New("no free 10.231.N.0/24 subnet")
}

func (h *Host) boot(sim string, o Options) error {
	if h.cnet == nil { // a cluster host is named by BootCluster
		if err := h.allocate(); err != nil {
			return err
		}
		pid := os.Getpid()
		h.Name = fmt.Sprintf("sst-%d-%d", pid, h.N)
		h.vethHost = fmt.Sprintf("s%dh%d", pid, h.N)
		h.vethPeer = fmt.Sprintf("s%dc%d", pid, h.N)
		h.Addr = fmt.Sprintf("%s%d.2", Subnet, h.N)
		h.SSHAddr = net.JoinHostPort(h.Addr, "22")
	}
	vethPeer := h.vethPeer
	var err error
	h.scratch, err = os.MkdirTemp("/var/tmp", h.Name+"-")
	if err != nil {
		return err
	}
	up, work := filepath.Join(h.scratch, "upper"), filepath.Join(h.scratch, "work")
	h.Root = filepath.Join(h.scratch, "root")
	for _, d := range []string{up, work, h.Root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := run("mount", "-t", "overlay", "overlay", "-o",
		"lowerdir=/,upperdir="+up+",workdir="+work, h.Root); err != nil {
		return err
	}
	if err := h.prepareRoot(sim, o); err != nil {
		return err
	}
	// Network: the namespace, a veth pair, addresses. A Boot host's machine side holds 10.231.N.1;
	// a cluster host's is a port of the cluster's bridge, which holds it.
	steps := [][]string{
		{"netns", "add", h.Name},
		{"link", "add", h.vethHost, "type", "veth", "peer", "name", vethPeer},
		{"link", "set", vethPeer, "netns", h.Name},
	}
	if h.cnet == nil {
		steps = append(steps, []string{"addr", "add", fmt.Sprintf("%s%d.1/24", Subnet, h.N), "dev", h.vethHost})
	} else {
		steps = append(steps, []string{"link", "set", h.vethHost, "master", h.cnet.bridge})
	}
	steps = append(steps,
		[]string{"link", "set", h.vethHost, "up"},
		[]string{"-n", h.Name, "addr", "add", h.Addr + "/24", "dev", vethPeer},
		[]string{"-n", h.Name, "link", "set", vethPeer, "up"},
		[]string{"-n", h.Name, "link", "set", "lo", "up"},
	)
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return err
		}
	}
	// Before any traffic: the host's address routes to its own link, never to the default route.
	if err := h.checkRoute(); err != nil {
		return err
	}
	if err := h.startSystemd(o.CPUGroup); err != nil {
		return err
	}
	return h.waitSSH(o.BootTimeout)
}

// prepareRoot writes the host's own files into its overlay root: host key,
// authorized_keys, sshd settings, sglangsim and the operator unit, and
// removes boot units a test host does not want.
func (h *Host) prepareRoot(sim string, o Options) error {
	r := h.Root
	// Units that must not start inside a test host.
	for _, glob := range []string{
		"etc/systemd/system/multi-user.target.wants/*",
		"etc/systemd/system/getty.target.wants/*",
		"etc/systemd/system/timers.target.wants/*",
		"etc/systemd/system/sysinit.target.wants/*",
	} {
		matches, _ := filepath.Glob(filepath.Join(r, glob))
		for _, m := range matches {
			if filepath.Base(m) == "ssh.service" {
				continue
			}
			if err := os.Remove(m); err != nil {
				return err
			}
		}
	}
	// Mask the console getty and units that touch hardware. udev especially: inside the host it
	// would act on the machine's devices (the host sees the machine's /dev) and re-apply .link
	// policies to the veth, changing its MAC address after the machine cached it (then the host
	// is unreachable until the neighbour entry expires, ~30 s).
	for _, u := range []string{"systemd-udevd.service", "systemd-udevd-control.socket", "systemd-udevd-kernel.socket",
		"systemd-udev-trigger.service", "systemd-udev-settle.service", "systemd-hwdb-update.service",
		"console-getty.service", "getty@tty1.service", "systemd-networkd.service",
		"systemd-resolved.service", "systemd-timesyncd.service", "apt-daily.timer", "apt-daily-upgrade.timer",
		"postgresql.service", "e2scrub_reap.service", "systemd-pstore.service",
		// Boot and login work no test needs, each a process or more on every host (process
		// accounting of a test host's boot and first login): modules a host cannot load (it shares
		// the machine's kernel), sysctls and sysusers the machine's root already has, utmp records,
		// and a user manager (a second systemd) for every SSH login's user.
		"modprobe@.service", "systemd-modules-load.service", "systemd-sysctl.service", "systemd-sysusers.service",
		"systemd-update-utmp.service", "systemd-update-utmp-runlevel.service", "user@.service",
		// systemd-tmpfiles at boot: the machine's root already has the directories its rules make,
		// the /dev ones would act on the machine's /dev (the host sees it), and its /tmp rule
		// empties the overlay's /tmp by whiting out every entry of the machine's /tmp: 0.12
		// CPU-seconds a host, a seventh of what its boot's processes used (docs/testhosts.md).
		"systemd-tmpfiles-setup.service", "systemd-tmpfiles-setup-dev.service",
		"systemd-tmpfiles-setup-dev-early.service", "systemd-tmpfiles-clean.timer",
		// Kernel file systems no test uses, each a mount process at boot; the journal's flush to
		// /var (the journal stays in /run: nothing reads it after the host is gone), and the
		// kernel's audit messages, which every host's journald would get (audit knows no network
		// namespace); password agents and the initctl socket of a console nobody has.
		"dev-hugepages.mount", "dev-mqueue.mount", "sys-fs-fuse-connections.mount", "sys-kernel-debug.mount",
		"sys-kernel-tracing.mount", "systemd-journal-flush.service", "systemd-journald-audit.socket",
		"systemd-ask-password-console.path", "systemd-ask-password-wall.path", "systemd-initctl.socket"} {
		p := filepath.Join(r, "etc/systemd/system", u)
		_ = os.Remove(p)
		if err := os.Symlink("/dev/null", p); err != nil {
			return err
		}
	}
	// Mask every generator (systemd.generator(7): a link to /dev/null in /etc/systemd/system-generators
	// masks the one of that name). systemd runs them all at boot and at each daemon-reload, a point's
	// start among them: 13 processes per reload, 2.9 of the 19.5 CPU-minutes of processes of a whole
	// `go test ./...` here; none makes a unit a test host needs (fstab's mounts, gettys, sysv scripts,
	// cryptsetup, postgresql's clusters). A real host runs them: its reloads cost more (docs/testhosts.md).
	if err := maskGenerators(r); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r, "etc/hostname"), []byte(h.Name+"\n"), 0o644); err != nil {
		return err
	}
	if h.cnet != nil {
		if err := os.WriteFile(filepath.Join(r, "etc/hosts"), h.hostsFile, 0o644); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(r, SharedPath), 0o755); err != nil {
			return err
		}
	}
	// Own host keys: only ed25519, so every host has a distinct identity.
	keys, _ := filepath.Glob(filepath.Join(r, "etc/ssh/ssh_host_*"))
	for _, k := range keys {
		_ = os.Remove(k)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "root@"+h.Name)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r, "etc/ssh/ssh_host_ed25519_key"), pem.EncodeToMemory(blk), 0o600); err != nil {
		return err
	}
	h.HostKey, err = ssh.NewPublicKey(pub)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r, "etc/ssh/ssh_host_ed25519_key.pub"), ssh.MarshalAuthorizedKey(h.HostKey), 0o644); err != nil {
		return err
	}
	conf := "# specsweep test host\nHostKey /etc/ssh/ssh_host_ed25519_key\nPasswordAuthentication no\n" +
		"KbdInteractiveAuthentication no\nUseDNS no\nMaxSessions 64\nMaxStartups 64:30:128\n"
	if err := os.MkdirAll(filepath.Join(r, "etc/ssh/sshd_config.d"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r, "etc/ssh/sshd_config.d/00-specsweep-test.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	// No message of the day: pam_motd runs /etc/update-motd.d's scripts (run-parts, uname, ...) at
	// every SSH login, processes no test reads.
	if err := dropPAMLines(filepath.Join(r, "etc/pam.d/sshd"), "pam_motd.so"); err != nil {
		return err
	}
	if !o.LoginSessions {
		if err := dropPAMLines(filepath.Join(r, "etc/pam.d/common-session"), "pam_systemd.so"); err != nil {
			return err
		}
	}
	// root's shell start-up files are a fresh Debian system's (/etc/skel's), not this machine's:
	// the machine's .bashrc (bash reads it for sshd's commands) ran pyenv's init, whose rehash of a
	// shared directory printed errors into the output of commands run side by side.
	for _, f := range []string{".bashrc", ".profile"} {
		b, err := os.ReadFile(filepath.Join(r, "etc/skel", f))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(filepath.Join(r, "root", f), b, 0o644); err != nil {
			return err
		}
	}
	sshDir := filepath.Join(r, "root/.ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sshDir, "authorized_keys"), ssh.MarshalAuthorizedKey(h.Signer.PublicKey()), 0o600); err != nil {
		return err
	}
	h.KnownHosts = filepath.Join(h.scratch, "known_hosts")
	line := h.Addr + " " + string(ssh.MarshalAuthorizedKey(h.HostKey))
	if err := os.WriteFile(h.KnownHosts, []byte(line), 0o600); err != nil {
		return err
	}
	// sglangsim and the operator's unit.
	if err := copyFile(sim, filepath.Join(r, SimPath), 0o755); err != nil {
		return err
	}
	if o.GPUs > 0 {
		if err := writeGPUHostFiles(r, o.GPUs); err != nil {
			return err
		}
	}
	if o.NoUnit {
		return nil
	}
	h.UnitText = OperatorUnit(o.Args, o.Env)
	if err := os.WriteFile(filepath.Join(r, UnitPath), h.UnitText, 0o644); err != nil {
		return err
	}
	if o.UnitEnabled {
		if err := os.Symlink(UnitPath, filepath.Join(r, "etc/systemd/system/multi-user.target.wants/sglang.service")); err != nil {
			return err
		}
	}
	return nil
}

// writeGPUHostFiles gives the host under root n simulated GPUs of 80 GB: the nvidia-smi stand-in and
// sglangsim's host file (GPU count, registry).
func writeGPUHostFiles(root string, n int) error {
	smi := filepath.Join(root, NvidiaSMIPath)
	_ = os.Remove(smi)
	if err := os.Symlink(SimPath, smi); err != nil {
		return err
	}
	env := fmt.Sprintf("SGLANGSIM_GPUS=%d\nSGLANGSIM_GPU_MEM_GB=80\nSGLANGSIM_STATE_DIR=/run/sglangsim\n", n)
	return os.WriteFile(filepath.Join(root, "etc/sglangsim.env"), []byte(env), 0o644)
}

// OperatorUnit renders an operator-style sglang.service running sglangsim,
// with comments and a layout a drop-in must never disturb.
func OperatorUnit(args []string, env map[string]string) []byte {
	if args == nil {
		args = DefaultArgs
	}
	var b strings.Builder
	b.WriteString("# /etc/systemd/system/sglang.service -- maintained by the ops team, do not edit by hand\n")
	b.WriteString("[Unit]\nDescription=SGLang inference server (sglangsim stand-in)\nAfter=network-online.target\nWants=network-online.target\n\n")
	b.WriteString("[Service]\nType=simple\nUser=root\nWorkingDirectory=/\n")
	b.WriteString("Environment=PYTHONUNBUFFERED=1\n")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "Environment=%s=%s\n", k, env[k])
	}
	b.WriteString("# the launch line\nExecStart=" + SimPath)
	for _, a := range args {
		b.WriteString(" " + a)
	}
	b.WriteString("\nRestart=no\nTimeoutStopSec=90\nLimitNOFILE=65535\n\n[Install]\nWantedBy=multi-user.target\n")
	return []byte(b.String())
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// startSystemd starts systemd as PID 1 of a new PID namespace inside the
// network namespace, on the overlay root. The launcher runs on a locked OS
// thread that lives until teardown, so its parent-death signal (SIGKILL)
// fires only if the test process dies; unshare --kill-child passes it on
// to the namespace's PID 1.
func (h *Host) startSystemd(cpu *CPUGroup) error {
	console, err := os.Create(filepath.Join(h.scratch, "console.log"))
	if err != nil {
		return err
	}
	// The machine's /dev is bound into the root before the chroot (the overlay shows only the empty
	// mount point); the mount namespace is private, so nothing propagates back to the machine.
	// A cluster host's shared directory is bound the same way, in the host's mount namespace only.
	r := h.Root
	script := "mount --rbind /dev " + r + "/dev && mount -t proc proc " + r + "/proc && mount -t sysfs sysfs " + r + "/sys && "
	if h.cnet != nil {
		script += "mount --bind " + h.cnet.shared + " " + r + SharedPath + " && "
	}
	script += "cd " + r + " && exec chroot " + r + " /bin/sh -c 'hostname " + h.Name +
		" && cd / && exec /lib/systemd/systemd --system --unit=multi-user.target'"
	// The host's systemd gets cgroups of its own and a cgroup namespace rooted in them (cgroup.go):
	// the launcher joins them before unshare, and its child, PID 1, is born there.
	parents, err := systemdCgroups()
	if err != nil {
		console.Close()
		return err
	}
	if d := cpu.Dir(); d != "" {
		parents = append(parents, d)
	}
	h.cgroups, err = hostCgroups(parents, h.Name)
	if err != nil {
		console.Close()
		return err
	}
	join := ""
	for _, d := range h.cgroups {
		join += "echo $$ > '" + filepath.Join(d, "cgroup.procs") + "' && "
	}
	// (Joined before ip netns exec, which mounts a /sys of its own without the cgroup mounts.)
	cmd := exec.Command("sh", "-c", join+`exec "$@"`, "sh", "ip", "netns", "exec", h.Name,
		"unshare", "--cgroup", "--pid", "--fork", "--kill-child", "--mount",
		"--propagation", "private", "--uts", "sh", "-c", script)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after teardown
		// The host's systemd, and so all the host runs, gets the cpu group's slice from this
		// thread (cpugroup.go); the thread only waits after this.
		if err := cpu.sliceThisThread(); err != nil {
			started <- err
			return
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		console.Close()
		close(h.done)
	}()
	if err := <-started; err != nil {
		console.Close()
		close(h.done)
		return err
	}
	h.launcher = cmd.Process.Pid
	// PID 1 of the namespace is unshare's only child.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", h.launcher, h.launcher))
		if f := strings.Fields(string(b)); len(f) > 0 {
			h.pid1, _ = strconv.Atoi(f[0])
			return nil
		}
		select {
		case <-h.done:
			return errors.New("the launcher exited before systemd started")
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("no PID 1 appeared in the new PID namespace")
}

// waitSSH waits until sshd inside the host greets on port 22 and systemd has
// finished booting (running or degraded).
func (h *Host) waitSSH(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sshd of %s did not answer within %v", h.Name, timeout)
		}
		select {
		case <-h.done:
			return errors.New("systemd exited during boot")
		default:
		}
		c, err := net.DialTimeout("tcp", h.SSHAddr, time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 4)
			_, err = io.ReadFull(c, buf)
			c.Close()
			if err == nil && string(buf) == "SSH-" {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := h.Nsenter(ctx, "systemctl", "is-system-running", "--wait")
	state := strings.TrimSpace(string(out))
	if state == "running" || state == "degraded" {
		return nil
	}
	return fmt.Errorf("systemd did not finish booting: %q %v", state, err)
}

// Nsenter runs a command inside the host (all its namespaces and its root),
// bypassing SSH: for test set-up and assertions.
func (h *Host) Nsenter(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"-t", strconv.Itoa(h.pid1), "-m", "-u", "-n", "-i", "-p", "-r", "-w", "--"}, args...)
	return exec.CommandContext(ctx, "nsenter", full...).CombinedOutput()
}

// ReadFile reads a file of the host by its path inside the host.
func (h *Host) ReadFile(path string) ([]byte, error) {
	return os.ReadFile(filepath.Join(h.Root, path))
}

// WriteFile writes a file of the host by its path inside the host.
func (h *Host) WriteFile(path string, data []byte, mode os.FileMode) error {
	p := filepath.Join(h.Root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, mode)
}

// Unplug takes the host's side of its veth down: the host vanishes from the
// network (packets are dropped: connections hang, no RST), as a host that
// crashed. The machine side stays up, so the route to 10.231.N.0/24 stays
// on the veth (marked linkdown) or, for a cluster host, on the cluster's
// bridge, and traffic never falls through to the machine's default route.
func (h *Host) Unplug() error {
	if err := run("ip", "-n", h.Name, "link", "set", h.vethPeer, "down"); err != nil {
		return err
	}
	if err := h.checkRoute(); err != nil {
		return fmt.Errorf("after unplugging: %w", err)
	}
	return nil
}

// link is the machine-side interface the host's address routes to: its veth, or its cluster's bridge.
func (h *Host) link() string {
	if h.cnet != nil {
		return h.cnet.bridge
	}
	return h.vethHost
}

// checkRoute fails unless the machine routes the host's address to the host's own link (its veth, or
// its cluster's bridge), so test traffic can never leave by the default route.
func (h *Host) checkRoute() error {
	out, err := exec.Command("ip", "-o", "route", "get", h.Addr).Output()
	if err != nil || !strings.Contains(string(out), " dev "+h.link()+" ") {
		return fmt.Errorf("testhost: %s would not route via %s: %q %v", h.Addr, h.link(), out, err)
	}
	return nil
}

// Plug brings the host back.
func (h *Host) Plug() error { return run("ip", "-n", h.Name, "link", "set", h.vethPeer, "up") }

// SSHConfig is a client config for root with the test key, verifying the
// host key exactly.
func (h *Host) SSHConfig() *ssh.ClientConfig {
	return &ssh.ClientConfig{
		User:              "root",
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(h.Signer)},
		HostKeyCallback:   ssh.FixedHostKey(h.HostKey),
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		Timeout:           10 * time.Second,
	}
}

// Run runs a shell command on the host over SSH and returns its combined output. Commands share
// one SSH connection per host (a session each): a fresh connection per command cost sshd a process
// and a key exchange every time, and tests that poll a host many times a second loaded the machine
// and waited seconds per command once several tests ran side by side. A connection found broken
// (sshd restarted, its processes killed) is replaced once; a session sshd refuses (its MaxSessions
// per connection) runs on a connection of its own. ctx ends the command.
func (h *Host) Run(ctx context.Context, command string) ([]byte, error) {
	for retried := false; ; retried = true {
		c, err := h.runClient(ctx)
		if err != nil {
			return nil, err
		}
		s, err := c.NewSession()
		var refused *ssh.OpenChannelError
		switch {
		case errors.As(err, &refused):
			return h.runAlone(ctx, command)
		case err != nil && !retried:
			h.dropRunClient(c)
			continue
		case err != nil:
			return nil, err
		}
		return runSession(ctx, s, command)
	}
}

// runClient returns the host's shared SSH connection, dialling it if there is none.
func (h *Host) runClient(ctx context.Context) (*ssh.Client, error) {
	h.runMu.Lock()
	defer h.runMu.Unlock()
	if h.runConn != nil {
		return h.runConn, nil
	}
	c, err := h.dial(ctx)
	if err != nil {
		return nil, err
	}
	h.runConn = c
	return c, nil
}

// dropRunClient closes c and forgets it, if it is still the shared connection.
func (h *Host) dropRunClient(c *ssh.Client) {
	h.runMu.Lock()
	defer h.runMu.Unlock()
	if h.runConn == c {
		h.runConn = nil
	}
	c.Close()
}

// runAlone runs command over a connection of its own.
func (h *Host) runAlone(ctx context.Context, command string) ([]byte, error) {
	c, err := h.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return nil, err
	}
	return runSession(ctx, s, command)
}

func (h *Host) dial(ctx context.Context) (*ssh.Client, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", h.SSHAddr)
	if err != nil {
		return nil, err
	}
	// The handshake within the dial's bound, and never past ctx's deadline.
	dl := time.Now().Add(20 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = nc.SetDeadline(dl)
	c, chans, reqs, err := ssh.NewClientConn(nc, h.SSHAddr, h.SSHConfig())
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// runSession runs command in s, closing s when ctx ends first.
func runSession(ctx context.Context, s *ssh.Session, command string) ([]byte, error) {
	defer s.Close()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-finished:
		}
	}()
	out, err := s.CombinedOutput(command)
	if err != nil && ctx.Err() != nil {
		return out, fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return out, err
}

func (h *Host) consoleTail() string {
	if h.scratch == "" {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(h.scratch, "console.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// teardown removes everything boot created, whatever state it reached.
func (h *Host) teardown() {
	h.stopOnce.Do(func() {
		h.runMu.Lock()
		if h.runConn != nil {
			h.runConn.Close()
			h.runConn = nil
		}
		h.runMu.Unlock()
		if h.pid1 > 0 {
			_ = syscall.Kill(h.pid1, syscall.SIGKILL)
		}
		if h.launcher > 0 {
			_ = syscall.Kill(h.launcher, syscall.SIGKILL)
			select {
			case <-h.done:
			case <-time.After(10 * time.Second):
			}
		}
		for _, d := range h.cgroups {
			// The namespace's processes die with its PID 1, not at once: a cgroup is removed once
			// it is empty.
			for range 50 {
				if removeCgroup(d) == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if h.Name != "" {
			_ = exec.Command("ip", "netns", "del", h.Name).Run()
		}
		if h.vethHost != "" {
			_ = exec.Command("ip", "link", "del", h.vethHost).Run() // usually gone with the netns
		}
		if h.Root != "" {
			for range 50 {
				if exec.Command("umount", h.Root).Run() == nil || !mounted(h.Root) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if mounted(h.Root) {
				_ = exec.Command("umount", "-l", h.Root).Run()
			}
		}
		if h.scratch != "" && !mounted(h.Root) {
			_ = os.RemoveAll(h.scratch)
		}
		if h.lock != nil {
			h.lock.Close()
		}
	})
}

func mounted(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// reapStale removes what test processes that died without cleaning up
// (a killed `go test`) left behind: only names of this harness
// (sst-<pid>-<n>) whose pid no longer exists.
func reapStale() {
	bootMu.Lock()
	defer bootMu.Unlock()
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if pid, ok := harnessPid(f[0]); ok && !alive(pid) {
			_ = exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
	// Machine-side links of this harness: veths left by a boot that died before its namespace
	// existed, and the bridges of clusters (s<pid>b<N>), which no namespace takes with it.
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if pid, ok := linkPid(name); ok && !alive(pid) {
			_ = exec.Command("ip", "link", "del", name).Run()
		}
	}
	// Cgroups of hosts whose test process died.
	if parents, err := systemdCgroups(); err == nil {
		for _, m := range parents {
			hosts, _ := filepath.Glob(filepath.Join(m, "sst-*"))
			for _, d := range hosts {
				if pid, ok := harnessPid(filepath.Base(d)); ok && !alive(pid) {
					_ = removeCgroup(d)
				}
			}
		}
	}
	// A simulator build whose process is gone, and older than any test run: a live test process's
	// build went missing mid-run once (CI, 2026-12-07: "fork/exec /var/tmp/sst-sim-12167/sglangsim:
	// no such file or directory" in a test that had run it minutes before); pids are reused (this
	// machine's pid_max is 32768, and every process of every test host takes one), so a pid's
	// absence alone is no proof that its build is unused.
	sims, _ := filepath.Glob("/var/tmp/sst-sim-*")
	for _, d := range sims {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "sst-sim-"))
		if err != nil || alive(pid) {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, "sglangsim")); err == nil && time.Since(fi.ModTime()) < simKeep {
			continue
		}
		_ = os.RemoveAll(d)
	}
	// Builds of earlier versions of this harness (random names): removed once surely unused.
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "sst-sim-*"))
	for _, d := range old {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > time.Hour {
			_ = os.RemoveAll(d)
		}
	}
	dirs, _ := filepath.Glob("/var/tmp/sst-*-*-*")
	for _, d := range dirs {
		name := filepath.Base(d)
		name = name[:strings.LastIndexByte(name, '-')]
		if pid, ok := harnessPid(name); ok && !alive(pid) {
			root := filepath.Join(d, "root")
			if mounted(root) {
				_ = exec.Command("umount", "-l", root).Run()
			}
			if !mounted(root) {
				_ = os.RemoveAll(d)
			}
		}
	}
}

// harnessPid reads the pid out of a host name of this harness: sst-<pid>-<N> (Boot) or
// sst-<pid>-<N>-<k> (BootCluster).
func harnessPid(name string) (int, bool) {
	f := strings.Split(name, "-")
	if (len(f) != 3 && len(f) != 4) || f[0] != "sst" {
		return 0, false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, false
	}
	for _, n := range f[2:] {
		if _, err := strconv.Atoi(n); err != nil {
			return 0, false
		}
	}
	return pid, true
}

// linkPid reads the pid out of a machine-side link name of this harness: s<pid>h<N> and s<pid>c<N>
// (a Boot host's veth ends), s<pid>h<N>x<k> and s<pid>c<N>x<k> (a cluster host's), s<pid>b<N> (a
// cluster's bridge).
func linkPid(name string) (int, bool) {
	if len(name) < 4 || name[0] != 's' {
		return 0, false
	}
	i := 1
	for i < len(name) && name[i] >= '0' && name[i] <= '9' {
		i++
	}
	pid, err := strconv.Atoi(name[1:i])
	if err != nil || i == len(name) {
		return 0, false
	}
	kind, rest := name[i], name[i+1:]
	digits := func(s string) bool {
		_, err := strconv.Atoi(s)
		return err == nil && s != "" && s[0] != '+' && s[0] != '-'
	}
	switch kind {
	case 'b':
		return pid, digits(rest)
	case 'h', 'c':
		n, k, cluster := strings.Cut(rest, "x")
		return pid, digits(n) && (!cluster || digits(k))
	}
	return 0, false
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// maskGenerators links every system generator of the machine to /dev/null under root's
// /etc/systemd/system-generators.
func maskGenerators(root string) error {
	dir := filepath.Join(root, "etc/systemd/system-generators")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"usr/lib/systemd/system-generators", "lib/systemd/system-generators", "usr/local/lib/systemd/system-generators"} {
		es, err := os.ReadDir(filepath.Join(root, d))
		if err != nil {
			continue // not on this system
		}
		for _, e := range es {
			p := filepath.Join(dir, e.Name())
			if _, err := os.Lstat(p); err == nil {
				continue
			}
			if err := os.Symlink("/dev/null", p); err != nil {
				return fmt.Errorf("masking generator %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// dropPAMLines rewrites the PAM file at path without its lines naming module (a missing file is no
// error: that system's sshd has no PAM stack to trim).
func dropPAMLines(path, module string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.Contains(l, module) {
			keep = append(keep, l)
		}
	}
	return os.WriteFile(path, []byte(strings.Join(keep, "")), 0o644)
}
