package sim

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// The simulated host's GPUs: SGLANGSIM_GPUS of one model whose memory is
// SGLANGSIM_GPU_MEM_GB (docs/sglangsim.md, "GPUs").

// DefaultGPUs is the GPU count of a simulated host without SGLANGSIM_GPUS.
const DefaultGPUs = 8

// MaxGPUs bounds SGLANGSIM_GPUS (torch assumes at most 64 devices when
// CUDA_VISIBLE_DEVICES is unset).
const MaxGPUs = 64

// Driver is the simulated NVIDIA driver version (nvidia-smi driver_version).
const Driver = "570.158.01"

// gpuModels are real GPUs by memory size: their nvidia-smi name and
// memory.total (MiB). SGLANGSIM_GPU_MEM_GB picks one; another size gets a
// generic name and GB x 1024 MiB.
var gpuModels = []struct {
	memGB    float64
	name     string
	totalMiB int
}{
	{40, "NVIDIA A100-SXM4-40GB", 40960},
	{80, "NVIDIA H100 80GB HBM3", 81559},
	{96, "NVIDIA H20", 97871},
	{141, "NVIDIA H200", 143771},
}

// GPUHost is the simulated host: Count GPUs of one model.
type GPUHost struct {
	Count    int
	MemGB    float64 // SGLANGSIM_GPU_MEM_GB, the memory model's GB per GPU
	Name     string
	TotalMiB int
}

// NewGPUHost is a host of count GPUs of memGB each.
func NewGPUHost(count int, memGB float64) GPUHost {
	h := GPUHost{Count: count, MemGB: memGB}
	for _, m := range gpuModels {
		if m.memGB == memGB {
			h.Name, h.TotalMiB = m.name, m.totalMiB
			return h
		}
	}
	h.Name = fmt.Sprintf("NVIDIA Simulated GPU %gGB", memGB)
	h.TotalMiB = int(math.Round(memGB * 1024))
	return h
}

// UUID is GPU i's UUID: "GPU-" and 32 hex digits in the 8-4-4-4-12 form,
// the same for an index on every simulated host.
func (h GPUHost) UUID(i int) string {
	sum := sha256.Sum256([]byte("sglangsim/gpu/" + strconv.Itoa(i)))
	x := hex.EncodeToString(sum[:16])
	return "GPU-" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// hgxBusIDs are the PCI buses of an 8-GPU HGX H100 baseboard.
var hgxBusIDs = []string{"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"}

// BusID is GPU i's PCI bus id as nvidia-smi prints it.
func (h GPUHost) BusID(i int) string {
	if i < len(hgxBusIDs) {
		return "00000000:" + hgxBusIDs[i] + ":00.0"
	}
	return fmt.Sprintf("%08X:%02X:00.0", 1+i/256, i%256)
}

// VisibleDevices applies CUDA_VISIBLE_DEVICES to the host's GPUs as CUDA
// does, in torch's emulation of it (torch/cuda/__init__.py,
// _parse_visible_devices and _device_count_nvml): unset, every GPU; else a
// comma-separated list read up to the first invalid entry, each entry an
// integer read like strtoul (leading digits, "1gpu" is 1; empty or negative
// ends the list), an ordinal beyond the host's GPUs ending it too, and any
// repeated entry making the whole list empty. A list starting with "GPU-"
// holds UUIDs or unambiguous prefixes of them (an entry without the prefix, an
// unknown or ambiguous one ends the list); "MIG-" ones name MIG instances,
// which the simulated GPUs have none of. The result is the visible GPUs'
// physical indices in CUDA's order (device i of the process is result[i]).
func (h GPUHost) VisibleDevices(value string, set bool) []int {
	all := make([]int, h.Count)
	for i := range all {
		all[i] = i
	}
	if !set {
		return all
	}
	if strings.HasPrefix(value, "GPU-") {
		return h.visibleUUIDs(value)
	}
	if strings.HasPrefix(value, "MIG-") {
		return []int{}
	}
	rc := []int{}
	for _, elem := range strings.Split(value, ",") {
		x := strtoul(strings.TrimSpace(elem))
		for _, y := range rc {
			if x == y {
				return []int{}
			}
		}
		if x < 0 {
			break
		}
		rc = append(rc, x)
	}
	for i, x := range rc {
		if x >= h.Count {
			return rc[:i]
		}
	}
	return rc
}

func (h GPUHost) visibleUUIDs(value string) []int {
	var cands []string
	for _, elem := range strings.Split(value, ",") {
		for _, c := range cands {
			if c == elem {
				return []int{}
			}
		}
		if !strings.HasPrefix(elem, "GPU-") {
			break
		}
		cands = append(cands, elem)
	}
	rc := []int{}
	for _, c := range cands {
		idx := -1
		for i := 0; i < h.Count; i++ {
			if strings.HasPrefix(h.UUID(i), c) {
				if idx >= 0 {
					idx = -2 // ambiguous
					break
				}
				idx = i
			}
		}
		if idx < 0 {
			break
		}
		for _, y := range rc {
			if y == idx {
				return []int{}
			}
		}
		rc = append(rc, idx)
	}
	return rc
}

// strtoul is torch's reading of one CUDA_VISIBLE_DEVICES entry: an optional
// sign and the digits it starts with, -1 when there are none.
func strtoul(s string) int {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return -1
	}
	n, err := strconv.Atoi(s[:j])
	if err != nil {
		return -1
	}
	return n
}

