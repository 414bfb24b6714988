package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/internal/defaults"
	"strconv"
	"strings"
	"time"
)

// Defaults applied by Parse to keys a spec leaves out.
const (
	DefaultUnit           = defaults.Unit
	DefaultDriver         = DriverSSH
	DefaultAPI            = APIChat
	DefaultRepeats        = 1
	DefaultWarmupRequests = 4
	DefaultPort           = defaults.Port
	DefaultReadyTimeout   = defaults.ReadyTimeout
	DefaultStopTimeout    = defaults.StopTimeout
	DefaultSeed           = 1
	DefaultDataset        = "random"
	DefaultGPUs           = 1

	// Defaults of a search block (docs/spec.md, "search").
	DefaultStrategy = StrategyClimb
	DefaultMinGain  = 0.02
	DefaultPatience = 1
)

// Accepted values of Host.Driver and Workload.API.
const (
	DriverSSH   = "ssh"
	DriverLocal = "local"
	DriverSlurm = "slurm"

	APIChat        = "chat"
	APICompletions = "completions"

	StrategyGrid  = "grid"
	StrategyClimb = "climb"
)

// Spec is a parsed, defaulted and validated sweep spec.
type Spec struct {
	Version  int               `json:"version"`
	Name     string            `json:"name"`
	Hosts    []Host            `json:"hosts"`
	Server   Server            `json:"server"`
	Methods  map[string]Method `json:"methods"`
	Matrix   Matrix            `json:"matrix"`
	Workload Workload          `json:"workload"`
	Schedule *Schedule         `json:"schedule,omitempty"`
	// Search, when set, decides which planned points run (nil: every point, the full grid; a nil
	// search is left out of the hash so specs written before it keep theirs).
	Search *Search `json:"search,omitempty"`
	// Watch, when set, makes this sweep a watch of a configuration `specsweep apply` deployed
	// (issue 29; docs/spec.md "watch"): its `applied` method is held to another sweep's figures.
	// Nil is left out of the hash.
	Watch *Watch `json:"watch,omitempty"`

	// File is the name the spec was parsed under (used in error messages).
	File string `json:"-"`
	// Source is the spec text exactly as read, for storing with a sweep.
	Source []byte `json:"-"`
	// Warnings are what Parse found valid but likely not meant (an option given twice), each
	// "warning: ..." at its position; not part of the hash.
	Warnings ErrorList `json:"-"`
}

// Host is one GPU machine a sweep may use.
type Host struct {
	Name         string `json:"name"`
	Address      string `json:"address,omitempty"` // host[:port]; empty for driver local
	User         string `json:"user,omitempty"`
	IdentityFile string `json:"identity_file,omitempty"`
	KnownHosts   string `json:"known_hosts,omitempty"`
	// CreateUnit lets specsweep install a managed unit when the host has none (removed at restore).
	CreateUnit bool `json:"create_unit,omitempty"`
	// DBus says how an ssh host's unit is driven: through systemd's D-Bus API over the SSH
	// connection (true), with systemctl processes on the host (false), or nil: D-Bus for a root
	// login that reaches the bus, else systemctl (docs/spec.md, hosts[].dbus).
	DBus *bool `json:"dbus,omitempty"`
	// Pack runs several points at once on disjoint GPU sets (docs/spec.md, hosts[].pack).
	Pack   bool   `json:"pack,omitempty"`
	Unit   string `json:"unit"`
	Driver string `json:"driver"`
	GPUs   int    `json:"gpus"`
	// Slurm is a driver: slurm host's cluster settings (docs/slurm.md); nil for the others.
	Slurm *Slurm `json:"slurm,omitempty"`
	// Nodes make the host a group of machines of GPUs each, in rank order (docs/spec.md,
	// hosts[].nodes): a point whose tp exceeds GPUs spans tp/GPUs of them. Empty for one machine.
	Nodes []Node `json:"nodes,omitempty"`
	// DistInitPort is the port of --dist-init-addr on rank 0's node (0: a free one at start).
	DistInitPort int `json:"dist_init_port,omitempty"`
}

// Node is one machine of a host group, with its own SSH settings (those of the group where it
// gives none).
type Node struct {
	Name         string `json:"name"`
	Address      string `json:"address"`
	User         string `json:"user,omitempty"`
	IdentityFile string `json:"identity_file,omitempty"`
	KnownHosts   string `json:"known_hosts,omitempty"`
}

