// Command loadmem measures the load generator's peak memory (RSS) on a level of many long prompts
// against the real simulator (sglangsim over loopback): the load runs in a child process whose
// peak RSS (getrusage of the child, and its own VmHWM) is printed, for this tree and for an
// earlier commit (built from `git archive`, with this same driver), side by side. With -worst it
// also holds a level at the spec's bounds (every slot in flight with a prompt of -worst-input
// tokens, held by a loopback sink that stops reading each body early) and prints its peak; the earlier commit runs that case under an address-space limit (RLIMIT_AS), so that its
// out-of-memory death costs the machine nothing.
// It prints figures; it asserts nothing. Run it through bench/loadmem.sh.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/specsweep/specsweep/workload"
)

// beforeStreamedBodies is the last commit whose load generator built every prompt whole.
const beforeStreamedBodies = "0181fbb"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		child(os.Args[2:])
		return
	}
	var (
		simBin      = flag.String("sim", "", "sglangsim binary (default: built from ./cmd/sglangsim)")
		conc        = flag.Int("concurrency", 4096, "requests in flight")
		input       = flag.Int("input", 32768, "prompt tokens (random dataset)")
		output      = flag.Int("output", 4, "output tokens per request")
		requests    = flag.Int("requests", 0, "measured requests (0: one per slot)")
		scale       = flag.String("scale", "0.0001", "SGLANGSIM_TIME_SCALE")
		before      = flag.String("before", beforeStreamedBodies, "commit to compare with (empty: this tree only)")
		worst       = flag.Bool("worst", false, "also hold a level at the bounds (-concurrency x -worst-input)")
		worstInput  = flag.Int("worst-input", 4<<20, "prompt tokens of the worst case")
		hold        = flag.Duration("worst-hold", 10*time.Minute, "the longest the worst case waits for every slot to be in flight")
		beforeLimit = flag.Int("before-as-gib", 8, "address-space limit (GiB) of the earlier commit's worst case")
	)
	flag.Parse()
	if err := run(*simBin, *conc, *input, *output, *requests, *scale, *before, *worst, *worstInput, *hold, *beforeLimit); err != nil {
		fmt.Fprintln(os.Stderr, "loadmem:", err)
		os.Exit(1)
	}
}

// The worst case's sockets are kept small on both sides, so that 4096 stalled uploads hold little
// kernel memory (TCP's memory is the whole machine's: with the default buffers, 4096 stalled uploads
// pushed it past tcp_mem and slowed every connection on the machine). stallAfter is how much of each
// body the sink reads before it holds the request.
const (
	stallAfter = 16 << 10
	sockBuf    = 8 << 10
)

