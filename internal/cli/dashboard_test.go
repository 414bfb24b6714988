package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/api"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/web"
)

// dashboardDaemon is the daemon's API with its dashboard over a real store, on a loopback server.
func dashboardDaemon(t *testing.T) (dbFile, listen, url string) {
	t.Helper()
	ctx := context.Background()
	dbFile = filepath.Join(t.TempDir(), "d.db")
	st, err := store.Open(ctx, dbFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	token, _, err := apiToken(dbFile, "")
	if err != nil {
		t.Fatal(err)
	}
	sessions := web.NewSessions(nil)
	dash, err := web.New(web.Config{Store: st, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.NewAPI(api.APIConfig{Store: st, Metrics: api.NewMetrics(st), Token: token,
		ListenHost: "127.0.0.1", Sessions: sessions, Routes: dashboardRoutes(dash.Routes())})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return dbFile, strings.TrimPrefix(ts.URL, "http://"), ts.URL
}

// login trades a code for a session's secret as the page does; "" and the status when refused.
func login(t *testing.T, base, code string) (string, int) {
	t.Helper()
	resp, err := http.Post(base+"/api/sessions", "application/json", strings.NewReader(`{"code":"`+code+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s web.SessionJSON
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s.Secret, resp.StatusCode
}

// sessionGet is the status of a GET with a session's secret.
func sessionGet(t *testing.T, url, secret string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set(web.SessionHeader, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDashboardPrintsAWorkingLoginURL: `specsweep dashboard` reads the daemon's token file, asks the
// daemon's API for a code and prints a URL whose code (in the fragment) logs a browser in, once.
func TestDashboardPrintsAWorkingLoginURL(t *testing.T) {
	dbFile, listen, base := dashboardDaemon(t)
	out, errOut, code := runMain(t, nil, "dashboard", "--db", dbFile, "--listen", listen)
	url := strings.TrimSpace(out)
	// The code is in the fragment: a browser never sends it to a server.
	if code != 0 || !strings.HasPrefix(url, base+"/#code=") || !strings.Contains(errOut, "ssh -L") {
		t.Fatalf("dashboard: exit %d, %q, %q", code, out, errOut)
	}
	c := strings.TrimPrefix(url, base+"/#code=")
	secret, status := login(t, base, c)
	if status != 200 || secret == "" || sessionGet(t, base+"/api/sweeps", secret) != 200 {
		t.Fatalf("the login URL's code: %d", status)
	}
	if _, status := login(t, base, c); status != http.StatusUnauthorized {
		t.Errorf("second use of the login URL: %d, want 401", status)
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

// TestDashboardRevokeEndsEverySession: `specsweep dashboard --revoke` ends every session and makes
// unused login URLs useless; a session cannot do it itself.
func TestDashboardRevokeEndsEverySession(t *testing.T) {
	dbFile, listen, base := dashboardDaemon(t)
	var secrets []string
	for range 2 {
		out, _, code := runMain(t, nil, "dashboard", "--db", dbFile, "--listen", listen)
		if code != 0 {
			t.Fatalf("dashboard: exit %d", code)
		}
		s, _ := login(t, base, strings.TrimPrefix(strings.TrimSpace(out), base+"/#code="))
		secrets = append(secrets, s)
	}
	unused, _, _ := runMain(t, nil, "dashboard", "--db", dbFile, "--listen", listen)

	req, _ := http.NewRequest("POST", base+"/api/sessions/revoke", nil)
	req.Header.Set(web.SessionHeader, secrets[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a session revoking: %d, want 401", resp.StatusCode)
	}

	out, errOut, code := runMain(t, nil, "dashboard", "--revoke", "--db", dbFile, "--listen", listen)
	if code != 0 || !strings.Contains(out, "2 dashboard session(s) ended") {
		t.Fatalf("dashboard --revoke: exit %d, %q, %q", code, out, errOut)
	}
	for i, s := range secrets {
		if got := sessionGet(t, base+"/api/sweeps", s); got != http.StatusForbidden {
			t.Errorf("session %d after --revoke: %d, want 403", i+1, got)
		}
	}
	if _, status := login(t, base, strings.TrimPrefix(strings.TrimSpace(unused), base+"/#code=")); status != http.StatusUnauthorized {
		t.Errorf("a login URL made before --revoke: %d, want 401", status)
	}
	if _, errOut, code := runMain(t, nil, "dashboard", "--revoke", "--db", dbFile, "--listen", "127.0.0.1:1"); code == 0 || !strings.Contains(errOut, "is `specsweep daemon` running") {
		t.Errorf("--revoke without a daemon: exit %d, %q", code, errOut)
	}
}