// GPUAssignment is where the TP ranks of a server run.
type GPUAssignment struct {
	Visible []int // physical indices of the visible GPUs, in CUDA order
	GPUs    []int // physical index of each TP rank's GPU, rank order (this node's ranks only)
	// BadRank is the first rank whose device ordinal (gpu_id) is not a
	// visible GPU, -1 when every rank has one; BadOrdinal is its gpu_id.
	BadRank, BadOrdinal int
}

// AssignGPUs gives TP rank r the device ordinal base_gpu_id + r *
// gpu_id_step, as SGLang's launcher does (gpu_id of run_scheduler_process),
// and maps it through the visible GPUs.
func AssignGPUs(a *Args, visible []int) GPUAssignment {
	base := intOr(a.Raw, "base_gpu_id", 0)
	step := intOr(a.Raw, "gpu_id_step", 1)
	g := GPUAssignment{Visible: visible, BadRank: -1}
	// A launch over nodes runs tp/nnodes of the ranks here: node k's are k*per .. (k+1)*per-1, each
	// on ordinal base + (rank % per) * step (engine.py, _launch_scheduler_processes).
	nn := max(a.NNodes, 1)
	per := max(1, a.TP/nn)
	first := min(max(a.NodeRank, 0), nn-1) * per
	for r := first; r < first+per; r++ {
		ord := base + (r%per)*step
		if ord < 0 || ord >= len(visible) {
			g.BadRank, g.BadOrdinal = r, ord
			g.GPUs = nil
			return g
		}
		g.GPUs = append(g.GPUs, visible[ord])
	}
	return g
}

// deviceAuto reports whether --device was left to SGLang's auto-detection
// (releases whose default is None: get_device() at post-init).
func deviceAuto(a *Args) bool {
	if v, ok := a.Raw["device"]; ok {
		return v == nil
	}
	v, ok := a.defaults["device"]
	return ok && v == nil
}

// HostEnvFile holds host-wide knobs (SGLANGSIM_GPUS, SGLANGSIM_GPU_MEM_GB,
// SGLANGSIM_STATE_DIR) for processes that do not share an environment: a
// server started by systemd and an nvidia-smi run over SSH.
// SGLANGSIM_HOST_FILE names another file.
const HostEnvFile = "/etc/sglangsim.env"

