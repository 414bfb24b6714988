package hostctl

import (
	"regexp"
	"slices"
	"strings"
)

var (
	// Out of memory, in every release's words: torch's CUDA OOM (also wrapped in "Capture cuda graph
	// failed: ..."), the KV-pool sizing failure (model_runner.init_memory_pool, later
	// pool_configurator: "Not enough memory. Please try to increase --mem-fraction-static.", newer
	// releases append " Current value: ..."), newest main's ValueError for the same ("Loaded weights
	// leave no GPU memory for the KV cache"), the scheduler's KV-token exhaustion ("Prefill/Decode
	// out of memory. Try to lower your batch size."), the kernel's OOM killer. docs/hostctl.md.
	reOOM = regexp.MustCompile(`CUDA out of memory|OutOfMemoryError|torch\.cuda\.OutOfMemoryError|[Oo]ut of memory|oom-kill|Killed process \d+|` +
		`Not enough memory\. Please try to increase --mem-fraction-static|leave no GPU memory for the KV cache`)
	reUsage = regexp.MustCompile(`^usage: |: error: (unrecognized arguments|argument |the following arguments are required|ambiguous option|invalid choice)`)
	// reExec: systemd could not start ExecStart='s program (newer systemd: "Failed to locate
	// executable X: ...", older: "Failed at step EXEC spawning X: ..."; then status=203/EXEC).
	reExec = regexp.MustCompile(`Failed to locate executable|Failed at step EXEC|Failed to execute |status=203/EXEC`)
	// reFileWrite: a Slurm job could not write its launch's files on its node (writeJobFiles).
	reFileWrite = regexp.MustCompile(`^` + regexp.QuoteMeta(fileWriteFailed))
	reAssert    = regexp.MustCompile(`^AssertionError\b`)
	// Lines worth keeping as evidence of a crash.
	reCrash       = regexp.MustCompile(`Traceback \(most recent call last\)|Error: |Exception: |Scheduler hit an exception|scheduler is dead|Received sigquit|Initialization failed|Main process exited|Failed with result|code=(exited|killed|dumped)`)
	reStopTimeout = regexp.MustCompile(`State 'stop-sigterm' timed out|State 'stop-final-sigterm' timed out|Failed with result 'timeout'`)
	reDrain       = regexp.MustCompile(`Draining requests and shutting down|Gracefully exiting|Force exiting`)
	// reFatal: lines that tell how a process died or what broke under it, kept as evidence before
	// any other: CPython's faulthandler ("Fatal Python error: Segmentation fault", "Aborted"), the
	// shell's and systemd's words for a fatal signal, a C++ abort, CUDA and NCCL errors.
	reFatal = regexp.MustCompile(`Fatal Python error|Segmentation fault|SIGSEGV|SIGABRT|SIGBUS|\bAborted\b|core dumped|status=(11/SEGV|6/ABRT|7/BUS)|` +
		`terminate called after throwing|CUDA error|cudaError|CUDA driver error|illegal memory access|` +
		`NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclRemoteError`)
)

// classify decides whether an instance failed, from its state and its log
// lines (this invocation only). ready says whether it had been ready (a
// crash then is crash_during_load). It returns nil while the process runs.
func classify(st State, lines []string, ready bool) *Failure {
	if st.NRestarts > 0 || st.SubState == "auto-restart" {
		return &Failure{Class: ClassRestartLoop, State: st,
			Detail:   "the unit is restarting (NRestarts=" + itoa(st.NRestarts) + ", " + st.SubState + "): systemd Restart= keeps relaunching a failing server",
			Evidence: evidence(lines, reCrash, 8)}
	}
	if st.Running() || st.ActiveState == "" {
		return nil
	}
	exit := st.Exit()
	if exit == "" {
		exit = "result " + st.Result
	}
	switch {
	case anyMatch(lines, reFileWrite):
		return &Failure{Class: ClassLaunchFailed, State: st, Detail: "the launch's files could not be written on the host (" + exit + ")",
			Evidence: evidence(lines, reFileWrite, 4)}
	case (st.ExecMainCode == CodeExited && st.ExecMainStatus == 203) || anyMatch(lines, reExec):
		return &Failure{Class: ClassLaunchFailed, State: st, Detail: "the server's program could not be started (" + exit + ")",
			Evidence: evidence(lines, reExec, 4)}
	case st.Result == "oom-kill" || anyMatch(lines, reOOM):
		return &Failure{Class: ClassOOM, State: st, Detail: "out of memory (" + exit + ")", Evidence: evidence(lines, reOOM, 6)}
	case st.ExecMainCode == CodeExited && st.ExecMainStatus == 2, anyMatch(lines, reUsage),
		!ready && argumentCheckFailed(lines):
		return &Failure{Class: ClassBadArgs, State: st, Detail: "the server rejected its arguments (" + exit + ")",
			Evidence: evidence(lines, regexp.MustCompile(reUsage.String()+`|AssertionError|ValueError|TypeError|Traceback`), 6)}
	case ready:
		return &Failure{Class: ClassCrashDuringLoad, State: st, Detail: "the server died while serving (" + exit + ")", Evidence: evidence(lines, reCrash, 8)}
	default:
		return &Failure{Class: ClassCrashDuringStart, State: st, Detail: "the server died before it was ready (" + exit + ")", Evidence: evidence(lines, reCrash, 8)}
	}
}

