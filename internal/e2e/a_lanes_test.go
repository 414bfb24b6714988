package e2e

import "testing"

// The tests whose checks depend on measured speed or on a tight time, and those that drive
// Chromium, run as lanes of TestQuietLanes (docs/development.md, "Parallel end-to-end tests"), each
// lane's members in turn and the lanes one after another, beside the package's other tests: as
// parallel tests among the others (2026-12-06, a load of 44 on the CI machine's two cores), searches
// picked other winners, the verification's switches went another way, a precision level missed its
// interval and a browser's tab did not fill in within 3 minutes. Their processes had a small share
// of the machine then: every service and SSH login of a test host was a session of its own, and the
// scheduler's autogroups weighed each as much as the whole test session. Since test hosts share one
// cpu cgroup (internal/testhost/cgroup.go) they weigh as one, and the lanes run beside the parallel
// tests: TestQuietLanes is a parallel test too, the first of the package (this file's name sorts
// first, and go test starts paused parallel tests in source order), and the package runs one more
// test at a time than GOMAXPROCS (TestMain) for the slot it holds.

// measuresWinners: which configuration a search or a prompt set finds best, where a precision
// level ends, a phase's figures.
var measuresWinners = []namedTest{
	{"PromptSetsOnTheSimulator", testPromptSetsOnTheSimulator},
	{"ClimbOnTheSimulator", testClimbOnTheSimulator},
	{"ProbeReopensOnTheSimulator", testProbeReopensOnTheSimulator},
	{"SearchWithRepeatsAndNoise", testSearchWithRepeatsAndNoise},
	{"PrecisionSweepOnTheSimulator", testPrecisionSweepOnTheSimulator},
	{"PhasesOnTheSimulator", testPhasesOnTheSimulator},
}

// measuresSpeed: a verification's switch, a hung server named within seconds, an apply's speed
// check (it failed beside the others once: 492 output tok/s measured against the sweep's 1434), a
// pending Slurm job against a ready_timeout of 6 s.
var measuresSpeed = []namedTest{
	{"VerifyOnTheSimulator", testVerifyOnTheSimulator},
	{"HungServerIsNamedQuickly", testHungServerIsNamedQuickly},
	{"ApplyOnALocalHost", testApplyOnALocalHost},
	{"ApplyOnATestHost", testApplyOnATestHost},
	{"SlurmPendingJobIsNotASlowStart", testSlurmPendingJobIsNotASlowStart},
}

// TestQuietLanes runs the winners, speed and Chromium lanes (inChromium: chromium_test.go) one after
// another beside the package's other tests; one member runs as `go test -run 'TestQuietLanes/MeasuresSpeed/VerifyOnTheSimulator'`.
func TestQuietLanes(t *testing.T) {
	t.Parallel()
	for _, l := range []lane{
		{"MeasuresWinners", measuresWinners},
		{"MeasuresSpeed", measuresSpeed},
		{"InChromium", inChromium},
	} {
		t.Run(l.name, func(t *testing.T) {
			for _, c := range l.tests {
				t.Run(c.name, c.run)
			}
		})
	}
}

type namedTest struct {
	name string
	run  func(*testing.T)
}

type lane struct {
	name  string
	tests []namedTest
}
