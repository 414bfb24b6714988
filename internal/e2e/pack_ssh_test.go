package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// Packing on a real test host (systemd over SSH) with 8 simulated GPUs: each packed point runs in a
// unit of its own made from the operator's; TP 1, 2 and 4 points side by side with no GPU ever
// shared (the servers' own view of CUDA_VISIBLE_DEVICES in the truth file), a crashing point beside
// sound ones, kill -9 and resume, gpu_busy from an orphan, and restore removing every slot unit.

const packTruthOnHost = "/var/tmp/pack-truth.jsonl"

func sshPackSpec(name string, h *testhost.Host, matrix, extra string) string {
	return fmt.Sprintf(`version: 1
name: %s
hosts:
  - {name: %s, address: %q, user: root, identity_file: %q, known_hosts: %q, gpus: 8, pack: true}
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.6-27B, --host, 0.0.0.0, --port, "31800", --enable-metrics]
  env: {%s, SGLANGSIM_PROFILE: qwen3.6-27b, SGLANGSIM_TRUTH: %q}
  port: 31800
  ready_timeout: 1m
  stop_timeout: 20s
  stop: drain # serverSpans: a drained server logs its exit in the truth file, a killed one cannot
  gpu_wait: 3s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
  crashy:
    args: [--speculative-algorithm, EAGLE3]
    env: {SGLANGSIM_FAIL: "crash-during-load:3"}
matrix: %s
workload: {concurrency: [1, 4], requests: 8, warmup_requests: 1, input_tokens: 32, output_tokens: 48}
%s`, name, h.Name, h.Addr, h.KeyFile, h.KnownHosts, testhost.SimPath, fastEnv, packTruthOnHost, matrix, extra)
}

// hostSpans reads the servers' ready and exit lines from the host's truth file.
func hostSpans(t *testing.T, h *testhost.Host) []serverSpan {
	t.Helper()
	b, err := h.ReadFile(packTruthOnHost)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "truth.jsonl")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return serverSpans(t, p)
}

// slotFiles lists what of the slot units is on the host.
func slotFiles(t *testing.T, h *testhost.Host) []string {
	t.Helper()
	out, err := h.Run(t.Context(), "ls -d /etc/systemd/system/specsweep-* /var/lib/specsweep/restore-specsweep-* 2>/dev/null; true")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

func activeSlots(t *testing.T, h *testhost.Host) int {
	out, _ := h.Run(t.Context(), "systemctl list-units --plain --no-legend --state=active 'specsweep-sglang-slot*' | wc -l")
	n := 0
	fmt.Sscan(strings.TrimSpace(string(out)), &n)
	return n
}

func checkOperatorBack(t *testing.T, h *testhost.Host) {
	t.Helper()
	if left := slotFiles(t, h); len(left) > 0 {
		t.Errorf("slot units left on the host: %v", left)
	}
	out, _ := h.Run(t.Context(), "systemctl list-units --all --plain --no-legend 'specsweep-*' | grep -v not-found; true")
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("systemd still knows slot units:\n%s", s)
	}
	got, err := h.ReadFile(testhost.UnitPath)
	if err != nil || string(got) != string(h.UnitText) {
		t.Errorf("the operator's unit changed (%v)", err)
	}
	if s, _ := h.Run(t.Context(), "systemctl is-active sglang.service"); strings.TrimSpace(string(s)) != "active" {
		t.Errorf("sglang.service is %q after the sweep; it ran before", strings.TrimSpace(string(s)))
	}
}

