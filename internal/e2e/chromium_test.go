package e2e

import "testing"

// TestInChromium runs the tests that drive Chromium against the daemon's dashboard one after another:
// together they are one of the package's parallel tests (docs/development.md, "Parallel end-to-end
// tests"). Side by side, their browsers and eight tabs each took the machine's two cores, and a
// tab beside two other browsers did not fill in within 90 s.
func TestInChromium(t *testing.T) {
	t.Parallel()
	runInTurn(t, []namedTest{
		{"DashboardCredentialNeverReachesAnotherPort", testDashboardCredentialNeverReachesAnotherPort},
		{"DashboardSaysLoadingUntilTheSweepsArrive", testDashboardSaysLoadingUntilTheSweepsArrive},
		{"DashboardShowsASweepWhoseProcessDiedAsInterrupted", testDashboardShowsASweepWhoseProcessDiedAsInterrupted},
		{"DashboardLiveChartProvisionalBestAndHosts", testDashboardLiveChartProvisionalBestAndHosts},
		{"DashboardInABrowser", testDashboardInABrowser},
		{"DashboardShowsWatchesAndRegressions", testDashboardShowsWatchesAndRegressions},
	})
}
