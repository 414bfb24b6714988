// Command workload_accuracy measures specsweep's load generator against sglangsim's ground truth
// (SGLANGSIM_TRUTH): TTFT, output throughput and accept length errors at concurrency 1 and 32, on
// random prompts and on a prompt set (a generated MT-Bench-shaped file of two-turn conversations,
// padded, or the user's file with -set), the client's CPU cost per million streamed tokens, and
// the SSE rate one machine sustains at c=256. It prints figures; it asserts nothing. Run it
// through bench/workload_accuracy.sh.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/specsweep/specsweep/workload"
)

var (
	simBin  = flag.String("sim", "", "sglangsim binary")
	quick   = flag.Bool("quick", false, "fewer requests (a smoke run)")
	prompts = flag.String("prompts", "random,set", "the accuracy table's prompts: random, set, or both")
	setFile = flag.String("set", "", "a prompt set file (any format, detected) instead of the generated one")
	pad     = flag.Int("pad", 1024, "pad the set's first turns to this many words (0: as they are)")
	cost    = flag.Bool("cost", true, "measure the cost and top rate at c=256")
)

// writeGeneratedSet writes an MT-Bench-shaped set (question.jsonl: question_id, category, two
// turns) of n made-up items: prose, code, arithmetic and lists of 20 to 200 words, a quarter with
// their own max_tokens. No dataset's text: the words are generated here.
func writeGeneratedSet(path string, n int) error {
	vocab := strings.Fields("the a quiet river town market report garden engine letter window bridge " +
		"morning winter station library question answer student teacher machine signal")
	var b bytes.Buffer
	for k := range n {
		var first strings.Builder
		length := 20 + (k*37)%181
		category := []string{"prose", "code", "math", "list"}[k%4]
		switch category {
		case "prose":
			first.WriteString("Write a short story that uses these words:")
		case "code":
			fmt.Fprintf(&first, "def step%d(xs):\n    total = 0\n    for x in xs:\n        total += x * %d\n    return total\n# Explain step%d and name:", k, k, k)
		case "math":
			fmt.Fprintf(&first, "What is %d times %d plus %d? Show each step, then sort:", k+3, k+7, k*11)
		case "list":
			first.WriteString("List ten facts about each of:")
		}
		for w := words(first.String()); w < length; w++ {
			first.WriteString(" " + vocab[(k*7+w*13)%len(vocab)])
		}
		item := map[string]any{"question_id": 1000 + k, "category": category,
			"turns": []string{first.String(), fmt.Sprintf("Now do it again for item %d in half the words.", k)}}
		if k%4 == 1 {
			item["max_tokens"] = []int{128, 512}[k/4%2]
		}
		line, err := json.Marshal(item)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func words(s string) int { return len(strings.Fields(s)) }

type sim struct {
	url, truth string
	cmd        *exec.Cmd
}

func startSim(dir string, scale float64, extra ...string) (*sim, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	truth := filepath.Join(dir, fmt.Sprintf("truth-%d.jsonl", port))
	args := append([]string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--host", "127.0.0.1",
		"--port", strconv.Itoa(port), "--enable-metrics", "--log-level", "warning",
		"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
		"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"}, extra...)
	cmd := exec.Command(*simBin, args...)
	cmd.Env = append(os.Environ(), "SGLANGSIM_LOAD_SECONDS=0", "SGLANGSIM_WARMUP_SECONDS=0",
		"SGLANGSIM_TIME_SCALE="+strconv.FormatFloat(scale, 'g', -1, 64), "SGLANGSIM_TRUTH="+truth)
	logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("sim-%d.log", port)))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &sim{url: "http://127.0.0.1:" + strconv.Itoa(port), truth: truth, cmd: cmd}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(s.url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
	}
	s.stop()
	return nil, fmt.Errorf("sglangsim did not start")
}

func (s *sim) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

type truthReq struct {
	Event   string   `json:"event"`
	RID     string   `json:"rid"`
	Arrival float64  `json:"arrival_unix_ms"`
	First   *float64 `json:"first_token_unix_ms"`
	Finish  float64  `json:"finish_unix_ms"`
	Tokens  int      `json:"completion_tokens"`
	Verify  int      `json:"verify_steps"`
}

