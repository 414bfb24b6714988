package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestSecretsFromTheEnvironment: a server started with --api-key ${SGLANG_API_KEY} (the key in
// server.env) is measured with the key (every request completes), and neither the key nor another
// env value appears in what specsweep prints or writes for others: the results, status, export,
// the report; the database file is the owner's alone.
func TestSecretsFromTheEnvironment(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	sim := testhost.SimBinary(t)
	const key, token = "sk-e2e-9f8e7d", "hf_e2eTOKEN123"
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-secrets
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "31778", --enable-metrics, --api-key, "${SGLANG_API_KEY}"]
  env: {%s, SGLANG_API_KEY: %s, HF_TOKEN: %s}
  port: 31778
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3]
matrix: {method: [baseline, eagle3], num_steps: [2], topk: [1], tp: [4]}
workload: {concurrency: [1], requests: 6, warmup_requests: 1, input_tokens: 32, output_tokens: 32}
`, sim, fastEnv, key, token))
	r := specsweep(t, 3*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	db := openDB(t, f.db)
	if n := scalar[int](t, db, "SELECT count(*) FROM run_summary WHERE status = 'ok' AND completed = 6"); n != 2 {
		t.Fatalf("%d of 2 runs ok with every request completed (the key must reach the server and the load)", n)
	}
	outputs := map[string]string{"run": r.stdout + r.stderr}
	for _, args := range [][]string{
		{"status", "--db", f.db, "--json", "e2e-secrets"},
		{"export", "--db", f.db, "e2e-secrets"},
		{"runs", "--db", f.db, "--format", "json"},
		{"report", "--db", f.db, "--format", "md", "-o", filepath.Join(f.dir, "report"), "e2e-secrets"},
	} {
		res := specsweep(t, time.Minute, args...)
		if res.code != 0 {
			t.Fatalf("%v:\n%s", args, res)
		}
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
		for _, secret := range []string{key, token} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows the secret %q", what, secret)
			}
		}
	}
	for _, p := range []string{f.db, f.db + "-wal"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is mode %v: others may read the stored spec and its env", p, fi.Mode().Perm())
		}
	}
}
