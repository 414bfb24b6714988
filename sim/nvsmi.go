package sim

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The nvidia-smi stand-in: sglangsim run under the name nvidia-smi (a
// symlink or copy; cmd/sglangsim picks the mode by argv[0]) answers
// nvidia-smi's CSV queries about the simulated host's GPUs and the
// registered servers that are running (docs/sglangsim.md, "nvidia-smi").

// nvidia-smi's return codes (its manual's RETURN VALUE).
const (
	nvOK          = 0
	nvBadArgument = 2   // a supplied argument or flag is invalid
	nvNotFound    = 6   // a query to find an object was unsuccessful
	nvOther       = 255 // other error or internal driver error
)

const nvInvalidArgs = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"

// nvField is one queryable property: its name in the header, its unit
// ("" when it has none) and its value for a row.
type nvField struct {
	header, unit string
}

var nvGPUFields = map[string]nvField{
	"count":          {"count", ""},
	"index":          {"index", ""},
	"uuid":           {"uuid", ""},
	"gpu_uuid":       {"uuid", ""},
	"name":           {"name", ""},
	"gpu_name":       {"name", ""},
	"driver_version": {"driver_version", ""},
	"pci.bus_id":     {"pci.bus_id", ""},
	"gpu_bus_id":     {"pci.bus_id", ""},
	"memory.total":   {"memory.total", "MiB"},
	"memory.used":    {"memory.used", "MiB"},
	"memory.free":    {"memory.free", "MiB"},
	"fan.speed":      {"fan.speed", "%"}, // passively cooled boards: [N/A]
}

var nvAppFields = map[string]nvField{
	"pid":             {"pid", ""},
	"process_name":    {"process_name", ""},
	"gpu_uuid":        {"gpu_uuid", ""},
	"gpu_name":        {"gpu_name", ""},
	"gpu_bus_id":      {"gpu_bus_id", ""},
	"used_memory":     {"used_gpu_memory", "MiB"},
	"used_gpu_memory": {"used_gpu_memory", "MiB"},
}

// NvidiaSMI runs the nvidia-smi stand-in with argv (without the program
// name) and returns its exit code.
func NvidiaSMI(argv []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var queryGPU, queryApps, format, ids *string
	list, help := false, false
	for i := 0; i < len(argv); i++ {
		name, val, hasVal := strings.Cut(argv[i], "=")
		var dst **string
		switch name {
		case "--query-gpu":
			dst = &queryGPU
		case "--query-compute-apps":
			dst = &queryApps
		case "--format":
			dst = &format
		case "-i", "--id":
			dst = &ids
		case "-L", "--list-gpus", "-h", "--help":
			if hasVal {
				fmt.Fprint(stdout, nvInvalidArgs)
				return nvBadArgument
			}
			if name == "-L" || name == "--list-gpus" {
				list = true
			} else {
				help = true
			}
			continue
		default:
			fmt.Fprint(stdout, nvInvalidArgs)
			return nvBadArgument
		}
		if !hasVal {
			if i+1 >= len(argv) {
				fmt.Fprint(stdout, nvInvalidArgs)
				return nvBadArgument
			}
			i++
			val = argv[i]
		}
		v := val
		*dst = &v
	}
	if help {
		fmt.Fprint(stdout, nvHelp)
		return nvOK
	}
	genv, err := HostGetenv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim nvidia-smi: %v\n", err)
		return nvOther
	}
	cfg, err := LoadConfig(genv)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim nvidia-smi: %v\n", err)
		return nvOther
	}
	host := NewGPUHost(cfg.GPUs, cfg.GPUMemGB)
	gpus := make([]int, host.Count)
	for i := range gpus {
		gpus[i] = i
	}
	if ids != nil {
		if gpus = host.selectIDs(*ids); gpus == nil {
			fmt.Fprint(stdout, "No devices were found\n")
			return nvNotFound
		}
	}
	queries := 0
	for _, q := range []*string{queryGPU, queryApps} {
		if q != nil {
			queries++
		}
	}
	switch {
	case list && queries == 0 && format == nil:
		for _, i := range gpus {
			fmt.Fprintf(stdout, "GPU %d: %s (UUID: %s)\n", i, host.Name, host.UUID(i))
		}
		return nvOK
	case list || queries != 1 || format == nil:
		// no summary table, no other query, no query without its format
		fmt.Fprint(stdout, nvInvalidArgs)
		return nvBadArgument
	}
	header, units, ok := parseNvFormat(*format)
	if !ok {
		fmt.Fprint(stdout, nvInvalidArgs)
		return nvBadArgument
	}
	q, table := queryGPU, nvGPUFields
	if queryApps != nil {
		q, table = queryApps, nvAppFields
	}
	names := strings.Split(*q, ",")
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
		if _, ok := table[names[i]]; !ok {
			fmt.Fprintf(stdout, "Field \"%s\" is not a valid field to query.\n\n", names[i])
			return nvBadArgument
		}
	}
	dirs, _ := StateDirs(genv)
	recs := LiveRecords(dirs)
	var rows [][]string
	if queryGPU != nil {
		used := make([]int, host.Count)
		for _, r := range recs {
			for _, g := range r.GPUs {
				if g >= 0 && g < host.Count {
					used[g] += r.UsedMiB
				}
			}
		}
		for _, i := range gpus {
			u := min(used[i], host.TotalMiB)
			var row []string
			for _, n := range names {
				row = append(row, host.gpuValue(n, i, u, units))
			}
			rows = append(rows, row)
		}
	} else {
		for _, i := range gpus {
			for _, r := range recs {
				if !holds(r, i) {
					continue
				}
				var row []string
				for _, n := range names {
					row = append(row, host.appValue(n, i, r, units))
				}
				rows = append(rows, row)
			}
		}
	}
	var b strings.Builder
	if header {
		var hs []string
		for _, n := range names {
			f := table[n]
			h := f.header
			if f.unit != "" {
				h += " [" + f.unit + "]"
			}
			hs = append(hs, h)
		}
		b.WriteString(strings.Join(hs, ", ") + "\n")
	}
	for _, row := range rows {
		b.WriteString(strings.Join(row, ", ") + "\n")
	}
	_, _ = io.WriteString(stdout, b.String())
	return nvOK
}

