package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The regression tests of the daemon's API (docs/security.md) against the real binary over real
// HTTP on loopback. Before, loopback needed no token: any local user (and any web page in a local
// browser, with a CORS "simple" request) could submit a driver: local spec and run commands as the
// daemon's user.

// apiLocalSpec is the reproduction: a driver local spec whose command writes `id` to out.
func apiLocalSpec(name, out string) string {
	return fmt.Sprintf(`version: 1
name: %s
hosts: [{name: here, driver: local}]
server: {command: [/bin/sh, -c, "id > %s"]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 1, input_tokens: 8, output_tokens: 8}
`, name, out)
}

// apiSSHSpec is an ordinary spec; hostExtra goes into its host's mapping.
func apiSSHSpec(name, hostExtra string) string {
	return fmt.Sprintf(`version: 1
name: %s
hosts: [{name: gpu, address: gpu.invalid%s}]
server: {command: [/usr/bin/python3, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 1, input_tokens: 8, output_tokens: 8}
`, name, hostExtra)
}

// later keeps an accepted sweep from running during the test.
const later = "?at=2099-01-01T00:00:00Z"

func countSweeps(db string) int { return countRows(db, "SELECT count(*) FROM sweeps") }

func stopDaemon(t *testing.T, d *daemonProc) {
	t.Helper()
	signal(t, d.cmd, syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("daemon exit: %v\n%s", err, tail(d.out.String(), 30))
	}
}

// TestDaemonAPIRefusesRequestsWithoutTheToken: on loopback too, every /api/ request needs the
// token, reads included, and a refused submit stores nothing; /healthz and /metrics stay open.
func TestDaemonAPIRefusesRequestsWithoutTheToken(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	db := filepath.Join(t.TempDir(), "d.db")
	d := startDaemon(t, db)
	noToken := func(r *http.Request) { r.Header.Del("Authorization") }
	if code, body := d.api(t, "POST", "/api/sweeps", apiSSHSpec("a", ""), noToken); code != 401 {
		t.Errorf("POST without the token: %d %s, want 401", code, body)
	}
	wrong := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+strings.Repeat("0", len(d.token))) }
	if code, body := d.api(t, "POST", "/api/sweeps", apiSSHSpec("a", ""), wrong); code != 401 {
		t.Errorf("POST with a wrong token: %d %s, want 401", code, body)
	}
	if n := countSweeps(db); n != 0 {
		t.Errorf("%d sweeps stored without the token", n)
	}
	for _, path := range []string{"/api/sweeps", "/api/sweeps/1"} {
		if code, _ := d.api(t, "GET", path, "", noToken); code != 401 {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
	}
	if code, _ := d.api(t, "POST", "/api/sweeps/1/cancel", "", noToken); code != 401 {
		t.Errorf("cancel without the token: %d, want 401", code)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if code, _ := d.api(t, "GET", path, "", noToken); code != 200 {
			t.Errorf("GET %s without the token: %d, want 200", path, code)
		}
	}
	if code, body := d.api(t, "POST", "/api/sweeps"+later, apiSSHSpec("a", ""), nil); code != 201 {
		t.Errorf("POST with the token: %d %s, want 201", code, body)
	}
	if code, _ := d.api(t, "GET", "/api/sweeps", "", nil); code != 200 {
		t.Errorf("GET /api/sweeps with the token: %d", code)
	}
	stopDaemon(t, d)
}

