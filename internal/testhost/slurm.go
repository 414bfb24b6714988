package testhost

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// SlurmOptions shape the Slurm cluster Slurm builds on a BootCluster's hosts.
type SlurmOptions struct {
	// GPUsPerNode is every compute node's GPU count: Gres=gpu:N in slurm.conf, the node's gres.conf
	// (File=/var/lib/sst-gpus/nvidia[0-N-1], stand-in device nodes), and sglangsim's host file
	// (SGLANGSIM_GPUS, the nvidia-smi stand-in). Default 4.
	GPUsPerNode int
	// CPUsPerNode and MemoryMB are every compute node's CPUs= and RealMemory= (default 8 and 16384):
	// claimed with SlurmdParameters=config_overrides, whatever the machine has.
	CPUsPerNode int
	MemoryMB    int
	// ControllerComputes makes host 0 a compute node too (default: host 0 only runs slurmctld).
	ControllerComputes bool
	// Partition is the one partition, Default=YES, of every compute node (default "gpu").
	Partition string
	// Conf is appended to slurm.conf (a line given twice: Slurm keeps the last).
	Conf string
	// Timeout bounds the start, until sinfo shows every node idle (default 60 s).
	Timeout time.Duration
}

// Cluster is a running Slurm cluster on test hosts: slurmctld on Login, slurmd on every Node,
// munged on every host, one munge key. The daemons are systemd units of the hosts (munge.service,
// slurmctld.service, slurmd.service), started by Slurm and by nothing else.
type Cluster struct {
	Login     *Host   // host 0: slurmctld; where sbatch, squeue, scontrol and scancel run
	Nodes     []*Host // the compute nodes (slurmd), in slurm.conf order; NodeName is the host's Name
	Hosts     []*Host // every host, Login first
	Partition string  // the default partition
	SharedDir string  // the machine's view of SharedPath, the directory every host shares
	SlurmConf []byte  // /etc/slurm/slurm.conf, as written on every host
	GresConf  []byte  // /etc/slurm/gres.conf, as written on every host
	opts      SlurmOptions
}

// GPUFileDir holds the stand-in GPU device nodes of every compute node.
const GPUFileDir = "/var/lib/sst-gpus"

// SlurmRequirements reports what is missing to run Slurm on test hosts, or "".
func SlurmRequirements() string {
	for _, b := range []struct{ path, pkg string }{
		{"/usr/sbin/slurmctld", "slurmctld"},
		{"/usr/sbin/slurmd", "slurmd"},
		{"/usr/bin/sbatch", "slurm-client"},
		{"/usr/sbin/munged", "munge"},
	} {
		if _, err := os.Stat(b.path); err != nil {
			return fmt.Sprintf("testhost: %s missing: apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge (%s)", b.path, b.pkg)
		}
	}
	for _, name := range []string{"slurm", "munge"} {
		if _, err := user.Lookup(name); err != nil {
			return "testhost: no " + name + " user: apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge"
		}
	}
	return ""
}

