package e2e

import "testing"

// TestMeasuresSpeed runs, one after another, the tests whose checks depend on measured speed or on
// a tight time: which configuration a search or a prompt set finds best, a verification's switch,
// a precision level's end, a hung server named within seconds, an apply's speed check, a pending
// Slurm job against a ready_timeout of 6 s. Together they are one of the package's parallel tests
// (docs/development.md, "Parallel end-to-end tests"): beside the others, which mostly wait on host
// boots and simulated servers, but never beside each other.
func TestMeasuresSpeed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"PromptSetsOnTheSimulator", testPromptSetsOnTheSimulator},
		{"HungServerIsNamedQuickly", testHungServerIsNamedQuickly},
		{"PhasesOnTheSimulator", testPhasesOnTheSimulator},
		{"PrecisionSweepOnTheSimulator", testPrecisionSweepOnTheSimulator},
		{"ClimbOnTheSimulator", testClimbOnTheSimulator},
		{"ProbeReopensOnTheSimulator", testProbeReopensOnTheSimulator},
		{"SearchWithRepeatsAndNoise", testSearchWithRepeatsAndNoise},
		{"VerifyOnTheSimulator", testVerifyOnTheSimulator},
		{"ApplyOnALocalHost", testApplyOnALocalHost},
		{"SlurmPendingJobIsNotASlowStart", testSlurmPendingJobIsNotASlowStart},
	} {
		t.Run(c.name, c.run)
	}
}
