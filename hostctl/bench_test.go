package hostctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"golang.org/x/sys/unix"
)

// The benchmarks below run on a real test host (systemd + sshd in a network
// namespace) over one reused SSH connection; bench/hostctl_bench.sh runs them
// with a fixed iteration count and docs/hostctl.md quotes the figures.

func benchHost(b *testing.B, env map[string]string) (*testhost.Host, *Remote) {
	return benchHostOpts(b, false)
}

func benchHostOpts(b *testing.B, dbus bool) (*testhost.Host, *Remote) {
	b.Helper()
	if msg := testhost.Requirements(); msg != "" {
		b.Skip(msg)
	}
	h := testhost.Boot(b, 1, testhost.Options{})[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := DialRemote(ctx, RemoteOptions{Name: h.Name, DBus: dbus, SSH: rootSSH(h)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.Restore(ctx)
		r.Close()
	})
	return h, r
}

func benchLaunch(env map[string]string, args ...string) Launch {
	e := map[string]string{"SGLANGSIM_TIME_SCALE": "0.05", "SGLANGSIM_LOAD_SECONDS": "20", "SGLANGSIM_WARMUP_SECONDS": "2",
		"SGL_FORCE_SHUTDOWN": "1"}
	for k, v := range env {
		e[k] = v
	}
	argv := append([]string{testhost.SimPath, "--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--port", "30000"}, args...)
	return Launch{Argv: argv, Env: e, Port: 30000, ReadyTimeout: time.Minute, StopTimeout: 30 * time.Second}
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// truthReady reads the last "ready" instant (unix ms) of the simulator's truth file.
func truthReady(h *testhost.Host, path string) (float64, error) {
	b, err := h.ReadFile(path)
	if err != nil {
		return 0, err
	}
	last := 0.0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var ev struct {
			Event  string  `json:"event"`
			UnixMs float64 `json:"unix_ms"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "ready" {
			last = ev.UnixMs
		}
	}
	if last == 0 {
		return 0, fmt.Errorf("no ready event in %s", path)
	}
	return last, nil
}

// BenchmarkReadyLag: from sglangsim's truth "ready" instant (when /health
// first answers 200) to WaitReady returning, a 1 s load (20 s at scale 0.05).
func BenchmarkReadyLag(b *testing.B) {
	h, r := benchHost(b, nil)
	ctx := context.Background()
	const truth = "/var/tmp/sglangsim-truth.jsonl"
	var lags []float64
	for b.Loop() {
		in, err := r.Start(ctx, benchLaunch(map[string]string{"SGLANGSIM_TRUTH": truth}))
		if err != nil {
			b.Fatal(err)
		}
		ready, err := in.WaitReady(ctx)
		if err != nil {
			b.Fatal(err)
		}
		at := float64(ready.At.UnixNano()) / 1e6
		tr, err := truthReady(h, truth)
		if err != nil {
			b.Fatal(err)
		}
		lags = append(lags, at-tr)
		if _, err := in.Stop(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("ready lags (ms): %.0f", lags)
	b.ReportMetric(percentile(lags, 0.5), "p50-ready-lag-ms")
	b.ReportMetric(percentile(lags, 0.9), "p90-ready-lag-ms")
	b.ReportMetric(float64(len(lags)), "samples")
}

func monotonicUs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Sec*1e6 + ts.Nsec/1e3
}

// benchFailLag: from the process's death (systemd's ExecMainExitTimestamp,
// CLOCK_MONOTONIC shared with the machine) to WaitReady returning the class.
func benchFailLag(b *testing.B, want Class, env map[string]string, args ...string) {
	_, r := benchHost(b, nil)
	ctx := context.Background()
	var lags []float64
	for b.Loop() {
		in, err := r.Start(ctx, benchLaunch(env, args...))
		if err != nil {
			b.Fatal(err)
		}
		_, err = in.WaitReady(ctx)
		seen := monotonicUs()
		if f, ok := AsFailure(err); !ok || f.Class != want {
			b.Fatalf("want %s, got %v", want, err)
		}
		out, err := r.run(ctx, "systemctl show -p ExecMainExitTimestampMonotonic --value "+r.o.Unit, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		died, _ := strconv.ParseInt(strings.TrimSpace(string(out.Stdout)), 10, 64)
		lags = append(lags, float64(seen-died)/1e3)
		if _, err := in.Stop(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%s detection lags (ms): %.0f", want, lags)
	b.ReportMetric(percentile(lags, 0.5), "p50-detect-lag-ms")
	b.ReportMetric(percentile(lags, 1), "max-detect-lag-ms")
}

func BenchmarkFailLagBadArgs(b *testing.B) {
	benchFailLag(b, ClassBadArgs, nil, "--bogus-flag", "1")
}

func BenchmarkFailLagOOM(b *testing.B) {
	benchFailLag(b, ClassOOM, map[string]string{"SGLANGSIM_FAIL": "oom"})
}

// BenchmarkPointOverhead: the host operations of one point with a reused
// connection: drop-in write (SFTP, atomic), daemon-reload, start, stop of a
// ready server (SGL_FORCE_SHUTDOWN=1), and a state+journal poll.
func BenchmarkPointOverhead(b *testing.B) {
	b.Run("systemctl", func(b *testing.B) { benchPointOverhead(b, false) })
	b.Run("dbus", func(b *testing.B) { benchPointOverhead(b, true) })
}

func benchPointOverhead(b *testing.B, dbus bool) {
	_, r := benchHostOpts(b, dbus)
	ctx := context.Background()
	var write, reload, start, stop, poll []float64
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	l := benchLaunch(map[string]string{"SGLANGSIM_LOAD_SECONDS": "2"})
	for b.Loop() {
		dropIn, _ := RenderDropIn("sglang.service", l)
		t0 := time.Now()
		if err := r.conn.WriteFileAtomic(ctx, DropInPath(r.o.Unit), dropIn, 0o644); err != nil {
			b.Fatal(err)
		}
		write = append(write, ms(time.Since(t0)))
		t1 := time.Now()
		if err := r.unit.reload(ctx); err != nil { // systemctl daemon-reload, or Reload over D-Bus
			b.Fatal(err)
		}
		reload = append(reload, ms(time.Since(t1)))
		t2 := time.Now()
		in, err := r.Start(ctx, l) // marker check, stop check, GPU check, write, reload, start
		if err != nil {
			b.Fatal(err)
		}
		start = append(start, ms(time.Since(t2)))
		if _, err := in.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if _, err := in.State(ctx); err != nil {
			b.Fatal(err)
		}
		poll = append(poll, ms(time.Since(t3)))
		t4 := time.Now()
		res, err := in.Stop(ctx, nil)
		if err != nil || !res.Clean {
			b.Fatalf("stop: %+v %v", res, err)
		}
		stop = append(stop, ms(time.Since(t4)))
	}
	b.ReportMetric(percentile(write, 0.5), "p50-dropin-write-ms")
	b.ReportMetric(percentile(reload, 0.5), "p50-daemon-reload-ms")
	b.ReportMetric(percentile(start, 0.5), "p50-Start-ms")
	b.ReportMetric(percentile(poll, 0.5), "p50-poll-ms")
	b.ReportMetric(percentile(stop, 0.5), "p50-Stop-ms")
}

// BenchmarkPointCycle: one point of bench/sweep.sh's sweep on one host as hostctl sees it (sglangsim
// at 5x real time, so its SIGTERM drain check wakes every second since its start; a 1 s pause
// stands for the load levels), split into what hostctl adds and what the server takes:
//   - Start: claim to Start returned (marker, state, GPU check, files, drop-in, daemon-reload, start);
//   - stop-hostctl: Stop called to the server's "SIGTERM received" line, plus the server's exit
//     (sglangsim's truth file) to Stop returned: the stop's own cost (state reads, the stop, seeing
//     the unit gone, its last journal lines, reset-failed);
//   - stop-server: SIGTERM received to the exit, the server's own drain (0-1 s here, 0-5 s with
//     SGLang: its watchdog's tick), which no driver can shorten;
//   - pre-stop: the polls the runner makes between levels and before the stop (Logs, Check).
func BenchmarkPointCycle(b *testing.B) {
	h, r := benchHost(b, nil)
	ctx := context.Background()
	const truth = "/var/tmp/sglangsim-truth.jsonl"
	l := benchLaunch(map[string]string{"SGLANGSIM_TRUTH": truth, "SGLANGSIM_TIME_SCALE": "0.2", "SGLANGSIM_LOAD_SECONDS": "10"})
	var start, stopHost, stopServer, stopAll, checks []float64
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for b.Loop() {
		t0 := time.Now()
		in, err := r.Start(ctx, l)
		if err != nil {
			b.Fatal(err)
		}
		start = append(start, ms(time.Since(t0)))
		if _, err := in.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Second)
		t1 := time.Now()
		if f, err := in.Check(ctx); err != nil || f != nil {
			b.Fatalf("check: %v %v", f, err)
		}
		if _, err := in.Logs(ctx); err != nil {
			b.Fatal(err)
		}
		checks = append(checks, ms(time.Since(t1)))
		t2 := time.Now()
		res, err := in.Stop(ctx, nil)
		t3 := time.Now()
		if err != nil || !res.Clean {
			b.Fatalf("stop: %+v %v", res, err)
		}
		term, exit, err := stopInstants(ctx, h, r, in.ID(), truth)
		if err != nil {
			b.Fatal(err)
		}
		stopAll = append(stopAll, ms(t3.Sub(t2)))
		stopServer = append(stopServer, ms(exit.Sub(term)))
		stopHost = append(stopHost, ms(term.Sub(t2)+t3.Sub(exit)))
	}
	b.Logf("Start (ms): %.0f", start)
	b.Logf("stop, hostctl's part (ms): %.0f", stopHost)
	b.Logf("stop, the server's drain (ms): %.0f", stopServer)
	b.ReportMetric(percentile(start, 0.5), "p50-Start-ms")
	b.ReportMetric(percentile(checks, 0.5), "p50-check+logs-ms")
	b.ReportMetric(percentile(stopAll, 0.5), "p50-Stop-ms")
	b.ReportMetric(percentile(stopHost, 0.5), "p50-stop-hostctl-ms")
	b.ReportMetric(percentile(stopServer, 0.5), "p50-stop-server-ms")
}

// stopInstants reads when the server logged its SIGTERM (the journal's receive time) and when it
// exited (sglangsim's truth file).
func stopInstants(ctx context.Context, h *testhost.Host, r *Remote, id, truth string) (term, exit time.Time, err error) {
	out, err := r.run(ctx, "journalctl -q -o json --output-fields=MESSAGE _SYSTEMD_INVOCATION_ID="+ShellQuote(id), 10*time.Second)
	if err != nil {
		return term, exit, err
	}
	sc := bufio.NewScanner(bytes.NewReader(out.Stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Msg string `json:"MESSAGE"`
			RT  string `json:"__REALTIME_TIMESTAMP"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && strings.Contains(e.Msg, "SIGTERM received") {
			us, _ := strconv.ParseInt(e.RT, 10, 64)
			term = time.UnixMicro(us)
			break
		}
	}
	b, err := h.ReadFile(truth)
	if err != nil {
		return term, exit, err
	}
	sc = bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Event  string  `json:"event"`
			UnixMs float64 `json:"unix_ms"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "exit" {
			exit = time.UnixMicro(int64(ev.UnixMs * 1000))
		}
	}
	if term.IsZero() || exit.IsZero() {
		return term, exit, fmt.Errorf("no SIGTERM line (%v) or exit event (%v) of %s", term, exit, id)
	}
	return term, exit, nil
}
