package testhost

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestFreePortsAreConsecutiveAndFree: every port of the range can be listened on at once.
func TestFreePortsAreConsecutiveAndFree(t *testing.T) {
	base := FreePorts(t, 8)
	for k := range 8 {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+k)))
		if err != nil {
			t.Fatalf("port %d of %d..%d: %v", base+k, base, base+7, err)
		}
		defer l.Close()
	}
}

// TestGuardFailsOnlyForItsOwnConnections: a held port a client of this process (or of a child)
// connects to fails the run, naming the port; an unused one does not, and a port held by another
// program already is left to it.
func TestGuardFailsOnlyForItsOwnConnections(t *testing.T) {
	p := FreePort(t)
	done := guardPorts([]int{p})
	if code := done(0); code != 0 {
		t.Errorf("no connection: exit %d, want 0", code)
	}

	p = FreePort(t)
	done = guardPorts([]int{p})
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("the guard does not hold %d: %v", p, err)
	}
	_, _ = c.Read(make([]byte, 1)) // the guard closes it once it has looked
	c.Close()
	if code := done(0); code != 1 {
		t.Errorf("a connection of this process: exit %d, want 1", code)
	}

	if py, err := exec.LookPath("python3"); err == nil {
		p = FreePort(t)
		done = guardPorts([]int{p})
		script := "import socket; s = socket.create_connection(('127.0.0.1', " + strconv.Itoa(p) + ")); s.recv(1)"
		if out, err := exec.Command(py, "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("the child's connection: %v %s", err, out)
		}
		if code := done(0); code != 1 {
			t.Errorf("a connection of a child: exit %d, want 1", code)
		}

		// Another program's connection (a process this one did not start: re-parented once its
		// parent has gone) is not this package's: another test binary may probe a port held here.
		p = FreePort(t)
		done = guardPorts([]int{p})
		mark := filepath.Join(t.TempDir(), "connected")
		script = "import os, socket, sys, time\nwhile os.getppid() == int(sys.argv[1]): time.sleep(0.01)\n" +
			"s = socket.create_connection(('127.0.0.1', " + strconv.Itoa(p) + ")); s.recv(1)\nopen(" + strconv.Quote(mark) + ", 'w').close()\n"
		if out, err := exec.Command("/bin/sh", "-c", `"$0" -c "$1" $$ </dev/null >/dev/null 2>&1 &`, py, script).CombinedOutput(); err != nil {
			t.Fatalf("the orphan: %v %s", err, out)
		}
		for i := 0; ; i++ {
			if _, err := os.Stat(mark); err == nil {
				break
			}
			if i == 2000 {
				t.Fatal("the orphan did not connect within 20 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if code := done(0); code != 0 {
			t.Errorf("another program's connection: exit %d, want 0", code)
		}
	}

	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	done = guardPorts([]int{other.Addr().(*net.TCPAddr).Port})
	if code := done(0); code != 0 {
		t.Errorf("a port held already: exit %d, want 0", code)
	}
}

func TestDescends(t *testing.T) {
	if !descends(os.Getpid()) || descends(1) || descends(os.Getppid()) {
		t.Errorf("descends: self %t, init %t, parent %t; want true, false, false", descends(os.Getpid()), descends(1), descends(os.Getppid()))
	}
}

// TestFreePortsAreBelowTheEphemeralRange: a test server's port is never one the kernel may give an
// outgoing connection as its own end meanwhile (CI: a packed point's server found its port taken),
// nor a default port.
func TestFreePortsAreBelowTheEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	for range 50 {
		base := FreePorts(t, 8)
		if base < 1024 || base+8 > lo {
			t.Fatalf("FreePorts(8) = %d..%d, want below the ephemeral range (from %d)", base, base+7, lo)
		}
		for _, p := range DefaultPorts {
			if base <= p && p < base+8 {
				t.Fatalf("FreePorts(8) = %d..%d holds the default port %d", base, base+7, p)
			}
		}
	}
}