// reFrame is a traceback frame line (possibly behind a launcher's prefix such as mpirun's
// "[1,0]<stderr>:"); reException the exception line that ends a traceback.
var (
	reLauncher  = regexp.MustCompile(`^\[[^\]]*\]<std(?:out|err)>:`)
	reFrame     = regexp.MustCompile(`^(?:\[[^\]]*\]<std(?:out|err)>:)?\s+File "([^"]*)", line \d+`)
	reException = regexp.MustCompile(`^(?:\[[^\]]*\]<std(?:out|err)>:)?((?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception)))(?::|$)`)
	// Where SGLang checks its arguments: ServerArgs (__post_init__, _handle_*, check_server_args)
	// in python/sglang/srt/server_args.py, and the arg_groups/ hooks of 2026 releases.
	reArgCode = regexp.MustCompile(`sglang/srt/server_args\.py$|sglang/srt/arg_groups/`)
)

// pyTraceback is the last Python traceback of a log: the file of its innermost frame and its
// exception type ("" when the log has no complete one).
func pyTraceback(lines []string) (lastFrame, exc string, frames int) {
	start := -1
	for i, l := range lines {
		if strings.Contains(l, "Traceback (most recent call last)") {
			start = i
		}
	}
	if start < 0 {
		return "", "", 0
	}
	for _, l := range lines[start+1:] {
		if m := reFrame.FindStringSubmatch(l); m != nil {
			lastFrame, frames = m[1], frames+1
			continue
		}
		if l = reLauncher.ReplaceAllString(l, ""); strings.HasPrefix(l, " ") || strings.TrimSpace(l) == "" {
			continue // the source line of a frame, or the carets under it
		}
		if m := reException.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			return lastFrame, m[2], frames
		}
		return lastFrame, "", frames
	}
	return lastFrame, "", frames
}

// argumentCheckFailed: the server died of SGLang's own checks of its arguments, not of a crash:
// the last traceback ends in a ValueError, AssertionError or TypeError raised in SGLang's argument
// code (a partial speculative triple: a bare AssertionError, or "TypeError: '>' not supported
// between instances of 'NoneType' and 'int'"; "ValueError: speculative_eagle_topk > 1 with
// page_size > 1 ..."), or is a bare AssertionError with no frame printed. An exception raised
// further in (transformers loading the model's config, a device check) is a crash, even when
// ServerArgs is on the stack: that is not the user's arguments.
func argumentCheckFailed(lines []string) bool {
	frame, exc, frames := pyTraceback(lines)
	switch exc {
	case "ValueError", "AssertionError", "TypeError":
	default:
		return exc == "" && frames == 0 && lastNonEmpty(lines, reAssert) // a bare assert, no traceback
	}
	if frames == 0 {
		return exc == "AssertionError"
	}
	return reArgCode.MatchString(frame)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	if neg {
		b = append([]byte{'-'}, b...)
	}
	return string(b)
}

