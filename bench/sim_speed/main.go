// Command sim_speed prints the simulator's speed figures: output tok/s per
// speculative num_steps (1..10) at concurrency 1, 16 and 64 for a profile,
// computed by the scheduler the server runs (in virtual time); then it checks
// two points over real HTTP against the sglangsim binary, and measures the
// simulator's own CPU while it serves 256 concurrent streams. First it prints
// the flag-table coverage of every SGLang era the simulator models.
//
//	go run ./bench/sim_speed                # everything
//	go run ./bench/sim_speed -http=false -cpu=0
//	go run ./bench/sim_speed -flags         # the flag-table coverage per era only
//
// Only 127.0.0.1 is contacted.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/specsweep/specsweep/sim"
)

func main() {
	profile := flag.String("profile", sim.DefaultProfile, "performance profile")
	tp := flag.Int("tp", 4, "tensor parallel size")
	input := flag.Int("input", 1024, "prompt tokens per request")
	output := flag.Int("output", 512, "completion tokens per request")
	doHTTP := flag.Bool("http", true, "verify two points over real HTTP")
	cpuSec := flag.Float64("cpu", 10, "seconds of the 256-stream CPU measurement (0: skip)")
	cpuInput := flag.Int("cpu-input", 256, "prompt tokens per stream in the CPU measurement")
	flagsOnly := flag.Bool("flags", false, "print only the flag-table coverage per era")
	flag.Parse()

	flagCoverage(os.Stdout)
	if *flagsOnly {
		return
	}
	fmt.Println()

	p := sim.Profiles[*profile]
	if p == nil {
		fmt.Fprintf(os.Stderr, "unknown profile %q (known: %s)\n", *profile, strings.Join(sim.ProfileNames(), ", "))
		os.Exit(2)
	}
	fmt.Printf("profile %s, TP %d, EAGLE3 topk 1, input %d, output %d tokens, ignore_eos; output tok/s (accept length)\n",
		p.Name, *tp, *input, *output)
	concs := []int{1, 16, 64}
	fmt.Printf("%-9s", "steps")
	for _, c := range concs {
		fmt.Printf("%18s", fmt.Sprintf("c=%d", c))
	}
	fmt.Println()
	row := func(label string, argv []string) {
		m := model(p, argv)
		fmt.Printf("%-9s", label)
		for _, c := range concs {
			r := sim.Simulate(m, c, max(4*c, 8), *input, *output, 1)
			fmt.Printf("%18s", fmt.Sprintf("%.0f (%.2f)", r.OutputTokS, r.AcceptLen))
		}
		fmt.Println()
	}
	row("baseline", []string{"--tp", strconv.Itoa(*tp)})
	for k := 1; k <= 10; k++ {
		row(strconv.Itoa(k), eagle3(*tp, k))
	}

	if !*doHTTP && *cpuSec <= 0 {
		return
	}
	bin, cleanup := build()
	defer cleanup()
	if *doHTTP {
		fmt.Println("\nover HTTP (sglangsim, SGLANGSIM_TIME_SCALE=0.1, /v1/chat/completions streaming; tok/s in simulated time):")
		for _, pt := range []struct{ steps, conc int }{{3, 1}, {3, 16}} {
			argv := eagle3(*tp, pt.steps)
			want := sim.Simulate(model(p, argv), pt.conc, 2*pt.conc, 256, 256, 1)
			got := loadHTTP(bin, p.Name, argv, 0.1, pt.conc, 2*pt.conc, 256, 256)
			fmt.Printf("  steps %d c=%-3d model %.0f tok/s, HTTP %.0f tok/s (%+.1f%%)\n", pt.steps, pt.conc,
				want.OutputTokS, got, 100*(got/want.OutputTokS-1))
		}
	}
	if *cpuSec > 0 {
		fmt.Printf("\nsim CPU with 256 concurrent streams (time scale 1, %d-token prompts, %.0f s window after all are decoding):\n", *cpuInput, *cpuSec)
		for _, c := range []struct {
			label string
			argv  []string
			scale float64
		}{
			{"baseline", []string{"--tp", strconv.Itoa(*tp)}, 1},
			{"EAGLE3 steps 3, --max-running-requests 256", append(eagle3(*tp, 3), "--max-running-requests", "256"), 1},
			{"baseline, SGLANGSIM_TIME_SCALE=0.1 (10x)", []string{"--tp", strconv.Itoa(*tp)}, 0.1},
		} {
			cpu, tps, streams := cpuRun(bin, p.Name, c.argv, c.scale, 256, *cpuInput, *cpuSec)
			fmt.Printf("  %-44s %3d streams, %6.0f tok/s delivered, sim CPU %.1f%% of one core (%.1f%% of 2 cores)\n",
				c.label, streams, tps, 100*cpu, 50*cpu)
		}
	}
}

