// Package hostctl drives the SGLang server of one GPU host: over SSH/SFTP and
// systemd for a remote host (driver "ssh"), as a child process of specsweep
// (driver "local"), or as a job of a Slurm cluster (driver "slurm"), behind
// one interface; Open (open.go) makes a spec's host into its Driver.
//
// A remote launch never edits the operator's unit: it writes a drop-in
// (/etc/systemd/system/<unit>.d/50-specsweep.conf), reloads systemd and
// (re)starts the unit; Restore deletes the drop-in and leaves the unit as the
// operator had it, guided by a marker file that survives a crash of
// specsweep. Readiness is polled with a bounded backoff while the unit state
// and the journal lines of THIS invocation are checked at every step, so a
// dead server is classified (bad_args, oom, ...) within about a second, with
// the log lines that show why. An ssh host can also make a launch its server
// durably (Applier, apply.go: a persistent 40-specsweep-applied.conf drop-in,
// with a rollback record). docs/hostctl.md is the user reference.
package hostctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/internal/defaults"
)

// Host drives the server of one machine. Methods are safe for use by one
// goroutine at a time per Host (the orchestrator runs one worker per host),
// except Close, which may be called at any time.
type Host interface {
	// Name is the host's name in the spec.
	Name() string
	// Start stops a previous instance if one still runs, installs the launch
	// (drop-in + daemon-reload for ssh) and starts a new instance. It returns
	// once the process was started: readiness is the Instance's WaitReady.
	Start(ctx context.Context, l Launch) (Instance, error)
	// Restore puts the machine back as it was before the first Start: the
	// drop-in removed, the unit running again if it ran before, stopped
	// otherwise. Idempotent; a no-op when nothing was changed.
	Restore(ctx context.Context) error
	// Provenance describes the machine (hostname, kernel, GPUs, unit hashes).
	Provenance(ctx context.Context) (Provenance, error)
	// Close releases connections; it does not stop or restore anything.
	Close() error
}

// Instance is one started server process (one systemd invocation).
type Instance interface {
	// ID identifies the instance: the systemd InvocationID, or "local-PID".
	ID() string
	// WaitReady polls until the server answers /health and a one-token
	// generation, fails (a *Failure), or ReadyTimeout passes (ready_timeout).
	WaitReady(ctx context.Context) (Ready, error)
	// Check reports a failure of an instance that was ready (crash during the
	// load test, OOM, restart loop), or nil while it runs.
	Check(ctx context.Context) (*Failure, error)
	// State is the current unit (or process) state.
	State(ctx context.Context) (State, error)
	// Logs returns the log lines of this instance so far (at most the last 10000).
	Logs(ctx context.Context) ([]string, error)
	// Stop sends SIGTERM (systemctl stop --no-block) and follows the stop,
	// reporting each observed state to progress (may be nil), until the
	// process is gone. A clean drain ending in SGLang's self-SIGKILL is a
	// clean stop; systemd's stop timeout gives a StopResult with
	// Class == ClassStopTimeoutSIGKILL.
	Stop(ctx context.Context, progress func(State)) (StopResult, error)
	// HTTPClient reaches the server port (through the SSH connection for a
	// remote host, so servers bound to 127.0.0.1 work); BaseURL is the URL
	// to use with it. Do not drive a load test through it: use Address.
	HTTPClient() *http.Client
	BaseURL() string
	// Address is host:port of the server as reachable directly from here
	// (for the load generator), when the server listens on a non-loopback
	// address of a remote host or locally; "" when only the tunnel works.
	Address() string
	// LogMark is the position of the instance's log now, LogsSince the lines
	// logged after a mark (a load level's, for its accept length: they
	// satisfy workload.ServerLog); an error where the driver does not offer
	// its log as a sequence while the server runs (a Slurm job).
	LogMark(ctx context.Context) (int, error)
	LogsSince(ctx context.Context, mark int) ([]string, error)
	// HostLost reports an error when the machine the server ran on is gone,
	// not only the server: a Slurm job's node (the cluster notices a lost node
	// only after its own timeout, and the login node is still there). nil when
	// it is there, or when the driver's own errors already say so (SSH).
	HostLost(ctx context.Context) error
}

