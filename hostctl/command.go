// Remote commands: quoting, the command line (sudo, timeout), bounded output, exit errors.

package hostctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// ShellQuote quotes s for a POSIX shell (the remote login shell).
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("@%+=:,./_-", c) >= 0) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Cmd is one remote command.
type Cmd struct {
	Args      []string      // argv; each argument shell-quoted
	Timeout   time.Duration // remote `timeout`; default 30 s
	Sudo      bool          // prefix `sudo -n` for a non-root login
	Stdin     []byte
	MaxOutput int // bytes kept of stdout and of stderr each (default 1 MiB)
}

// Output of a remote command.
type Output struct {
	Stdout, Stderr []byte
	Code           int
	Truncated      bool
}

// CommandLine renders the shell command line of cmd for a login as user.
func (cmd Cmd) CommandLine(user string) string {
	to := cmd.Timeout
	if to == 0 {
		to = 30 * time.Second
	}
	var b strings.Builder
	if cmd.Sudo && user != "root" {
		b.WriteString("sudo -n ")
	}
	fmt.Fprintf(&b, "timeout --kill-after=5s %ss", strconv.FormatFloat(to.Round(time.Millisecond).Seconds(), 'f', -1, 64))
	if len(cmd.Args) > 0 {
		b.WriteByte(' ')
		b.WriteString(shellJoin(cmd.Args))
	}
	return b.String()
}

// shellJoin quotes each argument (ShellQuote) and joins them with spaces.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

type capWriter struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		if len(p) > room {
			w.buf.Write(p[:room])
			w.truncated = true
		} else {
			w.buf.Write(p)
		}
	} else if len(p) > 0 {
		w.truncated = true
	}
	return len(p), nil
}

// Run runs cmd; a non-zero exit is an *ExitError with the output. A
// connection that breaks gives an *UnreachableError. Opening the session is
// retried once after a reconnect (the command had not run).
func (c *Conn) Run(ctx context.Context, cmd Cmd) (Output, error) {
	if cmd.MaxOutput == 0 {
		cmd.MaxOutput = 1 << 20
	}
	line := cmd.CommandLine(c.t.user)
	var out Output
	for attempt := 0; ; attempt++ {
		cl, gen, err := c.Client(ctx)
		if err != nil {
			return out, err
		}
		s, err := c.newSession(cl)
		if err != nil {
			c.markDead(gen)
			if attempt == 0 && ctx.Err() == nil {
				continue
			}
			return out, c.unreachable(gen, err)
		}
		stdout := &capWriter{max: cmd.MaxOutput}
		stderr := &capWriter{max: cmd.MaxOutput}
		s.Stdout, s.Stderr = stdout, stderr
		if cmd.Stdin != nil {
			s.Stdin = bytes.NewReader(cmd.Stdin)
		}
		stop := context.AfterFunc(ctx, func() { _ = s.Signal(ssh.SIGKILL); s.Close() })
		err = s.Run(line)
		stop()
		s.Close()
		out = Output{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(), Truncated: stdout.truncated || stderr.truncated}
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			out.Code = ee.ExitStatus()
			if cmd.Sudo && c.t.user != "root" && bytes.Contains(out.Stderr, []byte("sudo: a password is required")) {
				return out, ErrSudoPassword
			}
			return out, &ExitError{Line: line, Out: out}
		}
		// The channel closed without an exit status: the connection broke.
		c.markDead(gen)
		return out, c.unreachable(gen, err)
	}
}

// ExitError is a remote command that exited non-zero.
type ExitError struct {
	Line string
	Out  Output
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(string(e.Out.Stderr))
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	if e.Out.Code == 124 {
		return fmt.Sprintf("remote command timed out: %s", e.Line)
	}
	return fmt.Sprintf("remote command exited %d: %s: %s", e.Out.Code, e.Line, msg)
}

// ErrSudoPassword means a non-root login whose sudo asks for a password.
var ErrSudoPassword = errors.New("sudo needs a password: allow passwordless sudo for systemctl, journalctl, install and sftp-server for this user (NOPASSWD), or log in as root")
