package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/store"
)

const apiToken = "0123456789abcdef0123456789abcdef"

// apiSpec is a valid spec; hosts replaces its hosts section.
func apiSpec(hosts string) string {
	if hosts == "" {
		hosts = "hosts: [{name: h, address: h.example, gpus: 1}]"
	}
	return "version: 1\nname: api\n" + hosts + `
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}
`
}

type apiHarness struct {
	t       *testing.T
	db      *store.DB
	h       http.Handler
	metrics *Metrics
}

func newAPIHarness(t *testing.T, c APIConfig) *apiHarness {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "api.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c.Store, c.Metrics = db, NewMetrics(db)
	if c.Token == "" {
		c.Token = apiToken
	}
	h, err := NewAPI(c)
	if err != nil {
		t.Fatal(err)
	}
	return &apiHarness{t: t, db: db, h: h, metrics: c.Metrics}
}

// do sends a request as a well-behaved client (loopback Host, the token, YAML body) changed by edit.
func (a *apiHarness) do(method, target, body string, edit func(r *http.Request)) *httptest.ResponseRecorder {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	r.Host = "127.0.0.1:8377"
	r.Header.Set("Authorization", "Bearer "+apiToken)
	if body != "" {
		r.Header.Set("Content-Type", "application/yaml")
	}
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, r)
	return w
}

func (a *apiHarness) sweeps() int {
	a.t.Helper()
	sws, err := a.db.ListSweeps(context.Background())
	if err != nil {
		a.t.Fatal(err)
	}
	return len(sws)
}

func TestNewAPIRefusesAnEmptyToken(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "api.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if h, err := NewAPI(APIConfig{Store: db, Metrics: NewMetrics(db)}); err == nil || h != nil {
		t.Errorf("NewAPI without a token = %v, %v; want an error", h, err)
	}
}

// TestAPIRequiresTheTokenOnEveryAPIPath: reads too (specs carry paths and env); /healthz and
// /metrics stay open.
func TestAPIRequiresTheTokenOnEveryAPIPath(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	if w := a.do("POST", "/api/sweeps", apiSpec(""), nil); w.Code != http.StatusCreated {
		t.Fatalf("submit with the token: %d %s", w.Code, w.Body)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + apiToken + "x", apiToken, "bearer " + apiToken} {
		for _, rq := range []struct{ method, path, body string }{
			{"GET", "/api/sweeps", ""}, {"GET", "/api/sweeps/1", ""}, {"POST", "/api/sweeps", apiSpec("")},
			{"POST", "/api/sweeps/1/cancel", ""}, {"POST", "/api/sweeps/1/resume", ""}, {"GET", "/api/watches", ""},
			{"GET", "/api/unknown", ""},
		} {
			w := a.do(rq.method, rq.path, rq.body, func(r *http.Request) { r.Header.Set("Authorization", auth) })
			if w.Code != http.StatusUnauthorized || !strings.Contains(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with Authorization %q: %d, want 401", rq.method, rq.path, auth, w.Code)
			}
		}
	}
	if n := a.sweeps(); n != 1 {
		t.Errorf("%d sweeps stored, want only the authorised one", n)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if w := a.do("GET", path, "", func(r *http.Request) { r.Header.Del("Authorization") }); w.Code != http.StatusOK {
			t.Errorf("GET %s without a token: %d, want 200", path, w.Code)
		}
	}
	if w := a.do("GET", "/api/sweeps/1", "", nil); w.Code != http.StatusOK {
		t.Errorf("GET /api/sweeps/1 with the token: %d", w.Code)
	}
}

