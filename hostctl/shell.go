// The persistent remote shell: one long-lived sh running every systemctl/journalctl script, framed by end markers.

package hostctl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// shell is one long-lived remote `sh` reading commands from stdin: a poll
// costs a round trip instead of a new session (sshd forks and starts the
// login shell for each session, ~100 ms on a busy host).
type shell struct {
	sess  *ssh.Session
	stdin io.WriteCloser
	out   *bufio.Reader
	gen   int
}

// RunShell runs script in the persistent shell (as root: `sudo -n sh` for a
// non-root login) and returns its output, stdout and stderr each bounded by
// maxOut bytes, like Run. Any trouble with the shell falls back to Run.
func (c *Conn) RunShell(ctx context.Context, script string, timeout time.Duration, maxOut int) (Output, error) {
	return c.RunShellInput(ctx, script, nil, timeout, maxOut)
}

// RunShellInput is RunShell with stdin for the script (nil: /dev/null). The bytes reach it through
// the shell's own input, as a here-document (base64), never through an argument that other users
// of the host could read in /proc: a new session for them would cost as much as the rest of a
// point's start on a loaded host (sshd, PAM and the login shell for each).
func (c *Conn) RunShellInput(ctx context.Context, script string, stdin []byte, timeout time.Duration, maxOut int) (Output, error) {
	return c.runInShell(ctx, true, script, stdin, timeout, maxOut)
}

// RunUserShell is RunShellInput as the login user, not root: a persistent shell of its own for a
// non-root login (where Slurm's commands run as the user who submits).
func (c *Conn) RunUserShell(ctx context.Context, script string, stdin []byte, timeout time.Duration, maxOut int) (Output, error) {
	return c.runInShell(ctx, c.t.user == "root", script, stdin, timeout, maxOut)
}

func (c *Conn) runInShell(ctx context.Context, root bool, script string, stdin []byte, timeout time.Duration, maxOut int) (Output, error) {
	c.shMu.Lock()
	defer c.shMu.Unlock()
	slot := &c.sh
	if !root {
		slot = &c.ush
	}
	out, sent, err := c.runShell(ctx, slot, root, script, stdin, timeout, maxOut)
	if err == nil || ctx.Err() != nil {
		return out, err
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return out, err
	}
	gen := 0
	if *slot != nil {
		gen = (*slot).gen
		(*slot).sess.Close()
		*slot = nil
	}
	if sent {
		// The command may have run: never run it twice. The connection (or the shell) broke.
		return out, c.unreachable(gen, fmt.Errorf("remote shell: %w", err))
	}
	return c.Run(ctx, Cmd{Args: []string{"sh", "-c", script}, Sudo: root, Stdin: stdin, Timeout: timeout, MaxOutput: maxOut})
}

func (c *Conn) runShell(ctx context.Context, slot **shell, root bool, script string, stdin []byte, timeout time.Duration, maxOut int) (out Output, sent bool, err error) {
	cl, gen, err := c.Client(ctx)
	if err != nil {
		return Output{}, sent, err
	}
	if *slot != nil && (*slot).gen != gen {
		(*slot).sess.Close()
		*slot = nil
	}
	if *slot == nil {
		s, err := c.newSession(cl)
		if err != nil {
			return Output{}, sent, err
		}
		w, err := s.StdinPipe()
		if err != nil {
			s.Close()
			return Output{}, sent, err
		}
		r, err := s.StdoutPipe()
		if err != nil {
			s.Close()
			return Output{}, sent, err
		}
		cmd := "exec sh"
		if root && c.t.user != "root" {
			cmd = "exec sudo -n sh"
		}
		if err := s.Start(cmd); err != nil {
			s.Close()
			return Output{}, sent, err
		}
		*slot = &shell{sess: s, stdin: w, out: bufio.NewReaderSize(r, 64<<10), gen: gen}
	}
	sh := *slot
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	marker := "@@specsweep-end-" + hex.EncodeToString(nonce[:])
	// stderr goes to a temp file printed after stdout, between markers. Stdin is a here-document
	// after the line (the marker is random: no base64 line is it).
	in, doc := " </dev/null", ""
	if stdin != nil {
		in = ""
		doc = wrapBase64(stdin) + marker + "-in\n"
	}
	// The script runs in a subshell of the persistent shell (a fork, no program started), through
	// eval of its quoted text (a syntax error is the subshell's exit 2, never the shell's). The
	// subshell first prints its own PID (read from /proc/self/stat by a builtin): on the host's
	// side nothing bounds the command's time any more, so at its timeout this process ends the
	// command's processes itself (killTree). `timeout N sh -c` cost each command two programs, about
	// 9-14 ms of the host's CPU on this machine, the largest share of a poll.
	cmd := "( read -r _ssp _ </proc/self/stat && printf '" + marker + "-pid %s %s\\n' \"$_ssp\" \"$$\"; eval " + ShellQuote(script) + " )"
	if stdin != nil {
		cmd = "base64 -d <<'" + marker + "-in' | " + cmd
	}
	// The stderr file is the shell's own, made once (removed when it exits) and emptied by a
	// builtin: each command then costs the host no program but its own, where mktemp, head and rm
	// made five (each several milliseconds on a loaded host).
	line := "[ -n \"$_sse\" ] || { _sse=$(mktemp) && trap 'rm -f \"$_sse\"' EXIT; }; : >\"$_sse\"; " + cmd + in + " 2>\"$_sse\"; _ssr=$?; printf '\\n" +
		marker + "-stderr\\n'; [ -s \"$_sse\" ] && head -c " + strconv.Itoa(maxOut) + " \"$_sse\"; printf '\\n" + marker + " %s\\n' $_ssr\n" + doc
	if timeout <= 0 {
		timeout = 30 * time.Second // Cmd's default
	}
	// The session is closed when ctx ends, or when the command's end has not come within its timeout
	// and 10 s for the network: a bound of network I/O, on the real clock.
	sctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	stop := context.AfterFunc(sctx, func() { sh.sess.Close() })
	defer stop()
	// At the timeout the command's processes are sent SIGTERM, as timeout(1) did, once its PID is
	// known; its exit is then reported as timeout(1)'s 124. (A context's deadline: the host's time
	// bound is one of remote I/O, on the real clock.)
	k := &shellKill{c: c, root: root}
	kctx, kcancel := context.WithTimeout(context.Background(), timeout)
	defer kcancel()
	context.AfterFunc(kctx, func() {
		if kctx.Err() == context.DeadlineExceeded {
			k.expire()
		}
	})
	c.shellCmds.Add(1)
	if _, err := io.WriteString(sh.stdin, line); err != nil {
		return Output{}, false, err
	}
	sent = true
	pidLine := []byte(marker + "-pid ")
	var buf bytes.Buffer
	var stdout []byte
	truncated := false
	full := false // this stream reached maxOut: keep a prefix, never later pieces of it
	for {
		l, err := sh.out.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			if ctx.Err() != nil {
				return Output{}, sent, ctx.Err()
			}
			return Output{}, sent, err
		}
		if rest, ok := bytes.CutPrefix(l, pidLine); ok && stdout == nil && buf.Len() == 0 {
			// The subshell's PID, then the shell's ($$ is the shell's in a subshell).
			if f := strings.Fields(string(rest)); len(f) == 2 {
				pid, err1 := strconv.Atoi(f[0])
				ppid, err2 := strconv.Atoi(f[1])
				if err1 == nil && err2 == nil {
					k.started(pid, ppid)
				}
			}
			continue
		}
		if bytes.Equal(l, []byte(marker+"-stderr\n")) {
			stdout = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			buf, full = bytes.Buffer{}, false
			continue
		}
		if rest, ok := bytes.CutPrefix(l, []byte(marker+" ")); ok {
			code, _ := strconv.Atoi(strings.TrimSpace(string(rest)))
			if code != 0 && k.killed() {
				code = 124
			}
			stderr := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			out := Output{Stdout: stdout, Stderr: stderr, Code: code, Truncated: truncated}
			if code != 0 {
				return out, true, &ExitError{Line: script, Out: out}
			}
			return out, true, nil
		}
		if !full && buf.Len()+len(l) <= maxOut {
			buf.Write(l)
		} else {
			full, truncated = true, true
		}
	}
}

