package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The GPU registry: every running sglangsim writes, in the state directory,
// a record of the GPUs it holds and the memory it uses on each, so that the
// nvidia-smi stand-in can answer from the servers that are running
// (docs/sglangsim.md, "GPU registry").

// DefaultStateDir is the registry a host should name (SGLANGSIM_STATE_DIR in the host file, as
// the test hosts do): /run is private to each systemd host (a tmpfs systemd mounts at boot) and is
// not hidden by a unit's PrivateTmp.
const DefaultStateDir = "/run/sglangsim"

// StateDirs returns the registry directory: SGLANGSIM_STATE_DIR (from the environment or the host
// file). Without it servers do not register and nvidia-smi lists no process: a simulator run on a
// developer's machine (make run, the unit tests) leaves nothing behind, not even the records of
// the servers it killed.
func StateDirs(getenv func(string) string) (dirs []string, explicit bool) {
	if d := strings.TrimSpace(getenv("SGLANGSIM_STATE_DIR")); d != "" {
		return []string{d}, true
	}
	return nil, false
}

// GPURecord is one server's entry in the registry.
type GPURecord struct {
	PID int `json:"pid"`
	// StartTicks is the process start time (field 22 of /proc/PID/stat):
	// a record whose pid now names another process is not that server's.
	StartTicks  uint64 `json:"start_ticks"`
	Port        int    `json:"port"`
	GPUs        []int  `json:"gpus"`     // physical indices
	UsedMiB     int    `json:"used_mib"` // on each of GPUs
	ProcessName string `json:"process_name"`
	// CUDAVisibleDevices is the server's CUDA_VISIBLE_DEVICES, null when unset.
	CUDAVisibleDevices *string `json:"cuda_visible_devices"`
	UpdatedUnixMs      float64 `json:"updated_unix_ms"`
}

// Registry is this server's record: written at start, updated as the
// memory it holds grows, removed when the process ends.
type Registry struct {
	mu   sync.Mutex
	path string // "" when registration is off
	rec  GPURecord
}

// OpenRegistry writes rec into the first of dirs it can (created as
// needed). With an explicit directory a failure is an error; else it is a
// warning and the server runs unregistered.
func OpenRegistry(dirs []string, explicit bool, rec GPURecord) (*Registry, error) {
	r := &Registry{rec: rec}
	if ticks, _, err := procStat(rec.PID); err == nil {
		r.rec.StartTicks = ticks
	}
	var errs []error
	for i, d := range dirs {
		if err := ensureDir(d, !explicit && i > 0); err != nil {
			errs = append(errs, err)
			continue
		}
		r.path = filepath.Join(d, strconv.Itoa(rec.PID)+".json")
		if err := r.write(); err != nil {
			r.path = ""
			errs = append(errs, err)
			continue
		}
		return r, nil
	}
	return r, errors.Join(errs...)
}

// ensureDir creates d when missing: 0755, or world-writable with the
// sticky bit when shared (the fallback under /tmp, where servers of every
// user register).
func ensureDir(d string, shared bool) error {
	if fi, err := os.Stat(d); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", d)
		}
		return nil
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	if shared {
		return os.Chmod(d, 0o777|os.ModeSticky)
	}
	return nil
}

// Path is the record's file, "" when the server is not registered.
func (r *Registry) Path() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.path
}

// SetUsed records the memory the server holds on each of its GPUs (GB of
// the memory model, counted as GiB like SGLang's logs).
func (r *Registry) SetUsed(gb float64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.UsedMiB = int(math.Round(math.Max(0, gb) * 1024))
	if r.path != "" {
		_ = r.write()
	}
}

// Remove deletes the record (the process is about to end).
func (r *Registry) Remove() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path != "" {
		_ = os.Remove(r.path)
		r.path = ""
	}
}

// write replaces the record file atomically (caller holds mu).
func (r *Registry) write() error {
	r.rec.UpdatedUnixMs = math.Round(UnixMs(time.Now())*1000) / 1000
	b, err := json.Marshal(r.rec)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(r.path), ".tmp-"+strconv.Itoa(r.rec.PID)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp, 0o644)); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, r.path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// LiveRecords reads the records of dirs whose process still runs (a
// stopped or orphaned process still holds its GPUs), sorted by pid. The
// record of a process that is gone (SIGKILLed: it could not remove it), a
// zombie, or whose pid now names another process is skipped and deleted
// when the reader may.
func LiveRecords(dirs []string) []GPURecord {
	var out []GPURecord
	seen := map[int]bool{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name := e.Name()
			if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
				continue
			}
			path := filepath.Join(d, name)
			b, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			var rec GPURecord
			if json.Unmarshal(b, &rec) != nil || rec.PID <= 0 {
				continue
			}
			if !alive(rec) {
				_ = os.Remove(path)
				continue
			}
			if !seen[rec.PID] {
				seen[rec.PID] = true
				out = append(out, rec)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// alive reports whether rec's process still runs: /proc/PID/stat exists,
// the process is no zombie, and it started when the record says.
func alive(rec GPURecord) bool {
	ticks, state, err := procStat(rec.PID)
	if err != nil {
		return false
	}
	if state == 'Z' || state == 'X' || state == 'x' {
		return false
	}
	return rec.StartTicks == 0 || ticks == rec.StartTicks
}

// procStat reads a process's start time (clock ticks since boot) and state
// from /proc/PID/stat.
func procStat(pid int) (startTicks uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	startTicks, err = strconv.ParseUint(f[19], 10, 64) // field 22
	return startTicks, f[0][0], err
}