func run(simBin string, conc, input, output, requests int, scale, before string, worst bool, worstInput int, hold time.Duration, beforeLimit int) error {
	tmp, err := os.MkdirTemp("", "loadmem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if simBin == "" {
		simBin = filepath.Join(tmp, "sglangsim")
		if out, err := exec.Command("go", "build", "-o", simBin, "./cmd/sglangsim").CombinedOutput(); err != nil {
			return fmt.Errorf("build sglangsim: %v\n%s", err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	type variant struct{ name, bin string }
	variants := []variant{{"this tree", self}}
	if before != "" {
		// Outside a git checkout (or without that commit) only this tree is measured.
		if bin, err := buildAt(tmp, before); err != nil {
			fmt.Fprintf(os.Stderr, "loadmem: no comparison with %s: %v\n", before, err)
		} else {
			variants = append([]variant{{"before (" + before + ")", bin}}, variants...)
		}
	}
	if requests == 0 {
		requests = conc
	}
	fmt.Printf("## Load generator peak RSS: concurrency %d, %d-token prompts, %d output tokens, %d requests (sglangsim, SGLANGSIM_TIME_SCALE=%s)\n\n",
		conc, input, output, requests, scale)
	fmt.Println("| code | peak RSS (getrusage) | VmHWM | completed | failed | wall | first error |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, v := range variants {
		url, stop, err := startSim(simBin, tmp, scale)
		if err != nil {
			return err
		}
		r, err := measure(url, v.bin, conc, input, output, requests, 0, nil, 0)
		stop()
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		fmt.Println(r.row(v.name, false))
	}
	if !worst {
		return nil
	}
	fmt.Printf("\n## At the bounds: concurrency %d, %d-token prompts, every slot in flight (a sink holds each request after %d KiB of its body)\n\n",
		conc, worstInput, stallAfter>>10)
	fmt.Println("| code | peak RSS (getrusage) | VmHWM | requests held at once | wall | first error |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, v := range variants {
		limit := 0
		name := v.name
		if v.bin != self {
			limit = beforeLimit
			name += fmt.Sprintf(", RLIMIT_AS %d GiB", limit)
		}
		sk, url, err := startSink(stallAfter)
		if err != nil {
			return err
		}
		r, err := measure(url, v.bin, conc, worstInput, output, conc, limit, sk, hold)
		_ = sk.srv.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		fmt.Println(r.row(name, true))
	}
	return nil
}

// buildAt builds this driver against the workload package of an earlier commit.
func buildAt(tmp, commit string) (string, error) {
	dir := filepath.Join(tmp, "src-"+commit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	sh := fmt.Sprintf("git archive %s | tar -x -C %s", commit, dir)
	if out, err := exec.Command("sh", "-c", sh).CombinedOutput(); err != nil {
		return "", fmt.Errorf("extract %s: %v\n%s", commit, err, out)
	}
	src, err := os.ReadFile("bench/loadmem/main.go")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "bench/loadmem"), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench/loadmem/main.go"), src, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(tmp, "loadmem-"+commit)
	cmd := exec.Command("go", "build", "-o", bin, "./bench/loadmem")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build at %s: %v\n%s", commit, err, out)
	}
	return bin, nil
}

// report is what a child prints, with the parent's view of it.
type report struct {
	Completed, Failed, Sent int
	FirstError              string
	VmHWMKiB                int64
	Wall                    time.Duration
	MaxRSSKiB               int64  `json:"-"`
	Held                    int64  `json:"-"` // requests the sink held at once
	Stopped                 string `json:"-"`
	Died                    string `json:"-"`
}

func (r *report) row(name string, held bool) string {
	if r.Died != "" {
		if held {
			return fmt.Sprintf("| %s | %s | - | %d | %.1f s | died: %s |", name, mib(r.MaxRSSKiB), r.Held, r.Wall.Seconds(), r.Died)
		}
		return fmt.Sprintf("| %s | %s | - | - | - | %.1f s | died: %s |", name, mib(r.MaxRSSKiB), r.Wall.Seconds(), r.Died)
	}
	if held {
		return fmt.Sprintf("| %s | %s | %s | %d | %.1f s | %s |", name, mib(r.MaxRSSKiB), mib(r.VmHWMKiB), r.Held, r.Wall.Seconds(), r.FirstError)
	}
	return fmt.Sprintf("| %s | %s | %s | %d | %d | %.1f s | %s |", name, mib(r.MaxRSSKiB), mib(r.VmHWMKiB),
		r.Completed, r.Failed, r.Wall.Seconds(), r.FirstError)
}

func mib(kib int64) string { return fmt.Sprintf("%.0f MiB", float64(kib)/1024) }

// measure runs one child against url and returns its report. With a sink, the child is stopped
// (SIGTERM: it cancels its level and reports) once every slot's request is held by the sink, or
// after hold.
func measure(url, bin string, conc, input, output, requests, asGiB int, sk *sink, hold time.Duration) (*report, error) {
	sndbuf := 0
	if sk != nil {
		sndbuf = sockBuf
	}
	args := []string{"-child", url, strconv.Itoa(conc), strconv.Itoa(input), strconv.Itoa(output),
		strconv.Itoa(requests), strconv.Itoa(asGiB), strconv.Itoa(sndbuf)}
	cmd := exec.Command(bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	r := &report{}
	var err error
	if sk == nil {
		err = <-done
	} else {
		tick := time.NewTicker(100 * time.Millisecond)
		deadline := time.After(hold)
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-tick.C:
				if kib := tcpMemKiB(); kib > tcpMemGuardKiB {
					r.Stopped = fmt.Sprintf("stopped early: the kernel's TCP memory reached %d MiB", kib>>10)
				} else if sk.held.Load() < int64(conc) {
					continue
				}
			case <-deadline:
			}
			r.Held = sk.held.Load()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			err = <-done
			break
		}
		tick.Stop()
		if r.Held == 0 {
			r.Held = sk.held.Load()
		}
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSSKiB = ru.Maxrss // KiB on Linux
	}
	if err != nil {
		r.Wall = time.Since(began)
		r.Died = firstLine(stderr.String())
		return r, nil
	}
	held, rss, stopped := r.Held, r.MaxRSSKiB, r.Stopped
	if err := json.Unmarshal([]byte(stdout.String()), r); err != nil {
		return nil, fmt.Errorf("child said %q: %w", stdout.String(), err)
	}
	r.Held, r.MaxRSSKiB = held, rss
	if stopped != "" {
		r.FirstError = stopped
	}
	return r, nil
}

// tcpMemGuardKiB is the kernel TCP memory (all sockets of the machine) at which the worst case
// stops early: a quarter of this machine's usual tcp_mem pressure threshold.
const tcpMemGuardKiB = 384 << 10

// tcpMemKiB is the kernel's TCP memory in use (/proc/net/sockstat counts pages).
func tcpMemKiB() int64 {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "TCP: "); ok {
			f := strings.Fields(rest)
			for i := 0; i+1 < len(f); i += 2 {
				if f[i] == "mem" {
					pages, _ := strconv.ParseInt(f[i+1], 10, 64)
					return pages * int64(os.Getpagesize()) >> 10
				}
			}
		}
	}
	return 0
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "(no output)"
}