var hostKeys = map[string]bool{"SGLANGSIM_GPUS": true, "SGLANGSIM_GPU_MEM_GB": true, "SGLANGSIM_STATE_DIR": true}

// HostGetenv returns getenv with the host-wide knobs it leaves unset read
// from the host file (lines NAME=value; blank lines and # comments ignored;
// other names ignored), when the file exists.
func HostGetenv(getenv func(string) string) (func(string) string, error) {
	path := getenv("SGLANGSIM_HOST_FILE")
	if path == "" {
		path = HostEnvFile
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return getenv, nil
	}
	if err != nil {
		return getenv, err
	}
	defer f.Close()
	vals := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return getenv, fmt.Errorf("%s:%d: want NAME=value, got %q", path, n, line)
		}
		k = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(k), "export "))
		if hostKeys[k] {
			vals[k] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	if err := sc.Err(); err != nil {
		return getenv, err
	}
	return func(k string) string {
		if v := getenv(k); v != "" || !hostKeys[k] {
			return v
		}
		return vals[k]
	}, nil
}

// pyOptStr is Python's repr of an optional string (None when unset).
func pyOptStr(s string, set bool) string {
	if !set {
		return "None"
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// invalidDeviceTrace is the traceback of a scheduler whose
// torch.cuda.set_device(gpu_id) fails (model_runner.py,
// init_torch_distributed): "invalid device ordinal", or "No CUDA GPUs are
// available" when none is visible. Line numbers are illustrative.
func invalidDeviceTrace(era *Era, noGPU bool) string {
	call := "    pre_model_load_memory = self.init_torch_distributed()"
	if era.OldDeviceTrace {
		call = "    min_per_gpu_memory = self.init_torch_distributed()"
	}
	lines := []string{
		"Traceback (most recent call last):",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 2958, in run_scheduler_process",
		"    scheduler = Scheduler(",
		"                ^^^^^^^^^^",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 337, in __init__",
		"    self.tp_worker = TpModelWorker(",
		"                     ^^^^^^^^^^^^^^",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/tp_worker.py\", line 81, in __init__",
		"    self.model_runner = ModelRunner(",
		"                        ^^^^^^^^^^^^",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py\", line 245, in __init__",
		call,
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py\", line 601, in init_torch_distributed",
		"    torch.get_device_module(self.device).set_device(self.gpu_id)",
		"  File \"/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py\", line 567, in set_device",
		"    torch._C._cuda_setDevice(device)",
	}
	if noGPU {
		lines = append(lines,
			"  File \"/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py\", line 372, in _lazy_init",
			"    torch._C._cuda_init()",
			"RuntimeError: No CUDA GPUs are available",
			"")
	} else {
		lines = append(lines,
			"RuntimeError: CUDA error: invalid device ordinal",
			"CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
			"For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
			"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
			"")
	}
	return strings.Join(lines, "\n")
}

// noAcceleratorTrace is the launcher's traceback when --device is left to
// auto-detection and no GPU is visible: ServerArgs.__post_init__ calls
// get_device(), which raises. Line numbers are illustrative.
func noAcceleratorTrace(era *Era) string {
	utils := "/usr/local/lib/python3.12/dist-packages/sglang/srt/utils/common.py"
	if era.Name == "0.5.2" {
		utils = "/usr/local/lib/python3.12/dist-packages/sglang/srt/utils.py"
	}
	return serverArgsTraceHead +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 640, in __post_init__\n" +
		"    self._handle_missing_default_values()\n" +
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py\", line 771, in _handle_missing_default_values\n" +
		"    self.device = get_device()\n" +
		"                  ^^^^^^^^^^^^\n" +
		"  File \"" + utils + "\", line 1714, in get_device\n" +
		"    raise RuntimeError(\"No accelerator (CUDA, XPU, HPU) is available.\")\n" +
		"RuntimeError: No accelerator (CUDA, XPU, HPU) is available.\n"
}
