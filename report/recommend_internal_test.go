package report

import (
	"strings"
	"testing"
)

// TestDeployRedactsSecrets: the deploy args start after the spec's command; every credential
// option's literal value (spaced or after =, each occurrence) and every env secret are redacted,
// wherever it occurs; a ${NAME} reference and the settings (numbers, booleans, short values) are
// kept; without a stored spec the whole argv is shown, redacted alike.
func TestDeployRedactsSecrets(t *testing.T) {
	const spec = `version: 1
name: keys
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [/opt/py/bin/python, -m, sglang.launch_server]
  args: [--model-path, /models/m]
  port: 30000
methods:
  baseline: []
matrix: {method: [baseline], tp: [4]}
workload: {concurrency: [1], requests: 8, input_tokens: 64, output_tokens: 32}
`
	argv := []string{"/opt/py/bin/python", "-m", "sglang.launch_server", "--model-path", "/models/m", "--api-key", "sk-first-000",
		"--api-key=sk-second-111", "--admin-api-key", "${ADMIN}", "--hf-token", "hf_tokenvalue", "--served-model-name", "m-hf_tokenvalue",
		"--ssl-keyfile-password", "pw", "--tp-size", "4"}
	env := map[string]string{"ADMIN": "adm-secret-222", "SGLANG_X": "1", "MODE": "off", "CACHE": "/cache/dir", "A": "abc"}
	p := &Point{ID: "p", Config: Config{Method: "baseline", TP: 4, Baseline: true}, Argv: argv, Env: env}
	d := deployOf(&Sweep{SpecText: spec}, p)
	wantArgs := "--model-path /models/m --api-key '<redacted>' '--api-key=<redacted>' --admin-api-key ${ADMIN} --hf-token '<redacted>' " +
		"--served-model-name 'm-<redacted>' --ssl-keyfile-password '<redacted>' --tp-size 4"
	if got := d.ArgsLine(); got != wantArgs {
		t.Errorf("args\n got %s\nwant %s", got, wantArgs)
	}
	if got := strings.Join(d.Command, " "); got != "/opt/py/bin/python -m sglang.launch_server" {
		t.Errorf("command %q", got)
	}
	if got := d.EnvLine(); got != "A=abc ADMIN='<redacted>' CACHE='<redacted>' MODE=off SGLANG_X=1" {
		t.Errorf("env %s", got)
	}
	if d.Redacted != 7 {
		t.Errorf("%d values redacted, want 7", d.Redacted)
	}
	// The point's own argv is not changed.
	if argv[6] != "sk-first-000" {
		t.Errorf("the point's argv was changed: %q", argv)
	}
	d = deployOf(&Sweep{SpecText: "not a spec"}, p)
	if d.Command != nil || d.Args[0] != "/opt/py/bin/python" || strings.Contains(d.ArgsLine(), "sk-") {
		t.Errorf("without a spec: %v %s", d.Command, d.ArgsLine())
	}
}
