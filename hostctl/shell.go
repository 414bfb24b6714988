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
	cmd := Cmd{Args: []string{"sh", "-c", script}, Timeout: timeout}.CommandLine("root")
	if stdin != nil {
		cmd = "base64 -d <<'" + marker + "-in' | " + cmd
	}
	// The stderr file is the shell's own, made once (removed when it exits) and emptied by a
	// builtin: each command then costs the host two processes (timeout, sh) besides its own, where
	// mktemp, head and rm made five (each several milliseconds on a loaded host).
	line := "[ -n \"$e\" ] || { e=$(mktemp) && trap 'rm -f \"$e\"' EXIT; }; : >\"$e\"; " + cmd + in + " 2>\"$e\"; r=$?; printf '\\n" +
		marker + "-stderr\\n'; [ -s \"$e\" ] && head -c " + strconv.Itoa(maxOut) + " \"$e\"; printf '\\n" + marker + " %s\\n' $r\n" + doc
	// The session is closed when ctx ends, or when the command's end has not come within its timeout
	// (run on the host) and 10 s for the network: a bound of network I/O, on the real clock.
	sctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	stop := context.AfterFunc(sctx, func() { sh.sess.Close() })
	defer stop()
	c.shellCmds.Add(1)
	if _, err := io.WriteString(sh.stdin, line); err != nil {
		return Output{}, false, err
	}
	sent = true
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
		if bytes.Equal(l, []byte(marker+"-stderr\n")) {
			stdout = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			buf, full = bytes.Buffer{}, false
			continue
		}
		if rest, ok := bytes.CutPrefix(l, []byte(marker+" ")); ok {
			code, _ := strconv.Atoi(strings.TrimSpace(string(rest)))
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
