package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// testApplyOnATestHost: the Done-when of issue 29's apply on a real systemd+sshd test host. A winner
// is applied (its flags in ExecStart, the applied drop-in in `systemctl cat`, the checks passing); a
// configuration that fails to start and one whose speed is off both roll back to the applied winner,
// with their evidence and distinct exit codes; a later sweep leaves the applied configuration
// running; an apply killed with -9 and `restore --applied` give the operator's unit back
// byte-identical, running as before.
func testApplyOnATestHost(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end on a test host")
	}
	hosts := boot(t, 1, testhost.Options{UnitEnabled: true})
	h := hosts[0]
	ctx := t.Context()
	sh := func(cmd string) string {
		t.Helper()
		out, err := h.Run(ctx, cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	unitSum := sh("sha256sum " + testhost.UnitPath)
	f := writeSpec(t, hostSpecHead("e2e-apply", hostsYAML(hosts, []int{4}))+`methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
  broken: {args: [--speculative-algorithm, EAGLE3, --no-such-flag], num_steps: [1], topk: [1]}
matrix: {method: [baseline, eagle3, broken], num_steps: [1, 3], topk: [1], tp: [4]}
workload: {concurrency: [1, 4], requests: 8, warmup_requests: 1, input_tokens: 32, output_tokens: 48}
`)
	// The sweep ends with its broken point failed (bad_args); the others measured.
	if r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec); !strings.Contains(r.stdout, "Stored in") {
		t.Fatalf("sweep:\n%s", r)
	}
	ids := pointIDs(t, f.db, "e2e-apply")

	// 0. --dry-run says what would happen and changes nothing.
	r0 := specsweep(t, time.Minute, "apply", "--db", f.db, "--host", h.Name, "--dry-run", "e2e-apply")
	if r0.code != 0 || !strings.Contains(r0.stdout, "/etc/systemd/system/sglang.service.d/40-specsweep-applied.conf:") ||
		!strings.Contains(r0.stdout, "ExecStart=") || !strings.Contains(r0.stdout, "Nothing was changed (--dry-run)") ||
		strings.Contains(r0.stdout, "SGLANGSIM_TIME_SCALE=") {
		t.Fatalf("apply --dry-run:\n%s", r0)
	}
	if _, err := os.Stat(filepath.Join(h.Root, "etc/systemd/system/sglang.service.d/40-specsweep-applied.conf")); err == nil {
		t.Fatal("--dry-run wrote the applied drop-in")
	}

	// 1. The recommendation, applied and checked. Every apply here passes --tolerance 0.5: a speed
	// figure moves with a shared machine's load (the simulator runs at a twentieth of real time), and
	// the speed that is off (3.) is three times off.
	r := specsweep(t, 3*time.Minute, "apply", "--db", f.db, "--host", h.Name, "--tolerance", "0.5", "e2e-apply")
	if r.code != 0 || !strings.Contains(r.stdout, "Applied ") || !strings.Contains(r.stdout, "output check agreement") {
		t.Fatalf("apply of the recommendation:\n%s", r)
	}
	winner := appliedPoint(t, f.db, h.Name)
	cat := sh("systemctl cat sglang.service")
	if !strings.Contains(cat, "40-specsweep-applied.conf") {
		t.Fatalf("systemctl cat shows no applied drop-in:\n%s", cat)
	}
	execStart := argvOf(sh("systemctl show -p ExecStart --value sglang.service"))
	if !strings.Contains(execStart, "--tp-size 4") || strings.Contains(winner.label, "eagle3") != strings.Contains(execStart, "--speculative-num-steps") {
		t.Fatalf("ExecStart %q does not hold the flags of %s", execStart, winner.label)
	}
	if s := sh("systemctl is-active sglang.service"); s != "active" {
		t.Fatalf("sglang.service is %s after the apply", s)
	}

	// 2. A configuration that fails to start: rolled back to the winner, exit 4.
	broken := ids["broken s=1 k=1 n=2 tp=4"]
	r = specsweep(t, 3*time.Minute, "apply", "--db", f.db, "--host", h.Name, "--tolerance", "0.5", "--config", broken, "e2e-apply")
	if r.code != 4 || !strings.Contains(r.stdout, "NOT applied: the start check failed") || !strings.Contains(r.stdout, "no-such-flag") ||
		!strings.Contains(r.stdout, "Rolled back") {
		t.Fatalf("apply of a configuration that fails to start (want exit 4, evidence, rolled back):\n%s", r)
	}
	if got := argvOf(sh("systemctl show -p ExecStart --value sglang.service")); got != execStart || sh("systemctl is-active sglang.service") != "active" {
		t.Fatalf("after the rollback ExecStart is %q, want the winner's %q", got, execStart)
	}

	// 3. A configuration whose speed is off (the sweep's figures for it ten times what was measured):
	// rolled back, exit 6. Tripled was too little: the sweep's own figure was measured beside the
	// other tests, and an apply check on a quieter machine measured 2.4 times it (CI with go test
	// -p 3, 2026-12-07: 11156.7 output tok/s against 3 x 4575.9), within the tolerance of the triple.
	// Another measured EAGLE3 point than the winner (on a loaded machine one may have failed in the
	// sweep, and a point without runs has no figure to triple: CI saw "changed nothing").
	other := ""
	for _, label := range []string{"eagle3 s=3 k=1 n=4 tp=4", "eagle3 s=1 k=1 n=2 tp=4"} {
		id := ids[label]
		if id != winner.id && countRows(f.db, `SELECT count(*) FROM runs WHERE point_ref = (SELECT id FROM points WHERE point_id = '`+id+`')`) > 0 {
			other = id
			break
		}
	}
	if other == "" {
		t.Fatalf("no EAGLE3 point other than the winner %s was measured", winner.label)
	}
	tamper(t, f.db, `UPDATE runs SET output_tok_s = output_tok_s * 10 WHERE point_ref = (SELECT id FROM points WHERE point_id = ?)`, other)
	r = specsweep(t, 3*time.Minute, "apply", "--db", f.db, "--host", h.Name, "--tolerance", "0.5", "--config", other, "--level", "4", "e2e-apply")
	if r.code != 6 || !strings.Contains(r.stdout, "NOT applied: the speed check failed") || !strings.Contains(r.stdout, "Rolled back") {
		t.Fatalf("apply of a configuration whose speed is off (want exit 6, rolled back):\n%s", r)
	}
	if got := argvOf(sh("systemctl show -p ExecStart --value sglang.service")); got != execStart {
		t.Fatalf("after the speed rollback ExecStart is %q, want the winner's %q", got, execStart)
	}
	hist := applyHistory(t, f.db, h.Name)
	if want := "rolled_back/speed rolled_back/start applied/"; hist != want {
		t.Errorf("history (newest first) %q, want %q", hist, want)
	}

	// 4. A later sweep on the host ends with the applied configuration running again.
	if r := specsweep(t, 5*time.Minute, "run", "--db", f.db, "--new", f.spec); !strings.Contains(r.stdout, "Stored in") {
		t.Fatalf("second sweep:\n%s", r)
	}
	if got := argvOf(sh("systemctl show -p ExecStart --value sglang.service")); got != execStart || sh("systemctl is-active sglang.service") != "active" {
		t.Fatalf("after a later sweep ExecStart is %q (%s), want the applied %q", got, sh("systemctl is-active sglang.service"), execStart)
	}
	d := specsweep(t, time.Minute, "doctor", f.spec)
	if !strings.Contains(d.stdout, "applied: "+winner.label) {
		t.Errorf("doctor does not list what is applied:\n%s", d)
	}

	// 5. An apply killed with -9, then restore --applied: the operator's unit, byte-identical and running.
	cmd, out := startSpecsweep(t, "apply", "--db", f.db, "--host", h.Name, "--tolerance", "0.5", "--config", ids["eagle3 s=1 k=1 n=2 tp=4"], "e2e-apply")
	rollback := filepath.Join(h.Root, "var/lib/specsweep/apply-rollback-sglang.service.json")
	waitFor(t, 2*time.Minute, "the apply's rollback record", func() bool { _, err := os.Stat(rollback); return err == nil })
	signal(t, cmd, syscall.SIGKILL)
	_ = cmd.Wait()
	_ = out
	r = specsweep(t, 2*time.Minute, "restore", "--db", f.db, "--applied", h.Name)
	if r.code != 0 {
		t.Fatalf("restore --applied:\n%s", r)
	}
	if got := sh("sha256sum " + testhost.UnitPath); got != unitSum {
		t.Errorf("the operator's unit changed: %s, before %s", got, unitSum)
	}
	if cat := sh("systemctl cat sglang.service"); strings.Contains(cat, "specsweep") {
		t.Errorf("systemctl cat still shows specsweep's drop-ins:\n%s", cat)
	}
	if s := sh("systemctl is-active sglang.service"); s != "active" {
		t.Errorf("sglang.service is %s after restore --applied; it ran before the first apply", s)
	}
	for _, p := range []string{"etc/systemd/system/sglang.service.d/40-specsweep-applied.conf", "var/lib/specsweep/applied-sglang.service.json", "var/lib/specsweep/apply-rollback-sglang.service.json"} {
		if _, err := os.Stat(filepath.Join(h.Root, p)); err == nil {
			t.Errorf("%s left after restore --applied", p)
		}
	}
	if hist := applyHistory(t, f.db, h.Name); !strings.HasPrefix(hist, "unapplied/ running/") {
		t.Errorf("history after the kill and the restore %q: want the unapply, then the killed apply still running", hist)
	}
}

