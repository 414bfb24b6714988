package e2e

import "testing"

// The tests whose checks depend on measured speed or on a tight time run in two groups, their
// members in turn, before the package's parallel tests (docs/development.md, "Parallel end-to-end
// tests"): beside the parallel tests, on the CI machine's two cores at a load of 44, searches picked
// other winners, the verification's switches went another way and a precision level missed its
// interval (2026-12-06). The groups only name what must not share the machine.

// TestMeasuresWinners: which configuration a search or a prompt set finds best, where a precision
// level ends, a phase's figures.
func TestMeasuresWinners(t *testing.T) {
	runInTurn(t, []namedTest{
		{"PromptSetsOnTheSimulator", testPromptSetsOnTheSimulator},
		{"ClimbOnTheSimulator", testClimbOnTheSimulator},
		{"ProbeReopensOnTheSimulator", testProbeReopensOnTheSimulator},
		{"SearchWithRepeatsAndNoise", testSearchWithRepeatsAndNoise},
		{"PrecisionSweepOnTheSimulator", testPrecisionSweepOnTheSimulator},
		{"PhasesOnTheSimulator", testPhasesOnTheSimulator},
	})
}

// TestMeasuresSpeed: a verification's switch, a hung server named within seconds, an apply's speed
// check (it failed beside the others once: 492 output tok/s measured against the sweep's 1434), a
// pending Slurm job against a ready_timeout of 6 s.
func TestMeasuresSpeed(t *testing.T) {
	runInTurn(t, []namedTest{
		{"VerifyOnTheSimulator", testVerifyOnTheSimulator},
		{"HungServerIsNamedQuickly", testHungServerIsNamedQuickly},
		{"ApplyOnALocalHost", testApplyOnALocalHost},
		{"ApplyOnATestHost", testApplyOnATestHost},
		{"SlurmPendingJobIsNotASlowStart", testSlurmPendingJobIsNotASlowStart},
	})
}

type namedTest struct {
	name string
	run  func(*testing.T)
}

// runInTurn runs the tests as subtests of t, one after another.
func runInTurn(t *testing.T, tests []namedTest) {
	for _, c := range tests {
		t.Run(c.name, c.run)
	}
}
