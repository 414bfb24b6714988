package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// slurmBenchSpec is benchSpec's sweep (the same server, matrix and workload) on a Slurm cluster: one
// host, driver slurm, 4 GPUs per node, up to maxJobs points in flight (each a gpu:4 job, so one per
// node).
func slurmBenchSpec(c *testhost.Cluster, maxJobs int) string {
	l := c.Login
	host := fmt.Sprintf(`  - name: cluster
    driver: slurm
    address: %q
    user: root
    identity_file: %q
    known_hosts: %q
    gpus: 4
    slurm: {partition: %s, max_jobs: %d, time_limit: 10m, output_dir: %s/specsweep}
`, l.Addr, l.KeyFile, l.KnownHosts, c.Partition, maxJobs, testhost.SharedPath)
	text := strings.Replace(benchSpec(nil, false), "hosts:\n", "hosts:\n"+host, 1)
	return strings.Replace(text, "name: bench-sweep\n", "name: bench-slurm\n", 1)
}

// slurmBenchSweep is what one sweep of BenchmarkSlurmAgainstSSH measured.
type slurmBenchSweep struct {
	wall     time.Duration
	over     []time.Duration // orchestration overhead per point (overheads)
	stops    []time.Duration // the stop events' durations
	dead     []time.Duration // sglangsim's ready instant to the first measured request
	dirty    int             // stops recorded not clean
	sigkills int             // stop_timeout_sigkill events
	db       string
}

// runSlurmBenchSweep runs spec to its end and reads its figures; hosts are where the servers ran (their
// truth files).
func runSlurmBenchSweep(b *testing.B, what, spec string, hosts []*testhost.Host) slurmBenchSweep {
	for _, h := range hosts {
		if _, err := h.Nsenter(b.Context(), "rm", "-f", truthPath); err != nil {
			b.Fatalf("%s: %v", h.Name, err)
		}
	}
	dir := b.TempDir()
	specPath, db := filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "sweep.db")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	out, err := specsweepCmd(context.Background(), b, "run", "--db", db, specPath).CombinedOutput()
	s := slurmBenchSweep{wall: time.Since(t0), db: db}
	if err != nil {
		b.Fatalf("sweep %s: %v\n%s", what, err, tail(string(out), 30))
	}
	if n := countRows(db, "SELECT count(*) FROM point_summary WHERE state = 'done'"); n != 12 {
		b.Fatalf("sweep %s: %d of 12 points done\n%s", what, n, tail(string(out), 30))
	}
	s.over = overheads(b, db)
	s.sigkills = countRows(db, "SELECT count(*) FROM event_log WHERE kind = 'stop_timeout_sigkill'")
	for _, h := range hosts {
		s.dead = append(s.dead, deadTimes(b, h)...)
	}
	rows, err := openDB(b, db).Query("SELECT detail FROM event_log WHERE kind = 'stop'")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var detail string
		var sec float64
		if rows.Scan(&detail) != nil {
			continue
		}
		if _, err := fmt.Sscanf(detail, "stopped in %f s", &sec); err == nil {
			s.stops = append(s.stops, time.Duration(sec*float64(time.Second)))
		}
		if !strings.Contains(detail, "(clean)") {
			s.dirty++
		}
	}
	return s
}

// slurmJobLog is one job's times from slurmctld's and slurmd's logs (millisecond timestamps).
type slurmJobLog struct {
	submit, alloc, launch, done time.Time
	signalled                   time.Time   // slurmstepd logs the job CANCELLED (as it signals the batch step)
	kills                       []time.Time // every REQUEST_KILL_JOB (scancel) of the job
}

