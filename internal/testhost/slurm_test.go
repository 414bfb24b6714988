package testhost

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slurmDaemons are the process names of the packages' daemons (and the job step daemon).
var slurmDaemons = []string{"munged", "slurmctld", "slurmd", "slurmstepd"}

// bootSlurm boots a login node and two compute nodes of 4 GPUs, checking on the way that the
// packages' enabled units start nowhere by themselves: not on the machine, not on a fresh host.
func bootSlurm(t *testing.T) *Cluster {
	t.Helper()
	if msg := Requirements(); msg != "" {
		t.Skip(msg)
	}
	if msg := SlurmRequirements(); msg != "" {
		t.Skip(msg)
	}
	if testing.Short() {
		t.Skip("testhost: real hosts are skipped with -short")
	}
	if pids := machineDaemons(); len(pids) > 0 {
		t.Fatalf("Slurm or munge daemons run on the machine itself: %v", pids)
	}
	start := time.Now()
	hosts := BootCluster(t, 3, Options{NoUnit: true})
	booted := time.Since(start)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, h := range hosts {
		out, _ := h.Nsenter(ctx, "systemctl", "is-active", "munge.service", "slurmctld.service", "slurmd.service")
		if got := strings.Fields(string(out)); strings.Join(got, " ") != "inactive inactive inactive" {
			t.Fatalf("%s: munge, slurmctld, slurmd before Slurm: %q", h.Name, out)
		}
	}
	c := Slurm(t, hosts, SlurmOptions{GPUsPerNode: 4})
	t.Logf("3 hosts booted in %v, Slurm idle on 2 nodes after %v", booted.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return c
}

// machineDaemons lists munged and Slurm daemons of the machine's own PID namespace (a test host's
// are in theirs).
func machineDaemons() []string {
	self, _ := os.Readlink("/proc/self/ns/pid")
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		for _, daemon := range slurmDaemons {
			if ns, _ := os.Readlink(d + "/ns/pid"); name == daemon && ns == self {
				found = append(found, filepath.Base(d)+" "+name)
			}
		}
	}
	return found
}

// submit runs sbatch --parsable on the login node over SSH and returns the job id.
func submit(ctx context.Context, t *testing.T, c *Cluster, args string) string {
	t.Helper()
	out, err := c.Run(ctx, "sbatch --parsable "+args)
	id := strings.TrimSpace(string(out))
	if _, perr := strconv.Atoi(id); err != nil || perr != nil {
		t.Fatalf("sbatch %s: %v: %q", args, err, out)
	}
	return id
}

// waitJob is c.WaitJob that fails the test, with the daemons' logs.
func waitJob(ctx context.Context, t *testing.T, c *Cluster, id string, states ...string) map[string]string {
	t.Helper()
	job, err := c.WaitJob(ctx, id, states...)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
	return job
}

