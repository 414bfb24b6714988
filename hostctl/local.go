package hostctl

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/specsweep/specsweep/internal/defaults"
	"github.com/specsweep/specsweep/sweep"
)

// LocalOptions configure the local driver.
type LocalOptions struct {
	Name string
	// LogFile, if set, receives a copy of every server log line.
	LogFile string
	// GPUWait bounds the wait for free GPUs before a start when nvidia-smi
	// exists here (default 2 min), then gpu_busy.
	GPUWait time.Duration
	// Clock times the servers' readiness, stops and the GPU wait (nil: the real clock).
	Clock Clock
	// Dir is the folder a relative command with a slash is resolved against: the spec file's
	// (docs/spec.md, server.command). "" is the working directory.
	Dir string
}

// Local runs the server as a child process of specsweep, in its own process
// group, with its output captured: the same readiness and classification
// as a systemd unit (states named like systemctl show's).
type Local struct {
	o       LocalOptions
	mu      sync.Mutex
	current *instance
	seq     int
}

var _ Host = (*Local)(nil)

// NewLocal returns a local driver.
func NewLocal(o LocalOptions) *Local {
	if o.Name == "" {
		o.Name = "local"
	}
	o.Clock = orRealClock(o.Clock)
	return &Local{o: o}
}

// Name implements Host.
func (l *Local) Name() string { return l.o.Name }

// Close implements Host (a running child keeps running: use Restore).
func (l *Local) Close() error { return nil }

// localProc is the server as a child process here (a serverProc), in its
// own process group; its output lines wait in pending for the next poll.
type localProc struct {
	clock  Clock
	cmd    *exec.Cmd
	pgid   int
	id     string
	notify func() // wakes readiness polling: a new line

	mu          sync.Mutex
	exited      chan struct{}
	state       *os.ProcessState
	stopping    bool
	stopTimeout time.Duration
	kill        bool // the stop is SIGKILL at once (Launch.Kill)
	timedOut    bool
	pending     []string
}

var _ serverProc = (*localProc)(nil)

func (p *localProc) log(line string) {
	p.mu.Lock()
	p.pending = append(p.pending, line)
	p.mu.Unlock()
	p.notify()
}

func (p *localProc) currentState() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := State{At: p.clock.Now(), InvocationID: p.id, LoadState: "loaded", MainPID: p.cmd.Process.Pid}
	select {
	case <-p.exited:
	default:
		if p.stopping {
			st.ActiveState, st.SubState = "deactivating", "stop-sigterm"
		} else {
			st.ActiveState, st.SubState = "active", "running"
		}
		return st
	}
	st.MainPID = 0
	ws, _ := p.state.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		st.ExecMainCode, st.ExecMainStatus = CodeKilled, int(ws.Signal())
	default:
		st.ExecMainCode, st.ExecMainStatus = CodeExited, ws.ExitStatus()
	}
	switch {
	case p.timedOut:
		st.ActiveState, st.SubState, st.Result = "failed", "failed", "timeout"
	case st.ExecMainCode == CodeExited && st.ExecMainStatus == 0:
		st.ActiveState, st.SubState, st.Result = "inactive", "dead", "success"
	case st.ExecMainCode == CodeKilled && p.stopping && st.ExecMainStatus == int(syscall.SIGTERM):
		st.ActiveState, st.SubState, st.Result = "inactive", "dead", "success"
	case st.ExecMainCode == CodeKilled:
		st.ActiveState, st.SubState, st.Result = "failed", "failed", "signal"
	default:
		st.ActiveState, st.SubState, st.Result = "failed", "failed", "exit-code"
	}
	return st
}

// Start implements Host.
func (l *Local) Start(ctx context.Context, ln Launch) (Instance, error) {
	ln, err := resolveLocal(ln, l.o.Dir)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	prev := l.current
	l.mu.Unlock()
	if prev != nil {
		if _, err := prev.Stop(ctx, nil); err != nil {
			return nil, err
		}
	}
	if err := l.gpuFree(ctx, ln); err != nil {
		return nil, err
	}
	for _, f := range ln.Files {
		if err := writeLocalFile(f); err != nil {
			return nil, filesFailed(err)
		}
	}
	argv := ExpandArgv(ln.Argv, ln.Env) // ${NAME} as systemd substitutes it in ExecStart=
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	for k, v := range ln.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Own process group; SIGTERM if specsweep dies (the parent-death signal fires when the
	// forking thread ends: it is locked below and lives as long as the child).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	var logf *os.File
	if l.o.LogFile != "" {
		if logf, err = openServerLog(l.o.LogFile); err != nil {
			return nil, err
		}
	}
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after the child
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		<-exited
	}()
	if err := <-started; err != nil {
		if logf != nil {
			logf.Close()
		}
		// A missing or non-executable command is systemd's 203/EXEC.
		l.mu.Lock()
		l.seq++
		l.mu.Unlock()
		return nil, &Failure{Class: ClassLaunchFailed, Detail: "cannot start the server: " + err.Error(), Err: err}
	}
	startedAt := l.o.Clock.Now()
	l.mu.Lock()
	l.seq++
	id := fmt.Sprintf("local-%d-%d", cmd.Process.Pid, l.seq)
	l.mu.Unlock()
	host, _ := serverEndpoint(ln.Argv, ln.Port)
	p := &localProc{clock: l.o.Clock, cmd: cmd, pgid: cmd.Process.Pid, id: id, exited: exited, stopTimeout: ln.StopTimeout, kill: ln.Kill}
	in := newInstance(p, l.o.Clock, id, ln, startedAt,
		&http.Client{Transport: &http.Transport{MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second, DisableCompression: true}},
		"http://"+hostPort(host, ln.Port), hostPort(host, ln.Port))
	p.notify = in.notify
	var wg sync.WaitGroup
	var logMu sync.Mutex
	for _, r := range []io.Reader{stdout, stderr} {
		wg.Go(func() {
			readLines(r, MaxLogLine, func(line string) {
				p.log(line)
				if logf != nil {
					logMu.Lock()
					fmt.Fprintln(logf, line)
					logMu.Unlock()
				}
			})
		})
	}
	go func() {
		wg.Wait() // all output read before the exit is visible, as the journal orders it
		err := cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		p.exit(err)
	}()
	l.mu.Lock()
	l.current = in
	l.mu.Unlock()
	return in, nil
}