var (
	reSlurmLogLine = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\] (.*)$`)
	reSlurmSubmit  = regexp.MustCompile(`_slurm_rpc_submit_batch_job: JobId=(\d+) `)
	reSlurmAlloc   = regexp.MustCompile(`(?:sched: Allocate|_start_job: Started) JobId=(\d+) `)
	reSlurmKill    = regexp.MustCompile(`REQUEST_KILL_JOB JobId=(\d+) `)
	reSlurmLaunch  = regexp.MustCompile(`Launching batch job (\d+) `)
	reSlurmDone    = regexp.MustCompile(`\[(\d+)\.batch\] done with job`)
	reSlurmSignal  = regexp.MustCompile(`\[(\d+)\.batch\] error: \*\*\* JOB \d+ ON \S+ CANCELLED AT`)
)

// slurmJobLogs reads the cluster's logs: job id -> its times.
func slurmJobLogs(b *testing.B, c *testhost.Cluster) map[string]*slurmJobLog {
	jobs := map[string]*slurmJobLog{}
	job := func(id string) *slurmJobLog {
		if jobs[id] == nil {
			jobs[id] = &slurmJobLog{}
		}
		return jobs[id]
	}
	read := func(h *testhost.Host, file string) {
		data, err := h.ReadFile(file)
		if err != nil {
			b.Fatalf("%s: %v", h.Name, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			m := reSlurmLogLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			at, err := time.ParseInLocation("2006-01-02T15:04:05.000", m[1], time.Local)
			if err != nil {
				continue
			}
			if x := reSlurmSubmit.FindStringSubmatch(m[2]); x != nil {
				job(x[1]).submit = at
			} else if x := reSlurmAlloc.FindStringSubmatch(m[2]); x != nil {
				job(x[1]).alloc = at
			} else if x := reSlurmKill.FindStringSubmatch(m[2]); x != nil {
				job(x[1]).kills = append(job(x[1]).kills, at)
			} else if x := reSlurmLaunch.FindStringSubmatch(m[2]); x != nil {
				job(x[1]).launch = at
			} else if x := reSlurmDone.FindStringSubmatch(m[2]); x != nil {
				job(x[1]).done = at
			} else if x := reSlurmSignal.FindStringSubmatch(m[2]); x != nil {
				job(x[1]).signalled = at
			}
		}
	}
	read(c.Login, "/var/log/slurm/slurmctld.log")
	for _, n := range c.Nodes {
		read(n, "/var/log/slurm/slurmd.log")
	}
	return jobs
}

func durMax(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return slices.Max(d)
}

// durMedMax renders a median and a max.
func durMedMax(d []time.Duration) string {
	return fmt.Sprintf("%s (%s)", median(d).Round(time.Millisecond), durMax(d).Round(time.Millisecond))
}

// BenchmarkSlurmAgainstSSH runs BenchmarkSweep's 12-point sweep (baseline + EAGLE-3 steps 1..11 at
// tp 4, concurrency 1 and 8, sglangsim at 5x real time) on 3 SSH test hosts of 4 GPUs (one point at
// a time per host), then on a real Slurm cluster of 3 compute nodes of 4 GPUs (a login/controller
// host besides, slurm.max_jobs 3: a gpu:4 job per node), one after the other in one run. It prints
// both wall times and their ratio, the orchestration overhead per point of each (overheads), the
// stop times (systemctl stop against scancel until the job is gone), and what Slurm adds per point:
// submission to start (the provenance's slurm_queued_s, and slurmctld's log to the millisecond),
// slurmd's launch, scancel to the job's end on its node.
// Run: bench/slurm.sh (go test -run '^$' -bench SlurmAgainstSSH -benchtime 1x ./internal/e2e).
func BenchmarkSlurmAgainstSSH(b *testing.B) {
	// Both booted before either sweep runs, so both sweeps share the machine with the same idle daemons.
	c := slurmCluster(b, 3)
	hosts := testhost.Boot(b, 3, testhost.Options{})
	for b.Loop() {
		ssh := runSlurmBenchSweep(b, "on SSH hosts", benchSpec(hosts, false), hosts)
		fmt.Printf("3 SSH hosts, one point at a time each: %s wall\n", ssh.wall.Round(time.Millisecond))
		printPhases(b, ssh.db)
		slurm := runSlurmBenchSweep(b, "on the Slurm cluster", slurmBenchSpec(c, 3), c.Nodes)
		fmt.Printf("Slurm, 3 nodes, max_jobs 3: %s wall\n", slurm.wall.Round(time.Millisecond))
		printPhases(b, slurm.db)

		// What Slurm adds per point, from the cluster's logs, the servers' truth and the sweep's provenance.
		jobs := slurmJobLogs(b, c)
		// Every server's exit on each node, from its truth file (sglangsim's own clock, in ms).
		exits := map[string][]time.Time{}
		for _, n := range c.Nodes {
			data, err := n.ReadFile(truthPath)
			if err != nil {
				b.Fatalf("%s: truth file: %v", n.Name, err)
			}
			sc := bufio.NewScanner(bytes.NewReader(data))
			for sc.Scan() {
				var l truthLine
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.Event == "exit" {
					exits[n.Name] = append(exits[n.Name], time.UnixMicro(int64(l.UnixMS*1000)))
				}
			}
		}
		db := openDB(b, slurm.db)
		// The stop begins as the point is recorded done and ends with its stop event.
		rows, err := db.Query(`SELECT json_extract(p.provenance, '$.slurm_job'), coalesce(json_extract(p.provenance, '$.slurm_queued_s'), -1),
			json_extract(p.provenance, '$.hostname'),
			(SELECT max(at) FROM event_log e WHERE e.point_id = p.point_id AND e.kind = 'state' AND e.detail LIKE 'running -> done%'),
			(SELECT max(at) FROM event_log e WHERE e.point_id = p.point_id AND e.kind = 'stop')
			FROM point_summary p WHERE p.state = 'done'`)
		if err != nil {
			b.Fatal(err)
		}
		var queued, sched, launch, cancel, signalled, exited, trunc, toKill, seen []time.Duration
		kills, nodes := 0, map[string]int{}
		for rows.Next() {
			var id, node string
			var q float64
			var stopFrom, stopTo int64
			if err := rows.Scan(&id, &q, &node, &stopFrom, &stopTo); err != nil {
				b.Fatal(err)
			}
			nodes[node]++
			if q >= 0 {
				queued = append(queued, time.Duration(q*float64(time.Second)))
			}
			j := jobs[id]
			if j == nil || j.submit.IsZero() || j.alloc.IsZero() || j.launch.IsZero() || j.done.IsZero() || j.signalled.IsZero() || len(j.kills) == 0 {
				b.Fatalf("job %s: not every step in the logs: %+v\n%s", id, j, c.Logs())
			}
			sched = append(sched, j.alloc.Sub(j.submit))
			launch = append(launch, j.launch.Sub(j.alloc))
			cancel = append(cancel, j.done.Sub(j.kills[0]))
			signalled = append(signalled, j.signalled.Sub(j.kills[0]))
			// The server's exit: the first on its node after the scancel (the next job's server starts later).
			// A server killed at its stop (server.stop: kill, the default) records no exit of its own.
			if i := slices.IndexFunc(exits[node], func(t time.Time) bool { return !t.Before(j.kills[0].Add(-time.Millisecond)) }); i >= 0 {
				exited = append(exited, exits[node][i].Sub(j.kills[0]))
			}
			toKill = append(toKill, j.kills[0].Sub(time.UnixMilli(stopFrom)))
			seen = append(seen, time.UnixMilli(stopTo).Sub(j.done))
			// StartTime has whole seconds: the point's start (and its load_s) is taken that much early.
			trunc = append(trunc, j.alloc.Sub(j.alloc.Truncate(time.Second)))
			kills += len(j.kills)
		}
		rows.Close()
		if len(nodes) != 3 {
			b.Errorf("the points ran on %d nodes, not 3: %v", len(nodes), nodes)
		}

		fmt.Printf("12-point sweep, median (max)          3 SSH hosts       Slurm, 3 nodes\n")
		fmt.Printf("  wall time                           %-17s %s (%.2fx)\n", ssh.wall.Round(100*time.Millisecond),
			slurm.wall.Round(100*time.Millisecond), slurm.wall.Seconds()/ssh.wall.Seconds())
		fmt.Printf("  orchestration overhead per point    %-17s %s\n", durMedMax(ssh.over), durMedMax(slurm.over))
		fmt.Printf("  stop (the stop events)              %-17s %s\n", durMedMax(ssh.stops), durMedMax(slurm.stops))
		fmt.Printf("  dead time ready -> first request    %-17s %s\n", durMedMax(ssh.dead), durMedMax(slurm.dead))
		fmt.Printf("  stops recorded not clean            %-17s %d of %d (%d stop_timeout_sigkill events)\n",
			fmt.Sprintf("%d of %d", ssh.dirty, len(ssh.stops)), slurm.dirty, len(slurm.stops), slurm.sigkills)
		fmt.Printf("Slurm per point, median (max):\n")
		fmt.Printf("  submission to start: slurm_queued_s (StartTime - SubmitTime, whole seconds) %s; slurmctld's log: "+
			"submitted -> allocated %s; allocated -> slurmd launches the batch job %s\n", durMedMax(queued), durMedMax(sched), durMedMax(launch))
		fmt.Printf("  load_s counts from StartTime, whole seconds: %s of a point's start-up is before its job started\n", durMedMax(trunc))
		fmt.Printf("  the stop: point done -> scancel at slurmctld %s; then slurmstepd logs it cancelled %s, the server has exited %s "+
			"(%d of %d servers logged their exit: a killed one does not), slurmd done with the job %s; slurmd done -> the driver sees the job gone %s\n",
			durMedMax(toKill), durMedMax(signalled), durMedMax(exited), len(exited), len(cancel), durMedMax(cancel), durMedMax(seen))
		fmt.Printf("  %d scancels for %d jobs; points per node %v\n", kills, len(cancel), nodes)

		b.ReportMetric(ssh.wall.Seconds(), "ssh-wall-s")
		b.ReportMetric(slurm.wall.Seconds(), "slurm-wall-s")
		b.ReportMetric(slurm.wall.Seconds()/ssh.wall.Seconds(), "x-slurm/ssh-wall")
		b.ReportMetric(float64(median(ssh.over).Milliseconds()), "ssh-overhead-ms/point")
		b.ReportMetric(float64(median(slurm.over).Milliseconds()), "slurm-overhead-ms/point")
		b.ReportMetric(float64(median(sched).Milliseconds()), "slurm-queued-ms/point")
		b.ReportMetric(float64(median(ssh.stops).Milliseconds()), "ssh-stop-ms")
		b.ReportMetric(float64(median(slurm.stops).Milliseconds()), "slurm-stop-ms")
	}
}
