package hostctl

import (
	"context"
	"maps"
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
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv, GPUs: 8, UnitEnabled: true})[0]
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	opts := RemoteOptions{Name: h.Name, SSH: SSHOptions{Address: h.Addr, User: "root",
		IdentityFile: h.KeyFile, KnownHosts: h.KnownHosts, ConfigFile: "none", noAgent: true}, GPUWait: 1500 * time.Millisecond}
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
