package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// The states a stored sweep can be in, as the rows of docs/cli.md's table "What each command does
// with a sweep in each state". "none": no sweep of the spec's name; "scheduled": only a schedule's
// template of that name; "running": held by a live `specsweep run`; "orphaned": stored as running by
// a daemon that died (status shows it interrupted).
var sweepStates = []string{"none", "scheduled", "queued", "running", "orphaned", "interrupted", "done", "failed", "cancelled"}

// cellWant is what one command answers for a sweep in one state: its exit code and words (each a
// substring of stdout and stderr together).
type cellWant struct {
	code  int
	words []string
}

// stateTable is docs/cli.md's table: for each command, what it does with a sweep in each state.
// The SWEEP commands address the sweep by its id (1; "none" has no sweep 1); run, submit and
// restore take the spec, whose name is the sweep's.
var stateTable = map[string]map[string]cellWant{
	"run": {
		"none":        {0, []string{"sweep cell (id 1): 1 points on 1 host(s)", "Results (output tok/s"}},
		"scheduled":   {0, []string{"sweep cell (id 2): 1 points on 1 host(s)", "Results (output tok/s"}},
		"queued":      {0, []string{"resuming sweep cell (id 1), which was queued for the daemon: it runs here now", "Results (output tok/s"}},
		"running":     {1, []string{"sweep cell (id 1) is running (specsweep run, pid ", "a sweep runs in one process at a time", "`specsweep cancel 1` stops it"}},
		"orphaned":    {0, []string{"resuming sweep cell (id 1), interrupted: no process has held it since ", "1 interrupted point(s) will re-run", "Results (output tok/s"}},
		"interrupted": {0, []string{"resuming sweep cell (id 1): its points not done yet run now", "Results (output tok/s"}},
		"done":        {0, []string{"sweep cell (id 1) already finished (done, 1 done, 0 failed); its results follow", "`specsweep run --new SPEC` runs it again", "Results (output tok/s"}},
		"failed":      {1, []string{"sweep cell (id 1) already finished: it failed (0 done, 1 failed)", "`specsweep run --new SPEC` starts afresh", "`specsweep resume 1` queues this one", "Failed points (1)"}},
		"cancelled":   {0, []string{"resuming sweep cell (id 1), cancelled before: its cancelled points run again", "Results (output tok/s"}},
	},
	"submit": {
		"none":        {0, []string{"1\nqueued sweep cell (id 1, 1 points)"}},
		"scheduled":   {0, []string{"2\nqueued sweep cell (id 2, 1 points)"}},
		"queued":      {1, []string{"sweep cell (id 1) is already queued: the daemon runs it as soon as its hosts are free", "`specsweep submit --new SPEC` starts a new sweep"}},
		"running":     {1, []string{"sweep cell (id 1) is running (specsweep run, pid ", "`specsweep cancel 1` stops it"}},
		"orphaned":    {0, []string{"1\nsweep cell (id 1) was interrupted (no process has held it since ", "it is queued again", "1 point(s) to run"}},
		"interrupted": {0, []string{"1\nsweep cell (id 1) was interrupted; it is queued again", "1 point(s) to run"}},
		"done":        {1, []string{"sweep cell (id 1) already finished (done, 1 done, 0 failed): `specsweep report 1` shows its results", "`specsweep submit --new SPEC`"}},
		"failed":      {1, []string{"sweep cell (id 1) failed (0 done, 1 failed): `specsweep status 1` shows each failed point's cause", "`specsweep resume 1` queues it again", "`specsweep submit --new SPEC`"}},
		"cancelled":   {0, []string{"1\nsweep cell (id 1) was cancelled; it is queued again", "1 point(s) to run"}},
	},
	"resume": {
		"none":        {1, []string{`no sweep has the id or name "1"`}},
		"scheduled":   {1, []string{`schedule cell (id 1) is active (it fires on "@daily", next at `, "nothing to resume"}},
		"queued":      {1, []string{"sweep cell (id 1) is already queued: nothing to resume"}},
		"running":     {1, []string{"sweep cell (id 1) is running (specsweep run, pid ", "nothing to resume"}},
		"orphaned":    {0, []string{"sweep cell (id 1) is queued again: 1 point(s) to run"}},
		"interrupted": {0, []string{"sweep cell (id 1) is queued again: 1 point(s) to run"}},
		"done":        {1, []string{"sweep cell (id 1) is done (1 done, 0 failed): nothing to resume", "`specsweep run --new SPEC`"}},
		"failed":      {0, []string{"sweep cell (id 1) is queued again: 0 point(s) to run (its 1 failed point(s) stay failed"}},
		"cancelled":   {0, []string{"sweep cell (id 1) is queued again: 1 point(s) to run"}},
	},
	"cancel": {
		"none":        {1, []string{`no sweep has the id or name "1"`}},
		"scheduled":   {0, []string{`cancelled schedule cell (id 1, "@daily"): it fires no more`, "`specsweep resume --schedule 1` starts it again"}},
		"queued":      {0, []string{"cancelled sweep cell (id 1): it was queued, no point was running; `specsweep resume 1` queues it again"}},
		"running":     {0, []string{"cancelled sweep cell (id 1): 1 running point(s) stop within seconds", "`specsweep run SPEC` (the same spec) resumes it"}},
		"orphaned":    {0, []string{"cancelled sweep cell (id 1): no process was running it (no process has held it since ", "`specsweep resume 1` queues it again"}},
		"interrupted": {0, []string{"cancelled sweep cell (id 1): it was interrupted, no point was running; `specsweep run SPEC` (the same spec) resumes it"}},
		"done":        {1, []string{"sweep cell (id 1) has already ended (done: 1 done, 0 failed): nothing to cancel"}},
		"failed":      {1, []string{"sweep cell (id 1) has already ended (failed: 0 done, 1 failed): nothing to cancel"}},
		"cancelled":   {1, []string{"sweep cell (id 1) has already ended (cancelled: 0 done, 0 failed, 1 cancelled): nothing to cancel"}},
	},
	"status": {
		"none":        {1, []string{`no sweep has the id or name "1"`}},
		"scheduled":   {0, []string{`schedule cell (id 1): scheduled, fires on "@daily", next at `, "it has not fired yet"}},
		"queued":      {0, []string{"sweep cell (id 1): queued\n"}},
		"running":     {0, []string{"sweep cell (id 1): running\n", "1 running"}},
		"orphaned":    {0, []string{"sweep cell (id 1): interrupted: no process has held it since ", "start the daemon again"}},
		"interrupted": {0, []string{"sweep cell (id 1): interrupted\n"}},
		"done":        {0, []string{"sweep cell (id 1): done\n"}},
		"failed":      {0, []string{"sweep cell (id 1): failed\n", "1 failed"}},
		"cancelled":   {0, []string{"sweep cell (id 1): cancelled\n", "1 cancelled"}},
	},
	"report": {
		"none":        {1, []string{`no sweep has the id or name "1"`}},
		"scheduled":   {1, []string{`1 is schedule cell ("@daily"), not a sweep: it has no runs of its own`}},
		"queued":      {1, []string{"sweep cell (id 1) is queued and nothing of it is recorded yet", "`specsweep status 1` follows it"}},
		"running":     {0, []string{"note: sweep cell (id 1) is running: this report holds the 1 run(s) recorded so far", "report.html"}},
		"orphaned":    {0, []string{"note: sweep cell (id 1) is interrupted: this report holds the 1 run(s) recorded so far", "report.html"}},
		"interrupted": {1, []string{"sweep cell (id 1) is interrupted and nothing of it is recorded yet"}},
		"done":        {0, []string{"report.html"}},
		"failed":      {0, []string{"report.html"}},
		"cancelled":   {1, []string{"sweep cell (id 1) is cancelled and nothing of it is recorded yet"}},
	},
	"export": {
		"none":        {1, []string{`no sweep has the id or name "1"`}},
		"scheduled":   {1, []string{`1 is schedule cell ("@daily"), not a sweep`}},
		"queued":      {0, []string{"note: sweep cell (id 1) is queued and has no ok run to export"}},
		"running":     {0, []string{`"max_concurrency": 1`, "note: sweep cell (id 1) is running: this export holds the 1 run(s) recorded so far"}},
		"orphaned":    {0, []string{`"max_concurrency": 1`, "note: sweep cell (id 1) is interrupted: this export holds the 1 run(s)"}},
		"interrupted": {0, []string{"note: sweep cell (id 1) is interrupted and has no ok run to export"}},
		"done":        {0, []string{`"max_concurrency": 1`, `"max_concurrency": 2`}},
		"failed":      {0, []string{"note: sweep cell (id 1) is failed and has no ok run to export"}},
		"cancelled":   {0, []string{"note: sweep cell (id 1) is cancelled and has no ok run to export"}},
	},
	"restore": {
		"none":        {0, []string{"local  ok  local driver"}},
		"scheduled":   {0, []string{"local  ok  local driver"}},
		"queued":      {0, []string{"local  ok  local driver"}},
		"running":     {1, []string{"sweep cell (id 1) is running in ", "(specsweep run, pid ", "`specsweep cancel 1` first"}},
		"orphaned":    {0, []string{"local  ok  local driver"}},
		"interrupted": {0, []string{"local  ok  local driver"}},
		"done":        {0, []string{"local  ok  local driver"}},
		"failed":      {0, []string{"local  ok  local driver"}},
		"cancelled":   {0, []string{"local  ok  local driver"}},
	},
}

