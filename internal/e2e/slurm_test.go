package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// Sweeps on a real Slurm cluster (internal/testhost: slurmctld on a login host, slurmd on compute
// hosts, munge, stand-in GPU devices), each point a batch job.

func slurmSpec(name string, c *testhost.Cluster, maxJobs int, matrix, extra string) string {
	l := c.Login
	return fmt.Sprintf(`version: 1
name: %s
hosts:
  - name: cluster
    driver: slurm
    address: %q
    user: root
    identity_file: %q
    known_hosts: %q
    gpus: 4
    slurm: {partition: %s, max_jobs: %d, time_limit: 10m, output_dir: %s/specsweep}
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.6-27B, --host, 0.0.0.0, --port, "31700", --enable-metrics]
  env: {%s, SGLANGSIM_PROFILE: qwen3.6-27b}
  port: 31700
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: %s
workload: {concurrency: [1, 4], requests: 8, warmup_requests: 1, input_tokens: 32, output_tokens: 48}
%s`, name, l.Addr, l.KeyFile, l.KnownHosts, c.Partition, maxJobs, testhost.SharedPath, testhost.SimPath, fastEnv, matrix, extra)
}

func slurmCluster(t testing.TB, nodes int) *testhost.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	if msg := testhost.SlurmRequirements(); msg != "" {
		t.Skip(msg)
	}
	hosts := bootCluster(t, nodes+1, testhost.Options{})
	return testhost.Slurm(t, hosts, testhost.SlurmOptions{GPUsPerNode: 4})
}

// TestSweepsOnOneSlurmCluster runs the sweeps that leave a cluster as they found it (every job
// ended, every node up), and sbatch's reading of sbatch_args, one after another on one cluster of 2
// nodes: a cluster of its own for each cost a login node, two nodes and Slurm's daemons booted and
// torn down (docs/benchmarks.md, "The test suite").
func TestSweepsOnOneSlurmCluster(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	c := slurmCluster(t, 2)
	for _, s := range []struct {
		name string
		test func(*testing.T, *testhost.Cluster)
	}{{"SweepOnASlurmCluster", testSweepOnASlurmCluster}, {"SlurmFailuresAreClassified", testSlurmFailuresAreClassified},
		{"SlurmFromTheLoginNode", testSlurmFromTheLoginNode}, {"SbatchReadsSbatchArgsAsSweepDoes", testSbatchReadsSbatchArgsAsSweepDoes}} {
		t.Run(s.name, func(t *testing.T) { s.test(t, c) })
	}
}