// Slurm makes the hosts of one BootCluster a Slurm cluster: host 0 the controller and login node,
// the others compute nodes (with ControllerComputes host 0 too), and waits until sinfo on the login
// node shows every node idle. It skips the test when SlurmRequirements reports something missing.
// The daemons die with the hosts' teardown.
func Slurm(t testing.TB, hosts []*Host, o SlurmOptions) *Cluster {
	t.Helper()
	if msg := SlurmRequirements(); msg != "" {
		t.Skip(msg)
	}
	if o.GPUsPerNode == 0 {
		o.GPUsPerNode = 4
	}
	if o.CPUsPerNode == 0 {
		o.CPUsPerNode = 8
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = 16384
	}
	if o.Partition == "" {
		o.Partition = "gpu"
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if len(hosts) == 0 || hosts[0].cnet == nil {
		t.Fatal("testhost: Slurm wants the hosts of one BootCluster")
	}
	for _, h := range hosts {
		if h.cnet != hosts[0].cnet {
			t.Fatal("testhost: Slurm wants the hosts of one BootCluster")
		}
	}
	c := &Cluster{Login: hosts[0], Hosts: hosts, Partition: o.Partition, opts: o}
	if o.ControllerComputes {
		c.Nodes = hosts
	} else {
		c.Nodes = hosts[1:]
	}
	if len(c.Nodes) == 0 {
		t.Fatal("testhost: Slurm needs a compute node: boot 2 hosts or more, or set ControllerComputes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), o.Timeout)
	defer cancel()
	if err := c.start(ctx); err != nil {
		t.Fatalf("testhost: starting Slurm: %v\n%s", err, c.Logs())
	}
	if err := c.WaitNodes(ctx, "idle", c.NodeNames()...); err != nil {
		t.Fatalf("testhost: %v\n%s", err, c.Logs())
	}
	return c
}

func (c *Cluster) start(ctx context.Context) error {
	o := c.opts
	c.SlurmConf = c.slurmConf()
	c.GresConf = c.gresConf()
	key := make([]byte, 128)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	munge, err := user.Lookup("munge")
	if err != nil {
		return err
	}
	muid, _ := strconv.Atoi(munge.Uid)
	mgid, _ := strconv.Atoi(munge.Gid)
	c.SharedDir = c.Login.SharedDir()
	compute := map[*Host]bool{}
	for _, h := range c.Nodes {
		compute[h] = true
	}
	for _, h := range c.Hosts {
		// One munge key for the whole cluster, private to munge as munged demands.
		p := filepath.Join(h.Root, "etc/munge/munge.key")
		if err := os.WriteFile(p, key, 0o400); err != nil {
			return err
		}
		if err := os.Chown(p, muid, mgid); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o400); err != nil {
			return err
		}
		if err := h.WriteFile("/etc/slurm/slurm.conf", c.SlurmConf, 0o644); err != nil {
			return err
		}
		if err := h.WriteFile("/etc/slurm/gres.conf", c.GresConf, 0o644); err != nil {
			return err
		}
		if compute[h] {
			if err := writeGPUHostFiles(h.Root, o.GPUsPerNode); err != nil {
				return err
			}
			if err := gpuDeviceFiles(h.Root, o.GPUsPerNode); err != nil {
				return err
			}
		}
	}
	// munged everywhere first: slurmctld and slurmd authenticate every message with it.
	if err := c.each(ctx, c.Hosts, "systemctl", "start", "munge.service"); err != nil {
		return err
	}
	if out, err := c.Login.Nsenter(ctx, "systemctl", "start", "slurmctld.service"); err != nil {
		return fmt.Errorf("%s: systemctl start slurmctld: %v: %s", c.Login.Name, err, out)
	}
	return c.each(ctx, c.Nodes, "systemctl", "start", "slurmd.service")
}

// each runs a command inside every host at once.
func (c *Cluster) each(ctx context.Context, hosts []*Host, args ...string) error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			if out, err := h.Nsenter(ctx, args...); err != nil {
				errs[i] = fmt.Errorf("%s: %s: %v: %s", h.Name, strings.Join(args, " "), err, out)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) slurmConf() []byte {
	o := c.opts
	var b strings.Builder
	fmt.Fprintf(&b, "# slurm.conf of a specsweep test cluster (internal/testhost, docs/testhosts.md)\n")
	fmt.Fprintf(&b, "ClusterName=sst%dn%d\n", os.Getpid(), c.Login.N)
	fmt.Fprintf(&b, "SlurmctldHost=%s(%s)\n", c.Login.Name, c.Login.Addr)
	b.WriteString(`AuthType=auth/munge
CredType=cred/munge
SlurmUser=slurm
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
# debug: each RPC and each signal a step's processes get, for a kill that stalls (docs/slurm.md).
SlurmdDebug=debug
# No cgroups: processes are tracked by their parent pids, tasks are not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
# Nodes claim the CPUs, memory and GPUs configured below, whatever the machine has.
SlurmdParameters=config_overrides
# A node that was DOWN (lost, its slurmd stopped) is back in service once its slurmd registers.
ReturnToService=2
# Short timeouts, so tests are fast: a lost node is DOWN after SlurmdTimeout.
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=5
TCPTimeout=2
# KillWait: 15 s, not 5: a clean drain (sglangsim's SIGTERM path, then its own SIGKILL) on a loaded
# 2-core machine took 5.5 to 7 s, and 10.8 s under CI's own load, past 5, and was taken for Slurm's SIGKILL (stop_timeout_sigkill).
KillWait=15
InactiveLimit=0
Waittime=0
MinJobAge=600
`)
	fmt.Fprintf(&b, "NodeName=DEFAULT CPUs=%d RealMemory=%d Gres=gpu:%d State=UNKNOWN\n", o.CPUsPerNode, o.MemoryMB, o.GPUsPerNode)
	for _, h := range c.Nodes {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=%s NodeHostname=%s\n", h.Name, h.Addr, h.Name)
	}
	fmt.Fprintf(&b, "PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", o.Partition, strings.Join(c.NodeNames(), ","))
	if o.Conf != "" {
		b.WriteString(strings.TrimSuffix(o.Conf, "\n") + "\n")
	}
	return []byte(b.String())
}

func (c *Cluster) gresConf() []byte {
	o := c.opts
	var b strings.Builder
	b.WriteString("# gres.conf of a specsweep test cluster: stand-in GPU device nodes, no autodetection\nAutoDetect=off\n")
	for _, h := range c.Nodes {
		fmt.Fprintf(&b, "NodeName=%s Name=gpu File=%s/nvidia[0-%d]\n", h.Name, GPUFileDir, o.GPUsPerNode-1)
	}
	return []byte(b.String())
}

// gpuDeviceFiles makes the stand-in GPU devices of a compute node under its root: character device
// nodes GPUFileDir/nvidia0..n-1 with NVIDIA's major number (195) and no driver behind it (opening
// one fails with ENXIO). slurmd 22.05 drops file-less GPUs (Name=gpu Count=N: "Removing file-less
// GPU gpu:(null) from final GRES list", the node then INVAL) and wants a character or block device
// for every File=; with them it allocates GPU indices and sets CUDA_VISIBLE_DEVICES and
// SLURM_JOB_GPUS as on a real GPU node.
func gpuDeviceFiles(root string, n int) error {
	dir := filepath.Join(root, GPUFileDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("nvidia%d", i))
		_ = os.Remove(p)
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, int(unix.Mkdev(195, uint32(i)))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			return err
		}
	}
	return nil
}