// sink serves the worst case in this process: it reads the first stallAfter bytes of every body,
// then holds the request (reading nothing more: the client's writes wait on TCP's window, its request
// stays in flight) until the client gives up. held counts the requests held at once. (sglangsim,
// like SGLang's JSON parsing, holds each body whole: 4096 bodies of millions of tokens would need
// more memory than this machine has, on the server's side.)
type sink struct {
	held atomic.Int64
	srv  *http.Server
}

func startSink(stallAfter int64) (*sink, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	sk := &sink{}
	sk.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			_, _ = w.Write([]byte(`{"data":[{"id":"sink"}]}`))
			return
		case "/v1/completions", "/v1/chat/completions":
		default:
			http.NotFound(w, r)
			return
		}
		if _, err := io.CopyN(io.Discard, r.Body, stallAfter); err != nil {
			return
		}
		sk.held.Add(1)
		defer sk.held.Add(-1)
		<-r.Context().Done()
	})}
	go func() { _ = sk.srv.Serve(smallWindows{ln}) }()
	return sk, "http://" + ln.Addr().String(), nil
}

// smallWindows gives each accepted connection a small receive buffer (see sockBuf).
type smallWindows struct{ net.Listener }

func (l smallWindows) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(sockBuf)
	}
	return c, err
}

func startSim(bin, tmp, scale string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := []string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--host", "127.0.0.1",
		"--port", strconv.Itoa(port), "--log-level", "warning"}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SGLANGSIM_LOAD_SECONDS=0", "SGLANGSIM_WARMUP_SECONDS=0", "SGLANGSIM_TIME_SCALE="+scale)
	logf, err := os.Create(filepath.Join(tmp, fmt.Sprintf("sim-%d.log", port)))
	if err != nil {
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() }
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url, stop, nil
			}
		}
	}
	stop()
	b, _ := os.ReadFile(logf.Name())
	return "", nil, fmt.Errorf("sglangsim did not start: %s", b)
}

// child runs one level and prints a report as JSON: args URL CONCURRENCY INPUT OUTPUT REQUESTS
// AS_GIB (0: no address-space limit) SNDBUF (0: the kernel's; else each connection's send buffer,
// set on the client NewHTTPClient makes). SIGTERM cancels the level (then it reports what it has).
func child(args []string) {
	n := make([]int, 6)
	for i := range n {
		v, err := strconv.Atoi(args[i+1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadmem child:", err)
			os.Exit(2)
		}
		n[i] = v
	}
	conc, input, output, requests, asGiB, sndbuf := n[0], n[1], n[2], n[3], n[4], n[5]
	if asGiB > 0 {
		lim := uint64(asGiB) << 30
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
			fmt.Fprintln(os.Stderr, "loadmem child: setrlimit:", err)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	start := time.Now()
	client := workload.NewHTTPClient(conc)
	if sndbuf > 0 {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
			Control: func(_, _ string, c syscall.RawConn) error {
				return c.Control(func(fd uintptr) {
					_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, sndbuf)
				})
			}}
		client.Transport.(*http.Transport).DialContext = d.DialContext
	}
	res, err := workload.Run(ctx, workload.Config{URL: args[0], API: workload.APICompletions, Concurrency: conc,
		Requests: requests, InputTokens: input, OutputTokens: output, Seed: 1, MaxConsecutiveFailures: -1,
		StallTimeout: 10 * time.Minute, RequestTimeout: 20 * time.Minute, HTTPClient: client})
	if err != nil && !(ctx.Err() != nil && res != nil) {
		fmt.Fprintln(os.Stderr, "loadmem child:", err)
		os.Exit(1)
	}
	r := report{Completed: res.Completed, Failed: res.Failed, Sent: res.Sent, Wall: time.Since(start), VmHWMKiB: vmHWM()}
	if len(res.Errors) > 0 && ctx.Err() == nil {
		r.FirstError = fmt.Sprintf("%s (x%d)", res.Errors[0].Message, res.Errors[0].Count)
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// vmHWM is this process's peak resident set (KiB), from /proc/self/status.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return 0
}