func readTruth(path string, want int) (map[string]truthReq, error) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		out := map[string]truthReq{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var t truthReq
			if json.Unmarshal(sc.Bytes(), &t) == nil && t.Event == "request" {
				out[t.RID] = t
			}
		}
		f.Close()
		if len(out) >= want || time.Now().After(deadline) {
			return out, nil
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type figures struct {
	conc                      int
	scale                     float64
	requests                  int
	clientTTFT, truthTTFT     float64 // medians, ms
	overhead                  float64 // median of per-request (client - truth) TTFT, ms
	clientTokS, truthTokS     float64
	clientAccept, truthAccept float64
	cpuPerMTok, tokS, chunksS float64
	tokens, chunks            int64
	cpuSeconds, wallSeconds   float64
	clientCPUPercentOfOneCore float64
	medianITLClient           float64
	meanIn, meanFirstIn       float64 // the server's prompt tokens per request, all and first turns
	laterTurns                int
}

// measure runs one level of requests (random prompts of in words, or ds when not nil) against a
// fresh simulator and compares it with the simulator's truth.
func measure(dir string, conc, requests, in, out int, scale float64, ds workload.Dataset, simArgs ...string) (*figures, error) {
	s, err := startSim(dir, scale, simArgs...)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	var saved bytes.Buffer
	cpu0, wall0 := cpuTime(), time.Now()
	res, err := workload.Run(context.Background(), workload.Config{URL: s.url, Concurrency: conc, Requests: requests,
		Warmup: max(2, conc/4), InputTokens: in, OutputTokens: out, Prompts: ds, Seed: 1, SaveRequests: &saved,
		StallTimeout: 30 * time.Second})
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	if err != nil {
		return nil, err
	}
	if res.Failed > 0 || res.Aborted != "" {
		return nil, fmt.Errorf("c=%d: %d failed, %s %+v", conc, res.Failed, res.Aborted, res.Errors)
	}
	truth, err := readTruth(s.truth, requests+max(2, conc/4))
	if err != nil {
		return nil, err
	}
	f := &figures{conc: conc, scale: scale, requests: requests, clientTTFT: res.TTFT.Median, clientTokS: res.OutputThroughput,
		tokens: res.TotalOutputTokens, chunks: res.ITL.Count + res.TTFT.Count, cpuSeconds: cpu.Seconds(), wallSeconds: wall.Seconds(),
		medianITLClient: res.ITL.Median, meanIn: res.MeanInputTokens, meanFirstIn: res.MeanFirstInputTokens,
		laterTurns: res.LaterTurns}
	if res.AcceptLength != nil {
		f.clientAccept = *res.AcceptLength
	}
	var tt, diff []float64
	var tok, tokM1, ver int
	minA, maxF := math.Inf(1), math.Inf(-1)
	sc := bufio.NewScanner(&saved)
	for sc.Scan() {
		var r workload.RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, err
		}
		t, ok := truth[r.ID]
		if !ok || t.First == nil {
			return nil, fmt.Errorf("request %s not in the truth", r.ID)
		}
		tt = append(tt, *t.First-t.Arrival)
		diff = append(diff, r.TTFTMs-(*t.First-t.Arrival))
		tok += t.Tokens
		tokM1 += t.Tokens - 1
		ver += t.Verify
		minA, maxF = math.Min(minA, t.Arrival), math.Max(maxF, t.Finish)
	}
	f.truthTTFT, f.overhead = median(tt), median(diff)
	f.truthTokS = float64(tok) / ((maxF - minA) / 1000)
	if ver > 0 {
		f.truthAccept = float64(tokM1) / float64(ver)
	}
	f.tokS = float64(f.tokens) / res.Duration.Seconds()
	f.chunksS = float64(f.chunks) / res.Duration.Seconds()
	f.cpuPerMTok = cpu.Seconds() / (float64(f.tokens) / 1e6)
	f.clientCPUPercentOfOneCore = 100 * cpu.Seconds() / wall.Seconds()
	return f, nil
}

