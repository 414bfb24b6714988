package testhost

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
		// root's shell start-up files are Debian's, not this machine's, and commands run side by
		// side print nothing of their own.
		skel, _ := h.ReadFile("/etc/skel/.bashrc")
		if rc, err := h.ReadFile("/root/.bashrc"); err != nil || !bytes.Equal(rc, skel) {
			t.Errorf("%s: /root/.bashrc is not /etc/skel's (%v)", h.Name, err)
		}
		// No generator ran (each masked): at boot they write units and links under /run/systemd/generator*.
		if out, err := h.Run(ctx, "systemctl daemon-reload && find /run/systemd/generator /run/systemd/generator.early /run/systemd/generator.late -mindepth 1 2>/dev/null | head -5"); err != nil || len(bytes.TrimSpace(out)) != 0 {
			t.Errorf("%s: generators ran (%v):\n%s", h.Name, err, out)
		}
		// systemd-tmpfiles did not run at boot (masked: it emptied the overlay's /tmp entry by entry).
		tmpfiles := "systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service systemd-tmpfiles-setup-dev-early.service"
		if out, err := h.Run(ctx, "systemctl show -p LoadState -p ActiveState --value "+tmpfiles+" | grep . | sort | uniq -c"); err != nil ||
			strings.Join(strings.Fields(string(out)), " ") != "3 inactive 3 masked" {
			t.Errorf("%s: systemd-tmpfiles' boot units (%v), want 3 masked and inactive:\n%s", h.Name, err, out)
		}
		// The kernel file systems, the journal's flush and the audit socket were not started (masked).
		skipped := "dev-hugepages.mount dev-mqueue.mount sys-kernel-debug.mount systemd-journal-flush.service systemd-journald-audit.socket"
		if out, err := h.Run(ctx, "systemctl show -p LoadState -p ActiveState --value "+skipped+" | grep . | sort | uniq -c"); err != nil ||
			strings.Join(strings.Fields(string(out)), " ") != "5 inactive 5 masked" {
			t.Errorf("%s: units a host needs not (%v), want 5 masked and inactive:\n%s", h.Name, err, out)
		}
		// An SSH login is no logind session (pam_systemd dropped: Options.LoginSessions).
		if out, err := h.Run(ctx, "loginctl list-sessions --no-legend | wc -l"); err != nil || strings.TrimSpace(string(out)) != "0" {
			t.Errorf("%s: logind sessions while logged in (%v): %s", h.Name, err, out)
		}
		outs := make(chan string, 8)
		for range 8 {
			go func() {
				out, err := h.Run(ctx, "true")
				outs <- fmt.Sprint(string(out), err)
			}()
		}
		for range 8 {
			if o := <-outs; o != "<nil>" {
				t.Errorf("%s: a command printed %q", h.Name, o)
			}
		}
	}
	// The real /tmp survives a host boot (systemd-tmpfiles ran on the overlay only).
	if _, err := os.Stat(os.TempDir()); err != nil {
		t.Fatal(err)
	}
}

func TestTeardownLeavesNothing(t *testing.T) {
	var name, root, veth string
	var cgroups []string
	t.Run("boot", func(t *testing.T) {
		h := Boot(t, 1, Options{})[0]
		name, root, veth, cgroups = h.Name, h.Root, h.vethHost, h.cgroups
		if len(cgroups) == 0 {
			t.Error("the host has no cgroup of its own")
		}
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
	for _, d := range cgroups {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("cgroup %s left", d)
		}
	}
}

// TestHostsHaveCgroupsOfTheirOwn: two hosts run a unit of the same name side by side; each unit's
// process is in a cgroup under its own host's, the two are different, and stopping one host's unit
// leaves the other's running. Before each host had its own cgroup namespace, both were
// /system.slice/<unit> of the machine's one tree, and hosts booted side by side failed to start
// units (status 219/CGROUP).
func TestHostsHaveCgroupsOfTheirOwn(t *testing.T) {
	if msg := Requirements(); msg != "" {
		t.Skip(msg)
	}
	hosts := Boot(t, 2, Options{NoUnit: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var paths []string
	for _, h := range hosts {
		if out, err := h.Run(ctx, "systemd-run --unit=same-name sleep 600"); err != nil {
			t.Fatalf("%s: %v %s", h.Name, err, out)
		}
		out, err := h.Run(ctx, "systemctl show -p MainPID --value same-name.service")
		if err != nil {
			t.Fatalf("%s: %v %s", h.Name, err, out)
		}
		pid, err := h.Nsenter(ctx, "sh", "-c", "cat /proc/"+strings.TrimSpace(string(out))+"/cgroup")
		if err != nil {
			t.Fatalf("%s: %v %s", h.Name, err, pid)
		}
		paths = append(paths, string(pid))
		if len(h.cgroups) == 0 {
			t.Fatalf("%s has no cgroup of its own", h.Name)
		}
		found := false
		for _, d := range h.cgroups {
			_, err := os.Stat(filepath.Join(d, "system.slice", "same-name.service"))
			found = found || err == nil
		}
		if !found {
			t.Errorf("%s: same-name.service is not under the host's cgroups %v", h.Name, h.cgroups)
		}
	}
	if out, err := hosts[0].Run(ctx, "systemctl stop same-name.service"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, _ := hosts[1].Run(ctx, "systemctl is-active same-name.service"); strings.TrimSpace(string(out)) != "active" {
		t.Errorf("the second host's unit is %q once the first host's stopped", strings.TrimSpace(string(out)))
	}
	t.Logf("cgroups inside each host: %q", paths)
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
