package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestVisibleDevices: CUDA_VISIBLE_DEVICES as CUDA reads it (torch's
// emulation in torch/cuda/__init__.py, _parse_visible_devices).
func TestVisibleDevices(t *testing.T) {
	h := NewGPUHost(8, 96)
	u := func(i int) string { return h.UUID(i) }
	for _, c := range []struct {
		name, value string
		set         bool
		want        []int
	}{
		{"unset", "", false, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"empty", "", true, []int{}},
		{"two", "2,3", true, []int{2, 3}},
		{"order kept", "3,1", true, []int{3, 1}},
		{"spaces", " 2, 3", true, []int{2, 3}},
		{"negative ends the list", "0,2,-1,1", true, []int{0, 2}},
		{"-1 alone", "-1", true, []int{}},
		{"strtoul", "1gpu2,2ampere", true, []int{1, 2}},
		{"not a number", "a,1", true, []int{}},
		{"empty entry ends the list", "1,,2", true, []int{1}},
		{"repeat empties the list", "0,1,0", true, []int{}},
		{"beyond the host ends the list", "0,9,1", true, []int{0}},
		{"uuid", u(5) + "," + u(1), true, []int{5, 1}},
		{"uuid prefix", u(6)[:12], true, []int{6}},
		{"ambiguous uuid prefix", "GPU-", true, []int{}},
		{"unknown uuid ends the list", u(2) + ",GPU-zzzz," + u(3), true, []int{2}},
		{"index after uuids ends the list", u(4) + ",1", true, []int{4}},
		{"repeated uuid", u(4) + "," + u(4), true, []int{}},
		{"mig", "MIG-0123", true, []int{}},
	} {
		if got := h.VisibleDevices(c.value, c.set); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: CUDA_VISIBLE_DEVICES=%q: %v, want %v", c.name, c.value, got, c.want)
		}
	}
	if got := NewGPUHost(2, 96).VisibleDevices("", false); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Errorf("2-GPU host, unset: %v", got)
	}
}

func TestAssignGPUs(t *testing.T) {
	for _, c := range []struct {
		tp          int
		raw         rawArgs
		visible     []int
		gpus        []int
		bad, badOrd int
	}{
		{2, nil, []int{2, 3}, []int{2, 3}, -1, 0},
		{1, nil, []int{5, 6, 7}, []int{5}, -1, 0},
		{4, nil, []int{2, 3}, nil, 2, 2},
		{2, nil, []int{}, nil, 0, 0},
		{2, rawArgs{"base_gpu_id": 2}, []int{0, 1, 2, 3}, []int{2, 3}, -1, 0},
		{2, rawArgs{"gpu_id_step": 2}, []int{4, 5, 6, 7}, []int{4, 6}, -1, 0},
		{2, rawArgs{"base_gpu_id": 1, "gpu_id_step": 2}, []int{4, 5, 6, 7}, []int{5, 7}, -1, 0},
		{3, rawArgs{"base_gpu_id": 1, "gpu_id_step": 2}, []int{4, 5, 6, 7}, nil, 2, 5},
	} {
		g := AssignGPUs(&Args{TP: c.tp, Raw: c.raw}, c.visible)
		if !reflect.DeepEqual(g.GPUs, c.gpus) || g.BadRank != c.bad || (c.bad >= 0 && g.BadOrdinal != c.badOrd) {
			t.Errorf("tp %d %v on %v: gpus %v, bad rank %d (gpu_id %d); want %v, %d (%d)", c.tp, c.raw, c.visible, g.GPUs, g.BadRank, g.BadOrdinal, c.gpus, c.bad, c.badOrd)
		}
	}
}