// Slurm is how a cluster runs points as jobs (docs/slurm.md).
type Slurm struct {
	Partition string `json:"partition,omitempty"`
	Account   string `json:"account,omitempty"`
	// TimeLimit is each job's --time (0: the partition's default).
	TimeLimit time.Duration `json:"time_limit,omitempty"`
	// MaxJobs is how many points are in flight at once on the cluster (each its own job).
	MaxJobs    int      `json:"max_jobs"`
	SbatchArgs []string `json:"sbatch_args,omitempty"`
	// MaxNodes is how many nodes one job may take: a point whose tp exceeds the host's gpus (per
	// node) runs as one job over tp/gpus nodes, one rank each (docs/slurm.md).
	MaxNodes int `json:"max_nodes,omitempty"`
	// OutputDir holds the jobs' output files: a directory the login node and the compute nodes share.
	OutputDir string `json:"output_dir"`
}

// Defaults of a slurm block.
const (
	DefaultMaxJobs   = 1
	DefaultOutputDir = "specsweep-jobs" // relative: under the login user's home
)

// Fits reports whether a point with tensor parallelism tp can run on one node of h.
func (h Host) Fits(tp int) bool { return tp <= h.GPUs }

// NodeCount is how many machines one point may span on h: a group's nodes, a cluster's
// max_nodes, else 1.
func (h Host) NodeCount() int {
	switch {
	case len(h.Nodes) > 0:
		return len(h.Nodes)
	case h.Slurm != nil && h.Slurm.MaxNodes > 1:
		return h.Slurm.MaxNodes
	}
	return 1
}

// Span is how many nodes of h a point with tensor parallelism tp takes: 1 when it fits one,
// tp/gpus when tp is a whole number of nodes that h has (SGLang splits tp evenly over
// --nnodes), 0 when h cannot run it.
func (h Host) Span(tp int) int {
	switch {
	case tp <= 0 || h.GPUs <= 0:
		return 0
	case tp <= h.GPUs:
		return 1
	case tp%h.GPUs == 0 && tp/h.GPUs <= h.NodeCount():
		return tp / h.GPUs
	}
	return 0
}

// Server is the SGLang launch common to every point.
type Server struct {
	Command      []string          `json:"command"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env,omitempty"`
	Port         int               `json:"port"`
	ReadyTimeout time.Duration     `json:"ready_timeout"`
	StopTimeout  time.Duration     `json:"stop_timeout"`
	// GPUWait is how long a start waits for its GPUs to be free; 0 (not in the spec, and left out
	// of the stored JSON so a spec's hash is as before) is hostctl's default, defaults.GPUWait.
	GPUWait time.Duration `json:"gpu_wait,omitzero"`
	// JoinTimeout bounds the rendezvous of a point that spans nodes; 0 (left out of the stored JSON:
	// hashes as before) is hostctl's default, defaults.JoinTimeout.
	JoinTimeout time.Duration `json:"join_timeout,omitzero"`
	// Stop is how a point's server ends: "" (server.stop: kill, the default; left out of the stored
	// JSON, so a spec's hash is as before) is SIGKILL to all of its processes at once, StopDrain
	// SIGTERM and the server's own drain (docs/spec.md).
	Stop string `json:"stop,omitempty"`
}

// server.stop's values. Kill is the default: a point's server is stopped once its load has ended,
// with nothing in flight, and SGLang's SIGTERM path only waits for its watchdog's next 5-second tick
// before it SIGKILLs its own process tree (docs/spec.md cites the source).
const (
	StopKill  = "kill"
	StopDrain = "drain"
)

// KillAtStop reports whether a point's server is killed at its stop (server.stop: kill).
func (s Server) KillAtStop() bool { return s.Stop != StopDrain }

// Method is a named set of extra server arguments (and environment).
type Method struct {
	Name string            `json:"name"`
	Args []string          `json:"args"`
	Env  map[string]string `json:"env,omitempty"`
	// NumSteps, TopK and NumDraftTokens, when given, replace the matrix's lists for this method's
	// points (a method that needs its own steps: an adaptive server must start at one of its
	// candidates). Left out of the hash when empty, so specs written before them keep theirs.
	NumSteps       []int         `json:"num_steps,omitempty"`
	TopK           []int         `json:"topk,omitempty"`
	NumDraftTokens []DraftTokens `json:"num_draft_tokens,omitempty"`
	// Files are written on the host before each of the method's points starts (a config file
	// its args name, such as SGLang's --speculative-adaptive-config).
	Files []File `json:"files,omitempty"`
}

// File is a file a method's points write on their host before the server starts.
type File struct {
	Path    string `json:"path"` // absolute, clean
	Content string `json:"content"`
}

// MatrixOf is the matrix the method's points expand: the spec's, with the lists the method
// gives itself in place of the matrix's.
func (s *Spec) MatrixOf(m Method) Matrix {
	mx := s.Matrix
	if m.NumSteps != nil {
		mx.NumSteps = m.NumSteps
	}
	if m.TopK != nil {
		mx.TopK = m.TopK
	}
	if m.NumDraftTokens != nil {
		mx.NumDraftTokens = m.NumDraftTokens
	}
	return mx
}

