package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/api"
	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// words is s with its runs of white space made one space, so that a table's columns compare as words.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// scheduleDB stores schedules as the daemon leaves them: "nightly" submitted on "@daily" and
// cancelled (id 1), "nightly" submitted again on "0 22 * * *" (id 2, active) and a sweep it fired,
// done with a run (id 3).
func scheduleDB(t *testing.T) (dbFile string) {
	t.Helper()
	ctx := context.Background()
	dbFile = filepath.Join(t.TempDir(), "n.db")
	db, err := store.Open(ctx, dbFile)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hosts := []store.NewHost{{Name: "local", Driver: "local", GPUs: 4}}
	old, err := db.CreateSweep(ctx, store.NewSweep{Name: "nightly", SpecHash: "h", SpecText: "v", Schedule: "@daily", State: store.SweepScheduled}, hosts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CancelSweep(ctx, old, "cancelled by specsweep cancel"); err != nil {
		t.Fatal(err)
	}
	tmpl, err := db.CreateSweep(ctx, store.NewSweep{Name: "nightly", SpecHash: "h", SpecText: "v", Schedule: "0 22 * * *", State: store.SweepScheduled}, hosts, nil)
	if err != nil {
		t.Fatal(err)
	}
	fired := oneRunSweep(t, db, store.NewSweep{Name: "nightly@20261201T220000Z", SpecHash: "h", SpecText: "v", Schedule: "0 22 * * *", ScheduleID: tmpl})
	if tmpl != 2 || fired != 3 {
		t.Fatalf("ids %d, %d; want 2, 3", tmpl, fired)
	}
	return dbFile
}

// oneRunSweep stores a done one-point sweep with one ok run.
func oneRunSweep(t *testing.T, db *store.DB, ns store.NewSweep) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := db.CreateSweep(ctx, ns, []store.NewHost{{Name: "local", Driver: "local", GPUs: 4}},
		[]store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 4, Runs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetSweepState(ctx, id, store.SweepRunning, "claimed"); err != nil {
		t.Fatal(err)
	}
	att, err := db.ClaimPoint(ctx, id, "b", "local")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: "b", Attempt: att, Concurrency: 4, Repeat: 1, Status: store.RunOK,
		Metrics: &store.Metrics{Requests: 8, Completed: 8, OutputTokS: 1000, RequestS: 1}}, &store.PointFinish{State: store.PointDone}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSweepState(ctx, id, store.SweepDone, "1 done"); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestANameMeansTheNewestSweepNeverASchedule: one rule for names across report, export, status and
// cancel: a name means the newest sweep of that name that is not a schedule's template; a name only
// schedules have is refused with the schedule's id and its newest sweep; schedules are addressed as
// schedules (`specsweep schedules`, `cancel --schedule ID`), and their next firing shows in status.
func TestANameMeansTheNewestSweepNeverASchedule(t *testing.T) {
	dbFile := scheduleDB(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"report", "--db", dbFile, "-o", filepath.Join(dir, "r"), "nightly"},
		{"export", "--db", dbFile, "nightly"},
		{"status", "--db", dbFile, "nightly"},
		{"cancel", "--db", dbFile, "nightly"},
		{"runs", "--db", dbFile, "--sweep", "nightly"},
	} {
		out, errs, code := runMain(t, nil, args...)
		want := `no sweep is named "nightly": it is the name of schedule 2 (scheduled, "0 22 * * *"), and a name means a sweep, never a schedule`
		if code != ExitFailure || !strings.Contains(errs, want) || !strings.Contains(errs, "its newest sweep is nightly@20261201T220000Z (id 3, done)") {
			t.Errorf("%q: exit %d, want 1 and %q\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errs)
		}
	}
	// Nothing was cancelled by the name.
	out, _, _ := runMain(t, nil, "schedules", "--db", dbFile)
	for _, want := range []string{"id name cron state next_fire last_sweep last_sweep_id last_state",
		"1 nightly @daily cancelled - - - -", "2 nightly 0 22 * * * scheduled 20", "nightly@20261201T220000Z 3 done"} {
		if !strings.Contains(words(out), want) {
			t.Errorf("schedules lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runMain(t, nil, "status", "--db", dbFile)
	if !strings.Contains(words(out), "2 nightly scheduled (0 22 * * *, next 20") {
		t.Errorf("status lacks the schedule's next firing:\n%s", out)
	}
	out, _, _ = runMain(t, nil, "status", "--db", dbFile, "2")
	for _, want := range []string{`schedule nightly (id 2): scheduled, fires on "0 22 * * *", next at 20`,
		"last fired: sweep nightly@20261201T220000Z (id 3), done: 1 done, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("status 2 lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runMain(t, nil, "status", "--db", dbFile, "--json")
	var list []api.SweepJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 3 || list[1].NextFire == nil || list[0].NextFire != nil {
		t.Errorf("status --json: the active schedule's next_fire (and only its): %v\n%s", err, out)
	}
	out, _, _ = runMain(t, nil, "status", "--db", dbFile, "--json", "2")
	var one api.SweepDetailJSON
	if err := json.Unmarshal([]byte(out), &one); err != nil || one.NextFire == nil {
		t.Errorf("status --json 2: no next_fire: %v\n%s", err, out)
	}

	// --schedule takes a schedule's id; a name lists the ids, a sweep's id says what it is.
	_, errs, code := runMain(t, nil, "cancel", "--db", dbFile, "--schedule", "nightly")
	if code != ExitUsage || !strings.Contains(errs, `the schedules named "nightly": 1 (cancelled, "@daily"), 2 (scheduled, "0 22 * * *")`) {
		t.Errorf("cancel --schedule nightly: exit %d\n%s", code, errs)
	}
	_, errs, code = runMain(t, nil, "cancel", "--db", dbFile, "--schedule", "3")
	if code != ExitFailure || !strings.Contains(errs, "3 is sweep nightly@20261201T220000Z, not a schedule") {
		t.Errorf("cancel --schedule 3: exit %d\n%s", code, errs)
	}
	out, errs, code = runMain(t, nil, "cancel", "--db", dbFile, "--schedule", "2")
	if code != ExitOK || !strings.Contains(out, `cancelled schedule nightly (id 2, "0 22 * * *"): it fires no more`) {
		t.Errorf("cancel --schedule 2: exit %d\n%s%s", code, out, errs)
	}
	_, errs, code = runMain(t, nil, "cancel", "--db", dbFile, "--schedule", "2")
	if code != ExitFailure || !strings.Contains(errs, "schedule nightly (id 2, \"0 22 * * *\") is already cancelled") {
		t.Errorf("cancel --schedule 2 again: exit %d\n%s", code, errs)
	}
	out, errs, code = runMain(t, nil, "resume", "--db", dbFile, "--schedule", "2")
	if code != ExitOK || !strings.Contains(out, `schedule nightly (id 2) is active again: it fires on "0 22 * * *", next at 20`) {
		t.Errorf("resume --schedule 2: exit %d\n%s%s", code, out, errs)
	}

	// A sweep that ran under the name: every command takes it, never the schedules.
	ctx := context.Background()
	db, err := store.Open(ctx, dbFile)
	if err != nil {
		t.Fatal(err)
	}
	if id := oneRunSweep(t, db, store.NewSweep{Name: "nightly", SpecHash: "h2", SpecText: "v"}); id != 4 {
		t.Fatalf("one-off sweep id %d, want 4", id)
	}
	db.Close()
	out, errs, code = runMain(t, nil, "report", "--db", dbFile, "-o", filepath.Join(dir, "r4"), "nightly")
	if code != ExitOK || !strings.Contains(out, "r4") {
		t.Errorf("report nightly: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ = runMain(t, nil, "export", "--db", dbFile, "nightly")
	if !strings.Contains(out, `"sweep_id": 4`) {
		t.Errorf("export nightly: not sweep 4:\n%s", out)
	}
	out, _, _ = runMain(t, nil, "status", "--db", dbFile, "nightly")
	if !strings.HasPrefix(out, "sweep nightly (id 4): done") {
		t.Errorf("status nightly: not sweep 4:\n%s", out)
	}
	out, _, _ = runMain(t, nil, "runs", "--db", dbFile, "--sweep", "nightly", "--format", "csv", "--columns", "sweep_id")
	if out != "sweep_id\n4\n" {
		t.Errorf("runs --sweep nightly: %q, want sweep 4's run", out)
	}
}

// writeFile writes text to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAFailedOrCancelledSweepLeavesItsNameFree: after a sweep failed or was cancelled, an edited spec
// of the same name starts a new sweep (saying so) with run and submit; a sweep still unfinished or
// done is refused with the spec changed, in words that name no other command (the old ones read "restore
// that spec", as the restore command); a second schedule of a name is refused while the first fires.
func TestAFailedOrCancelledSweepLeavesItsNameFree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbFile := filepath.Join(dir, "e.db")
	v1 := stateSpec("/nonexistent/sglangsim", testhost.FreePort(t))
	v2 := strings.Replace(v1, "requests: 2", "requests: 3", 1)
	spec := writeFile(t, dir, "cell.yaml", v1)
	s1, err := sweep.Load(spec)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, dbFile)
	if err != nil {
		t.Fatal(err)
	}
	sw, err := orchestrator.Submit(ctx, db, s1, orchestrator.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetSweepState(ctx, sw.ID, store.SweepRunning, "claimed"); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSweepState(ctx, sw.ID, store.SweepInterrupted, "interrupted"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	writeFile(t, dir, "cell.yaml", v2)

	// Interrupted with v1: v2 is refused, in words that cannot be read as the restore command.
	for _, cmd := range []string{"run", "submit"} {
		_, errs, code := runMain(t, nil, cmd, "--db", dbFile, spec)
		for _, want := range []string{"sweep cell (id 1, interrupted) was made from a different version of this spec (stored hash ",
			"it continues only with the spec it was made from", "`specsweep " + cmd + " --new SPEC` starts a new sweep of this name"} {
			if code != ExitFailure || !strings.Contains(errs, want) {
				t.Errorf("%s of an edited spec after an interrupted sweep: exit %d, lacks %q:\n%s", cmd, code, want, errs)
			}
		}
		if strings.Contains(errs, "restore") {
			t.Errorf("%s of an edited spec: the refusal says \"restore\":\n%s", cmd, errs)
		}
	}

	// Cancelled with v1: submit of v2 queues a new sweep, and says what became of the old one.
	if _, errs, code := runMain(t, nil, "cancel", "--db", dbFile, "1"); code != 0 {
		t.Fatalf("cancel: %s", errs)
	}
	out, errs, code := runMain(t, nil, "submit", "--db", dbFile, spec)
	if code != ExitOK || !strings.HasPrefix(out, "2\nqueued sweep cell (id 2, 1 points)") ||
		!strings.Contains(out, "sweep cell (id 1) was cancelled with an earlier version of this spec (0 done, 0 failed, 1 cancelled): a new sweep of this name starts") {
		t.Errorf("submit after a cancelled sweep: exit %d\n%s%s", code, out, errs)
	}
	// Queued now: v1 again is refused (a queued sweep of another spec is still to run).
	writeFile(t, dir, "cell.yaml", v1)
	if _, errs, code := runMain(t, nil, "run", "--db", dbFile, spec); code != ExitFailure || !strings.Contains(errs, "sweep cell (id 2, queued) was made from a different version") {
		t.Errorf("run of v1 while v2 is queued: exit %d\n%s", code, errs)
	}
	// Failed with v2 (its server cannot start): run of v1 starts afresh, saying so.
	writeFile(t, dir, "cell.yaml", v2)
	out, errs, code = runMain(t, nil, "run", "--db", dbFile, spec)
	if code != ExitFailure || !strings.Contains(out, "Failed points (1)") {
		t.Fatalf("run of v2 (its command does not exist): exit %d, want 1\n%s%s", code, out, errs)
	}
	writeFile(t, dir, "cell.yaml", v1)
	out, errs, code = runMain(t, nil, "run", "--db", dbFile, spec)
	if !strings.Contains(errs, "sweep cell (id 2) failed with an earlier version of this spec (0 done, 1 failed): a new sweep of this name starts") ||
		!strings.Contains(errs, "sweep cell (id 3): 1 points") {
		t.Errorf("run of v1 after v2 failed: exit %d\n%s%s", code, out, errs)
	}

	// A schedule of the name fires: a second one is refused, --new adds it.
	args := []string{"submit", "--db", dbFile, "--cron", "@daily", spec}
	if out, errs, code := runMain(t, nil, args...); code != ExitOK {
		t.Fatalf("submit --cron: exit %d\n%s%s", code, out, errs)
	}
	_, errs, code = runMain(t, nil, args...)
	if code != ExitFailure || !strings.Contains(errs, `schedule cell (id 4) already fires on "@daily": `+"`specsweep cancel --schedule 4` stops it") {
		t.Errorf("second submit --cron: exit %d\n%s", code, errs)
	}
	if out, errs, code := runMain(t, nil, append([]string{"submit", "--new"}, args[1:]...)...); code != ExitOK || !strings.HasPrefix(out, "5\n") {
		t.Errorf("submit --new --cron: exit %d\n%s%s", code, out, errs)
	}
}