// stateFixture is a database holding a sweep of the spec in one state.
type stateFixture struct {
	dir, db, spec string
}

// stateSpec is a one-point sweep of the real simulator on this machine (driver local), fast.
func stateSpec(sim string, port int) string {
	return fmt.Sprintf(`version: 1
name: cell
hosts:
  - name: local
    driver: local
    gpus: 4
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "%d"]
  env: {SGLANGSIM_TIME_SCALE: "0.01", SGLANGSIM_LOAD_SECONDS: "0", SGLANGSIM_WARMUP_SECONDS: "0", SGL_FORCE_SHUTDOWN: "1"}
  port: %d
  ready_timeout: 30s
  stop_timeout: 10s
methods:
  baseline: []
matrix:
  method: [baseline]
  tp: [4]
workload:
  concurrency: [1, 2]
  requests: 2
  input_tokens: 16
  output_tokens: 8
`, sim, port, port)
}

// newStateFixture stores the sweep of the spec in state through the store's own calls, as the
// processes that run sweeps leave it. live is the pid of a live process other than this one (the
// holder of a running sweep), dead one of a process that ended.
func newStateFixture(t *testing.T, state, sim string, live, dead int) stateFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	f := stateFixture{dir: dir, db: filepath.Join(dir, "s.db"), spec: filepath.Join(dir, "cell.yaml")}
	if err := os.WriteFile(f.spec, []byte(stateSpec(sim, testhost.FreePort(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := sweep.Load(f.spec)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("fixture %s: %v", state, err)
		}
	}
	switch state {
	case "none":
		return f
	case "scheduled":
		_, err := orchestrator.Submit(ctx, db, spec, orchestrator.SubmitOptions{Cron: "@daily"})
		check(err)
		return f
	}
	sw, err := orchestrator.Submit(ctx, db, spec, orchestrator.SubmitOptions{})
	check(err)
	if state == "queued" {
		return f
	}
	host, _ := os.Hostname()
	id, point := sw.ID, spec.Plan().Points[0].ID
	holder := store.Holder{Kind: store.HolderRun, PID: dead, Host: host}
	switch state {
	case "running":
		holder.PID = live
	case "orphaned":
		holder.Kind = store.HolderDaemon
	}
	check(db.SetSweepState(ctx, id, store.SweepRunning, "claimed"))
	check(db.HoldSweep(ctx, id, holder))
	if state == "cancelled" {
		check(db.CancelSweep(ctx, id, "cancelled by specsweep cancel"))
		return f
	}
	attempt, err := db.ClaimPoint(ctx, id, point, "local")
	check(err)
	record := func(c int, fin *store.PointFinish) {
		check(db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: point, Attempt: attempt, Concurrency: c, Repeat: 1,
			Status: store.RunOK, Metrics: &store.Metrics{Requests: 2, Completed: 2, OutputTokS: 100 * float64(c), RequestS: 1}}, fin))
	}
	switch state {
	case "running", "orphaned":
		record(1, nil)
	case "interrupted":
		record(1, nil)
		_, err := db.RecoverInterrupted(ctx, id, "interrupted")
		check(err)
		check(db.SetSweepState(ctx, id, store.SweepInterrupted, "interrupted"))
	case "done":
		record(1, nil)
		record(2, &store.PointFinish{State: store.PointDone})
		check(db.SetSweepState(ctx, id, store.SweepDone, "1 done, 0 failed"))
	case "failed":
		check(db.FinishPoint(ctx, id, point, attempt, store.PointFinish{State: store.PointFailed, FailureClass: store.FailOOM,
			FailureDetail: "out of memory (code=killed, status=9)\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}))
		check(db.SetSweepState(ctx, id, store.SweepFailed, "every point failed"))
	}
	return f
}

// internalError is a package's own prefix in a message: words for the package's callers, not for
// a person.
var internalError = regexp.MustCompile(`(^|: )(store|orchestrator|report|sweep|hostctl): `)

// TestEveryCommandAnswersEverySweepState drives docs/cli.md's table of sweep states and commands
// through Main on a real store: each cell's exit code and words, and never an internal error (a
// store or orchestrator message, an illegal state transition).
func TestEveryCommandAnswersEverySweepState(t *testing.T) {
	// A live process that is not this one holds the running sweep; a process that ended held the
	// others.
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	sim := "/nonexistent/sglangsim" // only the cells that run a point need the real one
	if !testing.Short() {
		sim = testhost.SimBinary(t)
	}
	commands := []string{"run", "submit", "resume", "cancel", "status", "report", "export", "restore"}
	for _, cmd := range commands {
		for _, state := range sweepStates {
			want, ok := stateTable[cmd][state]
			if !ok {
				t.Errorf("no cell for %s of a %s sweep", cmd, state)
				continue
			}
			t.Run(cmd+"/"+state, func(t *testing.T) {
				runs := cmd == "run" && want.code == 0 && state != "done"
				if runs && testing.Short() {
					t.Skip("runs a point on the simulator")
				}
				f := newStateFixture(t, state, sim, sleeper.Process.Pid, ended.Process.Pid)
				var args []string
				switch cmd {
				case "run", "submit", "restore":
					args = []string{cmd, "--db", f.db, f.spec}
				case "report":
					args = []string{cmd, "--db", f.db, "-o", filepath.Join(f.dir, "rep"), "1"}
				default:
					args = []string{cmd, "--db", f.db, "1"}
				}
				out, errs, code := runMain(t, nil, args...)
				// Words, whatever the columns' widths; Main's own prefix left out.
				all := strings.Join(strings.Fields(strings.ReplaceAll(out+"\n"+errs, "specsweep "+cmd+": ", "")), " ")
				if code != want.code {
					t.Errorf("%s of a %s sweep: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", cmd, state, code, want.code, out, errs)
				}
				for _, w := range want.words {
					if !strings.Contains(all, strings.Join(strings.Fields(w), " ")) {
						t.Errorf("%s of a %s sweep: output lacks %q\nstdout:\n%s\nstderr:\n%s", cmd, state, w, out, errs)
					}
				}
				for _, internal := range []*regexp.Regexp{internalError, regexp.MustCompile(`illegal state transition|not found`)} {
					if internal.MatchString(all) {
						t.Errorf("%s of a %s sweep: an internal error (%q):\nstdout:\n%s\nstderr:\n%s", cmd, state, internal, out, errs)
					}
				}
			})
		}
	}
	for cmd := range stateTable {
		if !strings.Contains(" "+strings.Join(commands, " ")+" ", " "+cmd+" ") {
			t.Errorf("stateTable has %s, which the test does not drive", cmd)
		}
	}
}