func anyMatch(lines []string, re *regexp.Regexp) bool {
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// systemdLine reports whether a journal line is systemd's own about the
// unit (not the server's output).
func systemdLine(l string) bool {
	for _, m := range []string{"Main process exited", "Failed with result", "Deactivated successfully", "Consumed ",
		"Failed to kill control group", "Stopped ", "Started ", "Stopping ", "Killing process", "State 'stop-"} {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}

// lastServerLine is the last non-empty line the server wrote.
func lastServerLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if l := lines[i]; strings.TrimSpace(l) != "" && !systemdLine(l) {
			return l
		}
	}
	return ""
}

func lastNonEmpty(lines []string, re *regexp.Regexp) bool {
	return re.MatchString(strings.TrimSpace(lastServerLine(lines)))
}

// unfinishedOutput: the server's output ends inside a block whose telling line comes last: a
// Python traceback (its header or an indented frame line: the exception line is still to come) or
// argparse's usage (its first or a continuation line: the "error:" line is still to come).
func unfinishedOutput(lines []string) bool {
	l := lastServerLine(lines)
	return strings.HasPrefix(l, "Traceback (most recent call last)") || strings.HasPrefix(l, "usage: ") ||
		strings.HasPrefix(l, "  ")
}

// reSecretArg matches a credential in what SGLang logs of its arguments at start
// ("server_args=ServerArgs(..., api_key='sk-...', ...)") and in an argv ("--api-key sk-...").
var reSecretArg = regexp.MustCompile(`\b(api_key|admin_api_key|hf_token|ssl_keyfile_password)=('[^']*'|"[^"]*"|[^\s,)]+)|(--api-key|--admin-api-key|--hf-token)([= ])(\S+)`)

// redactLine hides credentials in a log line kept as evidence (evidence is stored and shown in
// reports): None stays, as it says there is none.
func redactLine(l string) string {
	if !strings.Contains(l, "key") && !strings.Contains(l, "token") && !strings.Contains(l, "password") {
		return l
	}
	return reSecretArg.ReplaceAllStringFunc(l, func(m string) string {
		sm := reSecretArg.FindStringSubmatch(m)
		if sm[1] != "" {
			if sm[2] == "None" {
				return m
			}
			return sm[1] + "='<redacted>'"
		}
		return sm[3] + sm[4] + "<redacted>"
	})
}

// evidence keeps the lines matching re (at most limit, the last ones, fatal lines first), then
// the last three lines, without duplicates, each at most 400 bytes.
func evidence(lines []string, re *regexp.Regexp, limit int) []string {
	var out []string
	seen := map[string]bool{}
	add := func(l string) {
		l = redactLine(l)
		if len(l) > 400 {
			l = l[:400] + "..."
		}
		if !seen[l] && strings.TrimSpace(l) != "" {
			seen[l] = true
			out = append(out, l)
		}
	}
	// The lines that say what happened come first when the cap bites: a fatal signal or a CUDA or
	// NCCL error line, which the class's own pattern may not match (a segfault's "Fatal Python
	// error: Segmentation fault" has no "Error: "), up to half the cap, the last ones.
	var fatal, hits []int
	for i, l := range lines {
		switch {
		case reFatal.MatchString(l):
			fatal = append(fatal, i)
		case re.MatchString(l):
			hits = append(hits, i)
		}
	}
	if n := max(1, limit/2); len(fatal) > n {
		fatal = fatal[len(fatal)-n:]
	}
	if room := limit - len(fatal); len(hits) > room {
		hits = hits[len(hits)-room:]
	}
	keep := append(fatal, hits...)
	slices.Sort(keep)
	for _, i := range keep {
		add(lines[i])
	}
	tail := lines
	if len(tail) > 3 {
		tail = tail[len(tail)-3:]
	}
	for _, l := range tail {
		add(l)
	}
	return out
}

// stopOutcome classifies a finished stop: systemd's stop timeout (Result
// timeout, the "stop-sigterm timed out" line) is stop_timeout_sigkill; a
// SIGKILL after a drain (SGLang kills itself) is a clean stop.
func stopOutcome(st State, lines []string) StopResult {
	r := StopResult{Final: st, SIGKILL: st.ExecMainCode == CodeKilled && st.ExecMainStatus == 9}
	if st.Result == "timeout" || anyMatch(lines, reStopTimeout) {
		r.Class = ClassStopTimeoutSIGKILL
		r.Evidence = evidence(lines, reStopTimeout, 4)
		return r
	}
	r.Clean = true
	r.Evidence = evidence(lines, reDrain, 4)
	return r
}
