package sim_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/sim"
)

// nvidiaSMI runs the binary under the name nvidia-smi (a symlink, as a host
// installs it) against the registry dir and returns its stdout and exit code.
func nvidiaSMI(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	link := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.Symlink(simBin, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, args...)
	cmd.Env = append(baseEnv(), "SGLANGSIM_STATE_DIR="+dir, "SGLANGSIM_HOST_FILE="+noHostFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Errorf("nvidia-smi %v: stderr %q", args, stderr.String())
	}
	return string(out), code
}

func (p *proc) ready() truthLine {
	p.t.Helper()
	for _, l := range p.truthLines() {
		if l.Event == "ready" {
			return l
		}
	}
	p.t.Fatalf("no ready line in the truth file")
	return truthLine{}
}

// TestCUDAVisibleDevices: a server sees only the GPUs of
// CUDA_VISIBLE_DEVICES; its ready line says which; a tp larger than the
// visible GPUs fails at start as SGLang does (torch.cuda.set_device in the
// rank without a GPU), and no GPU at all fails at post-init.
func TestCUDAVisibleDevices(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "gpus")
	env := map[string]string{"SGLANGSIM_STATE_DIR": state, "CUDA_VISIBLE_DEVICES": "2,3"}
	p := startSim(t, env, "--model-path", "/models/Qwen3.6-27B", "--tp", "2")
	p.waitReady()
	r := p.ready()
	if r.PID != p.cmd.Process.Pid || r.Port != p.port || r.CUDAVisibleDevices == nil || *r.CUDAVisibleDevices != "2,3" ||
		!reflect.DeepEqual(r.VisibleGPUs, []int{2, 3}) || !reflect.DeepEqual(r.GPUs, []int{2, 3}) {
		t.Errorf("ready line %+v; want pid %d, port %d, CUDA_VISIBLE_DEVICES 2,3, GPUs [2 3]", r, p.cmd.Process.Pid, p.port)
	}
	out, _ := nvidiaSMI(t, state, "--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader")
	host := sim.NewGPUHost(8, 96)
	if want := fmt.Sprintf("%d, %s\n%d, %s\n", r.PID, host.UUID(2), r.PID, host.UUID(3)); out != want {
		t.Errorf("compute apps %q, want %q", out, want)
	}

	// tp 4 on two visible GPUs: rank 2 has no device (gpu_id 2 of 2).
	bad := startSim(t, env, "--model-path", "/models/Qwen3.6-27B", "--tp", "4")
	if ws := bad.wait(5 * time.Second); !killedBySIGKILL(ws) {
		t.Errorf("tp 4 on 2 GPUs: %v, want SIGKILL (the launcher kills its tree)", ws)
	}
	log := bad.stderr.String()
	for _, want := range []string{
		" TP2] Context: self.device='cuda' self.gpu_id=2 os.environ.get('CUDA_VISIBLE_DEVICES')='2,3' self.tp_rank=2 self.tp_size=4\n",
		" TP2] Scheduler hit an exception: Traceback (most recent call last):\n",
		"    torch.get_device_module(self.device).set_device(self.gpu_id)\n",
		"RuntimeError: CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n" +
			"For debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
		"Received sigquit from a child process. It usually means the child failed.",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("tp 4 on 2 GPUs: log lacks %q", want)
		}
	}
	if strings.Contains(log, "Load weight begin") || bad.status("/health") != -1 {
		t.Errorf("tp 4 on 2 GPUs got past the device check")
	}
	if tl := bad.truthLines(); len(tl) != 1 || tl[0].Event != "exit" || tl[0].Reason != "invalid_device" {
		t.Errorf("tp 4 on 2 GPUs: truth %+v", tl)
	}
	if out, _ := nvidiaSMI(t, state, "--query-compute-apps=pid", "--format=csv,noheader"); out != fmt.Sprintf("%d\n%d\n", r.PID, r.PID) {
		t.Errorf("after the failed start, compute apps %q (only the tp 2 server's)", out)
	}

	// base_gpu_id moves the ranks along the visible GPUs.
	moved := startSim(t, map[string]string{"SGLANGSIM_STATE_DIR": t.TempDir(), "CUDA_VISIBLE_DEVICES": "7,6,5,4"},
		"--model-path", "/models/Qwen3.6-27B", "--tp", "2", "--base-gpu-id", "1")
	moved.waitReady()
	if g := moved.ready().GPUs; !reflect.DeepEqual(g, []int{6, 5}) {
		t.Errorf("base_gpu_id 1 on 7,6,5,4: GPUs %v, want [6 5]", g)
	}

	// No GPU visible: releases that detect the device fail in ServerArgs'
	// post-init; with --device cuda (0.4.1's default) rank 0 fails in torch.
	code, _, stderr := runSimEnv(t, map[string]string{"CUDA_VISIBLE_DEVICES": ""}, "--model-path", "/models/Qwen3.6-27B", "--tp", "2")
	if code != 1 || !strings.HasSuffix(stderr, "    self.device = get_device()\n                  ^^^^^^^^^^^^\n"+
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/utils/common.py\", line 1714, in get_device\n"+
		"    raise RuntimeError(\"No accelerator (CUDA, XPU, HPU) is available.\")\nRuntimeError: No accelerator (CUDA, XPU, HPU) is available.\n") {
		t.Errorf("CUDA_VISIBLE_DEVICES='': exit %d\n%s", code, stderr)
	}
	// 0.4.4 too (its model_runner.py, before the "Context:" line of 26f07294f).
	for _, era := range []string{"0.4.1", "0.4.4"} {
		old := startSim(t, map[string]string{"SGLANGSIM_VERSION": era, "CUDA_VISIBLE_DEVICES": ""}, "--model-path", "/models/Qwen3.6-27B", "--tp", "2")
		if ws := old.wait(5 * time.Second); !killedBySIGKILL(ws) || !strings.Contains(old.stderr.String(), " TP0] Scheduler hit an exception: ") ||
			!strings.Contains(old.stderr.String(), "\nRuntimeError: No CUDA GPUs are available\n") || strings.Contains(old.stderr.String(), "Context: ") ||
			!strings.Contains(old.stderr.String(), "    min_per_gpu_memory = self.init_torch_distributed()\n") {
			t.Errorf("%s without GPUs: %v\n%s", era, ws, old.stderr.String())
		}
	}
	// An invalid value hides what follows it, as in CUDA: "1,-1,2" is GPU 1 alone.
	code, _, stderr = runSimEnv(t, map[string]string{"CUDA_VISIBLE_DEVICES": "1,-1,2", "SGLANGSIM_TIME_SCALE": "0.01"},
		"--model-path", "/models/Qwen3.6-27B", "--tp", "2")
	if !strings.Contains(stderr, "self.gpu_id=1 os.environ.get('CUDA_VISIBLE_DEVICES')='1,-1,2' self.tp_rank=1 self.tp_size=2") {
		t.Errorf("CUDA_VISIBLE_DEVICES=1,-1,2 with tp 2: exit %d\n%s", code, stderr)
	}
}

