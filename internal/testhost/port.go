package testhost

import (
	"net"
	"testing"
)

// FreePort is a loopback TCP port nothing listened on a moment ago: tests start their servers on
// it, so two test processes never measure each other's servers.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