func eagle3(tp, k int) []string {
	return []string{"--tp", strconv.Itoa(tp), "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
		"--speculative-num-steps", strconv.Itoa(k), "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", strconv.Itoa(k + 1)}
}

func model(p *sim.Profile, argv []string) *sim.Model {
	a, _, err := sim.ParseArgs(append([]string{"--model-path", "/models/" + p.Name}, argv...))
	if err != nil {
		panic(err)
	}
	return sim.NewModel(a, p, 96)
}

func build() (string, func()) {
	dir, err := os.MkdirTemp("", "sim_speed")
	must(err)
	bin := filepath.Join(dir, "sglangsim")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/specsweep/specsweep/cmd/sglangsim").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	return bin, func() { os.RemoveAll(dir) }
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type server struct {
	cmd  *exec.Cmd
	base string
}

func start(bin, profile string, argv []string, scale float64) *server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, append([]string{"--model-path", "/models/" + profile, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, argv...)...)
	cmd.Env = append(os.Environ(), "SGLANGSIM_PROFILE="+profile, "SGLANGSIM_LOAD_SECONDS=0.5", "SGLANGSIM_WARMUP_SECONDS=0",
		"SGLANGSIM_TIME_SCALE="+strconv.FormatFloat(scale, 'g', -1, 64))
	must(cmd.Start())
	s := &server{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for i := 0; i < 1000; i++ {
		if r, err := http.Get(s.base + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return s
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "sglangsim did not become ready")
	os.Exit(1)
	return nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}

// stream sends one streaming chat request and adds the completion tokens
// (words) it receives to tokens as they arrive.
func stream(ctx context.Context, base, prompt string, maxTokens int, tokens *atomic.Int64) {
	body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": prompt}},
		"max_tokens": maxTokens, "ignore_eos": true, "temperature": 0, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", bytes.NewReader(body))
	resp, err := httpClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	key := []byte(`"content":"`)
	for sc.Scan() {
		line := sc.Bytes()
		if i := bytes.Index(line, key); i >= 0 {
			rest := line[i+len(key):]
			tokens.Add(int64(len(strings.Fields(string(rest[:bytes.IndexByte(rest, '"')])))))
		}
	}
}

// loadHTTP runs a closed loop of conc clients until n requests are done and
// returns output tok/s in simulated time.
func loadHTTP(bin, profile string, argv []string, scale float64, conc, n, input, output int) float64 {
	s := start(bin, profile, argv, scale)
	defer s.stop()
	prompt := strings.TrimSpace(strings.Repeat("word ", input))
	var next, tokens atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				stream(context.Background(), s.base, prompt, output, &tokens)
			}
		}()
	}
	wg.Wait()
	return float64(tokens.Load()) / (time.Since(t0).Seconds() / scale)
}

// cpuRun keeps endless streams open for sec seconds and returns the
// sim's CPU use (in cores), the delivered tok/s and the number of streams.
func cpuRun(bin, profile string, argv []string, scale float64, streams, input int, sec float64) (float64, float64, int) {
	s := start(bin, profile, argv, scale)
	defer s.stop()
	prompt := strings.TrimSpace(strings.Repeat("word ", input))
	ctx, cancel := context.WithCancel(context.Background())
	var tokens atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream(ctx, s.base, prompt, 200000, &tokens)
		}()
	}
	time.Sleep(5 * time.Second) // every stream admitted and past its prefill
	t0, c0, k0 := time.Now(), cpuSeconds(s.cmd.Process.Pid), tokens.Load()
	time.Sleep(time.Duration(sec * float64(time.Second)))
	el, c1, k1 := time.Since(t0).Seconds(), cpuSeconds(s.cmd.Process.Pid), tokens.Load()
	cancel()
	wg.Wait()
	return (c1 - c0) / el, float64(k1-k0) / el, streams
}

// cpuSeconds is utime+stime of pid from /proc/PID/stat.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}