func TestGPUHostIdentity(t *testing.T) {
	h := NewGPUHost(MaxGPUs, 96)
	re := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < h.Count; i++ {
		u := h.UUID(i)
		if !re.MatchString(u) || seen[u] {
			t.Errorf("GPU %d: UUID %q (bad form or repeated)", i, u)
		}
		seen[u] = true
		if NewGPUHost(2, 80).UUID(i) != u {
			t.Errorf("GPU %d: UUID depends on the host", i)
		}
	}
	if h.UUID(0) != "GPU-ff021b1f-147c-60bd-24fe-b0000163e2bc" {
		t.Errorf("GPU 0's UUID changed: %s (documented in docs/sglangsim.md)", h.UUID(0))
	}
	for _, c := range []struct {
		mem   float64
		name  string
		total int
	}{
		{96, "NVIDIA H20", 97871}, {80, "NVIDIA H100 80GB HBM3", 81559}, {141, "NVIDIA H200", 143771},
		{40, "NVIDIA A100-SXM4-40GB", 40960}, {24, "NVIDIA Simulated GPU 24GB", 24576},
	} {
		if g := NewGPUHost(1, c.mem); g.Name != c.name || g.TotalMiB != c.total {
			t.Errorf("%g GB: %q %d MiB, want %q %d", c.mem, g.Name, g.TotalMiB, c.name, c.total)
		}
	}
	if h.BusID(0) != "00000000:18:00.0" || h.BusID(7) != "00000000:DB:00.0" {
		t.Errorf("bus ids %s %s", h.BusID(0), h.BusID(7))
	}
}

func TestHostGetenv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "host.env")
	os.WriteFile(file, []byte("# the host\nSGLANGSIM_GPUS=4\nexport SGLANGSIM_STATE_DIR=\"/run/x\"\nSGLANGSIM_TIME_SCALE=9\n\n"), 0o644)
	env := map[string]string{"SGLANGSIM_HOST_FILE": file, "SGLANGSIM_GPUS": ""}
	get, err := HostGetenv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if get("SGLANGSIM_GPUS") != "4" || get("SGLANGSIM_STATE_DIR") != "/run/x" || get("SGLANGSIM_TIME_SCALE") != "" {
		t.Errorf("host file: GPUS %q STATE_DIR %q TIME_SCALE %q", get("SGLANGSIM_GPUS"), get("SGLANGSIM_STATE_DIR"), get("SGLANGSIM_TIME_SCALE"))
	}
	env["SGLANGSIM_GPUS"] = "2"
	if get("SGLANGSIM_GPUS") != "2" {
		t.Errorf("the environment does not win over the host file")
	}
	os.WriteFile(file, []byte("SGLANGSIM_GPUS 4\n"), 0o644)
	if _, err := HostGetenv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), ":1: want NAME=value") {
		t.Errorf("bad line: %v", err)
	}
	env["SGLANGSIM_HOST_FILE"] = filepath.Join(dir, "none")
	if get, err := HostGetenv(func(k string) string { return env[k] }); err != nil || get("SGLANGSIM_STATE_DIR") != "" {
		t.Errorf("missing host file: %v", err)
	}
}

func TestStateDirs(t *testing.T) {
	d, explicit := StateDirs(func(string) string { return "" })
	if explicit || len(d) != 0 {
		t.Errorf("default: %v %v, want no registry", d, explicit)
	}
	d, explicit = StateDirs(func(k string) string { return map[string]string{"SGLANGSIM_STATE_DIR": "/x"}[k] })
	if !explicit || !reflect.DeepEqual(d, []string{"/x"}) {
		t.Errorf("explicit: %v %v", d, explicit)
	}
}