// TestNvidiaSMIServers: two servers on disjoint GPUs are both listed with
// their pids, GPU UUIDs and memory; a server holds its GPUs from the start of
// its load; a SIGSTOPped server still holds them; a SIGKILLed one's are free
// again (its record is stale and skipped), and so are a stopped server's.
func TestNvidiaSMIServers(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "gpus")
	a := startSim(t, map[string]string{"SGLANGSIM_STATE_DIR": state, "CUDA_VISIBLE_DEVICES": "0,1"},
		"--model-path", "/models/Qwen3.6-27B", "--tp", "2",
		"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
		"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
	b := startSim(t, map[string]string{"SGLANGSIM_STATE_DIR": state, "CUDA_VISIBLE_DEVICES": "4,5,6,7"})
	a.waitReady()
	b.waitReady()
	host := sim.NewGPUHost(8, 96)
	pa, pb := a.cmd.Process.Pid, b.cmd.Process.Pid

	out, code := nvidiaSMI(t, state, "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits")
	rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	wantGPU := map[int]int{0: pa, 1: pa, 4: pb, 5: pb, 6: pb, 7: pb}
	if code != 0 || len(rows) != 6 {
		t.Fatalf("compute apps (exit %d):\n%s", code, out)
	}
	used := map[int]int{}
	for i, gpu := range []int{0, 1, 4, 5, 6, 7} {
		f := strings.Split(rows[i], ", ")
		pid, _ := strconv.Atoi(f[0])
		mib, err := strconv.Atoi(f[2])
		if len(f) != 3 || pid != wantGPU[gpu] || f[1] != host.UUID(gpu) || err != nil {
			t.Errorf("row %d %q: want pid %d on %s", i, rows[i], wantGPU[gpu], host.UUID(gpu))
		}
		used[pid] = mib
	}
	// 27B at tp 2: 27 GB of weights per GPU; 122B at tp 4: 61. The KV pool
	// fills most of the rest, below the GPU's 97871 MiB.
	if u := used[pa]; u < 27*1024 || u > 97871 || used[pb] < 61*1024 || used[pb] > 97871 {
		t.Errorf("used MiB: 27B tp 2 %d, 122B tp 4 %d", u, used[pb])
	}
	out, _ = nvidiaSMI(t, state, "--query-gpu=index,uuid,name,driver_version,memory.total,memory.used", "--format=csv,noheader,nounits")
	var want strings.Builder
	for i := 0; i < 8; i++ {
		u := 0
		if pid, ok := wantGPU[i]; ok {
			u = used[pid]
		}
		fmt.Fprintf(&want, "%d, %s, NVIDIA H20, 570.158.01, 97871, %d\n", i, host.UUID(i), u)
	}
	if out != want.String() {
		t.Errorf("query-gpu:\n%s\nwant\n%s", out, want.String())
	}
	// hostctl's doctor and GPU wait send these two.
	if out, _ = nvidiaSMI(t, state, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"); out != strings.Repeat("NVIDIA H20, 570.158.01, 97871\n", 8) {
		t.Errorf("doctor's GPU list: %q", out)
	}
	out, _ = nvidiaSMI(t, state, "--query-compute-apps=pid,used_memory", "--format=csv,noheader")
	if want := fmt.Sprintf("%[1]d, %[2]d MiB\n%[1]d, %[2]d MiB\n%[3]d, %[4]d MiB\n%[3]d, %[4]d MiB\n%[3]d, %[4]d MiB\n%[3]d, %[4]d MiB\n", pa, used[pa], pb, used[pb]); out != want {
		t.Errorf("doctor's compute apps:\n%s\nwant\n%s", out, want)
	}

	// A stopped process keeps its GPUs.
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if out, _ = nvidiaSMI(t, state, "--query-compute-apps=pid", "--format=csv,noheader"); strings.Count(out, strconv.Itoa(pb)+"\n") != 4 {
		t.Errorf("SIGSTOPped server: compute apps %q", out)
	}
	b.cmd.Process.Signal(syscall.SIGCONT)

	// A SIGKILLed server cannot remove its record: readers skip it and delete it.
	a.cmd.Process.Kill()
	a.wait(5 * time.Second)
	if _, err := os.Stat(filepath.Join(state, strconv.Itoa(pa)+".json")); err != nil {
		t.Errorf("the SIGKILLed server's record: %v (want it left behind)", err)
	}
	out, _ = nvidiaSMI(t, state, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits")
	if !strings.HasPrefix(out, "0, 0\n1, 0\n") || !strings.Contains(out, fmt.Sprintf("4, %d\n", used[pb])) {
		t.Errorf("after SIGKILL of the server on 0,1:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(state, strconv.Itoa(pa)+".json")); !os.IsNotExist(err) {
		t.Errorf("stale record not deleted by the reader: %v", err)
	}
	// A server that stops (SIGTERM, drain, SIGKILL of itself) removes its record.
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.wait(10 * time.Second)
	if out, _ = nvidiaSMI(t, state, "--query-compute-apps=pid,used_memory", "--format=csv,noheader"); out != "" {
		t.Errorf("after both servers ended: %q", out)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("records left: %v", ents)
	}

	// A loading server already holds its GPUs (CUDA context and NCCL: 1.2 GB each).
	c := startSim(t, map[string]string{"SGLANGSIM_STATE_DIR": state, "SGLANGSIM_LOAD_SECONDS": "3000"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ = nvidiaSMI(t, state, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
		if out != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want := strings.Repeat(fmt.Sprintf("%d, 1229\n", c.cmd.Process.Pid), 4); out != want {
		t.Errorf("loading server: %q, want %q", out, want)
	}
}

// TestNvidiaSMIErrors: the stand-in under its name answers other queries
// with nvidia-smi's errors and exit codes.
func TestNvidiaSMIErrors(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for _, c := range []struct {
		args []string
		out  string
		code int
	}{
		{[]string{"--query-gpu=index,cuda_version", "--format=csv,noheader"}, "Field \"cuda_version\" is not a valid field to query.\n\n", 2},
		{[]string{"--query-gpu=index"}, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", 2},
		{[]string{"topo", "-m"}, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", 2},
		{[]string{"--query-compute-apps=pid,used_memory", "--format=csv"}, "pid, used_gpu_memory [MiB]\n", 0},
	} {
		if out, code := nvidiaSMI(t, state, c.args...); out != c.out || code != c.code {
			t.Errorf("nvidia-smi %v: %d %q, want %d %q", c.args, code, out, c.code, c.out)
		}
	}
}
