package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/sweep"
)

// testSbatchReadsSbatchArgsAsSweepDoes (a part of TestSweepsOnOneSlurmCluster, last: its held jobs
// are cancelled at its end): for each item, the real sbatch 22.05 of the test cluster
// reads the line "#SBATCH ITEM" as sweep.ReadSbatchArg does (docs/slurm.md, "sbatch_args"): where
// sweep says sbatch refuses the line, sbatch refuses the script; otherwise a script with the item
// as written and a script with sweep's canonical options, one per line, give the same job (every
// field scontrol shows but ids and times), or the same refusal. Jobs are submitted held and never
// run. The options sweep says sbatch ignores in a script leave the job as an empty script makes it.
func testSbatchReadsSbatchArgsAsSweepDoes(t *testing.T, c *testhost.Cluster) {
	// About 200 submissions and as many reads of the job: 5 minutes ran out beside the package's
	// other parallel tests on a loaded machine (each of the last submissions then "failed silently").
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	var (
		mu  sync.Mutex
		ids []string
	)
	defer func() {
		if len(ids) > 0 {
			_, _ = c.Run(context.Background(), "scancel "+strings.Join(ids, " "))
		}
	}()
	// submit gives a held job's fields, or sbatch's error; it is called from several goroutines
	// (inTurns), so it reports its own trouble with t.Errorf and gives no job.
	submit := func(lines []string) (map[string]string, string) {
		var b strings.Builder
		b.WriteString("#!/bin/sh\n")
		for _, l := range lines {
			b.WriteString("#SBATCH " + l + "\n")
		}
		b.WriteString("true\n")
		out, err := c.Run(ctx, "sbatch --parsable --hold <<'SPECSWEEP_EOF'\n"+b.String()+"SPECSWEEP_EOF")
		id := strings.TrimSpace(string(out))
		if err != nil {
			return nil, sbatchError(string(out))
		}
		if _, perr := strconv.Atoi(id); perr != nil {
			t.Errorf("sbatch printed %q", out)
			return nil, "(no job id)"
		}
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
		job, err := c.Job(ctx, id)
		if err != nil {
			t.Error(err)
			return nil, "(no job)"
		}
		return normalizeJob(job, id), ""
	}
	// inTurns runs check for every item, eight at a time: two hundred submissions one after another
	// took 11 minutes beside the package's other parallel tests on a loaded machine.
	inTurns := func(items []string, check func(item string)) {
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for _, item := range items {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				check(item)
			}()
		}
		wg.Wait()
	}
	baseline, berr := submit(nil)
	if berr != "" {
		t.Fatalf("an empty script: %s\n%s", berr, c.Logs())
	}
	items := []string{
		// The examples, and other spellings of what specsweep sets.
		"--job-name other", "--output /tmp/x", "--job-nam=x", "--outp=/tmp/x", "--wra=id", "--arr=0-3", "--chd=/",
		"-vpother", "--uid=0", "--gid=0", "-Jother", "-J other", "-o/tmp/x", "--comm x", "--no-req", "-Opother", "-N1",
		// Accepted forms and getopt_long's rules.
		"--qos normal", "-q normal", "--exclus", "--mem 100M", "--mem=100M --cpus-per-task 2", "-Os", "--tasks-per=1",
		"-know", "--nice", "--nice=5", "--mail-type=END,FAIL # a comment", "--reservation='my slot'", "--gres gpu:1",
		"--gres-f=enforce-binding", "--cluster=other", "-w " + c.Nodes[0].Name, "--qos --job-name=x", "--begin=now+1hour",
		"--qos=a hetjob --job-name=x", `--qos=a "" --job-name=x`, "--comment='a b'", "--", "",
		// Refused by sbatch itself.
		"--ex", "--gr=gpu:1", "--mem-per=1G", "--clu=x", "--=x", "--fo", "-Z", "--qos", "-q", "--contiguous=yes",
		"qos=x", "--qos=a :b", `--qos="a`, "--qos=a -- --job-name=x", `--reservation=my\ slot`, "-kq normal",
	}
	inTurns(items, func(item string) {
		opts, ignored, err := sweep.ReadSbatchArg(item)
		raw, rawErr := submit([]string{item})
		if err != nil {
			if rawErr == "" {
				t.Errorf("%q: sweep says sbatch refuses it (%v), sbatch took it: %v", item, err, raw)
			}
			return
		}
		canon, canonErr := submit(opts)
		switch {
		case rawErr != canonErr:
			t.Errorf("%q: sbatch said %q, and %q to sweep's reading %q", item, rawErr, canonErr, opts)
		case rawErr == "" && !maps.Equal(raw, canon):
			t.Errorf("%q (sweep: %q, ignoring %q): sbatch made a different job:\n%s", item, opts, ignored, fieldDiff(raw, canon))
		}
	})
	// The options sweep refuses as early ones: sbatch ignores them in a script.
	inTurns([]string{"--wrap=true", "--wra=id", "--verbose", "-v", "-Q", "--help", "--usage", "-V"}, func(item string) {
		s, perr := sweep.Parse("s.yaml", []byte(sbatchSpec(item)))
		if s != nil || perr == nil || !strings.Contains(perr.Error(), "has no effect in a batch script") {
			t.Errorf("%q: sweep.Parse = %v, want it refused as having no effect", item, perr)
		}
		if job, serr := submit([]string{item}); serr != "" || !maps.Equal(job, baseline) {
			t.Errorf("%q: the job differs from an empty script's (%s):\n%s", item, serr, fieldDiff(job, baseline))
		}
	})
	// What the refused spellings mean to sbatch: specsweep's own settings, overridden.
	wants := map[string][2]string{
		"--job-name other": {"JobName", "other"}, "--job-nam=x": {"JobName", "x"}, "-Jother": {"JobName", "other"},
		"--outp=/tmp/x": {"StdOut", "/tmp/x"}, "--chd=/": {"WorkDir", "/"},
	}
	inTurns(slices.Sorted(maps.Keys(wants)), func(item string) {
		want := wants[item]
		if job, serr := submit([]string{item}); job[want[0]] != want[1] {
			t.Errorf("%q: sbatch set %s=%q (%s), want %q", item, want[0], job[want[0]], serr, want[1])
		}
	})
}