// testSweepOnASlurmCluster: 8 points as jobs on 2 nodes of 4 GPUs, up to 3 in flight: every point
// done, on both nodes, some at once; provenance names the job and the node; nothing left queued.
func testSweepOnASlurmCluster(t *testing.T, c *testhost.Cluster) {
	f := writeSpec(t, slurmSpec("e2e-slurm", c, 3, "{method: [baseline, eagle3], num_steps: [1, 2, 3], topk: [1], tp: [2, 4]}", ""))
	d := specsweep(t, time.Minute, "doctor", f.spec)
	if d.code != 0 || !strings.Contains(d.stdout, "slurm-wlm 22.") || !strings.Contains(d.stdout, "2 node(s), 2 up, 2 with >= 4 GPUs") {
		t.Errorf("doctor on the cluster:\n%s", d)
	}
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s\n%s", r, c.Logs())
	}
	db := openDB(t, f.db)
	if n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE state = 'done'"); n != 8 {
		t.Errorf("%d of 8 points done\n%s", n, r)
	}
	if n := scalar[int](t, db, "SELECT count(*) FROM run_summary WHERE status = 'ok'"); n != 16 {
		t.Errorf("%d of 16 runs ok", n)
	}
	nodes := scalar[string](t, db, `SELECT group_concat(DISTINCT json_extract(provenance, '$.hostname')) FROM points`)
	for _, n := range c.NodeNames() {
		if !strings.Contains(nodes, n) {
			t.Errorf("no point ran on node %s (nodes %q)", n, nodes)
		}
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM points WHERE json_extract(provenance, '$.slurm_job') IS NULL`); n != 0 {
		t.Errorf("%d points without their job in the provenance", n)
	}
	overlap := scalar[int](t, db, `SELECT count(*) FROM points a JOIN points b ON a.id < b.id
		WHERE a.started_at < b.finished_at AND b.started_at < a.finished_at`)
	if overlap == 0 {
		t.Error("no two points ran at once")
	}
	out, err := c.Run(t.Context(), "squeue -h -o '%i %j'")
	if err != nil || strings.Contains(string(out), "specsweep.") {
		t.Errorf("jobs left in the queue: %q %v", out, err)
	}
	// scancel's SIGTERM ends the server (which SIGKILLs itself at the end of its drain, as SGLang
	// does): clean stops, not stop timeouts.
	if n := scalar[int](t, db, "SELECT count(*) FROM event_log WHERE kind = 'stop_timeout_sigkill'"); n != 0 {
		t.Errorf("%d stops recorded as stop timeouts", n)
	}
	if n := scalar[int](t, db, "SELECT count(*) FROM event_log WHERE kind = 'stop' AND detail LIKE '%(clean)%'"); n != 8 {
		t.Errorf("%d of 8 stops clean: %s", n, scalar[string](t, db, "SELECT group_concat(detail, ' | ') FROM event_log WHERE kind = 'stop'"))
	}
	t.Logf("%d pairs of points at once; nodes %s", overlap, nodes)
}

// testSlurmFailuresAreClassified: on the cluster, a point whose server rejects its arguments is
// bad_args, one out of memory is oom, one crashing under load is crash_during_load, each with the
// job's output as evidence; the sound points beside them are done.
func testSlurmFailuresAreClassified(t *testing.T, c *testhost.Cluster) {
	f := writeSpec(t, slurmSpec("e2e-slurm-fail", c, 4, "{method: [baseline, badargs, oom, crashy], num_steps: [1], topk: [1], tp: [2]}", ""))
	// The methods are appended below the matrix's: the spec's methods section is rewritten.
	text := strings.Replace(mustRead(t, f.spec), "methods:\n  baseline: []\n  eagle3: [--speculative-algorithm, EAGLE3]\n", `methods:
  baseline: []
  badargs: [--speculative-algorithm, EAGLE3, --no-such-flag]
  oom:
    args: [--speculative-algorithm, EAGLE3]
    env: {SGLANGSIM_FAIL: oom}
  crashy:
    args: [--speculative-algorithm, EAGLE3]
    env: {SGLANGSIM_FAIL: "crash-during-load:3"}
`, 1)
	f = writeSpec(t, text)
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	db := openDB(t, f.db)
	want := map[string]string{"baseline": "", "badargs": "bad_args", "oom": "oom", "crashy": "crash_during_load"}
	for m, class := range want {
		state := "done"
		if class != "" {
			state = "failed"
		}
		n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE method = ? AND state = ? AND coalesce(failure_class, '') = ?", m, state, class)
		if n != 1 {
			detail := scalar[string](t, db, "SELECT coalesce(group_concat(state || ' ' || coalesce(failure_class, '') || ': ' || coalesce(failure_detail, ''), ' | '), '') FROM point_summary WHERE method = ?", m)
			t.Errorf("method %s: want %s %s, got %s\n%s", m, state, class, detail, tail(r.String(), 20))
		}
	}
	if d := scalar[string](t, db, "SELECT failure_detail FROM point_summary WHERE method = 'badargs'"); !strings.Contains(d, "no-such-flag") {
		t.Errorf("bad_args evidence does not show the job's output: %q", d)
	}
}

// TestSlurmNodeLostRetriesThePoint: the node of a point under load is lost (its network unplugged):
// the point is host trouble, not a server failure; it is tried again and ends done on the node that
// is left, every run recorded once.
func TestSlurmNodeLostRetriesThePoint(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	c := slurmCluster(t, 2)
	// Long levels (many requests), so the loss lands in the middle of one.
	text := strings.Replace(slurmSpec("e2e-slurm-lost", c, 1, "{method: [baseline, eagle3], num_steps: [1], topk: [1], tp: [4]}", ""),
		"requests: 8,", "requests: 400,", 1)
	f := writeSpec(t, text)
	cmd, out := startSpecsweep(t, "run", "--db", f.db, f.spec)
	waitFor(t, 2*time.Minute, "a point under load", func() bool {
		return countRows(f.db, "SELECT count(*) FROM event_log WHERE kind = 'ready'") > 0
	})
	q, err := c.Run(t.Context(), "squeue -h -t RUNNING -o '%N %j'")
	if err != nil {
		t.Fatal(err)
	}
	node, job, _ := strings.Cut(strings.TrimSpace(string(q)), " ")
	lost := c.Node(node)
	if lost == nil || !strings.HasPrefix(job, "specsweep.") {
		t.Fatalf("the running job: %q", q)
	}
	if err := lost.Unplug(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lost.Plug() })
	t.Logf("unplugged %s, which ran %s", node, job)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, tail(out.String(), 30))
	}
	db := openDB(t, f.db)
	if n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE state = 'done'"); n != 2 {
		t.Errorf("%d of 2 points done\n%s", n, tail(out.String(), 30))
	}
	if n := scalar[int](t, db, "SELECT count(*) FROM event_log WHERE kind = 'host_down'"); n < 1 {
		t.Errorf("no host_down event for the lost node\n%s", tail(out.String(), 30))
	}
	if n := scalar[int](t, db, "SELECT max(attempts) FROM point_summary"); n < 2 {
		t.Errorf("no point was tried again (max attempts %d)", n)
	}
	checkRunsOnce(t, db)
	if s := scalar[string](t, db, `SELECT group_concat(DISTINCT json_extract(provenance, '$.hostname')) FROM points WHERE state = 'done'`); strings.Contains(s, node) {
		t.Errorf("a point is done on the lost node %s: %s", node, s)
	}
}

// TestSlurmKillAndResumeAndRestore: kill -9 of specsweep leaves its jobs in the queue; the rerun
// cancels them before it submits any (no point ever has two jobs) and finishes with every run once;
// after another kill, `specsweep restore` cancels what is left.
func TestSlurmKillAndResumeAndRestore(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	c := slurmCluster(t, 2)
	f := writeSpec(t, slurmSpec("e2e-slurm-kill", c, 2, "{method: [baseline, eagle3], num_steps: [1, 2, 3], topk: [1], tp: [2, 4]}", ""))
	queued := func() string {
		out, err := c.Run(t.Context(), "squeue -h -o '%i %j %T'")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	killRuns(t, f, 0)
	if q := queued(); !strings.Contains(q, "specsweep.e2e-slurm-kill.") {
		t.Fatalf("no job left in the queue after the kill: %q", q)
	}
	if d := specsweep(t, time.Minute, "doctor", f.spec); d.code != 1 || !strings.Contains(d.stdout, "specsweep restore") {
		t.Errorf("doctor should fail the leftovers check after the kill:\n%s", d)
	}
	killedAt := int64(countRows(f.db, "SELECT max(id) FROM events"))
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("resume:\n%s", r)
	}
	db := openDB(t, f.db)
	if n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE state = 'done'"); n != 8 {
		t.Errorf("%d of 8 points done", n)
	}
	checkRunsOnce(t, db)
	// The killed run's jobs were cancelled before the rerun submitted its first.
	firstSubmit := scalar[int64](t, db, "SELECT coalesce(min(id), 0) FROM events WHERE kind = 'job_submitted' AND id > ?", killedAt)
	lastLeftover := scalar[int64](t, db, "SELECT coalesce(max(id), 0) FROM events WHERE kind = 'stopped_leftover' AND id > ?", killedAt)
	if lastLeftover == 0 || firstSubmit < lastLeftover {
		t.Errorf("the killed run's jobs cancelled by event %d, the rerun's first job submitted at event %d (after %d)", lastLeftover, firstSubmit, killedAt)
	}
	if q := queued(); strings.Contains(q, "specsweep.") {
		t.Errorf("jobs left after the sweep: %q", q)
	}

	g := writeSpec(t, slurmSpec("e2e-slurm-restore", c, 2, "{method: [baseline, eagle3], num_steps: [1, 2, 3], topk: [1], tp: [2]}", ""))
	killRuns(t, g, 0)
	if r := specsweep(t, time.Minute, "cancel", "--db", g.db, "e2e-slurm-restore"); r.code != 0 {
		t.Fatalf("cancel:\n%s", r)
	}
	rs := specsweep(t, 2*time.Minute, "restore", "--db", g.db, g.spec)
	if rs.code != 0 || !strings.Contains(rs.stdout, "cancelled job") {
		t.Errorf("restore:\n%s", rs)
	}
	if q := queued(); strings.Contains(q, "specsweep.") {
		t.Errorf("jobs left after restore: %q", q)
	}
	again := specsweep(t, time.Minute, "restore", "--db", g.db, g.spec)
	if again.code != 0 || !strings.Contains(again.stdout, "no job of the sweep") {
		t.Errorf("a second restore:\n%s", again)
	}
}

// testSlurmPendingJobIsNotASlowStart: three tp 4 points in flight on two nodes of 4 GPUs: the third
// job waits for resources longer than ready_timeout, is reported pending, and is not timed out:
// ready_timeout counts from the job's start.
func testSlurmPendingJobIsNotASlowStart(t *testing.T) {
	c := slurmCluster(t, 2)
	text := slurmSpec("e2e-slurm-pending", c, 3, "{method: [baseline, eagle3], num_steps: [1, 2], topk: [1], tp: [4]}", "")
	text = strings.Replace(text, "ready_timeout: 1m", "ready_timeout: 6s", 1)
	text = strings.Replace(text, "requests: 8,", "requests: 160,", 1)
	f := writeSpec(t, text)
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run:\n%s", r)
	}
	db := openDB(t, f.db)
	if n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE state = 'done'"); n != 3 {
		t.Errorf("%d of 3 points done: %s", n, scalar[string](t, db,
			"SELECT coalesce(group_concat(coalesce(failure_class, '') || ' ' || coalesce(failure_detail, ''), ' | '), '') FROM point_summary WHERE state <> 'done'"))
	}
	if ev := scalar[string](t, db, "SELECT coalesce(group_concat(detail, ' | '), '') FROM event_log WHERE kind = 'job_pending'"); !strings.Contains(ev, "Reason=Resources") {
		t.Errorf("no job reported pending for resources: %q", ev)
	}
	waited := scalar[float64](t, db, "SELECT max(json_extract(provenance, '$.slurm_queued_s')) FROM points")
	if waited < 6 {
		t.Errorf("the longest queue wait was %.1f s: the test needs one over ready_timeout (6 s)", waited)
	}
	t.Logf("longest queue wait %.1f s", waited)
}

// testSlurmFromTheLoginNode: specsweep on the login node itself (a cluster without an address): the
// Slurm commands run there, as the user running specsweep.
func testSlurmFromTheLoginNode(t *testing.T, c *testhost.Cluster) {
	bin, err := os.ReadFile(specsweepBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Login.WriteFile("/usr/local/bin/specsweep", bin, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := slurmSpec("e2e-slurm-here", c, 2, "{method: [baseline, eagle3], num_steps: [1], topk: [1], tp: [4]}", "")
	// No address, user or keys: the commands run here.
	spec = regexp.MustCompile(`(?m)^    (address|user|identity_file|known_hosts): .*\n`).ReplaceAllString(spec, "")
	if err := c.Login.WriteFile("/root/here.yaml", []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := c.Run(t.Context(), "cd /root && specsweep doctor here.yaml && specsweep run --db /root/here.db here.yaml 2>&1 | tail -n 5; "+
		"sqlite3 /root/here.db \"SELECT count(*) FROM point_summary WHERE state = 'done'\"")
	if err != nil {
		t.Fatalf("specsweep on the login node: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if last := lines[len(lines)-1]; last != "2" || !strings.Contains(string(out), "slurm-wlm 22.") {
		t.Errorf("specsweep on the login node: %s", out)
	}
}
