package hostctl

import (
	"os"
	"testing"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestMain holds the default ports on this machine's loopback for the package's run
// (testhost.GuardDefaultPorts): a local-driver test on 30000 fails every time, not only when
// another program holds it (CI once failed so). Test hosts have loopbacks of their own.
func TestMain(m *testing.M) {
	done := testhost.GuardDefaultPorts()
	os.Exit(done(m.Run()))
}