// drain cancels every job left and waits until the queue is empty and the nodes idle.
func drain(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := c.Login.Nsenter(ctx, "scancel", "--user=root"); err != nil {
		t.Errorf("scancel --user=root: %v: %s", err, out)
	}
	for {
		out, err := c.Login.Nsenter(ctx, "squeue", "--noheader", "--format=%i")
		if err == nil && strings.TrimSpace(string(out)) == "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("jobs left: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.WaitNodes(ctx, "idle", c.NodeNames()...); err != nil {
		t.Fatal(err)
	}
}

func TestSlurmCluster(t *testing.T) {
	c := bootSlurm(t)
	if len(c.Nodes) != 2 || c.Login != c.Hosts[0] || c.Node(c.Login.Name) != nil {
		t.Fatalf("want a login node and 2 compute nodes, got %v", c.NodeNames())
	}
	for i, h := range c.Nodes {
		if c.NodeAddrs()[i] != h.Addr || !strings.HasPrefix(h.Addr, Subnet) {
			t.Fatalf("node %s at %s", h.Name, h.Addr)
		}
	}

	t.Run("BatchJobRunsOnAComputeNode", func(t *testing.T) {
		defer drain(t, c)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		submitted := time.Now()
		id := submit(ctx, t, c, `--gres=gpu:2 --nodes=1 --output=/shared/%j.out --wrap 'hostname; echo $SLURM_JOB_GPUS $CUDA_VISIBLE_DEVICES'`)
		job := waitJob(ctx, t, c, id, "COMPLETED", "FAILED", "CANCELLED")
		t.Logf("job %s completed %v after sbatch", id, time.Since(submitted).Round(100*time.Millisecond))
		if job["JobState"] != "COMPLETED" || job["ExitCode"] != "0:0" {
			t.Fatalf("job %s: %v", id, job)
		}
		// The output, written on the node, is read on the login node (the shared directory).
		out, err := c.Run(ctx, "cat /shared/"+id+".out")
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil || len(lines) != 2 {
			t.Fatalf("output of job %s: %v: %q", id, err, out)
		}
		node := c.Node(lines[0])
		if node == nil || job["BatchHost"] != node.Name || job["NodeList"] != node.Name {
			t.Fatalf("job %s ran on %q (BatchHost=%s NodeList=%s), want a compute node", id, lines[0], job["BatchHost"], job["NodeList"])
		}
		if lines[1] != "0,1 0,1" {
			t.Fatalf("job %s: SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES = %q, want 2 GPUs 0,1", id, lines[1])
		}
		if b, err := os.ReadFile(filepath.Join(c.SharedDir, id+".out")); err != nil || string(b) != string(out) {
			t.Fatalf("the machine's view of /shared: %v %q", err, b)
		}
	})

	t.Run("GPUsLimitConcurrentJobs", func(t *testing.T) {
		defer drain(t, c)
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		a := submit(ctx, t, c, `--gres=gpu:4 --nodes=1 --job-name=a --output=/dev/null --wrap 'sleep 600'`)
		b := submit(ctx, t, c, `--gres=gpu:4 --nodes=1 --job-name=b --output=/dev/null --wrap 'sleep 600'`)
		ja := waitJob(ctx, t, c, a, "RUNNING")
		jb := waitJob(ctx, t, c, b, "RUNNING")
		if ja["NodeList"] == jb["NodeList"] || c.Node(ja["NodeList"]) == nil || c.Node(jb["NodeList"]) == nil {
			t.Fatalf("jobs of 4 GPUs on %s and %s, want one per node", ja["NodeList"], jb["NodeList"])
		}
		// Every GPU is taken: the third waits for resources.
		third := submit(ctx, t, c, `--gres=gpu:4 --nodes=1 --job-name=c --output=/dev/null --wrap 'sleep 600'`)
		for {
			j := waitJob(ctx, t, c, third, "PENDING")
			if j["Reason"] == "Resources" {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("third job pending for %q, want Resources", j["Reason"])
			}
			time.Sleep(200 * time.Millisecond)
		}
		out, err := c.Run(ctx, "squeue --noheader --format='%i %T %r' --jobs="+third)
		if err != nil || strings.TrimSpace(string(out)) != third+" PENDING Resources" {
			t.Fatalf("squeue over SSH: %v: %q", err, out)
		}
		// scancel ends a running job; its GPUs go to the waiting one.
		cancelled := time.Now()
		if out, err := c.Run(ctx, "scancel "+a); err != nil {
			t.Fatalf("scancel %s: %v: %s", a, err, out)
		}
		waitJob(ctx, t, c, a, "CANCELLED")
		out, err = c.Run(ctx, "scontrol show job "+a)
		if err != nil || !strings.Contains(string(out), "JobState=CANCELLED") {
			t.Fatalf("scontrol show job %s over SSH: %v: %s", a, err, out)
		}
		jc := waitJob(ctx, t, c, third, "RUNNING")
		t.Logf("the waiting job runs %v after scancel of %s", time.Since(cancelled).Round(100*time.Millisecond), a)
		if jc["NodeList"] != ja["NodeList"] {
			t.Fatalf("third job runs on %s, want the node freed by %s (%s)", jc["NodeList"], a, ja["NodeList"])
		}
		// The cancelled job's processes are gone from its node (within KillWait).
		node := c.Node(ja["NodeList"])
		for {
			out, _ := node.Nsenter(ctx, "sh", "-c", "ps -eo args | grep -c '^sleep 600$'")
			if strings.TrimSpace(string(out)) == "1" { // the third job's
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("sleep processes on %s: %s", node.Name, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("SimulatorInAJobReachedFromTheMachine", func(t *testing.T) {
		defer drain(t, c)
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		script := "#!/bin/bash\n#SBATCH --gres=gpu:4\n#SBATCH --nodes=1\n#SBATCH --output=/shared/sim-%j.out\n" +
			"export SGLANGSIM_TIME_SCALE=0.05 SGLANGSIM_LOAD_SECONDS=1 SGLANGSIM_TRUTH=/shared/truth-$SLURM_JOB_ID.jsonl\n" +
			"exec " + SimPath + " --model-path /models/Qwen3.5-122B-A10B --tp-size 4 --host \"$(hostname -i)\" --port 30000\n"
		if err := os.WriteFile(filepath.Join(c.SharedDir, "sim.sh"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		id := submit(ctx, t, c, "/shared/sim.sh")
		job := waitJob(ctx, t, c, id, "RUNNING")
		node := c.Node(job["BatchHost"])
		if node == nil {
			t.Fatalf("job %s on %q, not a compute node", id, job["BatchHost"])
		}
		// Only to a test host's address that routes to this cluster's bridge.
		if err := node.checkRoute(); err != nil {
			t.Fatal(err)
		}
		url := "http://" + node.Addr + ":30000/health"
		client := &http.Client{Timeout: 2 * time.Second}
		for {
			resp, err := client.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if ctx.Err() != nil {
				out, _ := os.ReadFile(filepath.Join(c.SharedDir, "sim-"+id+".out"))
				t.Fatalf("GET %s: %v %v\n%s", url, resp, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		truth, _ := os.ReadFile(filepath.Join(c.SharedDir, "truth-"+id+".jsonl"))
		if !strings.Contains(string(truth), `"event":"ready"`) || !strings.Contains(string(truth), `"cuda_visible_devices":"0,1,2,3"`) {
			t.Fatalf("the server's ready event, with Slurm's CUDA_VISIBLE_DEVICES: %s", truth)
		}
		if out, err := c.Run(ctx, "scancel "+id); err != nil {
			t.Fatalf("scancel: %v: %s", err, out)
		}
		waitJob(ctx, t, c, id, "CANCELLED")
		for {
			truth, _ = os.ReadFile(filepath.Join(c.SharedDir, "truth-"+id+".jsonl"))
			if strings.Contains(string(truth), `"event":"exit"`) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("no exit event after scancel: %s", truth)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !strings.Contains(string(truth), `"reason":"sigterm"`) {
			t.Fatalf("the server did not end on scancel's SIGTERM: %s", truth)
		}
	})

	t.Run("NodeLostAndBack", func(t *testing.T) {
		defer drain(t, c)
		node := c.Nodes[1]
		step := func(name string, do func() error, state string, within time.Duration) {
			t.Helper()
			ctx, cancel := context.WithTimeout(t.Context(), within)
			defer cancel()
			start := time.Now()
			if err := do(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := c.WaitNodes(ctx, state, node.Name); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, c.Logs())
			}
			t.Logf("%s: %s %s after %v", name, node.Name, state, time.Since(start).Round(100*time.Millisecond))
		}
		ctx := t.Context()
		step("slurmd stopped", func() error { return c.StopSlurmd(ctx, node) }, "down*", 60*time.Second)
		step("slurmd started", func() error { return c.StartSlurmd(ctx, node) }, "idle", 60*time.Second)
		step("unplugged", node.Unplug, "down*", 60*time.Second)
		step("plugged", node.Plug, "idle", 120*time.Second)
		// Back in service: a job runs there.
		ctx2, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		id := submit(ctx2, t, c, "--nodelist="+node.Name+" --gres=gpu:1 --output=/dev/null --wrap true")
		if job := waitJob(ctx2, t, c, id, "COMPLETED", "FAILED"); job["JobState"] != "COMPLETED" {
			t.Fatalf("job on the returned node: %v", job)
		}
	})
}

// TestSlurmTeardownLeavesNothing: once the test that built a Slurm cluster ends, its namespaces,
// veths, bridge, overlays, shared directory and every process of its hosts (munged, slurmctld,
// slurmd, ...) are gone, and no Slurm daemon ever ran on the machine itself.
func TestSlurmTeardownLeavesNothing(t *testing.T) {
	type left struct {
		name, root, veth string
		procs            map[int]string // pid: start time
	}
	var hs []left
	var bridge, shared string
	t.Run("boot", func(t *testing.T) {
		c := bootSlurm(t)
		bridge, shared = c.Login.Bridge(), c.SharedDir
		for _, h := range c.Hosts {
			procs := nsProcs(h.pid1)
			if len(procs) < 5 {
				t.Fatalf("%s: only %v in its PID namespace", h.Name, procs)
			}
			hs = append(hs, left{h.Name, h.Root, h.vethHost, procs})
		}
	})
	if len(hs) == 0 {
		t.Skip("boot skipped")
	}
	netns, _ := exec.Command("ip", "netns", "list").Output()
	for _, h := range hs {
		if strings.Contains(string(netns), h.name) {
			t.Errorf("netns %s left", h.name)
		}
		if mounted(h.root) {
			t.Errorf("overlay %s still mounted", h.root)
		}
		if exec.Command("ip", "link", "show", h.veth).Run() == nil {
			t.Errorf("veth %s left", h.veth)
		}
		for pid, start := range h.procs {
			if !gone(pid, start, 10*time.Second) {
				t.Errorf("process %d of %s still alive", pid, h.name)
			}
		}
	}
	if exec.Command("ip", "link", "show", bridge).Run() == nil {
		t.Errorf("bridge %s left", bridge)
	}
	if _, err := os.Stat(shared); err == nil {
		t.Errorf("shared directory %s left", shared)
	}
	if pids := machineDaemons(); len(pids) > 0 {
		t.Errorf("Slurm or munge daemons on the machine: %v", pids)
	}
}

// nsProcs maps the machine pid of every process in the PID namespace whose PID 1 is pid1 to its
// start time (so a pid reused later is not taken for it).
func nsProcs(pid1 int) map[int]string {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid1))
	if err != nil {
		return nil
	}
	procs := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if l, _ := os.Readlink(d + "/ns/pid"); l == ns {
			pid, err := strconv.Atoi(filepath.Base(d))
			if start, _ := procStat(pid); err == nil && start != "" {
				procs[pid] = start
			}
		}
	}
	return procs
}

// procStat is a process's start time and state from /proc/PID/stat ("" if it is gone).
func procStat(pid int) (start, state string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(b), ')')
	if err != nil || i < 0 {
		return "", ""
	}
	f := strings.Fields(string(b[i+1:])) // state is field 3 of stat, starttime field 22
	if len(f) < 20 {
		return "", ""
	}
	return f[19], f[0]
}

// gone waits until the process pid that started at start is gone (or a zombie, not yet reaped).
func gone(pid int, start string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		s, state := procStat(pid)
		if s != start || state == "Z" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestParseFields(t *testing.T) {
	f := parseFields("JobId=7 JobName=wrap JobState=PENDING Reason=Resources Dependency=(null)\n   Command=/shared/a b.sh TRES=cpu=1,node=1,gres/gpu=4 Comment=x=y")
	for k, want := range map[string]string{"JobId": "7", "JobState": "PENDING", "Reason": "Resources",
		"Command": "/shared/a b.sh", "TRES": "cpu=1,node=1,gres/gpu=4", "Comment": "x=y"} {
		if f[k] != want {
			t.Errorf("%s = %q, want %q (%v)", k, f[k], want, f)
		}
	}
}

// TestSlurmConf: the configuration the cluster runs with (no hosts needed).
func TestSlurmConf(t *testing.T) {
	login := &Host{Name: "sst-1-7-2", Addr: "10.231.7.2", N: 7}
	nodes := []*Host{{Name: "sst-1-7-3", Addr: "10.231.7.3", N: 7}, {Name: "sst-1-7-4", Addr: "10.231.7.4", N: 7}}
	c := &Cluster{Login: login, Nodes: nodes, opts: SlurmOptions{GPUsPerNode: 4, CPUsPerNode: 8, MemoryMB: 16384, Partition: "gpu", Conf: "KillWait=7"}}
	conf, gres := string(c.slurmConf()), string(c.gresConf())
	for _, want := range []string{"SlurmctldHost=sst-1-7-2(10.231.7.2)\n", "SelectType=select/cons_tres\n", "GresTypes=gpu\n",
		"ProctrackType=proctrack/linuxproc\n", "TaskPlugin=task/none\n", "SlurmdParameters=config_overrides\n", "ReturnToService=2\n",
		"NodeName=DEFAULT CPUs=8 RealMemory=16384 Gres=gpu:4 State=UNKNOWN\n",
		"NodeName=sst-1-7-3 NodeAddr=10.231.7.3 NodeHostname=sst-1-7-3\n",
		"PartitionName=gpu Nodes=sst-1-7-3,sst-1-7-4 Default=YES MaxTime=INFINITE State=UP\n", "KillWait=15\n", "\nKillWait=7\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q", want)
		}
	}
	if strings.Contains(conf, "NodeName=sst-1-7-2 ") {
		t.Error("the login node is a compute node")
	}
	if want := "NodeName=sst-1-7-4 Name=gpu File=/var/lib/sst-gpus/nvidia[0-3]\n"; !strings.Contains(gres, want) {
		t.Errorf("gres.conf lacks %q", want)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("slurm.conf:\n%s\ngres.conf:\n%s", conf, gres)
	}
}
