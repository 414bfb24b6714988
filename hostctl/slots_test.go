package hostctl

import (
	"context"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

func TestSlotUnitNames(t *testing.T) {
	for _, c := range []struct {
		unit string
		k    int
		want string
	}{
		{"sglang.service", 0, "specsweep-sglang-slot0.service"},
		{"sglang@big.service", 7, "specsweep-sglang-big-slot7.service"},
		{"llm-serve.service", 12, "specsweep-llm-serve-slot12.service"},
	} {
		got := SlotUnit(c.unit, c.k)
		if got != c.want {
			t.Errorf("SlotUnit(%q, %d) = %q, want %q", c.unit, c.k, got, c.want)
		}
		if err := checkUnitName(got); err != nil {
			t.Errorf("%s: %v", got, err)
		}
	}
}

// TestSlotUnitMode: a slot's unit file is readable by all only when every file it merges is.
func TestSlotUnitMode(t *testing.T) {
	for _, c := range []struct {
		modes []os.FileMode
		want  os.FileMode
	}{
		{[]os.FileMode{0o644}, 0o644},
		{[]os.FileMode{0o644, 0o444, 0o755}, 0o644},
		{[]os.FileMode{0o644, 0o600}, 0o600},
		{[]os.FileMode{0o640, 0o644}, 0o600},
		{[]os.FileMode{0o400}, 0o600},
	} {
		if got := slotUnitMode(c.modes); got != c.want {
			t.Errorf("slotUnitMode(%v) = %o, want %o", c.modes, got, c.want)
		}
	}
}

// slotLaunch is the launch of a TP tp point on GPUs from first, port 30000+k (as the orchestrator
// writes it for slot k).
func slotLaunch(k, first, tp int) Launch {
	l := launch(driver{simBin: testhost.SimPath}, nil)
	l.Env = maps.Clone(l.Env)
	var ids []string
	for g := first; g < first+tp; g++ {
		ids = append(ids, strconv.Itoa(g))
	}
	l.Env["CUDA_VISIBLE_DEVICES"] = strings.Join(ids, ",")
	port := 30000 + k
	l.Argv = []string{testhost.SimPath, "--model-path", "/models/Qwen3.6-27B", "--tp-size", strconv.Itoa(tp), "--port", strconv.Itoa(port)}
	l.Port = port
	return l
}

// TestPackedSlotsOnARealHost: two slots of a host with 8 GPUs run at once, each in a unit made from
// the operator's (its settings copied, its own ExecStart, port and GPUs); the operator's server is
// stopped for them; a new connection (specsweep killed and run again) stops what a slot left
// running before it starts one; the host's Restore removes every slot unit and starts the
// operator's server again.
func TestPackedSlotsOnARealHost(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv, GPUs: 8, UnitEnabled: true})[0]
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// Over D-Bus, as a root login's sweep by default: the slots too (TestPackedSlotKeepsAPrivateDropInPrivate's, over systemctl).
	opts := RemoteOptions{Name: h.Name, SSH: rootSSH(h), GPUWait: 1500 * time.Millisecond, DBus: true}
	if out, err := h.Run(ctx, "systemctl is-active sglang.service"); strings.TrimSpace(string(out)) != "active" {
		t.Fatalf("the operator's server should run before the sweep: %s %v", out, err)
	}
	r, err := DialRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	type started struct {
		in  Instance
		err error
	}
	res := make(chan started, 2)
	for k, g := range []int{0, 2} {
		go func() {
			s := r.Slot(k)
			if _, bus := s.unit.(*dbusUnit); !bus {
				t.Errorf("slot %d of a host over D-Bus is driven with %T", k, s.unit)
			}
			in, err := s.Start(ctx, slotLaunch(k, g, 2))
			if err == nil {
				_, err = in.WaitReady(ctx)
			}
			res <- started{in, err}
		}()
	}
	var ins []Instance
	for range 2 {
		s := <-res
		if s.err != nil {
			t.Fatal(s.err)
		}
		ins = append(ins, s.in)
	}
	if out, _ := h.Run(ctx, "systemctl is-active sglang.service"); strings.TrimSpace(string(out)) == "active" {
		t.Error("the operator's server still runs beside the slots")
	}
	// Each slot's server sees its own GPUs and listens on its own port; the operator's settings
	// (LimitNOFILE, WorkingDirectory) came along.
	for k, gpus := range []string{"0,1", "2,3"} {
		u := SlotUnit("sglang.service", k)
		var f []string
		for _, p := range []string{"LimitNOFILE", "WorkingDirectory", "MainPID"} {
			out, err := h.Run(ctx, "systemctl show -p "+p+" --value -- "+u)
			if err != nil {
				t.Fatal(err)
			}
			f = append(f, strings.TrimSpace(string(out)))
		}
		if f[0] != "65535" || f[1] != "/" {
			t.Errorf("%s: LimitNOFILE, WorkingDirectory = %q", u, f[:2])
		}
		env, err := h.Run(ctx, "tr '\\0' '\\n' < /proc/"+f[2]+"/environ | grep ^CUDA_VISIBLE_DEVICES=")
		if strings.TrimSpace(string(env)) != "CUDA_VISIBLE_DEVICES="+gpus || err != nil {
			t.Errorf("%s: the server's environment has %q, want GPUs %s (%v)", u, env, gpus, err)
		}
		if ins[0].BaseURL() == ins[1].BaseURL() {
			t.Errorf("both slots at %s", ins[0].BaseURL())
		}
	}
	apps, _ := h.Run(ctx, "nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader")
	if n := strings.Count(string(apps), "GPU-"); n != 4 {
		t.Errorf("nvidia-smi lists %d GPU holdings, want 2 servers x 2 GPUs:\n%s", n, apps)
	}
	left, err := r.Leftovers(ctx)
	if err != nil || !strings.Contains(strings.Join(left, " "), SlotUnit("sglang.service", 1)) {
		t.Errorf("leftovers during the sweep: %v %v", left, err)
	}

	// specsweep dies here (nothing restored); the next one's slot 1 lands on GPUs 0-3 of the
	// first run's two slots: what they left running is stopped first, not a gpu_busy.
	r2, err := DialRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	in, err := r2.Slot(1).Start(ctx, slotLaunch(1, 0, 4))
	if err != nil {
		t.Fatalf("a new sweep's slot on the GPUs an earlier one's slots hold: %v", err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _ := h.Run(ctx, "systemctl is-active "+SlotUnit("sglang.service", 0)); strings.TrimSpace(string(out)) == "active" {
		t.Error("the earlier sweep's slot 0 still runs")
	}

	if err := r2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if left, err := r2.Leftovers(ctx); err != nil || len(left) != 0 {
		t.Errorf("after the restore: %v %v", left, err)
	}
	out, _ := h.Run(ctx, "ls /etc/systemd/system/ | grep specsweep; systemctl list-units --all --plain --no-legend 'specsweep-*' | grep -v not-found; true")
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("slot units left after the restore:\n%s", s)
	}
	if out, _ := h.Run(ctx, "systemctl is-active sglang.service"); strings.TrimSpace(string(out)) != "active" {
		t.Errorf("the operator's server is %q after the restore; it ran before", out)
	}
	b, err := h.ReadFile("/etc/systemd/system/sglang.service")
	if err != nil || string(b) != string(h.UnitText) {
		t.Errorf("the operator's unit changed: %v", err)
	}
}

