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
	hosts := testhost.Boot(t, 1, testhost.Options{})
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
	// A short watchdog, so a daemon that does not ping would be killed during the test.
	if err := h.WriteFile("/etc/systemd/system/specsweep.service.d/10-test.conf", []byte("[Service]\nWatchdogSec=2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		out, err := h.Run(t.Context(), cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	props := func(names ...string) string {
		t.Helper()
		var vals []string
		for _, n := range names {
			vals = append(vals, run("systemctl show -p "+n+" --value specsweep.service"))
		}
		return strings.Join(vals, " ")
	}
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
	t.Log(run("systemd-analyze security specsweep.service --no-pager 2>/dev/null | tail -1"))
}
