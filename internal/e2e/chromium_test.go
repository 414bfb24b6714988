package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// inChromium: the tests that drive Chromium against the daemon's dashboard, a lane of TestQuietLanes
// (speed_test.go): side by side, their browsers of eight tabs took the machine's two cores, and
// beside the parallel tests a tab did not fill in within 3 minutes.
var inChromium = []namedTest{
	{"DashboardCredentialNeverReachesAnotherPort", testDashboardCredentialNeverReachesAnotherPort},
	{"DashboardSaysLoadingUntilTheSweepsArrive", testDashboardSaysLoadingUntilTheSweepsArrive},
	{"DashboardShowsASweepWhoseProcessDiedAsInterrupted", testDashboardShowsASweepWhoseProcessDiedAsInterrupted},
	{"DashboardLiveChartProvisionalBestAndHosts", testDashboardLiveChartProvisionalBestAndHosts},
	{"DashboardInABrowser", testDashboardInABrowser},
	{"DashboardShowsWatchesAndRegressions", testDashboardShowsWatchesAndRegressions},
	{"BrowserLeavesNothingBehind", testBrowserLeavesNothingBehind},
}

// testBrowserLeavesNothingBehind: Chromium makes its profile's singleton directory
// (org.chromium.Chromium.XXXXXX) in its temporary directory and leaves it when it is killed, as a
// test's end does: the browser's TMPDIR is the test's own, never the machine's /tmp.
func testBrowserLeavesNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	tmp := os.TempDir()
	left := func() []string {
		m, err := filepath.Glob(filepath.Join(tmp, "org.chromium.Chromium.*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := left()
	t.Run("browser", func(t *testing.T) { _ = browser(t) })
	for _, p := range left() {
		if !slices.Contains(before, p) {
			t.Errorf("the browser left %s", p)
		}
	}
}