// TestPackedSlotKeepsAPrivateDropInPrivate: the operator keeps a token in a drop-in only root may
// read (0600); the slot units made from the unit hold it too, and no other user may read it in
// any file specsweep wrote, also after a slot file was left readable (an earlier version's);
// the slot's server still gets the operator's settings from both drop-ins.
func TestPackedSlotKeepsAPrivateDropInPrivate(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv, GPUs: 4})[0]
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const secret = "hf_Zq8secretTOKEN4711"
	if err := h.WriteFile("/etc/systemd/system/sglang.service.d/10-token.conf", []byte("[Service]\nEnvironment=HF_TOKEN="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile("/etc/systemd/system/sglang.service.d/20-public.conf", []byte("[Service]\nEnvironment=OPERATOR_SETTING=kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Nsenter(ctx, "systemctl", "daemon-reload"); err != nil {
		t.Fatalf("daemon-reload: %v %s", err, out)
	}
	opts := RemoteOptions{Name: h.Name, SSH: rootSSH(h), GPUWait: 1500 * time.Millisecond}
	// readable lists the files that hold the token and that user nobody can read.
	readable := func() string {
		out, _ := h.Nsenter(ctx, "runuser", "-u", "nobody", "--", "sh", "-c",
			"grep -rl -- "+secret+" /etc/systemd /run/systemd "+MarkerDir+" 2>/dev/null; true")
		return strings.TrimSpace(string(out))
	}
	if s := readable(); s != "" {
		t.Fatalf("the token is readable by nobody before the sweep: %s", s)
	}
	start := func(r *Remote) {
		t.Helper()
		in, err := r.Slot(0).Start(ctx, slotLaunch(0, 0, 2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r, err := DialRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start(r)
	u := SlotUnit("sglang.service", 0)
	if s := readable(); s != "" {
		t.Errorf("user nobody can read the operator's private token in:\n%s", s)
	}
	if b, err := h.ReadFile("/etc/systemd/system/" + u); err != nil || !strings.Contains(string(b), secret) {
		t.Errorf("the slot unit lacks the operator's token drop-in: %v\n%s", err, b)
	}
	pid, err := h.Run(ctx, "systemctl show -p MainPID --value -- "+u)
	if err != nil {
		t.Fatal(err)
	}
	env, err := h.Run(ctx, "tr '\\0' '\\n' < /proc/"+strings.TrimSpace(string(pid))+"/environ | grep -E '^(HF_TOKEN|OPERATOR_SETTING)=' | sort")
	if want := "HF_TOKEN=" + secret + "\nOPERATOR_SETTING=kept"; strings.TrimSpace(string(env)) != want || err != nil {
		t.Errorf("the slot's server environment has %q, want %q (%v)", env, want, err)
	}

	// A slot file left readable by all (as an earlier specsweep wrote it, text unchanged) is made
	// private again by the next sweep's start.
	if out, err := h.Nsenter(ctx, "chmod", "0644", "/etc/systemd/system/"+u); err != nil {
		t.Fatalf("chmod: %v %s", err, out)
	}
	r2, err := DialRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	start(r2)
	if s := readable(); s != "" {
		t.Errorf("after a new sweep's start user nobody can read the operator's private token in:\n%s", s)
	}
	if err := r2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
}