// TestAPIRefusesBrowserDrivenRequests: a page in a browser on the machine can send a "simple"
// cross-origin POST (text/plain, no preflight) or reach the API through a rebound DNS name.
func TestAPIRefusesBrowserDrivenRequests(t *testing.T) {
	a := newAPIHarness(t, APIConfig{ListenHost: "ctl.example"})
	for _, c := range []struct {
		name   string
		method string
		path   string
		body   string
		edit   func(r *http.Request)
		want   int
	}{
		{"rebound host", "POST", "/api/sweeps", apiSpec(""), func(r *http.Request) { r.Host = "evil.example" }, 421},
		{"rebound host with port", "GET", "/api/sweeps", "", func(r *http.Request) { r.Host = "evil.example:8377" }, 421},
		{"rebound host on /metrics", "GET", "/metrics", "", func(r *http.Request) { r.Host = "evil.example" }, 421},
		{"host that ends like localhost", "GET", "/api/sweeps", "", func(r *http.Request) { r.Host = "localhost.evil.example" }, 421},
		{"other origin", "POST", "/api/sweeps", apiSpec(""), func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403},
		{"null origin", "POST", "/api/sweeps", apiSpec(""), func(r *http.Request) { r.Header.Set("Origin", "null") }, 403},
		{"other origin on a read", "GET", "/api/sweeps", "", func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, 403},
		{"other origin on cancel", "POST", "/api/sweeps/1/cancel", "", func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, 403},
		{"same host other port", "GET", "/api/sweeps", "", func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:9999") }, 403},
		{"text/plain", "POST", "/api/sweeps", apiSpec(""), func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415},
		{"form", "POST", "/api/sweeps", apiSpec(""), func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, 415},
		{"multipart", "POST", "/api/sweeps", apiSpec(""), func(r *http.Request) { r.Header.Set("Content-Type", "multipart/form-data; boundary=x") }, 415},
		{"body without type", "POST", "/api/sweeps", apiSpec(""), func(r *http.Request) { r.Header.Del("Content-Type") }, 415},
		{"cancel with a form type", "POST", "/api/sweeps/1/cancel", "", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415},
	} {
		if w := a.do(c.method, c.path, c.body, c.edit); w.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, strings.TrimSpace(w.Body.String()), c.want)
		}
	}
	if n := a.sweeps(); n != 0 {
		t.Fatalf("%d sweeps stored by refused requests", n)
	}
	for _, c := range []struct {
		name string
		body string
		edit func(r *http.Request)
	}{
		{"loopback address", apiSpec(""), nil},
		{"localhost", apiSpec(""), func(r *http.Request) { r.Host = "localhost:8377" }},
		{"IPv6 loopback", apiSpec(""), func(r *http.Request) { r.Host = "[::1]:8377" }},
		{"other loopback address", apiSpec(""), func(r *http.Request) { r.Host = "127.0.0.2" }},
		{"the listen host", apiSpec(""), func(r *http.Request) { r.Host = "CTL.example.:8377" }},
		{"own origin", apiSpec(""), func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:8377") }},
		{"yaml with charset", apiSpec(""), func(r *http.Request) { r.Header.Set("Content-Type", "application/yaml; charset=utf-8") }},
		{"json", `{"version": 1, "name": "js", "hosts": [{"name": "h", "address": "h.example"}],
			"server": {"command": ["/opt/sglang/bin/python"]}, "methods": {"baseline": []}, "matrix": {"method": ["baseline"]},
			"workload": {"concurrency": [1], "requests": 2, "input_tokens": 8, "output_tokens": 8}}`,
			func(r *http.Request) { r.Header.Set("Content-Type", "application/json") }},
	} {
		if w := a.do("POST", "/api/sweeps?at=2099-01-01T00:00:00Z", c.body, c.edit); w.Code != http.StatusCreated {
			t.Errorf("%s: %d %s, want 201", c.name, w.Code, strings.TrimSpace(w.Body.String()))
		}
	}
	// A body-less POST may omit Content-Type.
	if w := a.do("POST", "/api/sweeps/1/cancel", "", nil); w.Code != http.StatusOK {
		t.Errorf("cancel without a body or Content-Type: %d %s", w.Code, w.Body)
	}
}

func TestAPICapsBodies(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	big := apiSpec("") + "# " + strings.Repeat("x", MaxBodyBytes) + "\n"
	if w := a.do("POST", "/api/sweeps", big, nil); w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "larger than") {
		t.Errorf("oversized body with Content-Length: %d %s", w.Code, w.Body)
	}
	// Without a Content-Length (chunked), the reader stops at the cap.
	w := a.do("POST", "/api/sweeps", big, func(r *http.Request) {
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(big)), -1
	})
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "larger than") {
		t.Errorf("oversized chunked body: %d %s", w.Code, w.Body)
	}
	if n := a.sweeps(); n != 0 {
		t.Errorf("%d sweeps stored", n)
	}
}

// TestAPISubmitRefusesAZonePrefixWithoutZone: robfig/cron panicked on ?cron=TZ= and the connection
// was dropped; now it is a 400 with the reason.
func TestAPISubmitRefusesAZonePrefixWithoutZone(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	for _, expr := range []string{"TZ=", "CRON_TZ=", "CRON_TZ=UTC"} {
		w := a.do("POST", "/api/sweeps?cron="+expr, apiSpec(""), nil)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "bad cron expression") {
			t.Errorf("?cron=%s: %d %s, want 400", expr, w.Code, w.Body)
		}
	}
	bad := apiSpec("") + "schedule: {cron: \"TZ=\"}\n"
	if w := a.do("POST", "/api/sweeps", bad, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "request:8:18:") {
		t.Errorf("schedule.cron TZ=: %d %s, want 400 with a position", w.Code, w.Body)
	}
	if n := a.sweeps(); n != 0 {
		t.Errorf("%d sweeps stored", n)
	}
}