// TestRegistryLifecycle: a record is written, updated, read while its
// process lives and removed; a record whose pid is gone, or now names another
// process, is skipped and deleted by the reader.
func TestRegistryLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	r, err := OpenRegistry([]string{dir}, true, GPURecord{PID: os.Getpid(), Port: 30000, GPUs: []int{2, 3}, ProcessName: "sglangsim"})
	if err != nil {
		t.Fatal(err)
	}
	r.SetUsed(40.5)
	recs := LiveRecords([]string{dir})
	if len(recs) != 1 || recs[0].UsedMiB != 41472 || !reflect.DeepEqual(recs[0].GPUs, []int{2, 3}) || recs[0].StartTicks == 0 {
		t.Fatalf("live records %+v", recs)
	}
	// another process's record with this pid (a reused pid) and a dead pid's
	stale := GPURecord{PID: os.Getpid(), StartTicks: recs[0].StartTicks + 1, GPUs: []int{0}}
	dead := GPURecord{PID: 1 << 30, GPUs: []int{1}}
	other := filepath.Join(t.TempDir(), "other")
	os.MkdirAll(other, 0o755)
	for _, rec := range []GPURecord{stale, dead} {
		b, _ := json.Marshal(rec)
		os.WriteFile(filepath.Join(other, fmt.Sprintf("%d.json", rec.PID)), b, 0o644)
	}
	if recs := LiveRecords([]string{other}); len(recs) != 0 {
		t.Errorf("stale records read as live: %+v", recs)
	}
	if ents, _ := os.ReadDir(other); len(ents) != 0 {
		t.Errorf("stale records left: %v", ents)
	}
	r.Remove()
	if recs := LiveRecords([]string{dir}); len(recs) != 0 {
		t.Errorf("after Remove: %+v", recs)
	}
	if _, err := OpenRegistry([]string{"/proc/nope"}, true, GPURecord{PID: os.Getpid()}); err == nil {
		t.Errorf("an unwritable explicit directory is no error")
	}
}

// nvsmi runs the stand-in in-process against a registry directory.
func nvsmi(t *testing.T, dir string, env map[string]string, args ...string) (int, string) {
	t.Helper()
	e := map[string]string{"SGLANGSIM_STATE_DIR": dir, "SGLANGSIM_HOST_FILE": "/nonexistent"}
	for k, v := range env {
		e[k] = v
	}
	var out, errb bytes.Buffer
	code := NvidiaSMI(args, func(k string) string { return e[k] }, &out, &errb)
	if errb.Len() > 0 {
		t.Logf("stderr: %s", errb.String())
	}
	return code, out.String()
}

