package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateReportsAZonePrefixWithoutZone: `validate` of schedule.cron "TZ=" died in robfig/cron
// with a goroutine trace; now it is an error at the value's position.
func TestValidateReportsAZonePrefixWithoutZone(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "tz.yaml")
	text := `version: 1
name: tz
hosts: [{name: a, address: a.example}]
server: {command: [/usr/bin/python3, -m, sglang.launch_server]}
methods: {base: []}
matrix: {method: [base]}
workload: {concurrency: [1], requests: 8, input_tokens: 16, output_tokens: 16}
schedule:
  cron: "TZ="
`
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := runMain(t, nil, "validate", spec)
	if code != ExitFailure || !strings.Contains(errs, spec+":9:9: schedule.cron: bad cron expression \"TZ=\"") ||
		strings.Contains(errs, "goroutine") {
		t.Errorf("validate: code %d, stderr:\n%s", code, errs)
	}
}
