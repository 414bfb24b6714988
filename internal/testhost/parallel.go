package testhost

import (
	"flag"
	"strconv"
)

// WaitingParallel sets go test's -parallel to n unless the command line gave one. It is for the
// TestMain of a package whose parallel tests mostly wait (on test hosts' boots, simulated servers,
// Slurm's daemons), where the default, GOMAXPROCS (2 on the machines this project runs on), leaves
// the cores idle most of the time (docs/development.md, "Parallel end-to-end tests"). It parses the
// command line if nothing has yet.
func WaitingParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		// The flag exists in every test binary (testing.Init ran before TestMain).
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
