package testhost

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestBootTwoHosts(t *testing.T) {
	hosts := Boot(t, 2, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for _, h := range hosts {
		if !strings.HasPrefix(h.Addr, Subnet) {
			t.Fatalf("address %s outside the test subnet", h.Addr)
		}
		out, err := h.Run(ctx, "systemctl is-system-running; hostname; systemctl cat sglang.service >/dev/null && echo unit-ok; test -x "+SimPath+" && echo sim-ok")
		got := string(out)
		if err != nil && !strings.Contains(got, "degraded") { // is-system-running exits 1 when degraded
			t.Fatalf("%s: %v: %s", h.Name, err, out)
		}
		lines := strings.Fields(got)
		if len(lines) < 4 || (lines[0] != "running" && lines[0] != "degraded") || lines[1] != h.Name ||
			lines[2] != "unit-ok" || lines[3] != "sim-ok" {
			t.Fatalf("%s: unexpected output %q", h.Name, got)
		}
		if seen[h.Addr] {
			t.Fatalf("two hosts share %s", h.Addr)
		}
		seen[h.Addr] = true
		// The operator's unit is on disk as installed.
		b, err := h.ReadFile(UnitPath)
		if err != nil || !bytes.Equal(b, h.UnitText) {
			t.Fatalf("unit file: %v", err)
		}
	}
	// The real /tmp survives a host boot (systemd-tmpfiles ran on the overlay only).
	if _, err := os.Stat(os.TempDir()); err != nil {
		t.Fatal(err)
	}
}

func TestTeardownLeavesNothing(t *testing.T) {
	var name, root, veth string
	t.Run("boot", func(t *testing.T) {
		h := Boot(t, 1, Options{})[0]
		name, root, veth = h.Name, h.Root, h.vethHost
	})
	if name == "" {
		t.Skip("boot skipped")
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), name) {
		t.Errorf("netns %s left", name)
	}
	if mounted(root) {
		t.Errorf("overlay %s still mounted", root)
	}
	if exec.Command("ip", "link", "show", veth).Run() == nil {
		t.Errorf("veth %s left", veth)
	}
}

func TestOperatorUnitIsOperatorStyle(t *testing.T) {
	u := string(OperatorUnit(nil, map[string]string{"SGLANGSIM_TIME_SCALE": "0.01"}))
	for _, want := range []string{"# /etc/systemd/system/sglang.service", "ExecStart=" + SimPath + " --model-path",
		"Environment=SGLANGSIM_TIME_SCALE=0.01", "TimeoutStopSec=90", "[Install]"} {
		if !strings.Contains(u, want) {
			t.Errorf("unit lacks %q:\n%s", want, u)
		}
	}
}
