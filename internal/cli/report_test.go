package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunsBestAndColumns(t *testing.T) {
	path, plan := recordedDB(t)
	env := map[string]string{"SPECSWEEP_DB": path}
	out, errs, code := runMain(t, env, "runs", "--best", "--format", "json")
	if code != ExitOK {
		t.Fatalf("runs --best: code %d: %s", code, errs)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	// recordedDB: output tok/s = 100 * (plan index + 1) * concurrency, so the last point wins.
	levels := []float64{1, 4, 16}
	if len(rows) != len(levels) {
		t.Fatalf("%d best rows, want %d:\n%s", len(rows), len(levels), out)
	}
	n := len(plan.Points)
	last, second := plan.Points[n-1], plan.Points[n-2]
	for i, r := range rows {
		c := levels[i]
		if r["concurrency"] != c || r["point_id"] != last.ID || r["output_tok_s"] != 100*float64(n)*c || r["noise"] != "unknown" {
			t.Errorf("row %d: %v", i, r)
		}
		wantMargin := 100 * (float64(n)/float64(n-1) - 1)
		if m, _ := r["margin_pct"].(float64); fmt.Sprintf("%.6f", m) != fmt.Sprintf("%.6f", wantMargin) {
			t.Errorf("row %d: margin %v, want %.4f", i, r["margin_pct"], wantMargin)
		}
		if ru, _ := r["runner_up"].(string); !strings.HasPrefix(ru, second.Method) {
			t.Errorf("row %d: runner-up %v, want %s", i, ru, second.ID)
		}
	}

	out, errs, code = runMain(t, env, "runs", "--best", "--where", "concurrency = 4", "--columns", "concurrency, point_id,noise", "--format", "csv")
	if code != ExitOK || out != "concurrency,point_id,noise\n4,"+last.ID+",unknown\n" {
		t.Errorf("runs --best --columns: code %d\n%s%s", code, out, errs)
	}
	out, _, code = runMain(t, env, "runs", "--columns", "point_id,output_tok_s", "--where", "concurrency = 1", "--format", "csv", "--limit", "1")
	if code != ExitOK || !strings.HasPrefix(out, "point_id,output_tok_s\n"+plan.Points[0].ID+",100\n") {
		t.Errorf("runs --columns: code %d\n%s", code, out)
	}
	for _, args := range [][]string{{"runs", "--columns", "nosuch"}, {"runs", "--best", "--sort", "output_tok_s"}, {"runs", "--columns", ","}} {
		if _, errs, code := runMain(t, env, args...); code != ExitUsage {
			t.Errorf("%v: code %d, want %d: %s", args, code, ExitUsage, errs)
		}
	}
}

func TestReportAndExportCommands(t *testing.T) {
	path, plan := recordedDB(t)
	env := map[string]string{"SPECSWEEP_DB": path}
	dir := t.TempDir()
	for _, f := range []string{"html", "md", "tex"} {
		out, errs, code := runMain(t, env, "report", "quickstart", "--format", f, "-o", filepath.Join(dir, f))
		if code != ExitOK {
			t.Fatalf("report --format %s: code %d: %s", f, code, errs)
		}
		main := strings.Fields(out)[0]
		if b, err := os.ReadFile(main); err != nil || !strings.Contains(string(b), "quickstart") {
			t.Errorf("report --format %s: %s: %v", f, main, err)
		}
	}
	if _, _, code := runMain(t, env, "report", "1", "--compare", "quickstart", "--format", "md", "-o", filepath.Join(dir, "cmp")); code != ExitOK {
		t.Errorf("report --compare: code %d", code)
	}
	for _, args := range [][]string{{"report"}, {"report", "quickstart", "--format", "pdf"}, {"report", "quickstart", "--fragment"}, {"export", "quickstart", "--format", "csv"}} {
		if _, errs, code := runMain(t, env, args...); code != ExitUsage {
			t.Errorf("%v: code %d, want %d: %s", args, code, ExitUsage, errs)
		}
	}
	if _, _, code := runMain(t, env, "report", "nosuch", "-o", dir); code != ExitFailure {
		t.Errorf("report of an unknown sweep: code %d, want 1", code)
	}

	out, errs, code := runMain(t, env, "export", "quickstart")
	if code != ExitOK {
		t.Fatalf("export: code %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3*len(plan.Points) {
		t.Fatalf("%d lines, want %d", len(lines), 3*len(plan.Points))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(lines[0], `{"max_concurrency": 1, "completed": 32,`) || first["point_id"] != plan.Points[0].ID || first["output_throughput"] != 100.0 {
		t.Errorf("first line: %s", lines[0])
	}
}
