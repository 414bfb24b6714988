package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/web"
)

// TestDashboardPrintsAWorkingLoginURL: `specsweep dashboard` reads the daemon's token file, asks the
// daemon's API for a code and prints a URL whose code logs a browser in, once.
func TestDashboardPrintsAWorkingLoginURL(t *testing.T) {
	ctx := context.Background()
	dbFile := filepath.Join(t.TempDir(), "d.db")
	st, err := store.Open(ctx, dbFile)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	token, _, err := apiToken(dbFile, "")
	if err != nil {
		t.Fatal(err)
	}
	sessions := web.NewSessions(nil)
	dash, err := web.New(web.Config{Store: st, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	h, err := orchestrator.NewAPI(orchestrator.APIConfig{Store: st, Metrics: orchestrator.NewMetrics(st), Token: token,
		ListenHost: "127.0.0.1", Sessions: sessions, Routes: dashboardRoutes(dash.Routes())})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	listen := strings.TrimPrefix(ts.URL, "http://")

	out, errOut, code := runMain(t, nil, "dashboard", "--db", dbFile, "--listen", listen)
	url := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(url, ts.URL+"/login?code=") || !strings.Contains(errOut, "ssh -L") {
		t.Fatalf("dashboard: exit %d, %q, %q", code, out, errOut)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []int{200, 401} {
		resp, err := noRedirect.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || (want == 200) != (len(resp.Cookies()) == 1) {
			t.Errorf("use %d of the login URL: %d with %d cookies, want %d", i+1, resp.StatusCode, len(resp.Cookies()), want)
		}
	}

	// A token file others may read, or none: refused, saying why.
	if err := os.Chmod(dbFile+".token", 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runMain(t, nil, "dashboard", "--db", dbFile, "--listen", listen); code == 0 || !strings.Contains(errOut, "chmod 600") {
		t.Errorf("a readable token file: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runMain(t, nil, "dashboard", "--db", dbFile+"-none", "--listen", listen); code == 0 || !strings.Contains(errOut, "token file") {
		t.Errorf("no token file: exit %d, %q", code, errOut)
	}
}
