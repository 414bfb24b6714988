package hostctl

import (
	"regexp"
	"strings"
)

var (
	reOOM    = regexp.MustCompile(`CUDA out of memory|OutOfMemoryError|torch\.cuda\.OutOfMemoryError|[Oo]ut of memory|oom-kill|Killed process \d+`)
	reUsage  = regexp.MustCompile(`^usage: |: error: (unrecognized arguments|argument |the following arguments are required|ambiguous option|invalid choice)|Failed to locate executable|Failed at step EXEC|status=203/EXEC`)
	reAssert = regexp.MustCompile(`^AssertionError\b`)
	// Lines worth keeping as evidence of a crash.
	reCrash       = regexp.MustCompile(`Traceback \(most recent call last\)|Error: |Exception: |Scheduler hit an exception|scheduler is dead|Received sigquit|Initialization failed|Main process exited|Failed with result|code=(exited|killed|dumped)`)
	reStopTimeout = regexp.MustCompile(`State 'stop-sigterm' timed out|State 'stop-final-sigterm' timed out|Failed with result 'timeout'`)
	reDrain       = regexp.MustCompile(`Draining requests and shutting down|Gracefully exiting|Force exiting`)
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
	case st.Result == "oom-kill" || anyMatch(lines, reOOM):
		return &Failure{Class: ClassOOM, State: st, Detail: "out of memory (" + exit + ")", Evidence: evidence(lines, reOOM, 6)}
	case st.ExecMainCode == CodeExited && st.ExecMainStatus == 2, anyMatch(lines, reUsage),
		!ready && st.ExecMainCode == CodeExited && lastNonEmpty(lines, reAssert):
		return &Failure{Class: ClassBadArgs, State: st, Detail: "the server rejected its arguments (" + exit + ")",
			Evidence: evidence(lines, regexp.MustCompile(reUsage.String()+`|^AssertionError|Traceback`), 6)}
	case ready:
		return &Failure{Class: ClassCrashDuringLoad, State: st, Detail: "the server died while serving (" + exit + ")", Evidence: evidence(lines, reCrash, 8)}
	default:
		return &Failure{Class: ClassCrashDuringStart, State: st, Detail: "the server died before it was ready (" + exit + ")", Evidence: evidence(lines, reCrash, 8)}
	}
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

// unfinishedTraceback: the server's output ends inside a Python traceback
// (its header or an indented frame line): the exception line is still to come.
func unfinishedTraceback(lines []string) bool {
	l := lastServerLine(lines)
	return strings.HasPrefix(l, "Traceback (most recent call last)") || strings.HasPrefix(l, "  ")
}

// evidence keeps the lines matching re (at most max, the last ones), then
// the last three lines, without duplicates, each at most 400 bytes.
func evidence(lines []string, re *regexp.Regexp, max int) []string {
	var out []string
	seen := map[string]bool{}
	add := func(l string) {
		if len(l) > 400 {
			l = l[:400] + "..."
		}
		if !seen[l] && strings.TrimSpace(l) != "" {
			seen[l] = true
			out = append(out, l)
		}
	}
	var hits []string
	for _, l := range lines {
		if re.MatchString(l) {
			hits = append(hits, l)
		}
	}
	if len(hits) > max {
		hits = hits[len(hits)-max:]
	}
	for _, l := range hits {
		add(l)
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