// pointIDs maps each point's label to its id.
func pointIDs(t *testing.T, db, sweepName string) map[string]string {
	t.Helper()
	st, err := store.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := report.Load(context.Background(), st, sweepName)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range s.Points {
		out[fmt.Sprintf("%s tp=%d", p.Label(), p.TP)] = p.ID
	}
	return out
}

type applied struct{ id, label string }

// appliedPoint is the point of the host's latest apply.
func appliedPoint(t *testing.T, db, host string) applied {
	t.Helper()
	st, err := store.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	as, err := st.Applies(context.Background(), host, 1)
	if err != nil || len(as) != 1 {
		t.Fatalf("applies of %s: %v %v", host, as, err)
	}
	return applied{as[0].PointID, as[0].Label}
}

// applyHistory is the host's history, newest first, as "result/failure" words.
func applyHistory(t *testing.T, db, host string) string {
	t.Helper()
	st, err := store.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	as, err := st.Applies(context.Background(), host, 20)
	if err != nil {
		t.Fatal(err)
	}
	var w []string
	for _, a := range as {
		w = append(w, a.Result+"/"+a.Failure)
	}
	return strings.Join(w, " ")
}

// tamper changes the database behind specsweep's back (a test's way to make a recorded figure
// unreachable).
func tamper(t *testing.T, db, query string, args ...any) {
	t.Helper()
	conn, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := conn.Exec(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("%s changed nothing", query)
	}
}

// argvOf is the argv[] of `systemctl show -p ExecStart --value` (without the pid and times, which
// change at each start).
func argvOf(execStart string) string {
	_, rest, ok := strings.Cut(execStart, "argv[]=")
	if !ok {
		return execStart
	}
	argv, _, _ := strings.Cut(rest, " ;")
	return argv
}