// wrapBase64 is b in base64, in lines of 76 characters, each ending in a newline.
func wrapBase64(b []byte) string {
	enc := base64.StdEncoding.EncodeToString(b)
	var sb strings.Builder
	for len(enc) > 76 {
		sb.WriteString(enc[:76])
		sb.WriteByte('\n')
		enc = enc[76:]
	}
	if enc != "" {
		sb.WriteString(enc)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// shellKill ends a persistent shell's command at its timeout: its subshell (by the PID the subshell
// printed) and every process under it get SIGTERM, from a session of their own (the shell is busy
// waiting for the command).
type shellKill struct {
	c    *Conn
	root bool

	mu      sync.Mutex
	pid     int
	ppid    int
	expired bool
	sent    bool
}

// expire: the timeout passed.
func (k *shellKill) expire() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expired = true
	k.kill()
}

// started: the command's subshell is pid, a child of the shell ppid.
func (k *shellKill) started(pid, ppid int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pid, k.ppid = pid, ppid
	k.kill()
}

// killed: the command was sent its SIGTERM.
func (k *shellKill) killed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sent
}

// kill sends the SIGTERMs once the timeout passed and the PID is known; k.mu is held.
func (k *shellKill) kill() {
	if !k.expired || k.pid <= 0 || k.sent {
		return
	}
	k.sent = true
	go func(pid, ppid int) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = k.c.Run(ctx, Cmd{Args: []string{"sh", "-c", killTree(pid, ppid)}, Sudo: k.root, Timeout: 12 * time.Second})
	}(k.pid, k.ppid)
}

// killTree is the shell command sending SIGTERM to pid and every process under it (read from ps
// at once: a parent killed first would leave its children to init, out of reach), then SIGKILL to
// them if pid still runs 5 s later (timeout(1)'s --kill-after=5s). Nothing is sent unless pid is
// still a child of the shell ppid: a command that ended as its timeout passed has left its PID
// free for another process.
func killTree(pid, ppid int) string {
	p := strconv.Itoa(pid)
	return "t=$(ps -e -o pid= -o ppid= | awk -v r=" + p + " -v s=" + strconv.Itoa(ppid) + " '{pp[$1] = $2} " +
		"END {if (pp[r] != s) exit; k[r] = 1; do {n = 0; for (p in pp) if (!(p in k) && (pp[p] in k)) {k[p] = 1; n++}} while (n); for (p in k) print p}'); " +
		"[ -n \"$t\" ] || exit 0; kill -TERM $t 2>/dev/null; i=0; while [ $i -lt 50 ] && kill -0 " + p + " 2>/dev/null; do sleep 0.1; i=$((i+1)); done; " +
		"kill -0 " + p + " 2>/dev/null && kill -KILL $t 2>/dev/null; true"
}
