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
// answers its API on loopback, reloads on `systemctl reload` and stops cleanly.
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
