package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestAPIRefusesSpecsOverTheBounds: POST /api/sweeps over real HTTP with a spec past one of the
// bounds (docs/spec.md, "Limits") answers 400 with the position and the bound, and stores nothing.
// Before the bounds, concurrency 3000000 and input_tokens 2000000000 were stored (201) and then
// killed the daemon with out-of-memory; @every 0s fired every second.
func TestAPIRefusesSpecsOverTheBounds(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	srv := httptest.NewServer(a.h)
	t.Cleanup(srv.Close)
	post := func(query, spec string) (int, []string) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/api/sweeps"+query, strings.NewReader(spec))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/yaml")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var out struct {
			Error  string   `json:"error"`
			Errors []string `json:"errors"`
		}
		_ = json.Unmarshal(body, &out)
		if len(out.Errors) == 0 && out.Error != "" {
			out.Errors = []string{out.Error}
		}
		return resp.StatusCode, out.Errors
	}
	spec := func(workload string) string {
		return strings.Replace(apiSpec(""), "workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}", workload, 1)
	}
	for _, c := range []struct{ name, query, spec, want string }{
		{"concurrency", "", spec("workload: {concurrency: [3000000], requests: 2, input_tokens: 8, output_tokens: 8}"),
			"request:7:26: workload.concurrency[0]: 3000000 is above the limit 4096"},
		{"input_tokens", "", spec("workload: {concurrency: [1], requests: 2, input_tokens: 2000000000, output_tokens: 8}"),
			"request:7:57: workload.input_tokens: 2000000000 is above the limit 4194304"},
		{"every in the spec", "", apiSpec("") + "schedule: {cron: \"@every 0s\"}\n",
			"request:8:18: schedule.cron: bad cron expression \"@every 0s\": @every needs a positive interval"},
		{"every in the query", "?cron=" + url.QueryEscape("@every 10s"), apiSpec(""), "@every 10s is below the minimum of 1m"},
		{"sbatch_args", "", apiSpec("hosts: [{name: c, driver: slurm, address: login.example, gpus: 1, slurm: {sbatch_args: [--job-name other]}}]"),
			"request:3:89: hosts[0].slurm.sbatch_args[0]: \"--job-name other\": --job-name is set by specsweep for each job"},
	} {
		code, errs := post(c.query, c.spec)
		if code != http.StatusBadRequest || len(errs) == 0 || !strings.Contains(errs[0], c.want) {
			t.Errorf("%s: %d %q, want 400 with %q", c.name, code, errs, c.want)
		}
	}
	if n := a.sweeps(); n != 0 {
		t.Errorf("%d sweeps stored after refused submissions", n)
	}
	// The same server takes a spec at the limits, so the refusals above are the bounds'.
	if code, errs := post("", spec("workload: {concurrency: [4096], requests: 2, input_tokens: 4194304, output_tokens: 8}")); code != http.StatusCreated {
		t.Errorf("a spec at the limits: %d %q, want 201", code, errs)
	}
	if n := a.sweeps(); n != 1 {
		t.Errorf("%d sweeps stored, want 1", n)
	}
}
