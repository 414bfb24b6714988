package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestServiceUnitUnderSystemd installs packaging/specsweep.service on a real systemd host and checks
// that the daemon starts as Type=notify (active only once it said READY=1), keeps its watchdog fed,
// answers its API on loopback (with the token it made in its state directory), reloads on
// `systemctl reload` and stops cleanly.
func TestServiceUnitUnderSystemd(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	// A short watchdog, so a daemon that does not ping would be killed during the test.
	run, props := unitHost(t, "[Service]\nWatchdogSec=2s\n")
	run("mkdir -p /root/.ssh && systemctl daemon-reload && systemctl start specsweep.service")
	if s := props("ActiveState", "SubState"); s != "active running" {
		t.Fatalf("after start (Type=notify returns once READY=1): %q\n%s", s, run("journalctl -u specsweep --no-pager | tail -20"))
	}
	time.Sleep(5 * time.Second) // more than twice WatchdogSec
	if s := props("ActiveState", "NRestarts", "Result"); s != "active 0 success" {
		t.Errorf("after 5 s with WatchdogSec=2s: %q (a missing watchdog ping kills the daemon)", s)
	}
	api := run("exec 3<>/dev/tcp/127.0.0.1/8377 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3")
	if !strings.Contains(api, "200 OK") {
		t.Errorf("/healthz inside the host: %q", api)
	}
	// The API needs the token the daemon made beside its database (0600, root's); the log names
	// the file, never the token.
	if m := run("stat -c '%a %U' /var/lib/specsweep/specsweep.db.token"); m != "600 root" {
		t.Errorf("token file mode and owner %q, want 600 root", m)
	}
	get := "exec 3<>/dev/tcp/127.0.0.1/8377 && printf 'GET /api/sweeps HTTP/1.0\\r\\n%b\\r\\n' \"$AUTH\" >&3 && cat <&3"
	if api := run("AUTH= && " + get); !strings.Contains(api, "401 Unauthorized") {
		t.Errorf("/api/sweeps without the token: %q", api)
	}
	auth := `AUTH="Authorization: Bearer $(cat /var/lib/specsweep/specsweep.db.token)\r\n" && `
	if api := run(auth + get); !strings.Contains(api, "200 OK") {
		t.Errorf("/api/sweeps with the token: %q", api)
	}
	// The CLI finds the daemon from the record it wrote (0600, root's) and gets a login URL: the
	// packaged unit's comments say so instead of a curl line that sends the token to any listener.
	if m := run("stat -c '%a %U' /var/lib/specsweep/specsweep.db.daemon"); m != "600 root" {
		t.Errorf("address record mode and owner %q, want 600 root", m)
	}
	if u := run("SPECSWEEP_DB=/var/lib/specsweep/specsweep.db specsweep dashboard 2>/dev/null"); !strings.HasPrefix(u, "http://127.0.0.1:8377/") {
		t.Errorf("specsweep dashboard inside the host: %q", u)
	}
	token := run("cat /var/lib/specsweep/specsweep.db.token")
	if j := run("journalctl -u specsweep --no-pager -o cat"); !strings.Contains(j, "/var/lib/specsweep/specsweep.db.token") || strings.Contains(j, token) {
		t.Errorf("the journal should name the token file and not hold the token:\n%s", j)
	}
	run("systemctl reload specsweep.service")
	time.Sleep(500 * time.Millisecond)
	if j := run("journalctl -u specsweep --no-pager -o cat"); !strings.Contains(j, "reloading schedules") || !strings.Contains(j, `"daemon ready"`) {
		t.Errorf("journal lacks the ready and reload lines:\n%s", j)
	}
	if m := run("stat -c %a /var/lib/specsweep/specsweep.db"); m != "600" {
		t.Errorf("database mode %s, want 600", m)
	}
	run("systemctl stop specsweep.service")
	if s := props("ActiveState", "Result"); s != "inactive success" {
		t.Errorf("after stop: %q\n%s", s, run("journalctl -u specsweep --no-pager | tail -20"))
	}
	if out := run("test -e /var/lib/specsweep/specsweep.db.daemon && echo left || echo removed"); out != "removed" {
		t.Errorf("address record after stop: %s", out)
	}
	t.Log(run("systemd-analyze security specsweep.service --no-pager 2>/dev/null | tail -1"))
}

// unitHost boots a test host with specsweep and packaging/specsweep.service installed (dropIn, if
// not empty, as a drop-in), and returns a runner of commands on it and a reader of the unit's
// properties.
func unitHost(t *testing.T, dropIn string) (run func(string) string, props func(...string) string) {
	t.Helper()
	hosts := boot(t, 1, testhost.Options{})
	h := hosts[0]
	bin, err := os.ReadFile(specsweepBin(t))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("../../packaging/specsweep.service")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile("/usr/local/bin/specsweep", bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile("/etc/systemd/system/specsweep.service", unit, 0o644); err != nil {
		t.Fatal(err)
	}
	if dropIn != "" {
		if err := h.WriteFile("/etc/systemd/system/specsweep.service.d/10-test.conf", []byte(dropIn), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run = func(cmd string) string {
		t.Helper()
		out, err := h.Run(t.Context(), cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	props = func(names ...string) string {
		t.Helper()
		var vals []string
		for _, n := range names {
			vals = append(vals, run("systemctl show -p "+n+" --value specsweep.service"))
		}
		return strings.Join(vals, " ")
	}
	return run, props
}

// TestServiceUnitOnAHeldPort: another user's process holds 127.0.0.1:8377; the unit's daemon fails
// to start with "address in use" and the holder in its journal, exits 3, and systemd does not
// restart it (RestartPreventExitStatus=3), past several RestartSec= periods.
func TestServiceUnitOnAHeldPort(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	run, props := unitHost(t, "")
	run("systemd-run --unit=porthog --uid=nobody /usr/bin/python3 -c " +
		`'import socket, time; s = socket.socket(); s.bind(("127.0.0.1", 8377)); s.listen(); time.sleep(3600)'`)
	waitFor(t, 20*time.Second, "the port holder listening", func() bool {
		return strings.Contains(run("ss -Hltn 'sport = :8377'"), "127.0.0.1:8377")
	})
	run("mkdir -p /root/.ssh && systemctl daemon-reload")
	if out := run("systemctl start specsweep.service >/dev/null 2>&1 && echo started || echo failed"); out != "failed" {
		t.Errorf("systemctl start on a held port: %s", out)
	}
	// RestartSec=5s: a restarting unit would have come back twice by now.
	time.Sleep(12 * time.Second)
	if s := props("ActiveState", "Result", "ExecMainStatus", "NRestarts"); s != "failed exit-code 3 0" {
		t.Errorf("after 12 s on a held port: %q, want failed exit-code 3 0 (no restart)", s)
	}
	j := run("journalctl -u specsweep --no-pager -o cat")
	if !strings.Contains(j, "cannot listen on 127.0.0.1:8377: address in use (held by uid 65534 (nobody)") {
		t.Errorf("the journal does not say why:\n%s", j)
	}
	if n := strings.Count(j, "cannot listen on"); n != 1 {
		t.Errorf("%d start attempts in the journal, want 1:\n%s", n, j)
	}
	// Other start failures are restarted at most 5 times in 10 minutes.
	if s := props("StartLimitBurst", "StartLimitIntervalUSec"); s != "5 10min" {
		t.Errorf("start limit %q, want 5 10min", s)
	}
}
