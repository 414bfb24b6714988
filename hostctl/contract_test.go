package hostctl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/sweep"
	"golang.org/x/crypto/ssh"
)

// Fast simulator settings: 0.1 s of load, 0.1 s of warmup, drain checks every 0.25 s.
var fastEnv = map[string]string{"SGLANGSIM_TIME_SCALE": "0.05", "SGLANGSIM_LOAD_SECONDS": "2", "SGLANGSIM_WARMUP_SECONDS": "2"}

// driver is one Host implementation under the contract suite.
type driver struct {
	name   string
	simBin string // sglangsim's path where the driver runs it
	host   func(t *testing.T) Host
	env    map[string]string // added to every launch (the SGLang release profile)
	oldest bool              // runs the oldest SGLang release profile
	// serverArgs are added to every launch's argv (a job's server listens on its node's address).
	serverArgs []string
	// refusedAtStart names the failure checks the driver classifies at Start, before a server
	// exists, each with the reason: Start must return that failure.
	refusedAtStart map[string]string
	// stopTimeoutEvidence is the log line that shows a stop ended by the stop timeout (default
	// systemd's and the local driver's "timed out").
	stopTimeoutEvidence string
	// port picks the server port of each launch: a free one of this machine's loopback for a
	// server run here (another program may hold any fixed one); nil: 30000, inside a test host's
	// network namespace.
	port func() int
}

func launch(d driver, env map[string]string, args ...string) Launch {
	e := map[string]string{}
	for k, v := range fastEnv {
		e[k] = v
	}
	for k, v := range d.env {
		e[k] = v
	}
	for k, v := range env {
		e[k] = v
	}
	port := 30000
	if d.port != nil {
		port = d.port()
	}
	argv := append([]string{d.simBin, "--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--port", strconv.Itoa(port)}, d.serverArgs...)
	argv = append(argv, args...)
	return Launch{Argv: argv, Env: e, Port: port, ReadyTimeout: 30 * time.Second, StopTimeout: 10 * time.Second}
}

// assertionEvidence is how the release of d refuses EAGLE3 with steps but no topk: the partial
// triple's AssertionError, or, on 0.4 (which knows only EAGLE), argparse's invalid choice.
func assertionEvidence(d driver) string {
	if d.oldest {
		return "invalid choice"
	}
	return "AssertionError"
}

func contractDrivers(t *testing.T) []driver {
	var ds []driver
	ds = append(ds, localDriver(t))
	ds = append(ds, sshDriver(t))
	dbus := sshDriver(t)
	dbus.name = "ssh-dbus"
	dbus.host = func(t *testing.T) Host {
		h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv})[0]
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		r, err := DialRemote(ctx, RemoteOptions{Name: h.Name, DBus: true, SSH: rootSSH(h)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	// The oldest SGLang release profile over SSH (the others run the newest, the default): no
	// warmup gate on /health, /get_server_info only, no verify counter, older log lines.
	oldest := sshDriver(t)
	oldest.name = "ssh-oldest"
	oldest.env, oldest.oldest = map[string]string{"SGLANGSIM_VERSION": testhost.SimEras(t)[0]}, true
	return append(ds, dbus, oldest, slurmDriver(t))
}

// slurmDriver is a real Slurm cluster (slurmctld on a login node, one compute node of 4 GPUs) with
// a cluster's slot as the Host: a job per launch, reached at its node's address.
func slurmDriver(t *testing.T) driver {
	return driver{name: "slurm", simBin: testhost.SimPath, serverArgs: []string{"--host", "0.0.0.0"},
		refusedAtStart: map[string]string{
			"bad_args_bad_value": "the job's --gres=gpu:N is read from --tp-size, so a value that is not a number is refused before sbatch",
		},
		// scancel's SIGTERM, then Slurm's KillWait (15 s on the test cluster), then SIGKILL: the
		// job's output ends with slurmstepd's cancel line.
		stopTimeoutEvidence: "CANCELLED AT",
		host: func(t *testing.T) Host {
			c, login := bootSlurm(t, 1, testhost.Options{Env: fastEnv, NoUnit: true})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			return openCluster(t, ctx, c, login, 1, "contract")
		}}
}

func sshDriver(t *testing.T) driver {
	return driver{name: "ssh", simBin: testhost.SimPath, refusedAtStart: map[string]string{
		"file_not_writable": "the launch's files are written over SFTP before the unit starts",
	}, host: func(t *testing.T) Host {
		// A stock host's logins: each a logind session (test hosts leave them out by default).
		h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv, LoginSessions: true})[0]
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		if out, err := h.Run(ctx, "loginctl list-sessions --no-legend | wc -l"); err != nil || strings.TrimSpace(string(out)) == "0" {
			t.Fatalf("a host with LoginSessions: no logind session while logged in (%v): %s", err, out)
		}
		return dialTestHost(t, h)
	}}
}

