// Package e2e tests the specsweep binary end to end: real sweeps against sglangsim, through the local
// driver and through SSH and systemd on real test hosts (internal/testhost), including kill -9 at
// arbitrary instants and resume.
package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/specsweep/specsweep/internal/testhost"
)

// parallelDefault is how many of the package's parallel tests run at once (besides the lanes) when
// the command line gives no -parallel.
const parallelDefault = 4

var (
	// gate holds one slot per parallel test running (parallel); its size is -parallel's.
	gate chan struct{}
	// lanesGroup is the cpu cgroup of the lanes' processes (laneGroup), nil where there is none.
	lanesGroup *testhost.CPUGroup
)

// TestMain holds the default ports (testhost.GuardDefaultPorts): a test whose local server, daemon
// or probe uses one fails here every time, not only on a machine where another program holds it.
// The specsweep binary's folder goes with the test process: a 28 MB binary per run stayed in /tmp.
//
// Parallel tests run parallelDefault at a time unless -parallel is given: they wait on simulated
// servers and test hosts most of the time, and go test's default (GOMAXPROCS, 2 on the CI machine)
// left the two cores 45% idle (docs/benchmarks.md, "The test suite"). The count is kept by gate
// (parallel), not by go test, whose own limit is lifted: the lanes (TestQuietLanes) must start at
// once, beside them, and go test hands its slots out in no set order. The lanes' processes are
// served first, in a cpu cgroup of their own (laneGroup).
func TestMain(m *testing.M) {
	flag.Parse()
	width := parallelDefault
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			width = f.Value.(flag.Getter).Get().(int)
		}
	})
	gate = make(chan struct{}, max(width, 1))
	_ = flag.Set("test.parallel", "1000")
	g, err := testhost.NewCPUGroup(fmt.Sprintf("sst-lanes-%d", os.Getpid()), lanesShares, 0)
	if err != nil {
		// Not root, or no cpu controller to write: the lanes run as every test does.
		fmt.Fprintf(os.Stderr, "e2e: the lanes run without a cpu cgroup: %v\n", err)
	}
	if err := g.SetSlice(lanesSlice); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: the lanes run at the kernel's default slice: %v\n", err)
	}
	lanesGroup = g
	done := testhost.GuardDefaultPorts()
	code := done(m.Run())
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	if err := lanesGroup.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// parallel marks t parallel and waits for a slot of the gate; the function it returns gives the
// slot back, at the end of t's own function (before parallel subtests, which take slots of their
// own): `defer parallel(t)()`. Every parallel test of the package but TestQuietLanes calls it.
// The wait is logged: go test's elapsed time for t includes it.
func parallel(t *testing.T) func() {
	t.Parallel()
	start := time.Now()
	gate <- struct{}{}
	if w := time.Since(start); w > time.Second {
		t.Logf("waited %s for one of the %d slots of parallel tests", w.Round(time.Second), cap(gate))
	}
	return func() { <-gate }
}

// TestTestProcessLeavesNoBinary runs this test binary again, with a TMPDIR of its own, for a test
// that builds the specsweep binary, and checks that nothing is left in that TMPDIR after it.
func TestTestProcessLeavesNoBinary(t *testing.T) {
	defer parallel(t)()
	if os.Getenv("SST_E2E_CHILD") == "1" {
		specsweepBin(t)
		return
	}
	if testing.Short() {
		t.Skip("builds the specsweep binary")
	}
	tmp := t.TempDir()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^TestTestProcessLeavesNoBinary$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "SST_E2E_CHILD=1", "TMPDIR="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child test process: %v\n%s", err, out)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("the test process left %s in its TMPDIR", e.Name())
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// specsweepBin builds the specsweep binary once per test process.
func specsweepBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sst-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "specsweep")
		buildErr = testhost.BuildCommand("specsweep", binPath)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// fastEnv makes sglangsim start in about a second and run 20x faster than real time.