// parseNvFormat reads --format: csv (mandatory), noheader, nounits.
func parseNvFormat(s string) (header, units, ok bool) {
	header, units = true, true
	csv := false
	for _, o := range strings.Split(s, ",") {
		switch strings.TrimSpace(o) {
		case "csv":
			csv = true
		case "noheader":
			header = false
		case "nounits":
			units = false
		default:
			return false, false, false
		}
	}
	return header, units, csv
}

// selectIDs reads -i: comma-separated indices, UUIDs or PCI bus ids; nil
// when one names no GPU.
func (h GPUHost) selectIDs(s string) []int {
	var out []int
	for _, id := range strings.Split(s, ",") {
		id = strings.TrimSpace(id)
		found := -1
		for i := 0; i < h.Count; i++ {
			if strconv.Itoa(i) == id || strings.EqualFold(h.UUID(i), id) || strings.EqualFold(h.BusID(i), id) {
				found = i
				break
			}
		}
		if found < 0 {
			return nil
		}
		out = append(out, found)
	}
	return out
}

func holds(r GPURecord, gpu int) bool {
	for _, g := range r.GPUs {
		if g == gpu {
			return true
		}
	}
	return false
}

func withUnit(n int, unit string, units bool) string {
	if units {
		return strconv.Itoa(n) + " " + unit
	}
	return strconv.Itoa(n)
}

func (h GPUHost) gpuValue(field string, i, usedMiB int, units bool) string {
	switch field {
	case "count":
		return strconv.Itoa(h.Count)
	case "index":
		return strconv.Itoa(i)
	case "uuid", "gpu_uuid":
		return h.UUID(i)
	case "name", "gpu_name":
		return h.Name
	case "driver_version":
		return Driver
	case "pci.bus_id", "gpu_bus_id":
		return h.BusID(i)
	case "memory.total":
		return withUnit(h.TotalMiB, "MiB", units)
	case "memory.used":
		return withUnit(usedMiB, "MiB", units)
	case "memory.free":
		return withUnit(h.TotalMiB-usedMiB, "MiB", units)
	}
	return "[N/A]" // fan.speed
}

func (h GPUHost) appValue(field string, i int, r GPURecord, units bool) string {
	switch field {
	case "pid":
		return strconv.Itoa(r.PID)
	case "process_name":
		if r.ProcessName == "" {
			return "[N/A]"
		}
		return r.ProcessName
	case "gpu_uuid":
		return h.UUID(i)
	case "gpu_name":
		return h.Name
	case "gpu_bus_id":
		return h.BusID(i)
	}
	return withUnit(int(math.Min(float64(r.UsedMiB), float64(h.TotalMiB))), "MiB", units) // used_memory
}

const nvHelp = `NVIDIA System Management Interface -- v` + Driver + ` (sglangsim stand-in)

Answers from the simulated host (SGLANGSIM_GPUS, SGLANGSIM_GPU_MEM_GB) and the
sglangsim servers registered in the state directory (SGLANGSIM_STATE_DIR).

    -h,   --help                Print usage information and exit.
    -L,   --list-gpus           Display a list of GPUs connected to the system.
    --query-gpu=                index, uuid, name, driver_version, count, pci.bus_id,
                                memory.total, memory.used, memory.free, fan.speed
    --query-compute-apps=       pid, process_name, gpu_uuid, gpu_name, gpu_bus_id,
                                used_memory (used_gpu_memory)
    --format=                   Comma separated list of format options:
                                  csv - comma separated values (MANDATORY)
                                  noheader - skip the first line with column headers
                                  nounits - don't print units for numerical
                                             values
    -i,   --id=                 Target specific GPUs (indices, UUIDs or PCI bus ids).

The summary table, -q and every other option are not simulated.
`
