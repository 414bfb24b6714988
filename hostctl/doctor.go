package hostctl

import (
	"context"
	"errors"
	"fmt"
	"github.com/specsweep/specsweep/internal/defaults"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CheckStatus is the outcome of one doctor check.
type CheckStatus string

// Check outcomes.
const (
	CheckOK   CheckStatus = "ok"
	CheckFail CheckStatus = "FAIL"
	CheckSkip CheckStatus = "skip"
	CheckWarn CheckStatus = "warn"
)

// Check is one line of `specsweep doctor`.
type Check struct {
	Host   string
	Name   string
	Status CheckStatus
	Detail string
}

// DoctorTarget is one host to check (a driver's Doctor makes it from the spec's host).
type DoctorTarget struct {
	Name    string
	SSH     SSHOptions
	Unit    string
	Port    int
	Command string // the server command (local driver: must be executable here)
	// Slurm: a cluster's partition, GPUs per node, output directory and sweep (driver slurm).
	Slurm *SlurmOptions
	GPUs  int
	// Fit: the model and tps to weigh against the host's GPUs (the "model fit" check).
	Fit Fit
	// Dir: the spec file's folder, for a local relative command (Options.SpecDir).
	Dir string
	// DBus is the spec's hosts[].dbus (nil: unset), for the "dbus" check (driver ssh).
	DBus *bool
}

// DoctorTimeout bounds an unreachable host's checks: reaching it, its host key and the login.
const DoctorTimeout = 10 * time.Second

// DoctorChecksTimeout bounds a reachable host's checks after the login (each command has its own
// 8 s too). A separate budget: on a loaded host the login alone can take most of DoctorTimeout, and
// the checks that follow it then failed as "context deadline exceeded" instead of saying anything.
const DoctorChecksTimeout = 30 * time.Second

func (t DoctorTarget) withDefaults() DoctorTarget {
	if t.Unit == "" {
		t.Unit = defaults.Unit
	}
	if t.Port == 0 {
		t.Port = defaults.Port
	}
	return t
}

// doctorTail is a driver's checks once its SSH login works: the unit's for ssh, the cluster's for
// slurm.
type doctorTail func(ctx context.Context, c *Conn, t DoctorTarget, add func(string, CheckStatus, string, ...any)) []Check

// doctorSSH checks a host reached over SSH: reachable, host key, login, then the driver's tail. An
// unreachable host fails within DoctorTimeout.
func doctorSSH(ctx context.Context, t DoctorTarget, tail doctorTail) []Check {
	var out []Check
	add := func(name string, st CheckStatus, format string, a ...any) {
		out = append(out, Check{Host: t.Name, Name: name, Status: st, Detail: fmt.Sprintf(format, a...)})
	}
	if t.Slurm == nil {
		if err := checkUnitName(t.Unit); err != nil {
			add("unit", CheckFail, "%v", err)
			return out
		}
	}
	dctx, cancel := context.WithTimeout(ctx, DoctorTimeout)
	defer cancel()
	o := t.SSH
	o.HandshakeTimeout = DoctorTimeout
	o.ReconnectFor = time.Second
	tg, err := o.resolve()
	if err != nil {
		add("reachable", CheckFail, "%v", err)
		return out
	}
	d := net.Dialer{}
	nc, err := d.DialContext(dctx, "tcp", tg.addr)
	if err != nil && len(tg.jump) == 0 {
		add("reachable", CheckFail, "%s: %v", tg.addr, err)
		return out
	}
	if nc != nil {
		nc.Close()
	}
	add("reachable", CheckOK, "%s answers", tg.addr)
	c, err := DialSSH(dctx, o)
	var hke *HostKeyError
	var ae *AuthError
	switch {
	case errors.As(err, &hke):
		add("host key", CheckFail, "%v", hke)
		return out
	case errors.As(err, &ae):
		add("host key", CheckOK, "known and matching")
		add("login", CheckFail, "%v", ae)
		return out
	case err != nil:
		add("host key", CheckFail, "%v", err)
		return out
	}
	defer c.Close()
	add("host key", CheckOK, "known and matching")
	add("login", CheckOK, "as %s", c.User())
	tctx, tcancel := context.WithTimeout(ctx, DoctorChecksTimeout)
	defer tcancel()
	more := tail(tctx, c, t, add) // first: a tail may add through add
	return append(out, more...)
}

// doctorUnit is the ssh driver's checks after login: root/sudo, systemctl, the unit, leftovers,
// the port, GPUs, disk. Its lines go through add (after the login's).
func doctorUnit(dctx context.Context, c *Conn, t DoctorTarget, add func(string, CheckStatus, string, ...any)) []Check {
	run := func(script string) (string, error) {
		res, err := c.Run(dctx, Cmd{Args: []string{"sh", "-c", script}, Timeout: 8 * time.Second})
		return strings.TrimSpace(string(res.Stdout)), err
	}
	if c.User() == "root" {
		add("root/sudo", CheckOK, "root login")
	} else if _, err := c.Run(dctx, Cmd{Args: []string{"true"}, Sudo: true, Timeout: 8 * time.Second}); err != nil {
		add("root/sudo", CheckFail, "%v", err)
	} else {
		add("root/sudo", CheckOK, "passwordless sudo")
	}
	sudo := func(script string) (string, error) {
		res, err := c.Run(dctx, Cmd{Args: []string{"sh", "-c", script}, Sudo: true, Timeout: 8 * time.Second})
		return strings.TrimSpace(string(res.Stdout)), err
	}
	state, err := sudo("command -v systemctl >/dev/null || { echo missing; exit 0; }; systemctl is-system-running 2>/dev/null; true")
	switch {
	case err != nil:
		add("systemctl", CheckFail, "%v", err)
	case state == "missing":
		add("systemctl", CheckFail, "systemctl not found: the ssh driver needs systemd")
	case state == "running" || state == "degraded":
		add("systemctl", CheckOK, "systemd %s", state)
	default:
		add("systemctl", CheckWarn, "systemd is %q", state)
	}
	doctorDBus(dctx, c, t, add)
	show, err := sudo("systemctl show -p LoadState,ActiveState,MainPID,FragmentPath -- " + ShellQuote(t.Unit))
	st := parseShow([]byte(show), c.o.Clock.Now())
	switch {
	case err != nil:
		add("unit", CheckFail, "%v", err)
	case st.LoadState == "loaded":
		frag := ""
		for _, l := range strings.Split(show, "\n") {
			if v, ok := strings.CutPrefix(l, "FragmentPath="); ok {
				frag = v
			}
		}
		add("unit", CheckOK, "%s (%s, %s)", t.Unit, frag, st.ActiveState)
	default:
		add("unit", CheckFail, "%s does not exist (LoadState=%s): install it, or set create_unit", t.Unit, st.LoadState)
	}
	// What a specsweep that died without restoring left behind: it changes the operator's unit
	// (the drop-in) or the next sweep's restore (the marker).
	left, err := sudo("for f in " + shellJoin(leftoverPaths(t.Unit)) + " " + strings.Join(slotGlobs(t.Unit), " ") + "; do [ -e \"$f\" ] && echo \"$f\"; done; true")
	doctorLeftovers(t.Unit, left, err, add)
	// The port: free, or held by the unit's processes.
	owner, err := sudo(fmt.Sprintf("ss -Htlnp 'sport = :%d' 2>/dev/null | head -n1", t.Port))
	switch {
	case err != nil:
		add("port", CheckWarn, "cannot check port %d: %v", t.Port, err)
	case owner == "":
		add("port", CheckOK, "%d free", t.Port)
	default:
		pids := pidsIn(owner)
		inUnit, other := false, ""
		for _, p := range pids {
			cg, _ := sudo("cat /proc/" + strconv.Itoa(p) + "/cgroup 2>/dev/null")
			if strings.Contains(cg, "/"+t.Unit+"\n") || strings.HasSuffix(cg, "/"+t.Unit) || strings.Contains(cg, "/"+t.Unit+"/") {
				inUnit = true
			} else if u := unitOfCgroup(cg); u != "" {
				other = " (unit " + u + ")"
			}
		}
		if inUnit {
			add("port", CheckOK, "%d held by %s (will be restarted)", t.Port, t.Unit)
		} else {
			add("port", CheckFail, "%d in use by another process%s: %s", t.Port, other, strings.Join(strings.Fields(owner), " "))
		}
	}
	gpus, err := run("command -v nvidia-smi >/dev/null 2>&1 || { echo none; exit 0; }; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader,nounits; echo @@; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader")
	doctorGPUs(gpus, err, add)
	if err == nil && t.Fit.ModelPath != "" {
		w, _ := run(weightsScript(t.Fit.ModelPath))
		doctorFit(t.Fit, w, gpus, add)
	}
	disk, err := run("df -Pk /var/log | tail -n1")
	doctorDisk(disk, err, add)
	return nil
}

// doctorDBus says how a sweep will drive the unit (docs/spec.md, hosts[].dbus): over systemd's
// D-Bus API through the SSH connection, tried here as a start tries it, or with systemctl. A bus a
// spec asks for (dbus: true) that cannot be reached fails; unset, it warns, since every command is
// then a process on the host.
func doctorDBus(ctx context.Context, c *Conn, t DoctorTarget, add func(string, CheckStatus, string, ...any)) {
	switch {
	case t.DBus != nil && !*t.DBus:
		add("dbus", CheckSkip, "dbus: false: the unit is driven with systemctl")
		return
	case t.DBus == nil && c.User() != "root":
		add("dbus", CheckSkip, "not a root login: the unit is driven with sudo systemctl")
		return
	}
	u, err := dialDBus(ctx, c, t.Unit)
	switch {
	case err == nil:
		u.close()
		add("dbus", CheckOK, "systemd's D-Bus API answers over SSH: the unit is driven without a systemctl process per command")
	case t.DBus != nil:
		add("dbus", CheckFail, "dbus: true, but systemd's D-Bus API over SSH: %v", err)
	default:
		add("dbus", CheckWarn, "systemd's D-Bus API over SSH: %v: the unit will be driven with systemctl, a process on the host per command (dbus: false skips the attempt)", err)
	}
}

// unitOfCgroup finds the systemd unit in /proc/PID/cgroup text.
func unitOfCgroup(cg string) string {
	for _, line := range strings.Split(cg, "\n") {
		_, path, ok := strings.Cut(line, ":/")
		if !ok {
			continue
		}
		if i := strings.LastIndex(path, ":/"); i >= 0 {
			path = path[i+2:]
		}
		for _, part := range strings.Split(path, "/") {
			if strings.HasSuffix(part, ".service") || strings.HasSuffix(part, ".scope") {
				return part
			}
		}
	}
	return ""
}

func pidsIn(ssLine string) []int {
	var out []int
	for _, part := range strings.Split(ssLine, "pid=")[1:] {
		n := 0
		for _, c := range part {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		if n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func doctorGPUs(s string, err error, add func(string, CheckStatus, string, ...any)) {
	switch {
	case err != nil:
		add("gpus", CheckFail, "nvidia-smi: %v", err)
	case s == "none":
		add("gpus", CheckSkip, "no nvidia-smi on the host (no GPU checks)")
	default:
		list, apps, _ := strings.Cut(s, "@@")
		n := 0
		for _, l := range strings.Split(list, "\n") {
			if _, ok := parseGPU(l); ok {
				n++
			}
		}
		if apps = strings.TrimSpace(apps); apps != "" && !strings.Contains(apps, "No running") {
			add("gpus", CheckFail, "%d GPU(s), busy: %s", n, strings.ReplaceAll(apps, "\n", "; "))
		} else {
			add("gpus", CheckOK, "%d GPU(s) free", n)
		}
	}
}

func doctorDisk(s string, err error, add func(string, CheckStatus, string, ...any)) {
	f := strings.Fields(s)
	if err != nil || len(f) < 4 {
		add("disk", CheckWarn, "cannot read free space of /var/log: %v", err)
		return
	}
	kb, _ := strconv.ParseInt(f[3], 10, 64)
	if kb < 1<<20 {
		add("disk", CheckFail, "%d MiB free for logs under /var/log (want 1 GiB)", kb>>10)
	} else {
		add("disk", CheckOK, "%.1f GiB free for logs", float64(kb)/(1<<20))
	}
}

func doctorLocal(ctx context.Context, t DoctorTarget) []Check {
	var checks []Check
	add2 := func(name string, st CheckStatus, format string, a ...any) {
		checks = append(checks, Check{Host: t.Name, Name: name, Status: st, Detail: fmt.Sprintf(format, a...)})
	}
	if err := CheckLocalCommand(t.Command, t.Dir); err != nil {
		add2("command", CheckFail, "%v", err)
	} else {
		add2("command", CheckOK, "%s", t.Command)
	}
	if ln, err := net.Listen("tcp", hostPort("127.0.0.1", t.Port)); err != nil {
		add2("port", CheckFail, "%d in use: %v", t.Port, err)
	} else {
		ln.Close()
		add2("port", CheckOK, "%d free", t.Port)
	}
	if path, err := exec.LookPath("nvidia-smi"); err != nil {
		add2("gpus", CheckSkip, "no nvidia-smi here (no GPU checks)")
	} else {
		cctx, cancel := context.WithTimeout(ctx, DoctorTimeout)
		a, err := exec.CommandContext(cctx, path, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits").Output()
		b, _ := exec.CommandContext(cctx, path, "--query-compute-apps=pid,used_memory", "--format=csv,noheader").Output()
		cancel()
		doctorGPUs(string(a)+"@@"+string(b), err, add2)
		if err == nil && t.Fit.ModelPath != "" {
			cctx, cancel := context.WithTimeout(ctx, DoctorTimeout)
			w, _ := exec.CommandContext(cctx, "sh", "-c", weightsScript(t.Fit.ModelPath)).Output()
			cancel()
			doctorFit(t.Fit, string(w), string(a), add2)
		}
	}
	var fs syscall.Statfs_t
	dir, _ := os.Getwd()
	if err := syscall.Statfs(dir, &fs); err != nil {
		add2("disk", CheckWarn, "%v", err)
	} else {
		free := int64(fs.Bavail) * int64(fs.Bsize)
		if free < 1<<30 {
			add2("disk", CheckFail, "%d MiB free here (want 1 GiB)", free>>20)
		} else {
			add2("disk", CheckOK, "%.1f GiB free for logs", float64(free)/(1<<30))
		}
	}
	return checks
}

// doctorLeftovers reports files of specsweep on the host outside a sweep.
func doctorLeftovers(unitName, list string, err error, add func(string, CheckStatus, string, ...any)) {
	switch {
	case err != nil:
		add("leftovers", CheckWarn, "cannot check for a leftover drop-in or restore marker: %v", err)
	case strings.TrimSpace(list) == "":
		add("leftovers", CheckOK, "no drop-in or restore marker of specsweep for %s", unitName)
	default:
		add("leftovers", CheckFail, "left by a specsweep that did not restore %s (expected only while a sweep runs there): %s; run `specsweep restore SPEC` "+
			"(or let the sweep resume) to put the unit back as the operator had it",
			unitName, strings.Join(strings.Fields(list), ", "))
	}
}
