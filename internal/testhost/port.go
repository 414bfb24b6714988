package testhost

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/specsweep/specsweep/internal/defaults"
)

// FreePort is a loopback TCP port nothing listened on a moment ago: tests start their servers on
// it, so two test processes never measure each other's servers.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)
}

// FreePorts is the first of n consecutive loopback TCP ports nothing listened on a moment ago: a
// local host that packs (spec `pack: true`) runs its slot k's server on the spec's server.port
// plus k, one slot per GPU, so a packing spec of g GPUs needs FreePorts(t, g).
//
// The ports come from below the kernel's range of ports for connections' own (source) ends
// (ephemeralLow), never from it: a port the kernel hands out for :0 is from that range, and on a
// machine busy with other tests an outgoing connection (a load client's, ssh's) may take it as its
// source port before the test's server binds it (CI: a packed point failed so). Nor is it one of
// DefaultPorts. Where it starts is random, so that test processes side by side rarely try the same.
func FreePorts(t testing.TB, n int) int {
	t.Helper()
	if n < 1 {
		t.Fatalf("FreePorts(%d): want at least one port", n)
	}
	lo, hi := 10000, ephemeralLow()
	if hi-lo < 100*n {
		t.Fatalf("FreePorts(%d): the ports below the ephemeral range (%d) are too few", n, hi)
	}
	for range 500 {
		base := lo + rand.IntN(hi-lo-n)
		if base <= 8377 && 8377 < base+n || base <= defaults.Port && defaults.Port < base+n {
			continue
		}
		var held []net.Listener
		for k := range n {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+k)))
			if err != nil {
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			l.Close()
		}
		if len(held) == n {
			return base
		}
	}
	t.Fatalf("no %d consecutive free loopback ports below %d in 500 tries", n, hi)
	return 0
}

// ephemeralLow is the first port the kernel gives a connection's own end
// (/proc/sys/net/ipv4/ip_local_port_range; Linux's default 32768 where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 1024 {
				return lo
			}
		}
	}
	return 32768
}

// DefaultPorts are the ports a test's server would listen on, on this machine's loopback, when it
// names none: SGLang's (and the simulator's) --port, which is also a spec's server.port when the spec
// gives none, and `specsweep daemon`'s --listen (internal/cli/daemon.go).
var DefaultPorts = []int{defaults.Port, 8377}

// GuardDefaultPorts holds each of DefaultPorts on 127.0.0.1 that is free, from a package's TestMain
// until its tests end, so that a test that uses a default port in this machine's network namespace
// fails every time, not only when another program holds the port (as on a shared CI machine): its
// server cannot bind ("address already in use", also on 0.0.0.0), and a probe or client of this test
// process (or of a process it started) that connects reaches the guard, which counts the connection.
// A port another program holds already is left to it: that is the condition under test. Test hosts
// have network namespaces of their own (their 127.0.0.1:30000 is theirs), so the guard does not
// touch them.
//
//	func TestMain(m *testing.M) {
//		done := testhost.GuardDefaultPorts()
//		os.Exit(done(m.Run()))
//	}
//
// done closes the ports and returns the exit code: code, or 1 when a connection of this process or
// its children reached a held port, after saying so on stderr; on a failure it also names the held
// ports.
func GuardDefaultPorts() (done func(code int) int) { return guardPorts(DefaultPorts) }

func guardPorts(ports []int) (done func(code int) int) {
	g := &portGuard{ports: ports, hits: map[int]int{}}
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // held by another program already: the tests must cope with that anyway
		}
		g.held = append(g.held, l)
		g.wg.Add(1)
		go g.accept(l, p)
	}
	return g.done
}

type portGuard struct {
	ports []int
	held  []net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	hits  map[int]int // port -> connections accepted
}

func (g *portGuard) accept(l net.Listener, port int) {
	defer g.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		// The client waits for an answer, so its socket is still open: find whose it is. Only this
		// test process and its children count (another package's test binary may probe the port
		// while this one holds it; its own guard, or its failure to bind, is that package's).
		peer, _ := c.RemoteAddr().(*net.TCPAddr)
		mine := peer != nil && ownSocket(peer.Port, port)
		c.Close()
		if mine {
			g.mu.Lock()
			g.hits[port]++
			g.mu.Unlock()
		}
	}
}

// ownSocket reports whether the loopback socket from port from to port to belongs to this process
// or a descendant of it (read from /proc: the socket's inode, the process holding it, its parents).
func ownSocket(from, to int) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	local, remote := fmt.Sprintf("0100007F:%04X", from), fmt.Sprintf("0100007F:%04X", to)
	inode := ""
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 9 && f[1] == local && f[2] == remote {
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return false
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		fds, _ := os.ReadDir(filepath.Join(p, "fd"))
		for _, fd := range fds {
			if dst, err := os.Readlink(filepath.Join(p, "fd", fd.Name())); err == nil && dst == "socket:["+inode+"]" {
				pid, _ := strconv.Atoi(filepath.Base(p))
				return descends(pid)
			}
		}
	}
	return false
}

// descends reports whether pid is this process or one of its descendants.
func descends(pid int) bool {
	for range 64 {
		if pid == os.Getpid() {
			return true
		}
		if pid <= 1 {
			return false
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return false
		}
		next := 0
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				next, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		pid = next
	}
	return false
}

func (g *portGuard) done(code int) int {
	var ports []string
	for _, l := range g.held {
		ports = append(ports, l.Addr().String())
		l.Close()
	}
	g.wg.Wait()
	for _, p := range g.ports {
		if n := g.hits[p]; n > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: %d connection(s) to 127.0.0.1:%d, a default port held by testhost.GuardDefaultPorts: "+
				"a test's client or probe uses the default port; start its server on testhost.FreePort (FreePorts for a packing host)\n", n, p)
			code = max(code, 1)
		}
	}
	if code != 0 && len(ports) > 0 {
		fmt.Fprintf(os.Stderr, "note: this test binary held %s (testhost.GuardDefaultPorts): a test that failed with "+
			"\"address already in use\" there starts a server on a default port; give it testhost.FreePort\n", strings.Join(ports, " and "))
	}
	return code
}