// Launch is what one point runs.
type Launch struct {
	Argv         []string          // absolute command path first
	Env          map[string]string // server and method environment
	Port         int               // the server port (default defaults.Port, 30000)
	ReadyTimeout time.Duration     // default 20m
	StopTimeout  time.Duration     // TimeoutStopSec (default 90s)
	GPUWait      time.Duration     // how long to wait for the launch's GPUs to be free (default: the host's)
	// Tag names the point for a driver that must find it again (a Slurm job's name): the orchestrator
	// sets the point id.
	Tag string
	// Files are written on the host before the server starts (a point's config files, such as SGLang's
	// --speculative-adaptive-config): each path absolute and clean, mode 0644, replaced atomically.
	Files []File
	// HealthOnly: readiness is /health answering 200, without a generation or the server's info:
	// a rank >= 1 of a point that spans nodes serves SGLang's dummy health server only
	// (python/sglang/srt/entrypoints/engine.py _launch_subprocesses).
	HealthOnly bool
	// JoinTimeout bounds the rendezvous of a point that spans nodes (default defaults.JoinTimeout).
	JoinTimeout time.Duration
	// Kill: the server's stop sends SIGKILL to every process of it at once, not SIGTERM and the
	// drain (the spec's server.stop, kill by default for a sweep's own server, whose load has ended
	// when it stops: SGLang's SIGTERM path only waits for its watchdog's next 5-second tick and then
	// SIGKILLs its own process tree; docs/hostctl.md, "Stop"). A unit's
	// KillSignal=SIGKILL (so a Restart= policy never fires), the local process group's SIGKILL, a
	// Slurm job's server step SIGKILLed with scancel (docs/slurm.md, "Killed at the stop").
	Kill bool
}

// File is a file a launch writes on its host.
type File struct {
	Path string // absolute, clean (filepath.Clean(p) == p), no newline or NUL
	Data []byte
}

// Bounds of a launch's files: they are small config files, and the Slurm driver carries them in the
// batch script (base64), which the cluster bounds too (max_script_size, 4 MiB by default).
const (
	MaxFiles    = 16
	MaxFileSize = 1 << 20
)

// check refuses a path that is not a plain absolute file name: a relative path would depend on
// the server's working directory, and an unclean one (a/../b) could name something else than it
// reads as.
func (f File) check() error {
	switch {
	case strings.ContainsAny(f.Path, "\n\r\x00"):
		return fmt.Errorf("file %q: the path holds a newline or NUL", f.Path)
	case !filepath.IsAbs(f.Path):
		return fmt.Errorf("file %q: an absolute path is required", f.Path)
	case filepath.Clean(f.Path) != f.Path:
		return fmt.Errorf("file %q: the path is not clean (want %q)", f.Path, filepath.Clean(f.Path))
	case f.Path == "/":
		return errors.New("file \"/\": the path names no file")
	case len(f.Data) > MaxFileSize:
		return fmt.Errorf("file %q: %d bytes, more than %d", f.Path, len(f.Data), MaxFileSize)
	}
	return nil
}

// checkFiles checks every file and that no path is written twice.
func checkFiles(files []File) error {
	if len(files) > MaxFiles {
		return fmt.Errorf("%d files, more than %d", len(files), MaxFiles)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if err := f.check(); err != nil {
			return err
		}
		if seen[f.Path] {
			return fmt.Errorf("file %q is given twice", f.Path)
		}
		seen[f.Path] = true
	}
	return nil
}

// filesFailed is a Start's error when the launch's files could not be written: host trouble when
// the connection broke, else the point's launch_failed (the host refused the write: a read-only
// or unwritable directory, a full disk), since no server could start with its inputs missing.
func filesFailed(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if isUnreachable(err) {
		return unreachable(err, State{})
	}
	return &Failure{Class: ClassLaunchFailed, Detail: "cannot write the launch's files: " + err.Error(), Err: err}
}

func (l Launch) withDefaults() Launch {
	if l.Port == 0 {
		l.Port = argvPort(l.Argv)
	}
	if l.Port == 0 {
		l.Port = defaults.Port
	}
	if l.ReadyTimeout == 0 {
		l.ReadyTimeout = defaults.ReadyTimeout
	}
	if l.StopTimeout == 0 {
		l.StopTimeout = defaults.StopTimeout
	}
	if l.JoinTimeout == 0 {
		l.JoinTimeout = defaults.JoinTimeout
	}
	return l
}

