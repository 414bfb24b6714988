package hostctl

import (
	"flag"
	"os"
	"testing"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestMain holds the default ports on this machine's loopback for the package's run
// (testhost.GuardDefaultPorts): a local-driver test on 30000 fails every time, not only when
// another program holds it (CI once failed so). Test hosts have loopbacks of their own.
func TestMain(m *testing.M) {
	// Four parallel tests at once unless -parallel is given: at go test's default (GOMAXPROCS, 2
	// here) hostctl, beside internal/e2e in `make test` (go test -p 3), was the last package to end,
	// 90 s after e2e (its tests wait on test hosts most of the time).
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	done := testhost.GuardDefaultPorts()
	os.Exit(done(m.Run()))
}