// NodeNames are the compute nodes' Slurm names (their hostnames), in slurm.conf order.
func (c *Cluster) NodeNames() []string {
	names := make([]string, len(c.Nodes))
	for i, h := range c.Nodes {
		names[i] = h.Name
	}
	return names
}

// NodeAddrs are the compute nodes' addresses (NodeAddr=), in slurm.conf order.
func (c *Cluster) NodeAddrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, h := range c.Nodes {
		addrs[i] = h.Addr
	}
	return addrs
}

// Node is the host of a compute node by its Slurm name, or nil.
func (c *Cluster) Node(name string) *Host {
	for _, h := range c.Nodes {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Run runs a shell command on the login node over a fresh SSH connection (as a driver runs sbatch,
// squeue, scontrol and scancel) and returns its combined output.
func (c *Cluster) Run(ctx context.Context, command string) ([]byte, error) {
	return c.Login.Run(ctx, command)
}

// NodeStates maps every compute node to its state as sinfo prints it (%t: idle, alloc, mix, down*,
// ...; a trailing * means not responding).
func (c *Cluster) NodeStates(ctx context.Context) (map[string]string, error) {
	out, err := c.Login.Nsenter(ctx, "sinfo", "--noheader", "--Node", "--format=%N %t")
	if err != nil {
		return nil, fmt.Errorf("sinfo: %v: %s", err, out)
	}
	states := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			states[f[0]] = f[1]
		}
	}
	return states, nil
}

// WaitNodes waits until sinfo shows every named node in state (as NodeStates reports it, e.g.
// "idle", "down*"), or ctx ends.
func (c *Cluster) WaitNodes(ctx context.Context, state string, names ...string) error {
	var states map[string]string
	var err error
	for {
		states, err = c.NodeStates(ctx)
		if err == nil {
			all := true
			for _, n := range names {
				all = all && states[n] == state
			}
			if all {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes %v not %s: %v (sinfo: %v %v)", names, state, ctx.Err(), states, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Job is `scontrol show job --oneliner ID` on the login node as its fields (JobState, Reason,
// NodeList, BatchHost, ExitCode, StdOut, ...).
func (c *Cluster) Job(ctx context.Context, id string) (map[string]string, error) {
	out, err := c.Login.Nsenter(ctx, "scontrol", "show", "job", "--oneliner", id)
	if err != nil {
		return nil, fmt.Errorf("scontrol show job %s: %v: %s", id, err, out)
	}
	return parseFields(string(out)), nil
}

// WaitJob waits until job id is in one of the states (JobState: PENDING, RUNNING, COMPLETED,
// CANCELLED, FAILED, ...) and returns its fields, or fails when ctx ends.
func (c *Cluster) WaitJob(ctx context.Context, id string, states ...string) (map[string]string, error) {
	for {
		job, err := c.Job(ctx, id)
		if err == nil {
			for _, s := range states {
				if job["JobState"] == s {
					return job, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return job, fmt.Errorf("job %s not %v: %v (JobState=%s Reason=%s, %v)", id, states, ctx.Err(), job["JobState"], job["Reason"], err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// parseFields reads scontrol's one-line Key=Value output. A value runs to the next " Key=", so
// values holding spaces (Command=, a Reason) stay whole.
func parseFields(line string) map[string]string {
	fields := map[string]string{}
	words := strings.Fields(strings.TrimSpace(line))
	key := ""
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if ok && k != "" && !strings.ContainsAny(k, "/,:") {
			key = k
			fields[key] = v
			continue
		}
		if key != "" {
			fields[key] += " " + w
		}
	}
	return fields
}

// StopSlurmd stops a compute node's slurmd (the node's jobs keep running, the controller loses the
// node: not responding, then DOWN after SlurmdTimeout); StartSlurmd starts it again (the node
// registers and, with ReturnToService=2, is back in service). Host.Unplug and Host.Plug lose the
// whole node instead, its jobs and servers with it.
func (c *Cluster) StopSlurmd(ctx context.Context, h *Host) error {
	if out, err := h.Nsenter(ctx, "systemctl", "stop", "slurmd.service"); err != nil {
		return fmt.Errorf("%s: systemctl stop slurmd: %v: %s", h.Name, err, out)
	}
	return nil
}

// StartSlurmd starts a compute node's slurmd again.
func (c *Cluster) StartSlurmd(ctx context.Context, h *Host) error {
	if out, err := h.Nsenter(ctx, "systemctl", "start", "slurmd.service"); err != nil {
		return fmt.Errorf("%s: systemctl start slurmd: %v: %s", h.Name, err, out)
	}
	return nil
}

// Logs are the tails of slurmctld's and every slurmd's log, and the daemons' unit states: for a
// failing test's message.
func (c *Cluster) Logs() string {
	var b bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range c.Hosts {
		if h.pid1 == 0 {
			continue
		}
		out, _ := h.Nsenter(ctx, "systemctl", "--no-pager", "--lines=0", "status", "munge", "slurmctld", "slurmd")
		fmt.Fprintf(&b, "== %s units:\n%s", h.Name, out)
		for _, f := range []string{"/var/log/slurm/slurmctld.log", "/var/log/slurm/slurmd.log"} {
			if data, err := h.ReadFile(f); err == nil {
				if len(data) > 3000 {
					data = data[len(data)-3000:]
				}
				fmt.Fprintf(&b, "== %s %s:\n%s\n", h.Name, f, data)
			}
		}
	}
	return b.String()
}