// checkUnitName refuses unit names that could be read as something else on
// a command line: an option (a leading -), a path, or several words.
func checkUnitName(u string) error {
	switch {
	case u == "":
		return errors.New("empty unit name")
	case strings.HasPrefix(u, "-"):
		return fmt.Errorf("bad unit name %q: it may not start with -", u)
	case strings.ContainsAny(u, "/\\\n\r\x00 \t") || !utf8.ValidString(u):
		return fmt.Errorf("bad unit name %q: no /, \\, whitespace or NUL", u)
	}
	return nil
}

// Validate checks what a drop-in or a child process needs.
func (l Launch) Validate() error {
	if len(l.Argv) == 0 {
		return errors.New("empty command")
	}
	if !strings.HasPrefix(l.Argv[0], "/") {
		return fmt.Errorf("command %q: an absolute path is required", l.Argv[0])
	}
	for _, a := range l.Argv {
		if strings.ContainsAny(a, "\n\r\x00") {
			return fmt.Errorf("argument %q holds a newline or NUL", a)
		}
		if !utf8.ValidString(a) {
			return fmt.Errorf("argument %q is not valid UTF-8", a)
		}
	}
	if p := argvPort(l.Argv); p != 0 && l.Port != 0 && p != l.Port {
		return fmt.Errorf("the command listens on --port %d but the launch's port is %d", p, l.Port)
	}
	for k, v := range l.Env {
		if !envName(k) {
			return fmt.Errorf("bad environment variable name %q (want [A-Za-z_][A-Za-z0-9_]*)", k)
		}
		if strings.ContainsAny(v, "\n\r\x00") {
			return fmt.Errorf("environment %s holds a newline or NUL", k)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("environment %s is not valid UTF-8", k)
		}
	}
	return checkFiles(l.Files)
}

// argvPort is the port of the last --port in argv (or an abbreviation of it, as argparse reads it), or 0.
func argvPort(argv []string) int {
	v, ok := argparse.Last(argv, argparse.Port)
	if !ok {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n < 65536 {
		return n
	}
	return 0
}

// State is a unit's (or a local child's) state, systemctl show's names.
type State struct {
	ActiveState    string // active, activating, deactivating, inactive, failed
	SubState       string // running, dead, failed, auto-restart, stop-sigterm, ...
	Result         string // success, exit-code, signal, timeout, core-dump, ...
	ExecMainCode   int    // CLD_*: 1 exited, 2 killed, 3 dumped
	ExecMainStatus int    // exit status or signal number
	MainPID        int
	ExecMainPID    int // the main process's PID, kept after it exited
	NRestarts      int
	InvocationID   string
	LoadState      string // loaded, not-found, ...
	UnitFileState  string // enabled, disabled, static, ...
	ActiveEnter    time.Time
	InactiveEnter  time.Time
	ExecMainStart  time.Time
	ExecMainExit   time.Time
	At             time.Time // when the state was read
}

// Codes of ExecMainCode (siginfo CLD_*).
const (
	CodeExited = 1
	CodeKilled = 2
	CodeDumped = 3
)

// Running reports whether the process is up (or starting or stopping).
func (s State) Running() bool {
	switch s.ActiveState {
	case "active", "activating", "deactivating", "reloading":
		return s.SubState != "auto-restart"
	}
	return false
}

// Exit renders how the main process ended, systemd-style.
func (s State) Exit() string {
	switch s.ExecMainCode {
	case CodeExited:
		return fmt.Sprintf("code=exited, status=%d", s.ExecMainStatus)
	case CodeKilled:
		return fmt.Sprintf("code=killed, status=%d", s.ExecMainStatus)
	case CodeDumped:
		return fmt.Sprintf("code=dumped, status=%d", s.ExecMainStatus)
	}
	return ""
}

// Class is a failure class (the store's point_summary.failure_class).
type Class string

// Failure classes.
const (
	ClassBadArgs            Class = "bad_args"
	ClassOOM                Class = "oom"
	ClassCrashDuringStart   Class = "crash_during_start"
	ClassCrashDuringLoad    Class = "crash_during_load"
	ClassStopTimeoutSIGKILL Class = "stop_timeout_sigkill"
	ClassRestartLoop        Class = "restart_loop"
	ClassReadyTimeout       Class = "ready_timeout"
	ClassHostUnreachable    Class = "host_unreachable"
	ClassGPUBusy            Class = "gpu_busy"
	// ClassLaunchFailed: the server's program could not be started at all (missing, not
	// executable, not in PATH: systemd's 203/EXEC, a child's fork/exec error), so no SGLang ran.
	ClassLaunchFailed Class = "launch_failed"
)

// Failure is a classified failure with its evidence.
type Failure struct {
	Class    Class
	Detail   string   // one line: what happened
	Evidence []string // the log lines that show it
	State    State    // the unit state when it was classified
	Err      error    // an underlying error (host_unreachable)
}

func (f *Failure) Error() string {
	s := string(f.Class) + ": " + f.Detail
	if len(f.Evidence) > 0 {
		s += " (" + f.Evidence[len(f.Evidence)-1] + ")"
	}
	return s
}

func (f *Failure) Unwrap() error { return f.Err }

// AsFailure returns err's *Failure, if any.
func AsFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}