const fastEnv = `SGLANGSIM_TIME_SCALE: "0.05", SGLANGSIM_LOAD_SECONDS: "10", SGLANGSIM_WARMUP_SECONDS: "2", SGL_FORCE_SHUTDOWN: "1"`

// hostsYAML renders the spec's hosts section for booted test hosts with the given GPU counts.
func hostsYAML(hosts []*testhost.Host, gpus []int) string {
	var b strings.Builder
	b.WriteString("hosts:\n")
	for i, h := range hosts {
		fmt.Fprintf(&b, "  - {name: %s, address: %q, user: root, identity_file: %q, known_hosts: %q, gpus: %d}\n",
			h.Name, h.Addr, h.KeyFile, h.KnownHosts, gpus[i])
	}
	return b.String()
}

type sweepFiles struct {
	dir, spec, db string
}

func writeSpec(t testing.TB, text string) sweepFiles {
	t.Helper()
	text = onFreePort(t, text)
	dir := t.TempDir()
	f := sweepFiles{dir: dir, spec: filepath.Join(dir, "spec.yaml"), db: filepath.Join(dir, "sweep.db")}
	if err := os.WriteFile(f.spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// reServerPort is a spec's server.port line.
var reServerPort = regexp.MustCompile(`(?m)^  port: (\d+)$`)

// rePackGPUs is a packing host's GPU count: it runs a server per GPU at once, slot k on port+k.
var rePackGPUs = regexp.MustCompile(`gpus: (\d+), pack: true`)

// onFreePort moves a local-driver spec's server to a port free now: its servers listen on this
// machine's loopback, where another test process (or anything else) may hold the spec's fixed port.
// Every whole-word occurrence of the port (server.port, --port) is replaced. A packing host's slot k
// listens on the port plus k, so its spec gets as many consecutive free ports as the host has GPUs.
// Hosts in their own network namespaces keep theirs.
func onFreePort(t testing.TB, text string) string {
	t.Helper()
	m := reServerPort.FindStringSubmatch(text)
	if m == nil || !strings.Contains(text, "driver: local") {
		return text
	}
	n := 1
	if strings.Contains(text, "pack: true") {
		g := rePackGPUs.FindStringSubmatch(text)
		if g == nil {
			t.Fatalf("a packing spec without \"gpus: N, pack: true\": how many ports its slots take is unknown:\n%s", text)
		}
		if _, err := fmt.Sscan(g[1], &n); err != nil {
			t.Fatal(err)
		}
	}
	port := strconv.Itoa(testhost.FreePorts(t, n))
	return regexp.MustCompile(`\b`+m[1]+`\b`).ReplaceAllString(text, port)
}

// result of one specsweep invocation.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, tail(r.stderr, 60))
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stateHomes holds each test's XDG_STATE_HOME (stateHome), by its testing.TB.
var stateHomes sync.Map

// stateHome is the test's own XDG_STATE_HOME, a t.TempDir() made on first use and shared by every
// specsweep the test starts (a subtest has its own): the local driver keeps a host's applied
// configuration in STATE/specsweep/HOST/ (`apply`, `doctor`'s applied line, `restore --applied`),
// so no test reads or leaves state in the user's ~/.local/state/specsweep, nor in another test's.
func stateHome(t testing.TB) string {
	t.Helper()
	if d, ok := stateHomes.Load(t); ok {
		return d.(string)
	}
	d, loaded := stateHomes.LoadOrStore(t, t.TempDir())
	if !loaded {
		t.Cleanup(func() { stateHomes.Delete(t) })
	}
	return d.(string)
}

// specsweepCmd is one invocation of the binary, the one place the tests make one: the test
// process's environment with the test's own XDG_STATE_HOME (stateHome), in the cpu cgroup of the
// test's lane if it has one (laneGroup; specsweep and startSpecsweep start it with the lane's
// slice). specsweep reads no configuration from XDG_CONFIG_HOME, so that is left as it is.
func specsweepCmd(ctx context.Context, t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, specsweepBin(t), args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+stateHome(t)) // the last of a duplicate key wins
	laneGroup(t).Command(cmd)
	return cmd
}

// specsweep runs the binary to its end (bounded by timeout).
func specsweep(t testing.TB, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := specsweepCmd(ctx, t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := laneGroup(t).Start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("specsweep %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("specsweep %v did not finish within %s\n%s", args, timeout, r)
	}
	return r
}

// startSpecsweep starts the binary in the background; the caller signals or waits.
func startSpecsweep(t testing.TB, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := specsweepCmd(context.Background(), t, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := laneGroup(t).Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &out
}

func openDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func scalar[T any](t testing.TB, db *sql.DB, q string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRow(q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// waitFor polls cond every 50 ms until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitEvery(t, timeout, 50*time.Millisecond, what, cond)
}

// hostPoll is waitEvery's pace for a condition that runs a command on a test host (each an SSH
// session, and systemctl a request of the host's systemd): at waitFor's 50 ms, the packing test's
// three waits for two running slots ran most of its 488 systemctl processes, and its hosts' systemd
// took more CPU than its sweeps' clients and simulators.
const hostPoll = 200 * time.Millisecond

// waitEvery is waitFor polling every `every`: for a cond that starts processes (specsweep, a
// command on a test host), which at waitFor's pace cost more CPU than the rest of a long wait's
// test (the watch test's minute for its daemon's first firing: about 1 200 `specsweep status`).
func waitEvery(t testing.TB, timeout, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(every)
	}
}

// countRows counts rows of a query on a read-only connection, 0 while the database does not exist.
func countRows(path, q string) int {
	if _, err := os.Stat(path); err != nil {
		return 0
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return 0
	}
	defer db.Close()
	var n int
	if db.QueryRow(q).Scan(&n) != nil {
		return 0
	}
	return n
}

// checkRestored asserts every host's operator unit is byte-identical to what was installed and no
// specsweep drop-in is left.
func checkRestored(t *testing.T, hosts []*testhost.Host) {
	t.Helper()
	for _, h := range hosts {
		got, err := h.ReadFile(testhost.UnitPath)
		if err != nil || !bytes.Equal(got, h.UnitText) {
			t.Errorf("host %s: operator unit changed (err %v)", h.Name, err)
		}
		if _, err := h.ReadFile("/etc/systemd/system/sglang.service.d/50-specsweep.conf"); err == nil {
			t.Errorf("host %s: drop-in left behind", h.Name)
		}
		out, _ := h.Run(t.Context(), "systemctl is-active sglang.service")
		if s := strings.TrimSpace(string(out)); s == "active" || s == "activating" {
			t.Errorf("host %s: sglang.service is %s after the sweep, but was stopped before it", h.Name, s)
		}
	}
}

func signal(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

func openRO(path string) (*sql.DB, error) {
	return sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
}

// untilOnHost runs a loop on h, in an SSH session of its own, until the shell condition cond holds
// (checked every 200 ms on the host) or within passes, and sends nil when cond held, an error
// otherwise. A test's own polls over SSH missed states that last a second or two (a rank of a
// two-node point of short levels) once the machine was loaded: a command took seconds. (Every 50
// ms, a cond of two `systemctl` calls was a hundred processes a second for as long as it waited.)
func untilOnHost(ctx context.Context, h *testhost.Host, cond string, within time.Duration) <-chan error {
	held := make(chan error, 1)
	go func() {
		// bash's SECONDS (seconds since the shell started; root's shell on a test host is bash), not a
		// date process a check.
		script := fmt.Sprintf("until %s; do [ \"$SECONDS\" -lt %d ] || exit 3; sleep 0.2; done",
			cond, int(within.Seconds()))
		out, err := h.Run(ctx, script)
		if err != nil {
			err = fmt.Errorf("waiting on %s for %q: %w %s", h.Name, cond, err, out)
		}
		held <- err
	}()
	return held
}
