package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/internal/testhost"
)

// TestDoctor runs `specsweep doctor` on a spec with two healthy test hosts,
// one whose key is not in known_hosts and one that vanished from the network.
func TestDoctor(t *testing.T) {
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	hosts := testhost.Boot(t, 4, testhost.Options{Env: map[string]string{"SGLANGSIM_TIME_SCALE": "0.05", "SGLANGSIM_LOAD_SECONDS": "2"}})
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty_known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var hs strings.Builder
	for i, h := range hosts {
		kh := h.KnownHosts
		if i == 2 {
			kh = empty
		}
		fmt.Fprintf(&hs, "  - {name: h%d, address: %q, user: root, identity_file: %q, known_hosts: %q, gpus: 4}\n", i, h.Addr, h.KeyFile, kh)
	}
	spec := "version: 1\nname: doctor-test\nhosts:\n" + hs.String() +
		"server:\n  command: [/usr/local/bin/sglangsim]\n  args: [--model-path, /m]\n  port: 30000\n" +
		"methods:\n  baseline: []\nmatrix:\n  method: [baseline]\n  tp: [1]\n" +
		"workload:\n  concurrency: [1]\n  requests: 1\n  input_tokens: 8\n  output_tokens: 8\n"
	path := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hosts[3].Unplug(); err != nil {
		t.Fatal(err)
	}
	// h0: the port is held by the sweep's own unit (fine); h1: by another service (a failure).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if out, err := hosts[0].Nsenter(ctx, "systemctl", "start", "sglang.service"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := hosts[1].Nsenter(ctx, "systemd-run", "--unit=other-server", "--setenv=SGLANGSIM_LOAD_SECONDS=0",
		testhost.SimPath, "--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--port", "30000"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for _, h := range hosts[:2] {
		for i := 0; ; i++ {
			out, _ := h.Nsenter(ctx, "sh", "-c", "ss -Htln 'sport = :30000'")
			if len(strings.TrimSpace(string(out))) > 0 {
				break
			}
			if i > 100 {
				t.Fatalf("%s: nothing listens on 30000", h.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var out, errb bytes.Buffer
	t0 := time.Now()
	// An unreachable host must not hold doctor up: its checks end at DoctorTimeout, a reachable
	// host's at DoctorChecksTimeout after its login. Past both (and a margin for a loaded machine)
	// doctor hangs, and the context ends it: exit 1 without the rows below. How long it takes is not
	// asserted (a busy CI machine took 40 s for the reachable hosts' checks, within their budget).
	dctx, dcancel := context.WithTimeout(context.Background(), hostctl.DoctorTimeout+hostctl.DoctorChecksTimeout+time.Minute)
	defer dcancel()
	code := Main(dctx, []string{"doctor", path}, Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	t.Logf("doctor took %v:\n%s%s", time.Since(t0), out.String(), errb.String())
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if dctx.Err() != nil {
		t.Fatalf("doctor did not end with an unreachable host: %v", dctx.Err())
	}
	lines := strings.Split(out.String(), "\n")
	has := func(host, status, check, detail string) bool {
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == host && f[1] == status && f[2] == check && strings.Contains(l, detail) {
				return true
			}
		}
		return false
	}
	if !has("h0", "ok", "port", "held by sglang.service") {
		t.Error("h0: port held by the unit not reported ok")
	}
	if !has("h1", "FAIL", "port", "in use by another process (unit other-server.service)") {
		t.Error("h1: port held by another service not reported")
	}
	for _, h := range []string{"h0", "h1"} {
		for _, c := range []string{"reachable", "host", "login", "root/sudo", "systemctl", "unit", "disk"} {
			if !has(h, "ok", c, "") {
				t.Errorf("%s: no ok %s line", h, c)
			}
		}
		if !has(h, "skip", "gpus", "nvidia-smi") {
			t.Errorf("%s: no gpus skip line", h)
		}
	}
	if !has("h2", "FAIL", "host", "ssh-keyscan") {
		t.Error("h2: unknown host key not reported with the ssh-keyscan line")
	}
	if !has("h3", "FAIL", "reachable", "") {
		t.Error("h3: unreachable host not reported")
	}
}