func TestAPISubmitAppliesThePolicy(t *testing.T) {
	local := apiSpec("hosts: [{name: here, driver: local}]")
	key := apiSpec("hosts: [{name: h, address: h.example, identity_file: /etc/ssh/ssh_host_ed25519_key}]")
	a := newAPIHarness(t, APIConfig{Policy: SpecPolicy{Home: t.TempDir()}})
	for body, flag := range map[string]string{local: "--allow-local-driver", key: "--allow-any-key-path"} {
		w := a.do("POST", "/api/sweeps", body, nil)
		var out struct {
			Error  string   `json:"error"`
			Errors []string `json:"errors"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		if w.Code != http.StatusForbidden || !strings.Contains(out.Error, flag) || len(out.Errors) != 1 {
			t.Errorf("%d %s, want 403 naming %s", w.Code, w.Body, flag)
		}
	}
	if n := a.sweeps(); n != 0 {
		t.Errorf("%d refused sweeps stored", n)
	}
	allowed := newAPIHarness(t, APIConfig{Policy: SpecPolicy{AllowLocalDriver: true, AllowAnyKeyPath: true}})
	for _, body := range []string{local, key} {
		if w := allowed.do("POST", "/api/sweeps?at=2099-01-01T00:00:00Z", body, nil); w.Code != http.StatusCreated {
			t.Errorf("with the policy relaxed: %d %s", w.Code, w.Body)
		}
	}
}

// TestAPIHostNames: the Host names a request may use, for a named, an IPv6 and a wildcard listen.
func TestAPIHostNames(t *testing.T) {
	named := &api{hosts: allowedHosts("ctl.example")}
	v6 := &api{hosts: allowedHosts("fd00:0::5")}
	wild := &api{hosts: allowedHosts("0.0.0.0")}
	name, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a    *api
		host string
		want bool
	}{
		{named, "ctl.example:8377", true}, {named, "CTL.EXAMPLE.", true}, {named, "localhost", true},
		{named, "127.1.2.3:80", true}, {named, "[::1]:8377", true}, {named, "other.example", false},
		{named, "localhost.evil.example", false}, {named, name, name == "localhost"},
		{v6, "[fd00::5]:8377", true}, {v6, "[FD00:0:0::5]", true}, {v6, "[fd00::6]:8377", false},
		{wild, name, true}, {wild, name + ":8377", true}, {wild, "evil.example", false},
	} {
		if got := c.a.hostAllowed(c.host); got != c.want {
			t.Errorf("Host %q with hosts %v: allowed %v, want %v", c.host, c.a.hosts, got, c.want)
		}
	}
}

// TestMetricsCountTheStore: /metrics reports the sweeps by state (every state, 0 when none) and
// the points by state and failure class, read from the store at the scrape.
func TestMetricsCountTheStore(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	if w := a.do("POST", "/api/sweeps", apiSpec(""), nil); w.Code != http.StatusCreated {
		t.Fatalf("submit: %d %s", w.Code, w.Body)
	}
	w := a.do("GET", "/metrics", "", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", w.Code)
	}
	body := w.Body.String()
	for _, want := range []string{`specsweep_sweeps{state="queued"} 1`, `specsweep_sweeps{state="done"} 0`,
		`specsweep_sweeps{state="scheduled"} 0`, `specsweep_points{failure_class="",state="pending"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// failingCreate is a store whose CreateSweep fails, as a full disk or a broken database would.
type failingCreate struct{ *store.DB }

func (failingCreate) CreateSweep(context.Context, store.NewSweep, []store.NewHost, []store.NewPoint) (int64, error) {
	return 0, errors.New("disk I/O error")
}

// TestAPISubmitWordsRefusalsAndStoreFailures: a request the orchestrator refuses is a 400 worded with
// the API's parameters (not the CLI's flags); a store that fails is the daemon's fault, a 500.
func TestAPISubmitWordsRefusalsAndStoreFailures(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	for target, want := range map[string]string{
		"/api/sweeps?cron=@daily&at=2099-01-01T00:00:00Z": "cron= and at= exclude each other",
		"/api/sweeps?cron=nonsense":                       "bad cron expression",
	} {
		w := a.do("POST", target, apiSpec(""), nil)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), want) || strings.Contains(w.Body.String(), "--") {
			t.Errorf("%s: %d %s, want 400 saying %q", target, w.Code, w.Body, want)
		}
	}
	scheduled := apiSpec("") + "schedule: {cron: \"@daily\"}\n"
	if w := a.do("POST", "/api/sweeps?at=2099-01-01T00:00:00Z", scheduled, nil); w.Code != http.StatusBadRequest ||
		!strings.Contains(w.Body.String(), "at= conflicts with the spec's schedule.cron") {
		t.Errorf("at= on a scheduled spec: %d %s, want 400", w.Code, w.Body)
	}

	h, err := NewAPI(APIConfig{Store: failingCreate{a.db}, Metrics: NewMetrics(a.db), Token: apiToken})
	if err != nil {
		t.Fatal(err)
	}
	a.h = h
	if w := a.do("POST", "/api/sweeps", apiSpec(""), nil); w.Code != http.StatusInternalServerError ||
		!strings.Contains(w.Body.String(), "disk I/O error") {
		t.Errorf("failing store: %d %s, want 500", w.Code, w.Body)
	}
}
