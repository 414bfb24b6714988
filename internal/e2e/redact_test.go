package e2e

import (
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServerPrintedSecretsAreRedacted: a server that prints its environment's secrets as it dies
// (a token in a traceback) gives evidence that names them; specsweep stores and shows that evidence
// with every value of the spec's env (and a literal --api-key) replaced by <redacted>: in the
// database (failure details, events), the run's output, status, export and the report.
func TestServerPrintedSecretsAreRedacted(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	const token, secret, apiKey = "hf_LeakedToken42", `pa"ss\word-77`, "sk-literal-key-5150"
	// The server: a shell that prints the secrets on the lines SGLang's crash output has, then exits.
	script := `echo "Loading model with token $HF_TOKEN"; echo "Traceback (most recent call last):"; ` +
		`echo "  File \"x.py\", line 1, in <module>"; echo "RuntimeError: auth failed for $HF_TOKEN (db password $DB_PASSWORD) key $2"; exit 1`
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-redact
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [/bin/sh, -c, %q, server]
  args: [--api-key, %s, --port, "31779"]
  env: {HF_TOKEN: %s, DB_PASSWORD: %q, SHORT: "1"}
  port: 31779
  ready_timeout: 20s
  stop_timeout: 5s
methods:
  baseline: []
matrix: {method: [baseline], tp: [1]}
workload: {concurrency: [1], requests: 2, warmup_requests: 0, input_tokens: 16, output_tokens: 16, output_check: false}
`, script, apiKey, token, secret))
	r := specsweep(t, 2*time.Minute, "run", "--db", f.db, f.spec)
	if _, err := os.Stat(f.db); err != nil {
		t.Fatalf("run stored nothing:\n%s", r)
	}
	db := openDB(t, f.db)
	detail := scalar[string](t, db, "SELECT coalesce(failure_detail, '') FROM points")
	if !strings.Contains(detail, "RuntimeError: auth failed for <redacted> (db password <redacted>) key <redacted>") {
		t.Fatalf("the stored evidence should keep the line with the secrets redacted:\n%s\nrun:\n%s", detail, r)
	}
	outputs := map[string]string{"run": r.stdout + r.stderr, "failure_detail": detail}
	rows, err := db.Query("SELECT kind, detail FROM events")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var kind string
		var d sql.NullString
		if err := rows.Scan(&kind, &d); err != nil {
			t.Fatal(err)
		}
		outputs["event "+kind] += d.String + "\n"
	}
	rows.Close()
	for _, args := range [][]string{
		{"status", "--db", f.db, "--json", "e2e-redact"},
		{"export", "--db", f.db, "e2e-redact"},
		{"report", "--db", f.db, "--format", "md", "-o", filepath.Join(f.dir, "report"), "e2e-redact"},
	} {
		res := specsweep(t, time.Minute, args...)
		outputs[args[0]] = res.stdout + res.stderr
	}
	_ = filepath.WalkDir(filepath.Join(f.dir, "report"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			outputs[p] = string(b)
		}
		return nil
	})
	for what, text := range outputs {
		for _, s := range []string{token, secret, apiKey} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the secret %q", what, s)
			}
		}
	}
}
