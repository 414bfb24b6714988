// Package defaults declares, once, the defaults of how a point's SGLang server is launched: the spec
// applies them where a spec leaves a value out (docs/spec.md), and hostctl falls back to them for a
// launch that carries none.
package defaults

import "time"

const (
	// Port is launch_server's own default --port.
	Port = 30000
	// Unit is the systemd unit specsweep drives on a host unless the spec names another.
	Unit = "sglang.service"
	// ReadyTimeout bounds start to ready (a large model loads for minutes).
	ReadyTimeout = 20 * time.Minute
	// StopTimeout is the unit's TimeoutStopSec= (SGLang drains its requests, then exits).
	StopTimeout = 90 * time.Second
	// GPUWait bounds how long a start waits for the GPUs of its point to be free (nvidia-smi)
	// before the point fails gpu_busy.
	GPUWait = 2 * time.Minute
	// JoinTimeout bounds how long the ranks of a point that spans nodes may take to meet at
	// torch's rendezvous (from the first rank's "Init torch distributed begin." to every rank's
	// "ends."), so a rank that never joins fails the point long before torch's own 10 minutes.
	JoinTimeout = 2 * time.Minute
)