// TestNvidiaSMIFormats: nvidia-smi's CSV output (fields in the order asked,
// ", " between them, units unless nounits, a header unless noheader) for
// the queries specsweep sends, from the registered live servers.
func TestNvidiaSMIFormats(t *testing.T) {
	dir := t.TempDir()
	h := NewGPUHost(4, 80)
	env := map[string]string{"SGLANGSIM_GPUS": "4", "SGLANGSIM_GPU_MEM_GB": "80"}
	code, out := nvsmi(t, dir, env, "--query-compute-apps=pid,used_memory", "--format=csv,noheader")
	if code != 0 || out != "" {
		t.Errorf("no server, compute apps: %d %q", code, out)
	}
	if code, out = nvsmi(t, dir, env, "--query-compute-apps=pid,used_memory", "--format=csv"); code != 0 || out != "pid, used_gpu_memory [MiB]\n" {
		t.Errorf("no server, with header: %d %q", code, out)
	}
	r, err := OpenRegistry([]string{dir}, true, GPURecord{PID: os.Getpid(), GPUs: []int{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Remove()
	r.SetUsed(70)
	pid := fmt.Sprint(os.Getpid())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--query-gpu=index,uuid,name,driver_version,memory.total,memory.used", "--format=csv,noheader,nounits"},
			"0, " + h.UUID(0) + ", NVIDIA H100 80GB HBM3, 570.158.01, 81559, 0\n" +
				"1, " + h.UUID(1) + ", NVIDIA H100 80GB HBM3, 570.158.01, 81559, 71680\n" +
				"2, " + h.UUID(2) + ", NVIDIA H100 80GB HBM3, 570.158.01, 81559, 71680\n" +
				"3, " + h.UUID(3) + ", NVIDIA H100 80GB HBM3, 570.158.01, 81559, 0\n"},
		{[]string{"--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"},
			strings.Repeat("NVIDIA H100 80GB HBM3, 570.158.01, 81559\n", 4)},
		{[]string{"--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"},
			pid + ", " + h.UUID(1) + ", 71680\n" + pid + ", " + h.UUID(2) + ", 71680\n"},
		{[]string{"--query-compute-apps=pid,used_memory", "--format=csv,noheader"},
			pid + ", 71680 MiB\n" + pid + ", 71680 MiB\n"},
		{[]string{"--query-gpu=memory.used,index,memory.free,fan.speed", "--format=csv"},
			"memory.used [MiB], index, memory.free [MiB], fan.speed [%]\n" +
				"0 MiB, 0, 81559 MiB, [N/A]\n71680 MiB, 1, 9879 MiB, [N/A]\n71680 MiB, 2, 9879 MiB, [N/A]\n0 MiB, 3, 81559 MiB, [N/A]\n"},
		{[]string{"--query-gpu=index,memory.used", "--format=csv,nounits"},
			"index, memory.used [MiB]\n0, 0\n1, 71680\n2, 71680\n3, 0\n"},
		{[]string{"--query-gpu", "index,pci.bus_id", "--format", "csv,noheader", "-i", "2"}, "2, 00000000:3A:00.0\n"},
		{[]string{"--query-compute-apps=pid,gpu_name,gpu_bus_id", "--format=csv,noheader", "--id=" + h.UUID(2)},
			pid + ", NVIDIA H100 80GB HBM3, 00000000:3A:00.0\n"},
		{[]string{"-L"}, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: " + h.UUID(0) + ")\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: " + h.UUID(1) +
			")\nGPU 2: NVIDIA H100 80GB HBM3 (UUID: " + h.UUID(2) + ")\nGPU 3: NVIDIA H100 80GB HBM3 (UUID: " + h.UUID(3) + ")\n"},
	} {
		if code, out := nvsmi(t, dir, env, c.args...); code != 0 || out != c.want {
			t.Errorf("nvidia-smi %s: exit %d\n%s\nwant\n%s", strings.Join(c.args, " "), code, out, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--query-gpu=index,cuda_version", "--format=csv"}, 2, "Field \"cuda_version\" is not a valid field to query.\n\n"},
		{[]string{"--query-compute-apps=pid,index", "--format=csv"}, 2, "Field \"index\" is not a valid field to query.\n\n"},
		{[]string{"--query-gpu=index"}, 2, nvInvalidArgs},
		{[]string{"--query-gpu=index", "--format=json"}, 2, nvInvalidArgs},
		{[]string{"--query-gpu=index", "--format=noheader"}, 2, nvInvalidArgs},
		{[]string{"--query-gpu=index", "--query-compute-apps=pid", "--format=csv"}, 2, nvInvalidArgs},
		{[]string{"--bogus"}, 2, nvInvalidArgs},
		{[]string{"-q"}, 2, nvInvalidArgs},
		{nil, 2, nvInvalidArgs},
		{[]string{"--query-gpu=index", "--format=csv", "-i", "7"}, 6, "No devices were found\n"},
	} {
		if code, out := nvsmi(t, dir, env, c.args...); code != c.code || out != c.want {
			t.Errorf("nvidia-smi %s: exit %d %q, want %d %q", strings.Join(c.args, " "), code, out, c.code, c.want)
		}
	}
	if code, out := nvsmi(t, dir, env, "-h"); code != 0 || !strings.Contains(out, "--query-compute-apps=") {
		t.Errorf("-h: %d %q", code, out)
	}
	if code, _ := nvsmi(t, dir, map[string]string{"SGLANGSIM_GPUS": "0"}, "-L"); code != 255 {
		t.Errorf("SGLANGSIM_GPUS=0: exit %d", code)
	}
}