// TestDaemonAPIRefusesBrowserRequests: the browser's ways in (a text/plain "simple" request, another
// origin, a rebound DNS name) are refused even with the token; so is a schedule robfig/cron panicked on.
func TestDaemonAPIRefusesBrowserRequests(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	db := filepath.Join(t.TempDir(), "d.db")
	d := startDaemon(t, db)
	for _, c := range []struct {
		name string
		path string
		edit func(r *http.Request)
		want int
	}{
		{"text/plain", "/api/sweeps", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415},
		{"form", "/api/sweeps", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, 415},
		{"other origin", "/api/sweeps", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403},
		{"rebound host", "/api/sweeps", func(r *http.Request) { r.Host = "evil.example" }, 421},
		{"the reproduction", "/api/sweeps", func(r *http.Request) {
			r.Header.Set("Content-Type", "text/plain")
			r.Header.Set("Origin", "https://evil.example")
			r.Host = "evil.example"
		}, 421},
		{"cron TZ=", "/api/sweeps?cron=TZ=", nil, 400},
	} {
		if code, body := d.api(t, "POST", c.path, apiSSHSpec("b", ""), c.edit); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
	big := apiSSHSpec("b", "") + "# " + strings.Repeat("x", 1<<20) + "\n"
	if code, body := d.api(t, "POST", "/api/sweeps", big, nil); code != 413 {
		t.Errorf("a body over 1 MiB: %d %s, want 413", code, body)
	}
	if n := countSweeps(db); n != 0 {
		t.Errorf("%d sweeps stored by refused requests", n)
	}
	// The daemon is still up after the bad schedule.
	if code, _ := d.api(t, "GET", "/healthz", "", nil); code != 200 {
		t.Errorf("/healthz after the requests: %d", code)
	}
	stopDaemon(t, d)
}

// TestDaemonAPISpecPolicy: over the API, driver local and key paths outside the daemon's ~/.ssh are
// refused unless the daemon allows them.
func TestDaemonAPISpecPolicy(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "d.db")
	out := filepath.Join(dir, "id.out")
	d := startDaemon(t, db)
	for _, c := range []struct{ name, spec, flag string }{
		{"driver local", apiLocalSpec("c", out), "--allow-local-driver"},
		{"host key as identity", apiSSHSpec("d", ", identity_file: /etc/ssh/ssh_host_ed25519_key"), "--allow-any-key-path"},
		{"identity out of ~/.ssh", apiSSHSpec("d", ", identity_file: ~/.ssh/../../etc/ssh/ssh_host_rsa_key"), "--allow-any-key-path"},
		{"known_hosts elsewhere", apiSSHSpec("d", ", known_hosts: /etc/cron.d/x"), "--allow-any-key-path"},
	} {
		if code, body := d.api(t, "POST", "/api/sweeps", c.spec, nil); code != 403 || !strings.Contains(body, c.flag) {
			t.Errorf("%s: %d %s, want 403 naming %s", c.name, code, body, c.flag)
		}
	}
	if n := countSweeps(db); n != 0 {
		t.Errorf("%d refused sweeps stored", n)
	}
	if code, body := d.api(t, "POST", "/api/sweeps"+later, apiSSHSpec("e", ", identity_file: ~/.ssh/id_ed25519"), nil); code != 201 {
		t.Errorf("identity_file in ~/.ssh: %d %s, want 201", code, body)
	}
	stopDaemon(t, d)

	d = startDaemon(t, db, "--allow-local-driver", "--allow-any-key-path")
	if code, body := d.api(t, "POST", "/api/sweeps"+later, apiLocalSpec("c", out), nil); code != 201 {
		t.Errorf("driver local with --allow-local-driver: %d %s, want 201", code, body)
	}
	if code, body := d.api(t, "POST", "/api/sweeps"+later, apiSSHSpec("d", ", identity_file: /etc/ssh/ssh_host_ed25519_key"), nil); code != 201 {
		t.Errorf("identity_file with --allow-any-key-path: %d %s, want 201", code, body)
	}
	stopDaemon(t, d)
}

// TestDaemonTokenFileIsPrivateAndSurvivesRestart: the daemon makes DB.token, 0600, and keeps it.
func TestDaemonTokenFileIsPrivateAndSurvivesRestart(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	db := filepath.Join(t.TempDir(), "d.db")
	d := startDaemon(t, db)
	fi, err := os.Stat(db + ".token")
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("token file mode %04o, want 0600", m)
	}
	if len(d.token) != 64 {
		t.Errorf("token %d characters long, want 64 hex digits", len(d.token))
	}
	first := d.token
	stopDaemon(t, d)
	d = startDaemon(t, db)
	if d.token != first {
		t.Error("the token changed across a restart")
	}
	if code, _ := d.api(t, "GET", "/api/sweeps", "", nil); code != 200 {
		t.Errorf("the first token after a restart: %d", code)
	}
	stopDaemon(t, d)
	// A token file others may read: the daemon refuses to start, naming it.
	if err := os.Chmod(db+".token", 0o644); err != nil {
		t.Fatal(err)
	}
	r := specsweep(t, 30*time.Second, "daemon", "--db", db, "--listen", freePort(t))
	if r.code != 1 || !strings.Contains(r.stderr, "chmod 600 "+db+".token") {
		t.Errorf("daemon with a 0644 token file:\n%s", r)
	}
}

// TestDaemonAPIAsNobody runs the reproduction as user nobody: nobody cannot read the token file and
// its submit of a driver local spec gets 401; nothing is stored, nothing runs.
func TestDaemonAPIAsNobody(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run commands as nobody")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	// A directory nobody may enter, so only the token file's own mode keeps nobody out.
	dir, err := os.MkdirTemp("", "sst-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "d.db")
	d := startDaemon(t, db)
	out := filepath.Join(dir, "id.out")
	asNobody := func(stdin string, name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Dir = "/"
		cmd.Stdin = strings.NewReader(stdin)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		return b.String(), err
	}
	if got, err := asNobody("", "cat", db+".token"); err == nil || strings.Contains(got, d.token) ||
		!strings.Contains(got, "Permission denied") {
		t.Errorf("nobody's cat of the token file: %q %v, want Permission denied", got, err)
	}
	script := `exec ` + curl + ` -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/yaml' ` +
		`-H "Authorization: Bearer $(cat ` + db + `.token 2>/dev/null)" --data-binary @- http://` + d.addr + `/api/sweeps`
	got, err := asNobody(apiLocalSpec("pwn", out), "/bin/sh", "-c", script)
	if err != nil || got != "401" {
		t.Errorf("nobody's submit: %q %v, want 401", got, err)
	}
	if n := countSweeps(db); n != 0 {
		t.Errorf("%d sweeps stored by nobody", n)
	}
	stopDaemon(t, d)
	if _, err := os.Stat(out); err == nil {
		t.Error("nobody's command ran")
	}
}
