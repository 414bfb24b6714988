package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// FailMode is a parsed SGLANGSIM_FAIL value.
type FailMode struct {
	// Kind is "", "oom", "oom-kv", "oom-weights", "crash-during-load", "exit-during-start", "hang-after",
	// "ignore-sigterm", "slow-drain", "lossy", or for a multi-node launch "never-join", "node-crash",
	// "nccl-init-error".
	Kind     string
	Requests int     // requests, for crash-during-load and hang-after
	Seconds  float64 // for slow-drain and node-crash
	Prob     float64 // for lossy: the probability that an accepted draft token is wrong, in (0, 1]
}

// ParseFail parses SGLANGSIM_FAIL.
func ParseFail(s string) (FailMode, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return FailMode{}, nil
	}
	kind, arg, hasArg := strings.Cut(s, ":")
	f := FailMode{Kind: kind}
	switch kind {
	case "oom", "oom-kv", "oom-weights", "exit-during-start", "ignore-sigterm", "never-join", "nccl-init-error":
		if hasArg {
			return f, fmt.Errorf("SGLANGSIM_FAIL=%s takes no argument", kind)
		}
	case "crash-during-load", "hang-after":
		n, err := strconv.Atoi(arg)
		if !hasArg || err != nil || n < 0 {
			return f, fmt.Errorf("SGLANGSIM_FAIL=%s needs a request count, e.g. %s:10", kind, kind)
		}
		f.Requests = n
	case "slow-drain", "node-crash":
		v, err := strconv.ParseFloat(arg, 64)
		if !hasArg || err != nil || v < 0 {
			return f, fmt.Errorf("SGLANGSIM_FAIL=%s needs seconds, e.g. %s:30", kind, kind)
		}
		f.Seconds = v
	case "lossy":
		v, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if !hasArg || err != nil || !(v > 0 && v <= 1) {
			got := "no probability"
			if hasArg {
				got = fmt.Sprintf("%q", arg)
			}
			return f, fmt.Errorf("SGLANGSIM_FAIL=lossy needs the probability that an accepted draft token is wrong, in (0, 1], e.g. lossy:0.05 (got %s)", got)
		}
		f.Prob = v
	default:
		return f, fmt.Errorf("unknown SGLANGSIM_FAIL %q (oom, oom-kv, oom-weights, crash-during-load:N, exit-during-start, hang-after:N, ignore-sigterm, slow-drain:S, lossy:P, never-join, node-crash:S, nccl-init-error)", s)
	}
	return f, nil
}

// Config holds the SGLANGSIM_* knobs (and SGL_FORCE_SHUTDOWN).
type Config struct {
	LoadSeconds   float64
	WarmupSeconds float64
	TimeScale     float64
	GPUMemGB      float64
	// GPUs is SGLANGSIM_GPUS, the simulated host's GPU count.
	GPUs          int
	Profile       string
	Fail          FailMode
	TruthPath     string
	ForceShutdown bool
	// DraftCaptureShare is the extra load time of speculative methods
	// (draft model load + draft CUDA graph capture) as a share of LoadSeconds.
	DraftCaptureShare float64
	// HealthGenerate is SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION (default
	// true): false makes /health answer 200 without a generation.
	HealthGenerate bool
	// Nondeterminism is SGLANGSIM_NONDETERMINISM: the probability that a
	// greedy request's text diverges late, as BF16 batching makes it (0: never).
	Nondeterminism float64
	// AcceptScale is SGLANGSIM_ACCEPT_SCALE, in (0, 1]: the factor on every per-position draft
	// acceptance probability the requests draw (Model.AcceptScale; 1: unchanged).
	AcceptScale float64
	// EngineVersion is SGLANGSIM_ENGINE_VERSION: the version the server info reports instead of
	// the release profile's name ("": the name).
	EngineVersion string
	// Net is the inter-node network of a multi-node launch: SGLANGSIM_NCCL_NET (IB or Socket),
	// its figures overridden by SGLANGSIM_NET_LATENCY_US and SGLANGSIM_NET_GBPS.
	Net NetModel
	// NCCLDebugInfo is NCCL_DEBUG=INFO (or TRACE): NCCL's init lines go to stdout.
	NCCLDebugInfo bool
}

