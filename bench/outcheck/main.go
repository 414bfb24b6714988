// Command outcheck prints the output check's figures (docs/spec.md, "output_check"): its cost per
// point against real sglangsim servers (seconds in the simulated server's time, and as a share of a
// typical point), and its detection rate over seeded trials at SGLANGSIM_FAIL=lossy:P for several P,
// with the false-alarm rate on lossless speculative points, all with SGLANGSIM_NONDETERMINISM on (rare
// late divergences, as BF16 batching gives). Each trial is one set of fixed prompts (another seed):
// the reference answers twice as the orchestrator has it do, each candidate once, and the check's own
// rule (workload.Compare, workload.Mismatch) decides.
//
//	go run ./bench/outcheck                 # 50 trials at P = 0.01, 0.05, 0.2
//	go run ./bench/outcheck -trials 200 -nondeterminism 0.2
//
// Only 127.0.0.1 is contacted.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/sweep"
	"github.com/specsweep/specsweep/workload"
)

func main() {
	trials := flag.Int("trials", 50, "seeded trials per configuration")
	nondet := flag.Float64("nondeterminism", 0.1, "SGLANGSIM_NONDETERMINISM of every server")
	probs := flag.String("p", "0.01,0.05,0.2", "lossy probabilities")
	flag.Parse()

	dir, err := os.MkdirTemp("", "outcheck-bench")
	must(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sglangsim")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/sglangsim").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	check := sweep.DefaultOutputCheck
	eagle := []string{"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
		"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"}

	// Cost: one check pass on a real-time-scaled server (time scale 0.1: seconds are the simulated
	// server's), the reference's two passes, against a typical point of the climb example.
	const scale = 0.1
	costOf := func(argv []string, concurrency ...int) time.Duration {
		s := start(bin, argv, scale, *nondet, "")
		defer s.stop()
		t0 := time.Now()
		for _, c := range concurrency {
			_, err := workload.Answer(context.Background(), workload.CheckConfig{URL: s.base, API: workload.APIChat,
				Prompts: workload.CheckPrompts(check.Prompts, 1), MaxTokens: check.MaxTokens, Concurrency: c})
			must(err)
		}
		return time.Duration(float64(time.Since(t0)) / scale)
	}
	pass := costOf(eagle, check.Prompts)
	refCost := costOf(nil, check.Prompts, check.Prompts/2)
	spec, err := sweep.Load("examples/climb.yaml")
	must(err)
	plan := spec.Plan()
	typical := plan.Estimate / time.Duration(len(plan.Points))
	fmt.Printf("cost (qwen3.5-122b-a10b TP 4, %d prompts x %d tokens, all at once; simulated server time):\n", check.Prompts, check.MaxTokens)
	fmt.Printf("  speculative point (EAGLE3 steps 3): %.2f s per point, %.2f%% of a typical point (%s, the plan estimate of examples/climb.yaml)\n",
		pass.Seconds(), 100*pass.Seconds()/typical.Seconds(), typical.Round(time.Second))
	fmt.Printf("  reference (baseline: all at once, then in batches of half): %.2f s, %.2f%%\n",
		refCost.Seconds(), 100*refCost.Seconds()/typical.Seconds())

	// Detection: one reference and one candidate server per configuration, fast time scale.
	ref := start(bin, nil, 0.005, *nondet, "")
	defer ref.stop()
	type cand struct {
		name string
		s    *server
	}
	cands := []cand{{"lossless EAGLE3", start(bin, eagle, 0.005, *nondet, "")}}
	for _, p := range strings.Split(*probs, ",") {
		cands = append(cands, cand{"lossy:" + p, start(bin, eagle, 0.005, *nondet, "lossy:"+p)})
	}
	defer func() {
		for _, c := range cands {
			c.s.stop()
		}
	}()
	flagged := make([]int, len(cands))
	agree := make([]float64, len(cands))
	selfSum := 0.0
	ctx := context.Background()
	for trial := 1; trial <= *trials; trial++ {
		prompts := workload.CheckPrompts(check.Prompts, uint64(1000+trial))
		cfg := workload.CheckConfig{API: workload.APIChat, Prompts: prompts, MaxTokens: check.MaxTokens, Concurrency: check.Prompts}
		first, half := cfg, cfg
		first.URL = ref.base
		half.URL, half.Reverse, half.Concurrency = ref.base, true, max(1, check.Prompts/2)
		r1, err := workload.Answer(ctx, first)
		must(err)
		r2, err := workload.Answer(ctx, half)
		must(err)
		self, err := workload.Compare(r1, r2)
		must(err)
		selfSum += self.Agreement
		for i, c := range cands {
			cc := cfg
			cc.URL = c.s.base
			got, err := workload.Answer(ctx, cc)
			must(err)
			cmp, err := workload.Compare(r1, got)
			must(err)
			agree[i] += cmp.Agreement
			if workload.Mismatch(cmp.Agreement, self.Agreement) {
				flagged[i]++
			}
		}
	}
	fmt.Printf("\ndetection over %d seeded trials (SGLANGSIM_NONDETERMINISM=%g on every server; reference self-agreement %.3f on average):\n",
		*trials, *nondet, selfSum/float64(*trials))
	for i, c := range cands {
		what := "detected"
		if i == 0 {
			what = "false alarms"
		}
		fmt.Printf("  %-16s %s %d/%d (%.0f%%), mean agreement %.3f\n", c.name, what, flagged[i], *trials,
			100*float64(flagged[i])/float64(*trials), agree[i]/float64(*trials))
	}
}

type server struct {
	cmd  *exec.Cmd
	base string
}

func start(bin string, argv []string, scale, nondet float64, fail string) *server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, append([]string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4",
		"--host", "127.0.0.1", "--port", strconv.Itoa(port)}, argv...)...)
	cmd.Env = append(os.Environ(), "SGLANGSIM_LOAD_SECONDS=0.5", "SGLANGSIM_WARMUP_SECONDS=0",
		"SGLANGSIM_TIME_SCALE="+strconv.FormatFloat(scale, 'g', -1, 64),
		"SGLANGSIM_NONDETERMINISM="+strconv.FormatFloat(nondet, 'g', -1, 64), "SGLANGSIM_FAIL="+fail)
	must(cmd.Start())
	s := &server{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for range 1000 {
		if r, err := http.Get(s.base + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return s
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.stop()
	fmt.Fprintln(os.Stderr, "sglangsim did not become ready")
	os.Exit(1)
	return nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
