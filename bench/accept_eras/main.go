// Command accept_eras measures, for every SGLang release profile of sglangsim (SGLANGSIM_VERSION),
// the per-level accept length specsweep records against the simulator's ground truth: levels at
// temperature 0 and 1, one after the other on the same server, with no warmup between them (the
// worst case for a source that is not per level). The server runs under hostctl's local driver and
// the load is workload.Run with the instance's log as its ServerLog, as in a sweep. It prints a
// Markdown table; it asserts nothing. Run it through bench/accept_eras.sh.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/workload"
)

var (
	simBin = flag.String("sim", "", "sglangsim binary")
	quick  = flag.Bool("quick", false, "fewer requests (a smoke run)")
)

type level struct {
	conc int
	temp float64
}

func main() {
	flag.Parse()
	if *simBin == "" {
		fmt.Fprintln(os.Stderr, "accept_eras: -sim is required")
		os.Exit(2)
	}
	cmd := exec.Command(*simBin)
	cmd.Env = append(os.Environ(), "SGLANGSIM_VERSION=list")
	out, err := cmd.Output()
	eras := strings.Fields(string(out))
	if err != nil || len(eras) == 0 {
		fmt.Fprintf(os.Stderr, "accept_eras: SGLANGSIM_VERSION=list gave no release profile (%v)\n", err)
		os.Exit(1)
	}
	requests := 16
	if *quick {
		requests = 6
	}
	levels := []level{{1, 0}, {1, 1}, {8, 0}, {8, 1}, {1, 0}}
	fmt.Println("| era | level | temperature | recorded | source | truth | error |")
	fmt.Println("|---|---|---|---|---|---|---|")
	worst := map[string]float64{}
	for _, era := range eras {
		rows, err := measureEra(era, levels, requests)
		if err != nil {
			fmt.Fprintf(os.Stderr, "accept_eras: %s: %v\n", era, err)
			os.Exit(1)
		}
		for i, r := range rows {
			fmt.Printf("| %s | %d: c=%d | %g | %.3f | %s | %.3f | %+.3f |\n", era, i+1, levels[i].conc, levels[i].temp,
				r.got, r.source, r.truth, r.got-r.truth)
			worst[era] = math.Max(worst[era], math.Abs(r.got-r.truth))
		}
	}
	fmt.Println()
	fmt.Println("| era | worst per-level error (target <= 0.05) |")
	fmt.Println("|---|---|")
	for _, era := range eras {
		fmt.Printf("| %s | %.3f |\n", era, worst[era])
	}
}

type row struct {
	got, truth float64
	source     string
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func measureEra(era string, levels []level, requests int) ([]row, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "accept-eras-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	truth := filepath.Join(dir, "truth.jsonl")
	l := hostctl.NewLocal(hostctl.LocalOptions{Name: "bench"})
	defer l.Close()
	launch := hostctl.Launch{
		Argv: []string{*simBin, "--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--host", "127.0.0.1",
			"--port", strconv.Itoa(port), "--enable-metrics",
			"--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/models/eagle",
			"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"},
		Env: map[string]string{"SGLANGSIM_VERSION": era, "SGLANGSIM_TRUTH": truth, "SGLANGSIM_TIME_SCALE": "0.05",
			"SGLANGSIM_LOAD_SECONDS": "0", "SGLANGSIM_WARMUP_SECONDS": "0"},
		Port: port, ReadyTimeout: time.Minute, StopTimeout: 10 * time.Second,
	}
	in, err := l.Start(ctx, launch)
	if err != nil {
		return nil, err
	}
	defer func() { _, _ = in.Stop(ctx, nil) }()
	if _, err := in.WaitReady(ctx); err != nil {
		return nil, err
	}
	sl, _ := in.(workload.ServerLog)
	client := workload.NewHTTPClient(8)
	var out []row
	for _, lv := range levels {
		res, err := workload.Run(ctx, workload.Config{URL: "http://" + in.Address(), Concurrency: lv.conc, Requests: requests,
			InputTokens: 64, OutputTokens: 128, Temperature: lv.temp, HTTPClient: client, ServerLog: sl, Seed: 7})
		if err != nil {
			return nil, err
		}
		if res.AcceptLength == nil {
			return nil, fmt.Errorf("level c=%d T=%g: no accept length (%d completed, %d failed)", lv.conc, lv.temp, res.Completed, res.Failed)
		}
		t, err := truthAccept(truth, res.Start, res.Start.Add(res.Duration), requests)
		if err != nil {
			return nil, err
		}
		out = append(out, row{got: *res.AcceptLength, truth: t, source: res.AcceptLengthSource})
	}
	return out, nil
}

// truthAccept is the simulator's accept length over the requests that arrived in [from, to]:
// sum(completion_tokens - 1) / sum(verify_steps) (the first token comes from prefill).
func truthAccept(path string, from, to time.Time, want int) (float64, error) {
	lo, hi := float64(from.UnixMicro())/1000-1, float64(to.UnixMicro())/1000+1
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		var tokens, verify, n int
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r struct {
				Event   string  `json:"event"`
				Arrival float64 `json:"arrival_unix_ms"`
				Tokens  int     `json:"completion_tokens"`
				Verify  int     `json:"verify_steps"`
			}
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.Event != "request" || r.Arrival < lo || r.Arrival > hi {
				continue
			}
			tokens, verify, n = tokens+r.Tokens-1, verify+r.Verify, n+1
		}
		f.Close()
		if n >= want || time.Now().After(deadline) {
			if verify == 0 {
				return 0, fmt.Errorf("no verify steps in the truth of the window (%d requests)", n)
			}
			return float64(tokens) / float64(verify), nil
		}
	}
}