// LoadConfig reads the knobs from the environment.
func LoadConfig(getenv func(string) string) (Config, error) {
	c := Config{LoadSeconds: 20, WarmupSeconds: 2, TimeScale: 1, GPUMemGB: 96, GPUs: DefaultGPUs, DraftCaptureShare: 0.5, HealthGenerate: true, AcceptScale: 1}
	num := func(name string, dst *float64, positive bool) error {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || (positive && f == 0) {
			return fmt.Errorf("invalid %s=%q: want a non-negative number", name, v)
		}
		*dst = f
		return nil
	}
	for _, e := range []struct {
		name string
		dst  *float64
		pos  bool
	}{
		{"SGLANGSIM_LOAD_SECONDS", &c.LoadSeconds, false},
		{"SGLANGSIM_WARMUP_SECONDS", &c.WarmupSeconds, false},
		{"SGLANGSIM_TIME_SCALE", &c.TimeScale, true},
		{"SGLANGSIM_GPU_MEM_GB", &c.GPUMemGB, true},
		{"SGLANGSIM_DRAFT_CAPTURE_SHARE", &c.DraftCaptureShare, false},
	} {
		if err := num(e.name, e.dst, e.pos); err != nil {
			return c, err
		}
	}
	if v := strings.TrimSpace(getenv("SGLANGSIM_GPUS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxGPUs {
			return c, fmt.Errorf("invalid SGLANGSIM_GPUS=%q: want the host's GPU count, a whole number from 1 to %d", v, MaxGPUs)
		}
		c.GPUs = n
	}
	if v := strings.TrimSpace(getenv("SGLANGSIM_NONDETERMINISM")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !validProb(f) {
			return c, fmt.Errorf("invalid SGLANGSIM_NONDETERMINISM=%q: want a probability in [0, 1] (the share of greedy requests whose text diverges late)", v)
		}
		c.Nondeterminism = f
	}
	if v := strings.TrimSpace(getenv("SGLANGSIM_ACCEPT_SCALE")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return c, fmt.Errorf("invalid SGLANGSIM_ACCEPT_SCALE=%q: want a number in (0, 1] (the factor on every draft acceptance probability; 1 changes nothing)", v)
		}
		c.AcceptScale = f
	}
	c.EngineVersion = strings.TrimSpace(getenv("SGLANGSIM_ENGINE_VERSION"))
	switch v := strings.TrimSpace(getenv("SGLANGSIM_NCCL_NET")); strings.ToLower(v) {
	case "", "ib":
		c.Net = netDefaults("IB")
	case "socket":
		c.Net = netDefaults("Socket")
	default:
		return c, fmt.Errorf("invalid SGLANGSIM_NCCL_NET=%q: want IB or Socket (NCCL's inter-node transport)", v)
	}
	for _, e := range []struct {
		name string
		dst  *float64
	}{{"SGLANGSIM_NET_LATENCY_US", &c.Net.LatencyUS}, {"SGLANGSIM_NET_GBPS", &c.Net.GBps}} {
		if err := num(e.name, e.dst, e.name == "SGLANGSIM_NET_GBPS"); err != nil {
			return c, err
		}
	}
	switch strings.ToUpper(strings.TrimSpace(getenv("NCCL_DEBUG"))) {
	case "INFO", "TRACE":
		c.NCCLDebugInfo = true
	}
	var err error
	if c.Fail, err = ParseFail(getenv("SGLANGSIM_FAIL")); err != nil {
		return c, err
	}
	c.Profile = strings.TrimSpace(getenv("SGLANGSIM_PROFILE"))
	c.TruthPath = getenv("SGLANGSIM_TRUTH")
	switch strings.ToLower(strings.TrimSpace(getenv("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"))) {
	case "0", "false", "no", "off":
		c.HealthGenerate = false
	}
	switch strings.ToLower(strings.TrimSpace(getenv("SGL_FORCE_SHUTDOWN"))) {
	case "1", "true", "yes", "on":
		c.ForceShutdown = true
	}
	return c, nil
}