func TestPackedOnARealHost(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	// Two parts on hosts of their own, side by side: a kill and resume of a whole sweep, and the
	// shorter sweeps of gpu_busy, SIGTERM and restore.
	t.Run("kill_and_resume", func(t *testing.T) {
		defer parallel(t)()
		h := boot(t, 1, testhost.Options{GPUs: 8, UnitEnabled: true})[0]
		f := writeSpec(t, sshPackSpec("e2e-pack-ssh", h, "{method: [baseline, eagle3, crashy], num_steps: [1, 2], topk: [1], tp: [1, 2, 4]}", ""))

		// kill -9 mid-sweep: the slot units stay, some of them running.
		cmd, out := startSpecsweep(t, "run", "--db", f.db, f.spec)
		waitEvery(t, 2*time.Minute, hostPoll, "two slot units running at once", func() bool { return activeSlots(t, h) >= 2 })
		waitFor(t, time.Minute, "a run to be recorded", func() bool { return countRows(f.db, "SELECT count(*) FROM runs") > 0 })
		signal(t, cmd, syscall.SIGKILL)
		_ = cmd.Wait()
		t.Logf("killed:\n%s", tail(out.String(), 5))
		// No process holds the sweep now: status and sweeps say so at once (the pid is gone on this
		// host), with how to resume, and no ETA.
		st := specsweep(t, time.Minute, "status", "--db", f.db, "e2e-pack-ssh")
		if !strings.Contains(st.stdout, "interrupted: no process has held it since") || !strings.Contains(st.stdout, fmt.Sprintf("pid %d", cmd.Process.Pid)) ||
			!strings.Contains(st.stdout, "specsweep run` command again") || !strings.Contains(st.stdout, "ETA -") {
			t.Errorf("status after kill -9 of the run:\n%s", st)
		}
		if sw := specsweep(t, time.Minute, "sweeps", "--db", f.db, "--format", "csv"); !strings.Contains(sw.stdout, ",e2e-pack-ssh,interrupted,") {
			t.Errorf("sweeps after kill -9 of the run:\n%s", sw)
		}
		if left := slotFiles(t, h); len(left) == 0 {
			t.Fatal("no slot unit on the host after the kill")
		}
		d := specsweep(t, time.Minute, "doctor", f.spec)
		if d.code != 1 || !strings.Contains(d.stdout, "specsweep-sglang-slot") {
			t.Errorf("doctor should name the slot units left:\n%s", d)
		}

		// Resume: what the killed run's slots left running is stopped first; every point ends once.
		resumed := float64(time.Now().UnixNano()) / 1e6
		r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
		if r.code != 0 {
			t.Fatalf("resume failed:\n%s", r)
		}
		db := openDB(t, f.db)
		checkCrashBeside(t, db, 9, 6)
		spans := since(hostSpans(t, h), resumed)
		overlapped := sideBySide(t, spans)
		tps := map[int]bool{}
		for _, s := range spans {
			tps[len(s.gpus)] = true
		}
		if !tps[1] || !tps[2] || !tps[4] {
			t.Errorf("servers saw GPU sets of sizes %v, want 1, 2 and 4", tps)
		}
		checkOperatorBack(t, h)
		t.Logf("%d servers after the resume, %d pairs side by side", len(spans), overlapped)
	})
	t.Run("busy_term_restore", func(t *testing.T) {
		defer parallel(t)()
		h := boot(t, 1, testhost.Options{GPUs: 8, UnitEnabled: true})[0]
		// gpu_busy: an orphan (started outside any unit) holds GPU 3. Two tp 4 points run packed: the
		// one placed on GPUs 0-3 waits gpu_wait and fails gpu_busy naming it; the other, on 4-7, runs.
		o, err := h.Run(t.Context(), "CUDA_VISIBLE_DEVICES=3 SGLANGSIM_LOAD_SECONDS=600 setsid "+testhost.SimPath+
			" --model-path /models/Qwen3.6-27B --port 31999 </dev/null >/dev/null 2>&1 & echo $!")
		if err != nil {
			t.Fatal(err)
		}
		orphan := strings.TrimSpace(string(o))
		defer h.Run(t.Context(), "kill -9 "+orphan)
		waitEvery(t, 20*time.Second, hostPoll, "nvidia-smi to list the orphan", func() bool {
			out, _ := h.Run(t.Context(), "nvidia-smi --query-compute-apps=pid --format=csv,noheader")
			return strings.Contains(string(out), orphan)
		})
		g := writeSpec(t, sshPackSpec("e2e-pack-busy", h, "{method: [baseline, eagle3], num_steps: [1], topk: [1], tp: [4]}", ""))
		r := specsweep(t, 3*time.Minute, "run", "--db", g.db, g.spec)
		gdb := openDB(t, g.db)
		if n := scalar[int](t, gdb, "SELECT count(*) FROM point_summary WHERE state = 'done'"); n != 1 {
			t.Errorf("%d points done, want the one on GPUs 4-7\n%s", n, r)
		}
		if ev := scalar[string](t, gdb, "SELECT coalesce(group_concat(failure_class || ': ' || failure_detail, ' | '), '') FROM point_summary WHERE state = 'failed'"); !strings.Contains(ev, "gpu_busy") || !strings.Contains(ev, "0,1,2,3") {
			t.Errorf("want one point gpu_busy on GPUs 0,1,2,3: %q", ev)
		}
		if ev := scalar[string](t, gdb, "SELECT coalesce(group_concat(failure_detail, ' | '), '') FROM point_summary WHERE failure_class = 'gpu_busy'"); !strings.Contains(ev, "pid "+orphan+" holds") {
			t.Errorf("the gpu_busy evidence does not name the orphan %s: %q", orphan, ev)
		}
		h.Run(t.Context(), "kill -9 "+orphan)
		checkOperatorBack(t, h)

		// SIGTERM mid-sweep: the run stops its slots, removes their units, starts the operator's server
		// again and exits 0.
		tf := writeSpec(t, sshPackSpec("e2e-pack-term", h, "{method: [baseline, eagle3], num_steps: [1, 2], topk: [1], tp: [1]}", ""))
		cmd, out := startSpecsweep(t, "run", "--db", tf.db, tf.spec)
		waitEvery(t, 2*time.Minute, hostPoll, "two slot units running at once", func() bool { return activeSlots(t, h) >= 2 })
		signal(t, cmd, syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, tail(out.String(), 10))
		}
		checkOperatorBack(t, h)

		// restore after a kill -9 removes every slot unit and starts the operator's server again.
		rf := writeSpec(t, sshPackSpec("e2e-pack-restore", h, "{method: [baseline, eagle3], num_steps: [1, 2], topk: [1], tp: [1]}", ""))
		cmd, _ = startSpecsweep(t, "run", "--db", rf.db, rf.spec)
		waitEvery(t, 2*time.Minute, hostPoll, "two slot units running at once", func() bool { return activeSlots(t, h) >= 2 })
		signal(t, cmd, syscall.SIGKILL)
		_ = cmd.Wait()
		if r := specsweep(t, time.Minute, "cancel", "--db", rf.db, "e2e-pack-restore"); r.code != 0 {
			t.Fatalf("cancel:\n%s", r)
		}
		rs := specsweep(t, 2*time.Minute, "restore", "--db", rf.db, rf.spec)
		if rs.code != 0 || !strings.Contains(rs.stdout, "specsweep-sglang-slot") {
			t.Errorf("restore should remove the slot units and say so:\n%s", rs)
		}
		checkOperatorBack(t, h)
	})
}