// Ready describes a server that answered its readiness probes.
type Ready struct {
	At         time.Time     // when hostctl saw the server ready
	StartedAt  time.Time     // when Start returned
	Probes     int           // readiness probes sent
	ServerInfo []byte        // the /get_server_info body (effective arguments, version)
	Elapsed    time.Duration // At - StartedAt
}

// StopResult is how a stop went.
type StopResult struct {
	Duration time.Duration
	Final    State
	Clean    bool     // drained and exited (a self-SIGKILL after a clean drain included)
	SIGKILL  bool     // the process ended by SIGKILL (its own or systemd's)
	Class    Class    // ClassStopTimeoutSIGKILL when systemd's stop timeout killed it, else ""
	Evidence []string // the journal lines of the stop
	Already  bool     // nothing was running
}

// Provenance records where a point ran.
type Provenance struct {
	Hostname     string   `json:"hostname"`
	Kernel       string   `json:"kernel"`
	GPUs         []GPU    `json:"gpus,omitempty"`
	Driver       string   `json:"driver"`
	Unit         string   `json:"unit,omitempty"`
	UnitHash     string   `json:"unit_sha256,omitempty"`
	DropInHash   string   `json:"dropin_sha256,omitempty"` // of the drop-in followed by its launch script (ssh)
	ExecStart    string   `json:"exec_start,omitempty"`
	Argv         []string `json:"argv,omitempty"`
	SystemdVer   string   `json:"systemd,omitempty"`
	EngineVer    string   `json:"engine_version,omitempty"`
	SlurmJob     string   `json:"slurm_job,omitempty"`     // the point's job id (driver slurm)
	SlurmGPUs    string   `json:"slurm_gpus,omitempty"`    // the job's GPUs as scontrol shows them
	SlurmVersion string   `json:"slurm_version,omitempty"` // scontrol --version
	// SlurmQueued is how long the job waited in the queue (StartTime - SubmitTime), in seconds.
	SlurmQueued  *float64 `json:"slurm_queued_s,omitempty"`
	CollectedErr string   `json:"error,omitempty"`
	// DistInit and Ranks: a point that spans nodes (a host group): its --dist-init-addr and every
	// rank's node, rank 0 first.
	DistInit string           `json:"dist_init_addr,omitempty"`
	Ranks    []RankProvenance `json:"ranks,omitempty"`
}

// RankProvenance is where one rank of a point that spans nodes ran.
type RankProvenance struct {
	Rank      int      `json:"rank"`
	Node      string   `json:"node"`
	Address   string   `json:"address"`
	Hostname  string   `json:"hostname"`
	GPUs      []GPU    `json:"gpus,omitempty"`
	EngineVer string   `json:"engine_version,omitempty"`
	Argv      []string `json:"argv,omitempty"`
	// Transport is the network NCCL says it uses between nodes ("IB: [0]mlx5_0:1/IB"), from the
	// rank's log; "" when NCCL_DEBUG=INFO was not set.
	Transport    string `json:"nccl_transport,omitempty"`
	CollectedErr string `json:"error,omitempty"`
}

// GPU is one nvidia-smi row.
type GPU struct {
	Name     string `json:"name"`
	Driver   string `json:"driver"`
	MemoryMB int    `json:"memory_mb"`
}
