package e2e

import "testing"

// TestInChromium runs the tests that drive Chromium against the daemon's dashboard one after another,
// before the package's parallel tests (docs/development.md, "Parallel end-to-end tests"): side by
// side, their browsers of eight tabs took the machine's two cores, and beside the parallel tests a
// tab did not fill in within 3 minutes.
func TestInChromium(t *testing.T) {
	runInTurn(t, []namedTest{
		{"DashboardCredentialNeverReachesAnotherPort", testDashboardCredentialNeverReachesAnotherPort},
		{"DashboardSaysLoadingUntilTheSweepsArrive", testDashboardSaysLoadingUntilTheSweepsArrive},
		{"DashboardShowsASweepWhoseProcessDiedAsInterrupted", testDashboardShowsASweepWhoseProcessDiedAsInterrupted},
		{"DashboardLiveChartProvisionalBestAndHosts", testDashboardLiveChartProvisionalBestAndHosts},
		{"DashboardInABrowser", testDashboardInABrowser},
		{"DashboardShowsWatchesAndRegressions", testDashboardShowsWatchesAndRegressions},
	})
}
