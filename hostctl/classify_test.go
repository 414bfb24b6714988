package hostctl

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	dead := func(code, status int, result string) State {
		return State{ActiveState: "failed", SubState: "failed", Result: result, ExecMainCode: code, ExecMainStatus: status}
	}
	running := State{ActiveState: "active", SubState: "running"}
	cases := []struct {
		name  string
		st    State
		lines []string
		ready bool
		want  Class
	}{
		{"running", running, []string{"Load weight begin."}, false, ""},
		{"exit 2", dead(CodeExited, 2, "exit-code"), []string{"usage: launch_server.py [-h]", "launch_server.py: error: unrecognized arguments: --x"}, false, ClassBadArgs},
		{"usage line only", dead(CodeExited, 1, "exit-code"), []string{"launch_server.py: error: argument --tp-size: invalid int value: 'x'"}, false, ClassBadArgs},
		{"bare assertion", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", "    assert (", "AssertionError", "sglang.service: Main process exited, code=exited, status=1/FAILURE", "sglang.service: Failed with result 'exit-code'."}, false, ClassBadArgs},
		{"203/EXEC", dead(CodeExited, 203, "exit-code"), []string{"sglang.service: Failed to locate executable /opt/x: No such file or directory", "sglang.service: Main process exited, code=exited, status=203/EXEC"}, false, ClassLaunchFailed},
		{"203/EXEC, older systemd", dead(CodeExited, 203, "exit-code"), []string{"sglang.service: Failed at step EXEC spawning /opt/x: Permission denied"}, false, ClassLaunchFailed},
		{"oom self-kill", dead(CodeKilled, 9, "signal"), []string{"Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.", "Received sigquit from a child process."}, false, ClassOOM},
		{"kernel oom killer", dead(CodeKilled, 9, "oom-kill"), nil, false, ClassOOM},
		{"crash in start", dead(CodeExited, 1, "exit-code"), []string{"Scheduler hit an exception:", "RuntimeError: Initialization failed. Please see the error messages above."}, false, ClassCrashDuringStart},
		{"crash under load", dead(CodeKilled, 9, "signal"), []string{"RuntimeError: CUDA error: an illegal memory access was encountered", "Received sigquit from a child process."}, true, ClassCrashDuringLoad},
		{"assertion under load is a crash", dead(CodeExited, 1, "exit-code"), []string{"AssertionError"}, true, ClassCrashDuringLoad},
		// Texts and raising functions read from SGLang's source (see docs/hostctl.md): the partial
		// speculative triple, server_args checks, and what is not the user's arguments.
		{"partial triple: TypeError in server_args.py", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", `  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 10, in f`, `  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 10, in f`, "TypeError: '>' not supported between instances of 'NoneType' and 'int'", "sglang.service: Main process exited, code=exited, status=1/FAILURE"}, false, ClassBadArgs},
		{"ValueError of a server_args check", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", `  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 10, in f`, "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results for paged attention backends. This combination is only supported for the 'flashinfer' backend.", "sglang.service: Main process exited, code=exited, status=1/FAILURE"}, false, ClassBadArgs},
		{"ValueError of a 2026 arg_groups hook", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", `  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 10, in f`, `  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/arg_groups/speculative_hook.py", line 10, in f`, "ValueError: speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', 'fa3', 'triton'); got attention_backend='dsa'.", "sglang.service: Main process exited, code=exited, status=1/FAILURE"}, false, ClassBadArgs},
		{"bare assert in _handle_speculative_decoding", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", `  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 10, in f`, "AssertionError", "sglang.service: Main process exited, code=exited, status=1/FAILURE"}, false, ClassBadArgs},
		{"ValueError from transformers under ServerArgs is a crash", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", `  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 10, in f`, `  File "/opt/venv/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", line 10, in f`, "ValueError: The checkpoint you are trying to load has model type `glm_moe_dsa` but Transformers does not recognize this architecture.", "sglang.service: Main process exited, code=exited, status=1/FAILURE"}, false, ClassCrashDuringStart},
		{"assertion in a kernel library is a crash", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", `  File "/usr/local/lib/python3.12/dist-packages/deep_ep/buffer.py", line 10, in f`, "AssertionError: num_tokens must be divisible", "sglang.service: Main process exited, code=exited, status=1/FAILURE"}, false, ClassCrashDuringStart},
		{"KV pool sizing, newer wording", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", `  File "/sgl/python/sglang/srt/mem_cache/pool_configurator.py", line 10, in f`, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.93", "sglang.service: Main process exited, code=exited, status=1/FAILURE"}, false, ClassOOM},
		{"KV pool sizing, 2026 main ValueError", dead(CodeExited, 1, "exit-code"), []string{"Traceback (most recent call last):", `  File "/sgl/python/sglang/srt/managers/scheduler.py", line 10, in f`, "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5. Raise --mem-fraction-static above 0.61.", "sglang.service: Main process exited, code=exited, status=1/FAILURE"}, false, ClassOOM},
		{"restarting", State{ActiveState: "activating", SubState: "auto-restart", NRestarts: 2}, nil, false, ClassRestartLoop},
	}
	for _, c := range cases {
		f := classify(c.st, c.lines, c.ready)
		got := Class("")
		if f != nil {
			got = f.Class
			if len(f.Evidence) == 0 && len(c.lines) > 0 {
				t.Errorf("%s: no evidence", c.name)
			}
		}
		if got != c.want {
			t.Errorf("%s: got %q want %q (%v)", c.name, got, c.want, f)
		}
	}
}

func TestStopOutcome(t *testing.T) {
	killed := State{ActiveState: "failed", Result: "signal", ExecMainCode: CodeKilled, ExecMainStatus: 9}
	r := stopOutcome(killed, []string{"SIGTERM received. signum=<Signals.SIGTERM: 15> frame=None. Draining requests and shutting down...",
		"Gracefully exiting... remaining number of requests 0", "sglang.service: Main process exited, code=killed, status=9/KILL"})
	if !r.Clean || r.Class != "" || !r.SIGKILL {
		t.Fatalf("self-SIGKILL after a clean drain: %+v", r)
	}
	timeout := killed
	timeout.Result = "timeout"
	r = stopOutcome(timeout, []string{"sglang.service: State 'stop-sigterm' timed out. Killing.", "sglang.service: Killing process 1 (sglangsim) with signal SIGKILL.",
		"sglang.service: Main process exited, code=killed, status=9/KILL", "sglang.service: Failed with result 'timeout'."})
	if r.Clean || r.Class != ClassStopTimeoutSIGKILL || !strings.Contains(strings.Join(r.Evidence, "\n"), "timed out") {
		t.Fatalf("stop timeout: %+v", r)
	}
}

func TestParseShow(t *testing.T) {
	st := parseShow([]byte("ActiveState=failed\nSubState=failed\nResult=timeout\nExecMainCode=2\nExecMainStatus=9\nMainPID=0\nNRestarts=0\n"+
		"InvocationID=abc\nLoadState=loaded\nUnitFileState=disabled\nActiveEnterTimestamp=@1700000000\nInactiveEnterTimestamp=\n"), time.Time{})
	if st.ActiveState != "failed" || st.Result != "timeout" || st.ExecMainCode != CodeKilled || st.ExecMainStatus != 9 ||
		st.InvocationID != "abc" || !st.ActiveEnter.Equal(time.Unix(1700000000, 0)) || !st.InactiveEnter.IsZero() || st.Running() {
		t.Fatalf("%+v", st)
	}
	if st.Exit() != "code=killed, status=9" {
		t.Fatal(st.Exit())
	}
}

func TestShellQuoteAndCommandLine(t *testing.T) {
	for in, want := range map[string]string{"": "''", "plain-1.2/x": "plain-1.2/x", "a b": "'a b'", "it's": `'it'\''s'`, "$(x)": "'$(x)'"} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q want %q", in, got, want)
		}
	}
	c := Cmd{Args: []string{"systemctl", "show", "my unit"}, Sudo: true, Timeout: 1500 * time.Millisecond}
	if got := c.CommandLine("deploy"); got != "sudo -n timeout --kill-after=5s 1.5s systemctl show 'my unit'" {
		t.Fatal(got)
	}
	if got := c.CommandLine("root"); !strings.HasPrefix(got, "timeout ") {
		t.Fatal(got)
	}
}

func TestServerEndpoint(t *testing.T) {
	for _, c := range []struct {
		argv     []string
		host     string
		external bool
	}{
		{[]string{"/x"}, "127.0.0.1", false},
		{[]string{"/x", "--host", "0.0.0.0"}, "127.0.0.1", true},
		{[]string{"/x", "--host=10.231.200.5"}, "10.231.200.5", true},
	} {
		h, e := serverEndpoint(c.argv, 30000)
		if h != c.host || e != c.external {
			t.Errorf("%v: %s %v", c.argv, h, e)
		}
	}
}

func TestResolveSSHConfig(t *testing.T) {
	home := t.TempDir()
	cfg := home + "/config"
	if err := os.WriteFile(cfg, []byte("Host gpu2\n  HostName 10.231.9.2\n  User ops\n  Port 2222\n  IdentityFile ~/.ssh/gpu_key\n  ProxyJump bastion@jump.example:2200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := SSHOptions{Address: "gpu2", ConfigFile: cfg, Getenv: func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}}
	tg, err := o.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if tg.addr != "10.231.9.2:2222" || tg.user != "ops" || tg.identities[0] != home+"/.ssh/gpu_key" ||
		len(tg.jump) != 1 || tg.jump[0] != "bastion@jump.example:2200" {
		t.Fatalf("%+v", tg)
	}
	// Explicit settings win; no config: defaults.
	o = SSHOptions{Address: "10.231.9.3", User: "root", IdentityFile: "~/k", ConfigFile: "none", Getenv: o.Getenv}
	tg, _ = o.resolve()
	if tg.addr != "10.231.9.3:22" || tg.user != "root" || len(tg.identities) != 1 || tg.identities[0] != home+"/k" || tg.jump != nil {
		t.Fatalf("%+v", tg)
	}
}

func TestUnfinishedOutput(t *testing.T) {
	exit := "sglang.service: Main process exited, code=exited, status=1/FAILURE"
	for _, c := range []struct {
		lines []string
		want  bool
	}{
		{[]string{"Traceback (most recent call last):", exit, "sglang.service: Failed with result 'exit-code'."}, true},
		{[]string{"Traceback (most recent call last):", `  File "x.py", line 1, in <module>`, exit}, true},
		{[]string{"Traceback (most recent call last):", `  File "x.py", line 1`, "AssertionError", exit}, false},
		{[]string{"[2026-12-01 10:00:00] Load weight begin.", exit}, false},
		{nil, false},
		{[]string{"usage: launch_server.py [-h] --model-path MODEL_PATH", exit}, true},
		{[]string{"usage: sglang serve [-h] --model-path MODEL_PATH", "                    [--hicache-size HICACHE_SIZE]", exit}, true},
		{[]string{"usage: sglang serve [-h]", "sglang serve: error: argument --tp-size: invalid int value: 'four'", exit}, false},
	} {
		if got := unfinishedOutput(c.lines); got != c.want {
			t.Errorf("%q: got %v", c.lines, got)
		}
	}
}

// TestNearReadyLinesOfEveryRelease: the readiness poll speeds up on the end of a graph capture in
// every release's words (2026 main's "Capture target decode CUDA graph end", SGLang issue 33483,
// missed before), and not on a capture's start or failure.
func TestNearReadyLinesOfEveryRelease(t *testing.T) {
	for _, l := range []string{
		"[2025-03-01 10:00:00 TP0] Capture cuda graph end. Time elapsed: 12.3 s. avail mem=20.1 GB",
		"[2025-03-01 10:00:00 TP0] Capture draft cuda graph end. Time elapsed: 3.1 s. avail mem=19.0 GB",
		"[2025-09-01 10:00:00 TP0] Capture draft extend cuda graph end. Time elapsed: 1.0 s.",
		"[2026-07-21 13:35:33 TP1] Capture target decode CUDA graph end. elapsed=4.81 s, mem usage=0.27 GB, avail mem=5.34 GB.",
		"[2026-08-27 03:46:18] Capture target prefill CUDA graph end. elapsed=22.96 s, mem usage=1.71 GB, avail mem=10.88 GB.",
		"[2026-08-07 17:36:17 TP3] Capture target decode NPU graph end. elapsed=17.95 s, mem usage=0.73 GB, avail mem=0.88 GB.",
		"Capture draft decode CUDA graph end. elapsed=1.2 s, mem usage=0.1 GB, avail mem=9.0 GB.",
		"Capture npu graph end. Time elapsed: 9.0 s.",
	} {
		if !reNearReady.MatchString(l) {
			t.Errorf("not taken for near ready: %s", l)
		}
	}
	for _, l := range []string{
		"Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=73.10 GB",
		"Capture cuda graph begin. This can take up to several minutes. avail mem=20.0 GB",
		"Exception: Capture cuda graph failed: CUDA out of memory.",
		"Capturing batches (bs=1 avail_mem=72.47 GB): 100%",
	} {
		if reNearReady.MatchString(l) {
			t.Errorf("taken for near ready: %s", l)
		}
	}
}