// sbatchSpec is a valid spec whose one cluster host has sbatch_args [item].
func sbatchSpec(item string) string {
	return fmt.Sprintf(`version: 1
name: s
hosts: [{name: c, driver: slurm, address: login.example, gpus: 1, slurm: {sbatch_args: [%s]}}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}
`, strconv.Quote(item))
}

// sbatchError is the first error line sbatch printed.
func sbatchError(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "(sbatch failed silently)"
}

// normalizeJob drops what differs between two submissions of one script: ids, times, and the
// submitting session (AllocNode:Sid, which scontrol prints after Partition).
func normalizeJob(job map[string]string, id string) map[string]string {
	out := map[string]string{}
	for k, v := range job {
		if strings.HasSuffix(k, "Time") || k == "LastSchedEval" || k == "Deadline" || k == "JobId" {
			continue
		}
		var words []string
		for _, w := range strings.Fields(v) {
			switch {
			case strings.HasPrefix(w, "AllocNode:Sid="):
			case w == id && k == "ArrayJobId":
				words = append(words, "ID")
			default:
				// %j in the output file names (%A_%a for an array).
				w = strings.ReplaceAll(w, "-"+id+".", "-ID.")
				words = append(words, strings.ReplaceAll(w, "-"+id+"_", "-ID_"))
			}
		}
		out[k] = strings.Join(words, " ")
	}
	return out
}

func fieldDiff(a, b map[string]string) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if a[k] != b[k] {
			d = append(d, fmt.Sprintf("  %s: %q vs %q", k, a[k], b[k]))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, fmt.Sprintf("  %s: missing vs %q", k, b[k]))
		}
	}
	return strings.Join(d, "\n")
}