// rootSSH is how the tests log in to test host h: as root with its test key, its host key the
// only one known, no ~/.ssh/config and no agent.
func rootSSH(h *testhost.Host) SSHOptions {
	return SSHOptions{Address: h.Addr, User: "root", IdentityFile: h.KeyFile, KnownHosts: h.KnownHosts, ConfigFile: "none", noAgent: true}
}

// bootRemote boots a test host whose unit runs the simulator fast (fastEnv) and dials it, or skips
// the test where test hosts cannot boot.
func bootRemote(t *testing.T) (*testhost.Host, *Remote) {
	t.Helper()
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv})[0]
	return h, dialTestHost(t, h)
}

func dialTestHost(t *testing.T, h *testhost.Host) *Remote {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r, err := DialRemote(ctx, RemoteOptions{Name: h.Name, SSH: rootSSH(h)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func localDriver(t *testing.T) driver {
	sim := testhost.SimBinary(t)
	return driver{name: "local", simBin: sim, port: func() int { return testhost.FreePort(t) }, refusedAtStart: map[string]string{
		"file_not_writable": "the driver writes the launch's files before it starts the child",
	}, host: func(t *testing.T) Host {
		l := NewLocal(LocalOptions{Name: "local"})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = l.Restore(ctx)
			l.Close()
		})
		return l
	}}
}

func wantFailure(t *testing.T, err error, class Class, evidence string) *Failure {
	t.Helper()
	f, ok := AsFailure(err)
	if !ok {
		t.Fatalf("want a %s failure, got %v", class, err)
	}
	if f.Class != class {
		t.Fatalf("want %s, got %s: %s\nevidence: %q", class, f.Class, f.Detail, f.Evidence)
	}
	if evidence != "" && !strings.Contains(strings.Join(f.Evidence, "\n"), evidence) {
		t.Fatalf("%s evidence lacks %q: %q", class, evidence, f.Evidence)
	}
	return f
}

// TestContract runs the same behaviour checks against every driver: the
// local child process, systemd over SSH on a real test host (also over
// D-Bus, and with the oldest release profile) and a job on a real Slurm
// cluster. Every check applies to every driver; where a driver classifies
// earlier or words its evidence otherwise, its entry says so, with why.
func TestContract(t *testing.T) {
	for _, d := range contractDrivers(t) {
		t.Run(d.name, func(t *testing.T) {
			// The drivers share nothing (each its own test host, cluster or free ports) and mostly
			// wait on their servers: they run side by side (docs/development.md, "Tests").
			t.Parallel()
			if d.name != "local" {
				if msg := testhost.Requirements(); msg != "" {
					t.Skip(msg)
				}
			}
			h := d.host(t)
			// Each check has its own deadline: one shared by the driver's dozen checks ran out in
			// its last (a Slurm run's checks took 190 s of a loaded CI machine's time).
			subCtx := func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
				t.Cleanup(cancel)
				return ctx
			}
			stop := func(t *testing.T, in Instance) StopResult {
				t.Helper()
				res, err := in.Stop(subCtx(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}

			t.Run("start_ready_stop", func(t *testing.T) {
				ctx := subCtx(t)
				in, err := h.Start(ctx, launch(d, nil))
				if err != nil {
					t.Fatal(err)
				}
				r, err := in.WaitReady(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if EngineVersion(r.ServerInfo) == "" {
					t.Errorf("no engine version in /get_server_info: %.200s", r.ServerInfo)
				}
				resp, err := in.HTTPClient().Get(in.BaseURL() + "/health")
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("health after ready: %v %v", resp, err)
				}
				resp.Body.Close()
				// Releases without the warmup gate (0.4) answer /health before the warmup request
				// that ends in the ready line: it follows within moments.
				var logs []string
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					logs, _ = in.Logs(ctx)
					if strings.Contains(strings.Join(logs, "\n"), "The server is fired up and ready to roll!") || time.Now().After(deadline) {
						break
					}
				}
				if !strings.Contains(strings.Join(logs, "\n"), "The server is fired up and ready to roll!") {
					t.Errorf("logs of the instance lack the ready line: %q", logs)
				}
				var seen []string
				var mu sync.Mutex
				res, err := in.Stop(ctx, func(s State) { mu.Lock(); seen = append(seen, s.ActiveState); mu.Unlock() })
				if err != nil {
					t.Fatal(err)
				}
				// SGLang kills itself after a clean drain: SIGKILL, but a clean stop.
				if !res.Clean || res.Class != "" || !res.SIGKILL {
					t.Fatalf("clean drain: %+v", res)
				}
				if len(seen) == 0 {
					t.Error("no stop progress reported")
				}
				if f, err := in.Check(ctx); err != nil || f != nil && f.Class == ClassCrashDuringLoad {
					// a stopped instance is not a crash... Check reports state only.
					_ = f
				}
			})

			t.Run("files", func(t *testing.T) {
				ctx := subCtx(t)
				// The server's command reads both files, then execs the server: it starts only if
				// the driver wrote them where the server runs, and its first line shows what it read.
				// The second file's directory does not exist yet, and its path needs quoting.
				dir := t.TempDir()
				a := File{Path: dir + "/adaptive.json", Data: []byte(`{"ema_alpha": 0.25, "note": "it's $HOME \\ 50%"}`)}
				b := File{Path: dir + "/new dir/it's/b.txt", Data: []byte("second file\n")}
				l := launch(d, nil)
				script := `a=$(cat -- "$1") && b=$(cat -- "$2") && m=$(stat -c %a -- "$1" "$2") && ` +
					`printf 'launch files: %s|%s|%s\n' "$a" "$b" "$(echo $m)" && shift 2 && exec "$0" "$@"`
				l.Argv = append([]string{"/bin/sh", "-c", script, l.Argv[0], a.Path, b.Path}, l.Argv[1:]...)
				l.Files = []File{a, b}
				in, err := h.Start(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := in.WaitReady(ctx); err != nil {
					t.Fatalf("the server did not start with its files: %v", err)
				}
				want := "launch files: " + string(a.Data) + "|second file|644 644"
				var logs []string
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					logs, _ = in.Logs(ctx)
					if slices.Contains(logs, want) || time.Now().After(deadline) {
						break
					}
				}
				if !slices.Contains(logs, want) {
					t.Errorf("the server's log lacks %q: %q", want, logs)
				}
				stop(t, in)
			})

			t.Run("file_not_writable", func(t *testing.T) {
				ctx := subCtx(t)
				// A directory that is a regular file on every machine: the host refuses the write,
				// which is the point's launch_failed naming the path, not host trouble.
				const p = "/etc/passwd/adaptive.json"
				l := launch(d, nil)
				l.Files = []File{{Path: p, Data: []byte("{}")}}
				in, err := h.Start(ctx, l)
				if why, ok := d.refusedAtStart["file_not_writable"]; ok {
					t.Logf("%s classifies it at Start: %s", d.name, why)
					if f := wantFailure(t, err, ClassLaunchFailed, ""); !strings.Contains(f.Detail, p) {
						t.Fatalf("the detail does not name %s: %s", p, f.Detail)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				_, err = in.WaitReady(ctx)
				wantFailure(t, err, ClassLaunchFailed, p)
				stop(t, in)
			})

			t.Run("restart_sees_only_its_own_lines", func(t *testing.T) {
				ctx := subCtx(t)
				in1, err := h.Start(ctx, launch(d, nil))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := in1.WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
				// Start stops the running instance first.
				in2, err := h.Start(ctx, launch(d, map[string]string{"SGLANGSIM_FAIL": "exit-during-start"}))
				if err != nil {
					t.Fatal(err)
				}
				_, err = in2.WaitReady(ctx)
				f := wantFailure(t, err, ClassCrashDuringStart, "Initialization failed")
				if strings.Contains(strings.Join(f.Evidence, "\n"), "ready to roll") {
					t.Fatalf("evidence holds the previous instance's lines: %q", f.Evidence)
				}
				logs, _ := in2.Logs(ctx)
				for _, l := range logs {
					if strings.Contains(l, "ready to roll") {
						t.Fatalf("instance 2's logs hold instance 1's line %q", l)
					}
				}
			})

			for _, c := range []struct {
				name     string
				env      map[string]string
				args     []string
				class    Class
				evidence string
			}{
				{"bad_args_unknown_flag", nil, []string{"--bogus-flag", "1"}, ClassBadArgs, "unrecognized arguments"},
				{"bad_args_bad_value", nil, []string{"--tp-size", "four"}, ClassBadArgs, "invalid int value"},
				{"bad_args_assertion", nil, []string{"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/d", "--speculative-num-steps", "3"}, ClassBadArgs, assertionEvidence(d)},
				{"oom", map[string]string{"SGLANGSIM_FAIL": "oom"}, nil, ClassOOM, "CUDA out of memory"},
				{"crash_during_start", map[string]string{"SGLANGSIM_FAIL": "exit-during-start"}, nil, ClassCrashDuringStart, "Initialization failed"},
			} {
				t.Run(c.name, func(t *testing.T) {
					ctx := subCtx(t)
					in, err := h.Start(ctx, launch(d, c.env, c.args...))
					if why, ok := d.refusedAtStart[c.name]; ok {
						t.Logf("%s classifies it at Start: %s", d.name, why)
						wantFailure(t, err, c.class, "")
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					t0 := time.Now()
					_, err = in.WaitReady(ctx)
					wantFailure(t, err, c.class, c.evidence)
					// How fast is bench/hostctl_bench.sh's figure (docs/hostctl.md, "Measured"), not an
					// assertion: a loaded machine stretches it. That it is not ready_timeout is the
					// class's check above.
					t.Logf("%s classified in %v", c.class, time.Since(t0))
					stop(t, in)
				})
			}

			t.Run("crash_during_load", func(t *testing.T) {
				ctx := subCtx(t)
				in, err := h.Start(ctx, launch(d, map[string]string{"SGLANGSIM_FAIL": "crash-during-load:2"}))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := in.WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 5; i++ {
					body := strings.NewReader(`{"text":"a b c","sampling_params":{"max_new_tokens":2}}`)
					resp, err := in.HTTPClient().Post(in.BaseURL()+"/generate", "application/json", body)
					if err == nil {
						resp.Body.Close()
					}
				}
				var f *Failure
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
					if f, err = in.Check(ctx); err != nil {
						t.Fatal(err)
					}
					if f != nil {
						break
					}
				}
				if f == nil || f.Class != ClassCrashDuringLoad {
					t.Fatalf("want crash_during_load, got %+v", f)
				}
				stop(t, in)
			})

			t.Run("ready_timeout", func(t *testing.T) {
				ctx := subCtx(t)
				l := launch(d, map[string]string{"SGLANGSIM_LOAD_SECONDS": "1000"})
				l.ReadyTimeout = 1500 * time.Millisecond
				in, err := h.Start(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				_, err = in.WaitReady(ctx)
				wantFailure(t, err, ClassReadyTimeout, "")
				stop(t, in)
			})

			t.Run("hang_before_ready_is_ready_timeout", func(t *testing.T) {
				ctx := subCtx(t)
				// The scheduler hangs at the first generation: /health turned 200, but the
				// one-token generation never answers.
				l := launch(d, map[string]string{"SGLANGSIM_FAIL": "hang-after:0"})
				l.ReadyTimeout = 2 * time.Second
				in, err := h.Start(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				_, err = in.WaitReady(ctx)
				wantFailure(t, err, ClassReadyTimeout, "")
				stop(t, in)
			})

			t.Run("slow_drain_is_a_clean_stop", func(t *testing.T) {
				ctx := subCtx(t)
				l := launch(d, map[string]string{"SGLANGSIM_FAIL": "slow-drain:20"}) // 1 s drain
				l.StopTimeout = 10 * time.Second
				in, err := h.Start(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := in.WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
				res := stop(t, in)
				if !res.Clean || res.Class != "" || !res.SIGKILL || res.Duration < 900*time.Millisecond {
					t.Fatalf("a slow but finished drain: %+v", res)
				}
			})

			t.Run("stop_timeout_sigkill", func(t *testing.T) {
				ctx := subCtx(t)
				l := launch(d, map[string]string{"SGLANGSIM_FAIL": "ignore-sigterm"})
				l.StopTimeout = time.Second
				in, err := h.Start(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := in.WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
				res := stop(t, in)
				if res.Class != ClassStopTimeoutSIGKILL || res.Clean || !res.SIGKILL {
					t.Fatalf("want stop_timeout_sigkill: %+v", res)
				}
				want := "timed out"
				if d.stopTimeoutEvidence != "" {
					want = d.stopTimeoutEvidence
				}
				if !strings.Contains(strings.Join(res.Evidence, "\n"), want) {
					t.Fatalf("evidence lacks the timeout line: %q", res.Evidence)
				}
				if res.Duration < 900*time.Millisecond {
					t.Fatalf("stop took only %v with a 1 s stop timeout", res.Duration)
				}
			})

			// Launch.Kill: the stop is SIGKILL at once, so a server that ignores SIGTERM ends at the
			// stop, as a clean one, long before its stop timeout, and never logs a SIGTERM.
			t.Run("kill_at_stop", func(t *testing.T) {
				ctx := subCtx(t)
				l := launch(d, map[string]string{"SGLANGSIM_FAIL": "ignore-sigterm"})
				l.StopTimeout, l.Kill = 2*time.Minute, true
				in, err := h.Start(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := in.WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
				res := stop(t, in)
				if !res.Clean || res.Class != "" || !res.SIGKILL || res.Final.Running() {
					t.Fatalf("a killed server: want a clean stop by SIGKILL, got %+v", res)
				}
				if res.Duration >= l.StopTimeout {
					t.Fatalf("the kill took %v, the stop timeout's %v", res.Duration, l.StopTimeout)
				}
				t.Logf("killed in %v (%s)", res.Duration, res.Final.Exit())
				logs, _ := in.Logs(ctx)
				if all := strings.Join(logs, "\n"); strings.Contains(all, "SIGTERM") {
					t.Fatalf("a killed server was sent SIGTERM:\n%s", all)
				}
				// The next start on the host is as after any stop.
				in2, err := h.Start(ctx, launch(d, nil))
				if err != nil {
					t.Fatalf("start after a kill: %v", err)
				}
				if _, err := in2.WaitReady(ctx); err != nil {
					t.Fatalf("ready after a kill: %v", err)
				}
				stop(t, in2)
			})
		})
	}
}

func TestRemoteOnly(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	hosts := testhost.Boot(t, 1, testhost.Options{Env: fastEnv, UnitEnabled: true})
	h := hosts[0]
	r := dialTestHost(t, h)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	d := driver{name: "ssh", simBin: testhost.SimPath}

	t.Run("restore_byte_identical_and_running_again", func(t *testing.T) {
		before, _ := h.ReadFile(testhost.UnitPath)
		st0, err := r.UnitState(ctx)
		if err != nil || st0.ActiveState != "active" {
			t.Fatalf("operator unit should run at boot: %+v %v", st0, err)
		}
		t0 := time.Now()
		in, err := r.Start(ctx, launch(d, nil, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/50% $HOME \"q\""))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("start took %v", time.Since(t0))
		if _, err := in.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("ready after %v", time.Since(t0))
		// The drop-in is in place, the marker records the unit was running.
		if _, err := h.ReadFile(DropInPath("sglang.service")); err != nil {
			t.Fatal(err)
		}
		mb, err := h.ReadFile(MarkerPath("sglang.service"))
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := DecodeMarker(mb); !m.WasActive {
			t.Fatalf("marker: %s", mb)
		}
		// systemd saw exactly our argv (quoting of % $ " survived).
		out, _ := h.Nsenter(ctx, "sh", "-c", "tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value sglang.service)/cmdline")
		if !strings.Contains(string(out), "/m/50% $HOME \"q\"\n") {
			t.Fatalf("argv seen by the process: %q", out)
		}
		p, err := r.Provenance(ctx)
		if err != nil || p.Hostname != h.Name || p.DropInHash == "" || p.UnitHash == "" {
			t.Fatalf("provenance %+v %v", p, err)
		}
		// The hashes are of the files on the host now: the unit's, and the drop-in followed by its
		// launch script (the machine's facts are read once per connection; these at every call).
		dropIn, _ := h.ReadFile(DropInPath("sglang.service"))
		launch, _ := h.ReadFile(LaunchFilePath("sglang.service"))
		unitText, _ := h.ReadFile(testhost.UnitPath)
		if want := hex.EncodeToString(sumOf(append(dropIn, launch...))); p.DropInHash != want {
			t.Errorf("provenance's drop-in hash %s, want %s", p.DropInHash, want)
		}
		if want := hex.EncodeToString(sumOf(unitText)); p.UnitHash != want {
			t.Errorf("provenance's unit hash %s, want %s", p.UnitHash, want)
		}
		if err := h.WriteFile(DropInPath("sglang.service"), append(dropIn, "# edited\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		if p2, err := r.Provenance(ctx); err != nil || p2.DropInHash == p.DropInHash || p2.Hostname != h.Name {
			t.Errorf("provenance after the drop-in changed: %+v %v", p2, err)
		}
		// A new connection (specsweep crashed) restores from the marker alone.
		r2 := dialTestHost(t, h)
		t0 = time.Now()
		if err := r2.Restore(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("restore took %v", time.Since(t0))
		after, _ := h.ReadFile(testhost.UnitPath)
		if !bytes.Equal(before, after) {
			t.Fatal("the operator's unit changed")
		}
		if _, err := h.ReadFile(DropInPath("sglang.service")); err == nil {
			t.Fatal("drop-in left")
		}
		if _, err := h.ReadFile(MarkerPath("sglang.service")); err == nil {
			t.Fatal("marker left")
		}
		st, _ := r.UnitState(ctx)
		if st.ActiveState != "active" {
			t.Fatalf("unit not running again after restore: %+v", st)
		}
		out, _ = h.Nsenter(ctx, "systemctl", "show", "-p", "ExecStart", "--value", "sglang.service")
		if strings.Contains(string(out), "EAGLE3") {
			t.Fatalf("restored unit still runs the sweep's ExecStart: %s", out)
		}
		// Restore twice is a no-op.
		if err := r.Restore(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("reconnect_after_sshd_restart", func(t *testing.T) {
		var events []string
		var emu sync.Mutex
		r.conn.o.OnReconnect = func(n int, down time.Duration) {
			emu.Lock()
			events = append(events, "reconnect")
			emu.Unlock()
		}
		defer func() {
			emu.Lock()
			defer emu.Unlock()
			if len(events) == 0 && !t.Failed() {
				t.Error("OnReconnect not called")
			}
		}()
		if _, err := r.UnitState(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Provenance(ctx); err != nil { // the machine's facts, read on this connection
			t.Fatal(err)
		}
		n0 := r.Conn().Reconnects()
		if out, err := h.Nsenter(ctx, "systemctl", "restart", "ssh.service"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		// sshd restart keeps existing sessions' processes; kill ours so the connection really breaks.
		_, _ = h.Nsenter(ctx, "pkill", "-KILL", "-f", "^sshd: root")
		var err error
		for i := 0; i < 50; i++ {
			if _, err = r.UnitState(ctx); err == nil && r.Conn().Reconnects() > n0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil || r.Conn().Reconnects() == n0 {
			t.Fatalf("no reconnect: %v (reconnects %d)", err, r.Conn().Reconnects())
		}
		// A new connection may reach a rebooted machine: Provenance reads its facts again.
		if p, err := r.Provenance(ctx); err != nil || p.Hostname != h.Name || r.facts == nil || r.facts.reconnects != r.Conn().Reconnects() {
			t.Errorf("provenance after the reconnect: %+v %v (facts of reconnect %v, now %d)", p, err, r.facts, r.Conn().Reconnects())
		}
	})

	t.Run("readiness_survives_sshd_restart", func(t *testing.T) {
		in, err := r.Start(ctx, launch(d, map[string]string{"SGLANGSIM_LOAD_SECONDS": "60"})) // 3 s of load
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(time.Second)
			_, _ = h.Nsenter(ctx, "systemctl", "restart", "ssh.service")
			_, _ = h.Nsenter(ctx, "pkill", "-KILL", "-f", "^sshd: root")
		}()
		n0 := r.Conn().Reconnects()
		if _, err := in.WaitReady(ctx); err != nil {
			t.Fatalf("readiness across an sshd restart: %v", err)
		}
		if r.Conn().Reconnects() == n0 {
			t.Error("no reconnect happened")
		}
		if _, err := in.Stop(ctx, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("host_vanishes_mid_command", func(t *testing.T) {
		r.conn.o.ReconnectFor = 2 * time.Second
		errc := make(chan error, 1)
		go func() {
			_, err := r.run(ctx, "sleep 30", time.Minute)
			errc <- err
		}()
		time.Sleep(300 * time.Millisecond)
		if err := h.Unplug(); err != nil {
			t.Fatal(err)
		}
		defer h.Plug()
		t0 := time.Now()
		select {
		case err := <-errc:
			var ue *UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("want unreachable, got %v", err)
			}
			if el := time.Since(t0); el > 6*time.Second {
				t.Fatalf("detected after %v", el)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("a command on a vanished host did not fail within 15 s")
		}
		_, err := r.Start(ctx, launch(d, nil))
		if f, ok := AsFailure(err); !ok || f.Class != ClassHostUnreachable {
			t.Fatalf("start on a vanished host: %v", err)
		}
	})
}

func TestHostKeys(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	hosts := testhost.Boot(t, 2, testhost.Options{Env: fastEnv})
	h, other := hosts[0], hosts[1]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	opts := func(kh string, accept bool) SSHOptions {
		return SSHOptions{Address: h.Addr, User: "root", IdentityFile: h.KeyFile, KnownHosts: kh,
			AcceptNewHostKeys: accept, ConfigFile: "none", noAgent: true}
	}
	write := func(name, content string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Unknown: refused, with the ssh-keyscan line.
	empty := write("empty", "")
	_, err := DialSSH(ctx, opts(empty, false))
	var hke *HostKeyError
	if !errors.As(err, &hke) || hke.Changed || !strings.Contains(err.Error(), "ssh-keyscan "+h.Addr) {
		t.Fatalf("unknown host: %v", err)
	}
	// Changed: the file holds another host's key for this address.
	wrong := write("wrong", h.Addr+" "+string(ssh.MarshalAuthorizedKey(other.HostKey)))
	_, err = DialSSH(ctx, opts(wrong, true)) // accept-new never accepts a changed key
	if !errors.As(err, &hke) || !hke.Changed || !strings.Contains(err.Error(), "CHANGED") {
		t.Fatalf("changed key: %v", err)
	}
	// Accept-new: adds the key, then a strict dial works.
	added := write("added", "")
	c, err := DialSSH(ctx, opts(added, true))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = DialSSH(ctx, opts(added, false))
	if err != nil {
		t.Fatalf("after accept-new: %v", err)
	}
	defer c.Close()
	// Remote commands: quoted arguments, bounded output, timeout.
	out, err := c.Run(ctx, Cmd{Args: []string{"printf", "%s|", "a b", "it's", "$HOME", "`id`", ";", "\\"}})
	if err != nil || string(out.Stdout) != "a b|it's|$HOME|`id`|;|\\|" {
		t.Fatalf("quoting: %q %v", out.Stdout, err)
	}
	out, err = c.Run(ctx, Cmd{Args: []string{"head", "-c", "100000", "/dev/zero"}, MaxOutput: 1000})
	if err != nil || len(out.Stdout) != 1000 || !out.Truncated {
		t.Fatalf("bounded output: %d %v %v", len(out.Stdout), out.Truncated, err)
	}
	t0 := time.Now()
	_, err = c.Run(ctx, Cmd{Args: []string{"sleep", "30"}, Timeout: 500 * time.Millisecond})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Out.Code != 124 || time.Since(t0) > 5*time.Second {
		t.Fatalf("remote timeout: %v after %v", err, time.Since(t0))
	}
	// Atomic write replaces a file in place.
	for _, content := range []string{"one\n", "two\n"} {
		if err := c.WriteFileAtomic(ctx, "/etc/specsweep-test/f.conf", []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, _ := h.ReadFile("/etc/specsweep-test/f.conf")
		if string(got) != content {
			t.Fatalf("atomic write: %q", got)
		}
	}
	fi, err := os.Stat(h.Root + "/etc/specsweep-test/f.conf")
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	ents, _ := os.ReadDir(h.Root + "/etc/specsweep-test")
	if len(ents) != 1 {
		t.Fatalf("temp files left: %v", ents)
	}
}

func TestRestartLoop(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv})[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The operator's own drop-in restarts the server on failure.
	if err := h.WriteFile("/etc/systemd/system/sglang.service.d/10-operator.conf",
		[]byte("[Service]\nRestart=always\nRestartSec=200ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := dialTestHost(t, h)
	in, err := r.Start(ctx, launch(driver{simBin: testhost.SimPath}, map[string]string{"SGLANGSIM_FAIL": "exit-during-start"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = in.WaitReady(ctx)
	f, ok := AsFailure(err)
	// The first death may be seen before systemd schedules the restart.
	if !ok || (f.Class != ClassRestartLoop && f.Class != ClassCrashDuringStart) {
		t.Fatalf("want restart_loop or crash_during_start, got %v", err)
	}
	var last *Failure
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if last, err = in.Check(ctx); err == nil && last != nil && last.Class == ClassRestartLoop {
			break
		}
	}
	if last == nil || last.Class != ClassRestartLoop {
		t.Fatalf("want restart_loop, got %+v", last)
	}
	if err := r.Restore(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSpecDBus: a spec's `dbus` reaches the host's handle: true and unset (a root login) drive the
// unit over systemd's D-Bus API, false with systemctl; over an sshd that refuses to forward the bus,
// true fails at once, saying so (not as an unreachable host, which a sweep waits for and tries
// again), and unset falls back to systemctl with an event.
func TestSpecDBus(t *testing.T) {
	t.Parallel() // its own test host: shares nothing (docs/development.md, "Tests")
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	h := testhost.Boot(t, 1, testhost.Options{Env: fastEnv})[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	o := rootSSH(h)
	l := launch(driver{simBin: testhost.SimPath}, nil)
	l.Kill = true
	yes, no := true, false
	var events []string
	// cycle opens the host as a spec with dbus says, starts and stops a server, and returns the
	// handle's unit control.
	cycle := func(dbus *bool) (unitControl, error) {
		t.Helper()
		d, err := Open(ctx, sweep.Host{Name: "h", Driver: sweep.DriverSSH, Address: h.Addr, Unit: "sglang.service", GPUs: 4, DBus: dbus},
			Options{Sweep: "s", Port: 30000, ssh: &o, Event: func(_, kind, detail string) { events = append(events, kind+": "+detail) }})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		in, err := d.Start(ctx, l)
		if err != nil {
			return nil, err
		}
		r, err := d.(*openSSH).conn.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if res, err := in.Stop(ctx, nil); err != nil || !res.Clean {
			t.Fatalf("stop: %+v %v", res, err)
		}
		if err := r.Restore(ctx); err != nil {
			t.Fatal(err)
		}
		return r.unit, nil
	}
	// doctor is the "dbus" line of `specsweep doctor` for the host as a spec with dbus says.
	doctor := func(dbus *bool) Check {
		t.Helper()
		d, err := Open(ctx, sweep.Host{Name: "h", Driver: sweep.DriverSSH, Address: h.Addr, Unit: "sglang.service", GPUs: 4, DBus: dbus},
			Options{Sweep: "s", Port: 30000, ssh: &o})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var lines []Check
		for _, c := range d.Doctor(ctx) {
			if c.Name == "dbus" {
				lines = append(lines, c)
			}
		}
		if len(lines) != 1 {
			t.Fatalf("doctor with dbus %v: %d dbus lines: %+v", dbusSaid(dbus), len(lines), lines)
		}
		return lines[0]
	}
	for _, c := range []struct {
		dbus   *bool
		bus    bool
		doctor CheckStatus
	}{{&yes, true, CheckOK}, {nil, true, CheckOK}, {&no, false, CheckSkip}} {
		u, err := cycle(c.dbus)
		if err != nil {
			t.Fatal(err)
		}
		if _, bus := u.(*dbusUnit); bus != c.bus {
			t.Errorf("dbus %v: the unit is driven with %T", dbusSaid(c.dbus), u)
		}
		if d := doctor(c.dbus); d.Status != c.doctor {
			t.Errorf("doctor with dbus %v: %+v, want %s", dbusSaid(c.dbus), d, c.doctor)
		}
	}
	if len(events) > 0 {
		t.Errorf("events with the bus there: %q", events)
	}
	if out, err := h.Run(ctx, "echo 'AllowStreamLocalForwarding no' >> /etc/ssh/sshd_config && systemctl restart ssh.service"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if _, err := cycle(&yes); err == nil || isUnreachable(err) || !strings.Contains(err.Error(), "refused to forward") || !strings.Contains(err.Error(), "dbus: true") {
		t.Fatalf("a start over a refused bus: %v (unreachable: %v)", err, isUnreachable(err))
	}
	u, err := cycle(nil)
	if err != nil {
		t.Fatalf("dbus unset, the bus refused: %v", err)
	}
	if _, ok := u.(*systemctlUnit); !ok || len(events) != 1 || !strings.HasPrefix(events[0], "dbus_unavailable: ") {
		t.Errorf("dbus unset, the bus refused: the unit is driven with %T, events %q", u, events)
	}
	// The refused bus in doctor: a failure where the spec asks for it, a warning where it is tried.
	for _, c := range []struct {
		dbus   *bool
		status CheckStatus
	}{{&yes, CheckFail}, {nil, CheckWarn}, {&no, CheckSkip}} {
		if d := doctor(c.dbus); d.Status != c.status || (c.dbus == nil || *c.dbus) && !strings.Contains(d.Detail, "refused to forward") {
			t.Errorf("doctor with dbus %v, the bus refused: %+v, want %s saying sshd refused", dbusSaid(c.dbus), d, c.status)
		}
	}
}

// dbusSaid prints a spec's dbus: true, false or unset.
func dbusSaid(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}

// sumOf is b's SHA-256, as sha256sum prints it (in hex).
func sumOf(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
