package hostctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/internal/argparse"
)

// The GPU-free check before a start is per GPU: a point waits only for the GPUs it will run on
// (CUDA_VISIBLE_DEVICES of its environment, else the first tp ones, which SGLang takes), so a
// process holding another GPU of the host does not block it.

// gpuQuery lists the host's GPUs (index, uuid) and, after a line "@@", the compute processes with
// the uuid of the GPU each holds. nvidia-smi has listed gpu_uuid for compute apps for as long as
// --query-compute-apps exists.
const gpuQuery = "nvidia-smi --query-gpu=index,uuid --format=csv,noheader,nounits; echo @@; " +
	"nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits"

// gpuSet is the GPU indices a launch runs on: CUDA_VISIBLE_DEVICES when it sets one (numeric
// entries, up to the first that is not, as CUDA reads it), else 0..tp-1.
func gpuSet(l Launch) []int {
	if v, ok := l.Env["CUDA_VISIBLE_DEVICES"]; ok {
		var out []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				break
			}
			out = append(out, n)
		}
		return out
	}
	tp, err := launchTP(l)
	if err != nil {
		tp = 1
	}
	out := make([]int, tp)
	for i := range out {
		out[i] = i
	}
	return out
}

// launchTP is the launch's tensor parallelism: the argv's last --tp-size (as argparse reads it), 1
// without one.
func launchTP(l Launch) (int, error) {
	v, ok := argparse.Last(l.Argv, argparse.TPSize)
	if !ok {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q is not a positive number", argparse.TPSize, v)
	}
	return n, nil
}

// busyApps parses gpuQuery's output and returns, as evidence lines, the compute processes on any
// GPU of want ("pid 4242 holds 70000 MiB on GPU 0"). A process on a GPU the query did not list
// (nvidia-smi changed its mind between the two calls) counts: better to wait than to collide.
func busyApps(out string, want []int) ([]string, error) {
	gpus, apps, ok := strings.Cut(out, "@@")
	if !ok {
		return nil, fmt.Errorf("nvidia-smi: unexpected output %q", clipOut(out))
	}
	index := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(gpus), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 2 {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f[0]))
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi: GPU line %q: %w", clipOut(line), err)
		}
		index[strings.TrimSpace(f[1])] = n
	}
	wanted := map[int]bool{}
	for _, g := range want {
		wanted[g] = true
	}
	var busy []string
	for _, line := range strings.Split(strings.TrimSpace(apps), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, "No running") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 3 {
			return nil, fmt.Errorf("nvidia-smi: compute app line %q", clipOut(line))
		}
		pid, uuid, mem := strings.TrimSpace(f[0]), strings.TrimSpace(f[1]), strings.TrimSpace(f[2])
		g, known := index[uuid]
		if known && !wanted[g] {
			continue
		}
		where := "GPU " + strconv.Itoa(g)
		if !known {
			where = "GPU " + uuid
		}
		busy = append(busy, fmt.Sprintf("pid %s holds %s MiB on %s", pid, mem, where))
	}
	return busy, nil
}

func clipOut(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// gpuPoll is how often a start looks again at GPUs still held.
const gpuPoll = 2 * time.Second

// waitGPUs polls query (gpuQuery's output; none: the host has no nvidia-smi) every poll until no
// compute process holds a GPU of want, for at most wait: then it is gpu_busy with the processes as
// evidence. The wait and its polls are timed by clock.
func waitGPUs(ctx context.Context, clock Clock, query func(ctx context.Context) (out string, none bool, err error), want []int, wait, poll time.Duration) error {
	deadline := clock.Now().Add(wait)
	for {
		out, none, err := query(ctx)
		if err != nil {
			return err
		}
		if none {
			return nil
		}
		busy, err := busyApps(out, want)
		if err != nil {
			return err
		}
		if len(busy) == 0 {
			return nil
		}
		if clock.Now().After(deadline) {
			return &Failure{Class: ClassGPUBusy, Detail: fmt.Sprintf("GPU %s still held after %v", intsWords(want), wait), Evidence: busy}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clock.After(min(poll, wait)):
		}
	}
}

func intsWords(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