// writeLocalFile writes a launch's file atomically (a temp file in its directory, synced, then
// renamed over it: a reader sees the old file or the new one, never a part), mode 0644, its missing
// directories created 0755.
func writeLocalFile(f File) error {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("local: cannot create the directory of %s: %w", f.Path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("local: cannot write %s: %w", f.Path, err)
	}
	_, err = tmp.Write(f.Data)
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes it 0600
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("local: cannot write %s: %w", f.Path, err)
	}
	return nil
}

// openServerLog opens the file that receives a copy of the server's log, for appending. The
// server's output may hold what its environment holds (tokens), so the file is its user's alone:
// created 0600 (one left wider by an earlier version is made 0600), the directories created for
// it 0700 (an existing one is left as it is), and a symlink in its place is refused, not followed.
func openServerLog(p string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("local: the directory of the server log %s: %w", p, err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("local: the server log %s is a symlink: refused (name a file)", p)
		}
		return nil, fmt.Errorf("local: opening the server log %s: %w", p, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("local: the server log %s: %w", p, err)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("local: the server log %s is not a regular file", p)
	case fi.Mode().Perm()&0o077 != 0:
		if cerr := f.Chmod(0o600); cerr != nil {
			err = fmt.Errorf("local: making the server log %s private (mode %o): %w", p, fi.Mode().Perm(), cerr)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// exit records the end of the process (err: cmd.Wait's).
func (p *localProc) exit(err error) {
	p.mu.Lock()
	p.state = p.cmd.ProcessState
	if p.state == nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.state = ee.ProcessState
		}
	}
	st := p.state.Sys().(syscall.WaitStatus)
	p.mu.Unlock()
	// KillMode=control-group: whatever the server left in its group goes too.
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	exit := fmt.Sprintf("code=exited, status=%d", st.ExitStatus())
	if st.Signaled() {
		exit = fmt.Sprintf("code=killed, status=%d/%s", int(st.Signal()), strings.ToUpper(strings.TrimPrefix(unixSignalName(st.Signal()), "SIG")))
	}
	p.log("Main process exited, " + exit)
	close(p.exited)
}

// poll takes the lines logged since the last poll, then the state.
func (p *localProc) poll(ctx context.Context) (State, []string, error) {
	p.mu.Lock()
	lines := p.pending
	p.pending = nil
	p.mu.Unlock()
	return p.currentState(), lines, nil
}

// follow: every line already wakes readiness polling (see log); no watcher.
func (p *localProc) follow(ctx context.Context, wake func()) (func(), <-chan struct{}) {
	return func() {}, nil
}

// sendStop sends SIGTERM to the process group, then SIGKILL after the stop timeout.
func (p *localProc) sendStop(ctx context.Context) error {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	if p.kill {
		if err := syscall.Kill(-p.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
	if err := syscall.Kill(-p.pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	go func() {
		select {
		case <-p.exited:
		case <-p.clock.After(p.stopTimeout):
			p.log("State 'stop-sigterm' timed out. Killing.")
			p.mu.Lock()
			p.timedOut = true
			p.mu.Unlock()
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	}()
	return nil
}

func (p *localProc) afterStop(ctx context.Context) {}

// gpuFree waits (bounded) until no compute process holds a GPU the launch runs on; a machine
// without nvidia-smi has nothing to wait for.
func (l *Local) gpuFree(ctx context.Context, ln Launch) error {
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil
	}
	wait := cmp.Or(ln.GPUWait, l.o.GPUWait, defaults.GPUWait)
	return waitGPUs(ctx, l.o.Clock, func(ctx context.Context) (string, bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// The same query as over SSH, run by a shell for its two commands.
		out, err := exec.CommandContext(cctx, "/bin/sh", "-c", strings.ReplaceAll(gpuQuery, "nvidia-smi", ShellQuote(smi))).Output()
		if err != nil {
			return "", false, fmt.Errorf("nvidia-smi: %w", err)
		}
		return string(out), false, nil
	}, gpuSet(ln), wait, gpuPoll)
}

func unixSignalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	}
	return s.String()
}

// Restore implements Host: the child is stopped (nothing else was changed).
func (l *Local) Restore(ctx context.Context) error {
	l.mu.Lock()
	p := l.current
	l.current = nil
	l.mu.Unlock()
	if p == nil {
		return nil
	}
	_, err := p.Stop(ctx, nil)
	return err
}

// resolveCommand makes a local relative command absolute: a path with a slash is taken from dir
// (the spec file's folder; "" the working directory), a bare name from $PATH (as a shell would).
func resolveCommand(cmd, dir string) (string, error) {
	if strings.Contains(cmd, "/") {
		if dir != "" && !filepath.IsAbs(cmd) {
			cmd = filepath.Join(dir, cmd)
		}
		abs, err := filepath.Abs(cmd)
		if err != nil {
			return "", fmt.Errorf("command %q: %w", cmd, err)
		}
		return abs, nil
	}
	p, err := exec.LookPath(cmd)
	if err != nil {
		return "", fmt.Errorf("command %q not found in PATH: %w", cmd, err)
	}
	return filepath.Abs(p)
}

// CheckLocalCommand says whether the local driver could start cmd on this machine: it resolves as
// Start does (a path with a slash from dir, the spec file's folder; a bare name from $PATH) and must
// be an executable regular file. validate and plan call it, so a missing program is named before a
// sweep starts rather than as every point's launch_failed.
func CheckLocalCommand(cmd, dir string) error {
	abs, err := resolveCommand(cmd, dir)
	if err != nil {
		return err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("command %q (%s): %w", cmd, abs, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("command %q: %s is a directory", cmd, abs)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("command %q: %s is not executable", cmd, abs)
	}
	return nil
}

// Provenance implements Host.
func (l *Local) Provenance(ctx context.Context) (Provenance, error) {
	p := Provenance{Driver: sweep.DriverLocal}
	p.Hostname, _ = os.Hostname()
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		b := make([]byte, 0, len(u.Release))
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		p.Kernel = string(b)
	}
	if path, err := exec.LookPath("nvidia-smi"); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, _ := exec.CommandContext(cctx, path, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits").Output()
		cancel()
		for _, line := range strings.Split(string(out), "\n") {
			if g, ok := parseGPU(line); ok {
				p.GPUs = append(p.GPUs, g)
			}
		}
	}
	l.mu.Lock()
	cur := l.current
	l.mu.Unlock()
	if cur != nil {
		p.Argv = cur.launch.Argv
		p.EngineVer = cur.engineVersion(ctx)
	}
	return p, nil
}

// MaxLogLine is how much of one line of server output is kept (as evidence,
// in Logs and in the log file): --log-requests prints whole prompts.
const MaxLogLine = 64 << 10

// readLines calls fn with every line of r, without its newline, cut to
// limit bytes (and marked so). It reads every line to its end whatever its length:
// a reader that stopped would fill the pipe and block the server in write().
func readLines(r io.Reader, limit int, fn func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	dropped := 0
	for {
		frag, err := br.ReadSlice('\n')
		eol := len(frag) > 0 && frag[len(frag)-1] == '\n'
		if eol {
			frag = frag[:len(frag)-1]
		}
		keep := max(0, min(len(frag), limit-len(line)))
		line = append(line, frag[:keep]...)
		dropped += len(frag) - keep
		if err == bufio.ErrBufferFull {
			continue
		}
		if eol || len(line) > 0 || dropped > 0 {
			s := string(line)
			if dropped > 0 {
				s = trimCutRune(s) + fmt.Sprintf(" [line cut: %d more bytes]", dropped)
			}
			fn(s)
		}
		line, dropped = line[:0], 0
		if err != nil {
			return
		}
	}
}

// trimCutRune drops a rune cut in half at the end of s.
func trimCutRune(s string) string {
	for i := 0; i < utf8.UTFMax-1 && s != ""; i++ {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// resolveLocal makes a local launch's relative command absolute against dir (a child process may
// be given one, systemd may not: resolved once, here) and checks the launch.
func resolveLocal(ln Launch, dir string) (Launch, error) {
	ln = ln.withDefaults()
	if len(ln.Argv) > 0 && !filepath.IsAbs(ln.Argv[0]) {
		argv := append([]string(nil), ln.Argv...)
		var err error
		if argv[0], err = resolveCommand(argv[0], dir); err != nil {
			return ln, &Failure{Class: ClassLaunchFailed, Detail: "cannot start the server: " + err.Error(), Err: err}
		}
		ln.Argv = argv
	}
	if err := ln.Validate(); err != nil {
		return ln, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
	}
	return ln, nil
}