// Baseline reports whether the method runs without speculative decoding
// (its args carry no --speculative-algorithm).
func (m Method) Baseline() bool { return m.Algorithm() == "" }

// Algorithm returns the value of --speculative-algorithm in the method's args
// as SGLang's argparse reads it (the last occurrence, abbreviations taken), or
// "" for a baseline.
func (m Method) Algorithm() string {
	if v, ok := argparse.Last(m.Args, flagAlgorithm); ok {
		return v
	}
	if argparse.Has(m.Args, flagAlgorithm) {
		return "?" // a dangling flag still makes a speculative method; validation reports it
	}
	return ""
}

// Matrix lists the values to sweep; points are its cross product.
type Matrix struct {
	Methods        []string      `json:"method"`
	NumSteps       []int         `json:"num_steps,omitempty"`
	TopK           []int         `json:"topk,omitempty"`
	NumDraftTokens []DraftTokens `json:"num_draft_tokens,omitempty"`
	TP             []int         `json:"tp"`
}

// DraftTokens is one value of matrix.num_draft_tokens: a number or "auto"
// (num_steps+1, valid with topk=1 only).
type DraftTokens struct {
	Auto bool
	N    int
}

// String returns "auto" or the number.
func (d DraftTokens) String() string {
	if d.Auto {
		return "auto"
	}
	return strconv.Itoa(d.N)
}

// MarshalJSON encodes "auto" as a string and a number as a number.
func (d DraftTokens) MarshalJSON() ([]byte, error) {
	if d.Auto {
		return []byte(`"auto"`), nil
	}
	return []byte(strconv.Itoa(d.N)), nil
}

// Workload is the load run against every point.
type Workload struct {
	API            string `json:"api"`
	Concurrency    []int  `json:"concurrency"`
	Requests       int    `json:"requests"`
	WarmupRequests int    `json:"warmup_requests"`
	// InputTokens is the random prompts' length; when input_tokens is written as a list it is the
	// list's first value and InputLengths holds the list (the context-length axis, Cells).
	InputTokens  int    `json:"input_tokens"`
	InputLengths []int  `json:"input_lengths,omitempty"`
	OutputTokens int    `json:"output_tokens"`
	Dataset      string `json:"dataset"`
	// Phases, when given, are the load instead of levels: each concurrency held for a time
	// (workload.phases); Concurrency then lists their concurrencies, in order of first use.
	Phases []Phase `json:"phases,omitempty"`
	// Datasets are the prompt sets measured instead of random prompts (workload.datasets).
	Datasets []PromptSetRef `json:"datasets,omitempty"`
	Repeats  int            `json:"repeats"`
	Seed     int64          `json:"seed"`
	// Temperature is every request's sampling temperature (0, greedy, by default; omitted from the
	// hash when 0 so specs written before it keep theirs).
	Temperature float64 `json:"temperature,omitempty"`
	// OutputCheck is the lossless check of every point's outputs against the baseline's
	// (docs/spec.md, "output_check"); omitted from the hash when it is the default.
	OutputCheck OutputCheck `json:"output_check,omitzero"`
	// Precision, when given, ends each level once its figure's confidence interval is within the
	// target (workload.precision); Requests is then the cap. Nil: a fixed count (omitted from the
	// hash, so specs written before it keep theirs).
	Precision *Precision `json:"precision,omitempty"`
}

// Figures a precision target can name (workload.precision): a level's output tok/s, or its mean
// TTFT or TPOT.
const (
	PrecisionOutputTokS = "output_tok_s"
	PrecisionTTFT       = "ttft_ms"
	PrecisionTPOT       = "tpot_ms"
)

// DefaultConfidence is workload.precision.confidence when the spec leaves it out.
const DefaultConfidence = 0.95

// Precision is workload.precision: a level runs until the confidence interval of Metric (batch
// means over the steady-state window, docs/bench.md) is within Target of its value, after at least
// MinRequests measured requests and at most the workload's requests (docs/spec.md).
type Precision struct {
	Metric      string  `json:"metric"`
	Target      float64 `json:"target"` // relative half-width, 0.02 for ±2%
	Confidence  float64 `json:"confidence"`
	MinRequests int     `json:"min_requests,omitempty"` // 0: the load generator's default
}

// Words say the rule for people: "levels end when output tok/s is known to ±2% (95% confidence),
// at most 2000 requests", with the level's cap.
func (p Precision) Words(maxRequests int) string {
	what := map[string]string{PrecisionOutputTokS: "output tok/s", PrecisionTTFT: "mean TTFT", PrecisionTPOT: "mean TPOT"}[p.Metric]
	s := fmt.Sprintf("levels end when %s is known to ±%s (%s confidence)", what, pct(p.Target), pct(p.Confidence))
	if p.MinRequests > 0 {
		s += fmt.Sprintf(", after at least %d requests", p.MinRequests)
	}
	return s + fmt.Sprintf(", at most %d requests", maxRequests)
}

