package sim_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SGLANGSIM_PROFILE=FILE: the binary serves with the file's profile and says
// so in /get_server_info; a bad file stops it at start-up with exit 1 and
// the error naming the file and the field.
func TestProfileFileServer(t *testing.T) {
	t.Parallel()
	path, err := filepath.Abs("testdata/profiles/example-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	p := startSim(t, map[string]string{"SGLANGSIM_PROFILE": path, "SGLANGSIM_WARMUP_SECONDS": "0"},
		"--model-path", "/models/Llama-3.1-8B-Instruct", "--tp", "1", "--skip-server-warmup",
		"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3-8b",
		"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
	p.waitReady()
	info := p.getJSON("/get_server_info")
	if sim := fmt.Sprint(info["simulator"]); !strings.Contains(sim, "profile example-8b from "+path+",") {
		t.Errorf("simulator = %q, want the file's profile name and path", sim)
	}
	if info["context_length"] != 131072.0 {
		t.Errorf("context_length = %v, want the file's context_len 131072", info["context_length"])
	}
	if mi := p.getJSON("/get_model_info"); mi["model_type"] != "llama" {
		t.Errorf("model info: %v, want model_type llama", mi)
	}
	code, body := p.post("/generate", map[string]any{"text": "a b c", "sampling_params": map[string]any{"max_new_tokens": 16, "ignore_eos": true}})
	if code != 200 || !strings.Contains(string(body), `"completion_tokens":16`) {
		t.Errorf("generate: %d %s", code, body)
	}

	for _, tc := range []struct{ file, msg string }{
		{"bad/bad-probability.json", "accept.EAGLE3[2]: 1.3 is not a probability in [0, 1]"},
		{"bad/unknown-field.json", `tpexp: unknown field; did you mean "tp_exp"?`},
		{"missing.json", "no such file or directory"},
	} {
		bad, _ := filepath.Abs(filepath.Join("testdata/profiles", tc.file))
		cmd := exec.Command(simBin, "--model-path", "/models/m", "--tp", "1")
		cmd.Env = []string{"SGLANGSIM_PROFILE=" + bad, "SGLANGSIM_LOAD_SECONDS=0"}
		out, err := cmd.CombinedOutput()
		want := "sglangsim: profile " + bad + ": " + tc.msg + "\n"
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || string(out) != want {
			t.Errorf("SGLANGSIM_PROFILE=%s: %v, output %q; want exit 1 and %q", bad, err, out, want)
		}
	}
	// A name without "/" or ".json" is still a built-in profile.
	cmd := exec.Command(simBin, "--model-path", "/models/m")
	cmd.Env = []string{"SGLANGSIM_PROFILE=example-8b"}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `unknown SGLANGSIM_PROFILE "example-8b"`) {
		t.Errorf("SGLANGSIM_PROFILE=example-8b: %v %s", err, out)
	}
}
