package testhost

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// MaxClusterHosts bounds BootCluster's n: a cluster host's veth is named s<pid>h<N>x<k>, and Linux
// interface names have at most 15 characters.
const MaxClusterHosts = 64

// clusterNet is the machine side of a cluster: one 10.231.N.0/24 on a bridge holding 10.231.N.1,
// every host's veth a port of it.
type clusterNet struct {
	n      int
	bridge string // s<pid>b<N>
	shared string // the machine directory bound at SharedPath in every host
	lock   *os.File
	once   sync.Once
}

// SharedPath is the directory every host of a cluster shares, as a site's shared file system: a bind
// mount of one directory of the machine (Host.SharedDir), so job scripts and output files written
// there on one host are read on any other, and from the machine.
const SharedPath = "/shared"

// BootCluster boots n hosts (1 to MaxClusterHosts) on one shared subnet, so they reach each other as
// the machines of a cluster do, and the machine reaches every one of them. The subnet 10.231.N.0/24
// lives on a bridge of the machine (s<pid>b<N>, holding 10.231.N.1; N locked as Boot's are); host i
// is 10.231.N.(i+2), named sst-<pid>-<N>-<i+2>, with its veth's machine end a port of the bridge.
// Every host's /etc/hosts names every member, and every host has SharedPath, one directory shared by
// all. Hosts are otherwise what Boot makes (Options apply to each), and are torn down with
// t.Cleanup, the bridge and the shared directory last.
func BootCluster(t testing.TB, n int, o Options) []*Host {
	t.Helper()
	if msg := Requirements(); msg != "" {
		t.Skip(msg)
	}
	if testing.Short() {
		t.Skip("testhost: real hosts are skipped with -short")
	}
	if n < 1 || n > MaxClusterHosts {
		t.Fatalf("testhost: BootCluster(%d): want 1 to %d hosts", n, MaxClusterHosts)
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
	cn := &clusterNet{}
	t.Cleanup(cn.teardown) // registered first: runs after every host's teardown
	if err := cn.setup(); err != nil {
		t.Fatalf("testhost: cluster network: %v", err)
	}
	pid := os.Getpid()
	hosts := make([]*Host, n)
	etcHosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	for i := range n {
		k := i + 2
		h := &Host{KeyFile: keyFile, Signer: signer, done: make(chan struct{}), cnet: cn, N: cn.n}
		h.Name = fmt.Sprintf("sst-%d-%d-%d", pid, cn.n, k)
		h.vethHost = fmt.Sprintf("s%dh%dx%d", pid, cn.n, k)
		h.vethPeer = fmt.Sprintf("s%dc%dx%d", pid, cn.n, k)
		h.Addr = fmt.Sprintf("%s%d.%d", Subnet, cn.n, k)
		h.SSHAddr = net.JoinHostPort(h.Addr, "22")
		hosts[i] = h
		etcHosts += h.Addr + "\t" + h.Name + "\n"
	}
	for _, h := range hosts {
		h.hostsFile = []byte(etcHosts)
		t.Cleanup(h.teardown)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { errs[i] = h.boot(sim, o) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("testhost: booting cluster host %d: %v\n%s", i, err, hosts[i].consoleTail())
		}
	}
	return hosts
}

// Bridge is the machine-side bridge of a cluster host's subnet ("" for a Boot host).
func (h *Host) Bridge() string {
	if h.cnet == nil {
		return ""
	}
	return h.cnet.bridge
}

// SharedDir is the machine's view of a cluster host's SharedPath ("" for a Boot host).
func (h *Host) SharedDir() string {
	if h.cnet == nil {
		return ""
	}
	return h.cnet.shared
}

func (c *clusterNet) setup() error {
	f, n, err := allocateSubnet()
	if err != nil {
		return err
	}
	pid := os.Getpid()
	c.lock, c.n = f, n
	c.bridge = fmt.Sprintf("s%db%d", pid, n)
	// Named as a host's scratch directory (sst-<pid>-<N>-<k>-*, no host has k=0), so a later boot
	// removes it if this process dies.
	if c.shared, err = os.MkdirTemp("/var/tmp", fmt.Sprintf("sst-%d-%d-0-", pid, n)); err != nil {
		return err
	}
	if err := os.Chmod(c.shared, 0o777|os.ModeSticky); err != nil {
		return err
	}
	// A fixed, locally administered MAC: a bridge otherwise takes its ports' lowest MAC and changes it
	// as hosts join, after the first hosts cached the old one.
	mac := fmt.Sprintf("02:5e:%02x:%02x:%02x:%02x", byte(pid>>16), byte(pid>>8), byte(pid), byte(n))
	for _, s := range [][]string{
		{"link", "add", "name", c.bridge, "address", mac, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
		{"addr", "add", fmt.Sprintf("%s%d.1/24", Subnet, n), "dev", c.bridge},
		{"link", "set", c.bridge, "up"},
	} {
		if err := run("ip", s...); err != nil {
			return err
		}
	}
	// The subnet routes to the bridge, not the default route (checked again for every host).
	out, err := exec.Command("ip", "-o", "route", "get", fmt.Sprintf("%s%d.2", Subnet, n)).Output()
	if err != nil || !strings.Contains(string(out), " dev "+c.bridge+" ") {
		return fmt.Errorf("%s%d.0/24 would not route via %s: %q %v", Subnet, n, c.bridge, out, err)
	}
	return nil
}

// teardown deletes the bridge and the shared directory and releases the subnet, after the hosts' teardowns removed their
// namespaces (and with them their veths).
func (c *clusterNet) teardown() {
	c.once.Do(func() {
		if c.bridge != "" {
			_ = exec.Command("ip", "link", "del", c.bridge).Run()
		}
		if c.shared != "" {
			_ = os.RemoveAll(c.shared) // bound only in the hosts' mount namespaces, gone with them
		}
		if c.lock != nil {
			c.lock.Close()
		}
	})
}