// pct writes a fraction as a percentage without trailing zeros: 0.02 -> "2%", 0.975 -> "97.5%".
func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', -1, 64) + "%" }

// Defaults of workload.output_check.
const (
	DefaultCheckPrompts   = 8
	DefaultCheckMaxTokens = 64
)

// DefaultOutputCheck is the check a spec gets when it says nothing: on, 8 prompts of 64 tokens.
var DefaultOutputCheck = OutputCheck{Enabled: true, Prompts: DefaultCheckPrompts, MaxTokens: DefaultCheckMaxTokens}

// OutputCheck is workload.output_check: fixed seeded prompts answered greedily by every point
// before its load, compared with the baseline's answers at the same tp.
type OutputCheck struct {
	Enabled   bool `json:"enabled"`
	Prompts   int  `json:"prompts"`
	MaxTokens int  `json:"max_tokens"`
	// FailOnMismatch fails a mismatching point (class output_mismatch) instead of only flagging it.
	FailOnMismatch bool `json:"fail_on_mismatch,omitempty"`
}

// IsZero reports whether c is the default, so the hash of a spec that leaves it out (or writes
// the default) is the hash it had before the check existed.
func (c OutputCheck) IsZero() bool { return c == DefaultOutputCheck }

// DatasetPath returns PATH of a "sharegpt:PATH" dataset, or "".
func (w Workload) DatasetPath() string {
	p, _ := strings.CutPrefix(w.Dataset, "sharegpt:")
	if p == w.Dataset {
		return ""
	}
	return p
}

// Schedule makes a submitted sweep recur, and/or keeps its points inside a quiet window.
type Schedule struct {
	Cron string `json:"cron,omitempty"` // standard 5 fields, UTC unless prefixed CRON_TZ=Zone
	// Window, "HH:MM-HH:MM" in UTC, is when new points may start (a running point finishes);
	// it may wrap midnight ("22:00-07:00"). Empty: any time.
	Window string `json:"window,omitempty"`
}

// Search is how a sweep chooses the points it runs (docs/spec.md, "search").
type Search struct {
	Strategy string `json:"strategy"` // StrategyGrid or StrategyClimb
	// MinGain is the relative gain (0.02: 2%) at some concurrency level that makes a step better
	// than the best so far.
	MinGain float64 `json:"min_gain"`
	// Patience is the number of non-improving steps in a row after which a chain stops climbing.
	Patience int `json:"patience"`
	// Probe lists num_steps values always tried once per chain, to catch a second rise.
	Probe []int `json:"probe,omitempty"`
	// Budget caps the points run (0: no cap); past it the best found so far is the answer.
	Budget int `json:"budget,omitempty"`
}

// Climbs reports whether the search climbs (rather than running the whole grid).
func (s *Search) Climbs() bool { return s != nil && s.Strategy == StrategyClimb }

// hashFormat versions the canonical encoding: bump it only together with a
// migration, since stored sweeps are found again by their hash.
const hashFormat = "specsweep/spec/v1"

// Hash returns the spec_hash: hex SHA-256 of a canonical encoding of the
// parsed spec after defaults. Comments, whitespace, key order, quoting and
// writing a default explicitly do not change it; any value that does change
// what runs (including list order, which sets run order) does.
func (s *Spec) Hash() string {
	// encoding/json is canonical enough here: struct fields in declaration
	// order, map keys sorted, floats (the temperature) in their shortest form.
	b, err := json.Marshal(struct {
		Format string `json:"format"`
		Spec   *Spec  `json:"spec"`
	}{hashFormat, s})
	if err != nil {
		// Only unsupported types can fail, and Spec has none.
		panic("sweep: encoding spec for hash: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Watch says what a watch sweep checks: the configuration its method WatchMethod runs against the
// figures of sweep SweepID, level by level.
type Watch struct {
	// SweepID is the sweep the deployment was decided on.
	SweepID int64 `json:"sweep_id"`
	// Host is the spec host whose applied configuration is watched.
	Host string `json:"host"`
	// Reference maps each measured level to the point of that sweep whose figures the applied
	// configuration is held to there (one point for a fixed configuration; an adaptive schedule's
	// slot best at each level).
	Reference map[int]string `json:"reference"`
	// Tolerance is how far below the reference's lowest repeat a figure may fall (default 0.1).
	Tolerance float64 `json:"tolerance"`
}

// WatchMethod is the method of a watch sweep that runs the applied configuration (its baseline is
// the method WatchBaseline).
const (
	WatchMethod   = "applied"
	WatchBaseline = "baseline"
)