func main() {
	flag.Parse()
	if *simBin == "" {
		fmt.Fprintln(os.Stderr, "usage: workload_accuracy -sim PATH/TO/sglangsim")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "workload-accuracy-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	n1, n32, n256 := 40, 256, 1024
	if *quick {
		n1, n32, n256 = 10, 64, 256
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "workload_accuracy:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}

	type source struct {
		name string
		ds   workload.Dataset
	}
	var sources []source
	for _, p := range strings.Split(*prompts, ",") {
		switch p {
		case "": // -prompts "": no accuracy table
		case "random":
			sources = append(sources, source{name: "random 1024"})
		case "set":
			path, name := *setFile, "generated"
			if path == "" {
				path = filepath.Join(dir, "generated.jsonl")
				if err := writeGeneratedSet(path, 80); err != nil {
					fail(err)
				}
			} else {
				name = filepath.Base(path)
			}
			set, err := workload.ReadPromptSet(context.Background(), name, path, "", workload.SetLimits{})
			if err != nil {
				fail(err)
			}
			ds, err := workload.NewSetDataset(set, *pad, 1)
			if err != nil {
				fail(err)
			}
			label := fmt.Sprintf("set %s (%s, %d items, %d of several turns", name, set.Format, len(set.Items), ds.Conversations())
			if *pad > 0 {
				label += fmt.Sprintf(", padded to %d", *pad)
			}
			sources = append(sources, source{name: label + ")", ds: ds})
		default:
			fail(fmt.Errorf("-prompts: unknown %q (want random, set)", p))
		}
	}
	if len(sources) > 0 {
		fmt.Println("## Accuracy against sglangsim's ground truth (EAGLE3 steps=3 topk=1, tp=4, 256 out unless an item says, time scale 0.1)")
		fmt.Println("| prompts | concurrency | requests (later turns) | mean prompt tokens, first turns / all | median TTFT client / truth (ms) | error (ms) | median per-request overhead (ms) | output tok/s client / truth | error | accept length client / truth | error |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
		for _, src := range sources {
			for _, c := range []struct{ conc, n int }{{1, n1}, {32, n32}} {
				f, err := measure(dir, c.conc, c.n, 1024, 256, 0.1, src.ds)
				if err != nil {
					fail(err)
				}
				fmt.Printf("| %s | %d | %d (%d) | %.1f / %.1f | %.3f / %.3f | %+.3f | %+.3f | %.1f / %.1f | %+.2f%% | %.3f / %.3f | %+.3f |\n",
					src.name, f.conc, f.requests, f.laterTurns, f.meanFirstIn, f.meanIn, f.clientTTFT, f.truthTTFT,
					f.clientTTFT-f.truthTTFT, f.overhead, f.clientTokS, f.truthTokS, 100*(f.clientTokS/f.truthTokS-1),
					f.clientAccept, f.truthAccept, f.clientAccept-f.truthAccept)
			}
		}
	}
	if !*cost {
		return
	}

	fmt.Println()
	fmt.Println("## Cost and top rate at c=256 (128 in / 256 out, --max-running-requests 256; sglangsim runs on the same 2 cores)")
	fmt.Println("| time scale | tokens/s | chunks/s | median TTFT error (ms) | median per-request overhead (ms) | client CPU s per 1M tokens | client CPU (% of one core) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, scale := range []float64{0.05, 0.03, 0.02, 0.01, 0.005} {
		f, err := measure(dir, 256, n256, 128, 256, scale, nil, "--max-running-requests", "256", "--cuda-graph-max-bs", "256")
		if err != nil {
			fail(err)
		}
		fmt.Printf("| %g | %.0f | %.0f | %+.3f | %+.3f | %.2f | %.0f |\n", scale, f.tokS, f.chunksS, f.clientTTFT-f.truthTTFT,
			f.overhead, f.cpuPerMTok, f.clientCPUPercentOfOneCore)
	}
}
