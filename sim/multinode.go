package sim

// Multi-node launch: --nnodes, --node-rank, --dist-init-addr, --dist-timeout (docs/sglangsim.md,
// "Multi-node"). Node 0 serves HTTP; nodes >= 1 load their share of the model and then answer only
// SGLang's dummy health server. Their schedulers meet at torch's TCPStore rendezvous on the
// dist-init port, which this file emulates over a real TCP connection per node.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// torchDefaultDistTimeout is init_process_group's timeout for NCCL when --dist-timeout is unset
// (torch's default_pg_nccl_timeout, 10 minutes); the TCPStore rendezvous waits that long.
const torchDefaultDistTimeout = 600

// Inter-node all-reduce model (the speed model's share of a step spent across nodes). The model
// shape is assumed, not read from a config: every profile is taken as 48 layers of width 4096.
const (
	interNodeLayers = 48
	interNodeHidden = 4096
)

// NetModel is the inter-node network of a multi-node server: NCCL's transport and what one
// all-reduce across the nodes costs.
type NetModel struct {
	Name      string  // "IB" or "Socket" (SGLANGSIM_NCCL_NET)
	LatencyUS float64 // fixed cost of one inter-node all-reduce, µs
	GBps      float64 // bandwidth per GPU, GB/s
}

// netDefaults are the figures of each transport (docs/sglangsim.md, "The speed model across nodes").
func netDefaults(name string) NetModel {
	if name == "Socket" {
		return NetModel{Name: "Socket", LatencyUS: 60, GBps: 3}
	}
	return NetModel{Name: "IB", LatencyUS: 20, GBps: 50}
}

// interNodeMs is the time (ms, time scale 1) that layers layers of one forward over tokens tokens
// spend in all-reduces across nnodes nodes: two per layer (attention and MLP outputs, as tensor
// parallelism reduces them), each a fixed latency plus a ring's 2(n-1)/n of the bf16 activations
// over the per-GPU bandwidth.
func interNodeMs(net NetModel, nnodes, tokens, layers int) float64 {
	if nnodes <= 1 || tokens <= 0 || layers <= 0 {
		return 0
	}
	bytes := float64(tokens) * interNodeHidden * 2
	per := net.LatencyUS/1000 + 2*float64(nnodes-1)/float64(nnodes)*bytes/(net.GBps*1e9)*1000
	return float64(2*layers) * per
}

// Multi is where this process sits in a multi-node launch.
type Multi struct {
	NNodes, NodeRank int
	// Host and Port are the dist-init address (torch's TCPStore on node 0).
	Host string
	Port int
	// TimeoutSec is --dist-timeout, else torch's default.
	TimeoutSec int
	TPPerNode  int
}

// Enabled reports whether the launch spans nodes.
func (m Multi) Enabled() bool { return m.NNodes > 1 }

// FirstRank is the TP rank of this node's first GPU.
func (m Multi) FirstRank() int { return m.NodeRank * m.TPPerNode }

// MultiOf reads the multi-node arguments. Without --dist-init-addr each node uses its own
// 127.0.0.1:nccl_port (SGLang's model_runner), so the nodes never meet.
func MultiOf(a *Args) (Multi, error) {
	m := Multi{NNodes: max(a.NNodes, 1), NodeRank: a.NodeRank, TimeoutSec: a.DistTimeout}
	if m.TimeoutSec == 0 {
		m.TimeoutSec = torchDefaultDistTimeout
	}
	m.TPPerNode = max(1, a.TP/m.NNodes)
	if a.DistInitAddr == "" {
		m.Host, m.Port = "127.0.0.1", intOr(a.Raw, "nccl_port", 0)
		return m, nil
	}
	h, p, err := net.SplitHostPort(a.DistInitAddr)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil || n < 0 || n > 65535 {
		return m, fmt.Errorf("invalid --dist-init-addr %q: want HOST:PORT", a.DistInitAddr)
	}
	m.Host, m.Port = h, n
	return m, nil
}

// rvError is a rendezvous that failed: the exception the failing rank's scheduler raises.
type rvError struct {
	Rank   int    // TP rank that raises it
	Last   string // the exception line(s)
	Reason string // truth exit reason
}

func (e *rvError) Error() string { return e.Last }

// peerLink is this node's connections to the others after the rendezvous: node 0 holds one per
// node, the others one to node 0. lost receives the peer whose connection dropped.
type peerLink struct {
	mu    sync.Mutex
	conns []net.Conn
	ln    net.Listener
	lost  chan string // the peer's address
}

func (l *peerLink) watch(c net.Conn, r *bufio.Reader) {
	go func() {
		for {
			if _, err := r.ReadString('\n'); err != nil {
				select {
				case l.lost <- c.RemoteAddr().String():
				default:
				}
				return
			}
		}
	}()
}

// Close ends the links (the process is about to go).
func (l *peerLink) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
	}
	for _, c := range l.conns {
		c.Close()
	}
}

// rendezvous is torch's TCPStore rendezvous of init_process_group: node 0 (rank 0, the store's
// master) listens on the dist-init port and waits until every rank joined (TCPStore::waitForWorkers);
// the other nodes connect, retrying until the timeout (SocketConnectOp), then wait for node 0's
// ncclUniqueId. timeout is the scaled --dist-timeout.
func rendezvous(ctx context.Context, m Multi, timeout time.Duration) (*peerLink, error) {
	if m.NodeRank == 0 {
		return rendezvousMaster(ctx, m, timeout)
	}
	return rendezvousClient(ctx, m, timeout)
}

func rendezvousMaster(ctx context.Context, m Multi, timeout time.Duration) (*peerLink, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(m.Host, strconv.Itoa(m.Port)))
	if err != nil {
		last := "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. " +
			fmt.Sprintf("port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", m.Port)
		if !errors.Is(err, syscall.EADDRINUSE) {
			last = "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. " + err.Error()
		}
		return nil, &rvError{Rank: 0, Last: last, Reason: "rendezvous_bind"}
	}
	l := &peerLink{ln: ln, lost: make(chan string, 1)}
	type joined struct {
		c net.Conn
		r *bufio.Reader
	}
	joins := make(chan joined)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				r := bufio.NewReader(c)
				if _, err := r.ReadString('\n'); err != nil {
					c.Close()
					return
				}
				select {
				case joins <- joined{c, r}:
				case <-ctx.Done():
					c.Close()
				}
			}()
		}
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var got []joined
	for len(got) < m.NNodes-1 {
		select {
		case j := <-joins:
			got = append(got, j)
		case <-deadline.C:
			for _, j := range got {
				j.c.Close()
			}
			ln.Close()
			n := m.TPPerNode * (1 + len(got))
			return nil, &rvError{Rank: 0, Reason: "rendezvous_timeout", Last: fmt.Sprintf(
				"torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients joined.",
				m.TimeoutSec+1, n, m.TPPerNode*m.NNodes)}
		case <-ctx.Done():
			ln.Close()
			return nil, ctx.Err()
		}
	}
	for _, j := range got {
		if _, err := j.c.Write([]byte("go\n")); err == nil {
			l.conns = append(l.conns, j.c)
			l.watch(j.c, j.r)
		} else {
			j.c.Close()
		}
	}
	ln.Close() // every rank has its store connection; later ones would find none
	return l, nil
}

func rendezvousClient(ctx context.Context, m Multi, timeout time.Duration) (*peerLink, error) {
	addr := net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
	rank := m.FirstRank()
	deadline := time.Now().Add(timeout)
	var c net.Conn
	for {
		d := net.Dialer{Timeout: time.Until(deadline)}
		var err error
		if c, err = d.DialContext(ctx, "tcp", addr); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !time.Now().Before(deadline) {
			return nil, &rvError{Rank: rank, Reason: "rendezvous_timeout", Last: fmt.Sprintf(
				"torch.distributed.DistNetworkError: The client socket has timed out after %ds while trying to connect to (%s, %d).",
				m.TimeoutSec, m.Host, m.Port)}
		}
		// torch's connect backoff: retry while nothing listens
		select {
		case <-time.After(min(10*time.Millisecond, time.Until(deadline)+time.Millisecond)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if _, err := fmt.Fprintf(c, "join %d\n", m.NodeRank); err != nil {
		c.Close()
		return nil, &rvError{Rank: rank, Reason: "peer_lost", Last: uniqueIDError(rank, "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?")}
	}
	r := bufio.NewReader(c)
	// The ranks here ask for rank 0's ncclUniqueId only at their first collective, after the master
	// began its wait, so the master's own timeout comes first: wait twice as long for it.
	_ = c.SetReadDeadline(time.Now().Add(2 * timeout))
	line, err := r.ReadString('\n')
	_ = c.SetReadDeadline(time.Time{})
	if err != nil || strings.TrimSpace(line) != "go" {
		c.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, &rvError{Rank: rank, Reason: "rendezvous_timeout", Last: uniqueIDError(rank, "Socket Timeout")}
		}
		return nil, &rvError{Rank: rank, Reason: "peer_lost", Last: uniqueIDError(rank, "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?")}
	}
	l := &peerLink{conns: []net.Conn{c}, lost: make(chan string, 1)}
	l.watch(c, r)
	return l, nil
}

// uniqueIDError is ProcessGroupNCCL's error when a rank cannot fetch rank 0's ncclUniqueId from the
// store (torch's broadcastUniqueNCCLID).
func uniqueIDError(rank int, why string) string {
	return fmt.Sprintf("torch.distributed.DistBackendError: [%d] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: %s", rank, why)
}

// distInitTrace is a scheduler's traceback for an exception raised in init_process_group (line
// numbers illustrative).
func distInitTrace(last string) string {
	return distInitFrames(true, last)
}

// distInitFrames is the traceback down to init_distributed_environment, then into torch's
// init_process_group when torch raises.
func distInitFrames(inTorch bool, last string) string {
	lines := []string{
		"Traceback (most recent call last):",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 2958, in run_scheduler_process",
		"    scheduler = Scheduler(",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 337, in __init__",
		"    self.tp_worker = TpModelWorker(",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/tp_worker.py\", line 81, in __init__",
		"    self.model_runner = ModelRunner(",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py\", line 245, in __init__",
		"    pre_model_load_memory = self.init_torch_distributed()",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py\", line 1093, in init_torch_distributed",
		"    init_distributed_environment(",
	}
	if inTorch {
		lines = append(lines,
			"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/distributed/parallel_state.py\", line 1702, in init_distributed_environment",
			"    torch.distributed.init_process_group(",
			"  File \"/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py\", line 81, in wrapper",
			"    return func(*args, **kwargs)",
			"  File \"/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py\", line 1710, in init_process_group",
			"    store, rank, world_size = next(rendezvous_iterator)")
	} else {
		lines = append(lines,
			"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/distributed/parallel_state.py\", line 1688, in init_distributed_environment",
			"    assert timeout > 0, \"timeout must be positive\"")
	}
	return strings.Join(append(lines, last, ""), "\n")
}

// peerLostTrace is the scheduler's traceback when a peer's process is gone: its next broadcast of
// the requests over the TP CPU group (gloo) finds the TCP connection closed (line numbers illustrative).
func peerLostTrace(peer string) string {
	return strings.Join([]string{
		"Traceback (most recent call last):",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 2987, in run_scheduler_process",
		"    scheduler.event_loop_overlap()",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 1012, in event_loop_overlap",
		"    recv_reqs = self.recv_requests()",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 1616, in recv_requests",
		"    recv_reqs = broadcast_pyobj(",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/utils/common.py\", line 1210, in broadcast_pyobj",
		"    dist.broadcast(tensor_size, src=src, group=dist_group)",
		"  File \"/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py\", line 2730, in broadcast",
		"    work.wait()",
		"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer " + glooPeer(peer),
		"",
	}, "\n")
}

// glooPeer writes an address as gloo's Pair does: [IP]:PORT.
func glooPeer(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return "[" + h + "]:" + p
}

// ncclInitErrorTrace is SGLANGSIM_FAIL=nccl-init-error: ncclCommInitRank failing on this node when
// the TP group's communicator is set up.
func ncclInitErrorTrace() string {
	return distInitTrace("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3690, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3\n" +
		"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \n" +
		"Last error:\n" +
		"socketStartConnect: Connect to 10.0.0.1<43215> failed : Software caused connection abort")
}

// ncclInfoLines are NCCL's init lines with NCCL_DEBUG=INFO for one local rank: its bootstrap
// interface and the network it chose (net_ib.cc / net_socket.cc), in NCCL's "HOST:PID:TID [DEV]" form.
func ncclInfoLines(host string, pid, dev int, ip string, netName string, first bool) []string {
	pre := fmt.Sprintf("%s:%d:%d [%d] NCCL INFO ", host, pid, pid+dev+1, dev)
	out := []string{pre + fmt.Sprintf("Bootstrap : Using eth0:%s<0>", ip)}
	if first {
		out = append(out, "NCCL version 2.27.3+cuda12.9")
	}
	if netName == "Socket" {
		out = append(out, pre+fmt.Sprintf("NET/Socket : Using [0]eth0:%s<0>", ip), pre+"Using network Socket")
	} else {
		var devs []string
		for i := 0; i < 8; i++ {
			devs = append(devs, fmt.Sprintf("[%d]mlx5_%d:1/IB", i, i))
		}
		out = append(out, pre+fmt.Sprintf("NET/IB : Using %s [RO]; OOB eth0:%s<0>", strings.Join(devs, " "), ip), pre+"Using network IB")
	}
	return out
}

// dummyHealthHandler is launch_dummy_health_check_server as the era has it (none in 0.4.1): GET
// /health and /health_generate answer 200 with an empty body, from 0.5.4 GET /ping too, from 0.5.2 /metrics with
// --enable-metrics (prometheus_client's multiprocess registry; the simulator has no series there);
// everything else is FastAPI's 404 (405 for another method on a route).
func (s *Server) dummyHealthHandler() http.Handler {
	era := s.Args.Era
	routes := map[string]bool{"/health": true, "/health_generate": true}
	if eraAtLeast(era, "0.5.4") {
		routes["/ping"] = true
	}
	metrics := s.Args.EnableMetrics && eraAtLeast(era, "0.5.2")
	oldUvicorn := !eraAtLeast(era, "0.4.7") // uvicorn.run with its default (info) logging
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, s: s, r: r, logged: !oldUvicorn || !s.Args.LogHTTP}
		if metrics && (r.URL.Path == "/metrics" || strings.HasPrefix(r.URL.Path, "/metrics/")) {
			sw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			sw.WriteHeader(http.StatusOK)
			return
		}
		if !routes[r.URL.Path] {
			writeJSON(sw, http.StatusNotFound, map[string]any{"detail": "Not Found"})
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeJSON(sw, http.StatusMethodNotAllowed, map[string]any{"detail": "Method Not Allowed"})
			return
		}
		sw.WriteHeader(http.StatusOK)
	})
}

// eraAtLeast reports whether era is name or newer (EraNames is oldest first).
func eraAtLeast(era *Era, name string) bool {
	idx := map[string]int{}
	for i, n := range EraNames() {
		idx[n] = i
	}
	return idx[era.Name] >= idx[name]
}

// hostnameOr is the machine's name for NCCL's line prefix.
func hostnameOr() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// joinNodes runs the rendezvous of a multi-node launch at "Init torch distributed begin." and
// watches the other nodes from then on. A failed rendezvous kills the process as a scheduler
// exception does; a signal meanwhile kills it as during any load.
func (s *Server) joinNodes(sigc <-chan os.Signal) {
	if s.Config.Fail.Kind == "never-join" {
		// The rank never reaches init_process_group (e.g. stuck in set_device on a wedged GPU).
		sig := <-sigc
		s.log.Warn("Received %s during start-up. Killing the process tree.", sigName(sig))
		s.die("signal_during_load")
	}
	if s.Args.DistTimeout < 0 || (s.Args.DistTimeout == 0 && s.Args.Raw["dist_timeout"] != nil) {
		// init_distributed_environment: assert timeout > 0, "timeout must be positive"
		s.log.TPError("Scheduler hit an exception: %s", distInitFrames(false, "AssertionError: timeout must be positive"))
		s.sigquit()
		s.die("start_error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The master's check fires once the whole seconds elapsed exceed the timeout.
	timeout := s.scaled(float64(s.multi.TimeoutSec))
	if s.multi.NodeRank == 0 {
		timeout = s.scaled(float64(s.multi.TimeoutSec + 1))
	}
	type result struct {
		l   *peerLink
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := rendezvous(ctx, s.multi, timeout)
		done <- result{l, err}
	}()
	var res result
	select {
	case res = <-done:
	case sig := <-sigc:
		s.log.Warn("Received %s during start-up. Killing the process tree.", sigName(sig))
		s.die("signal_during_load")
	}
	var rv *rvError
	if errors.As(res.err, &rv) {
		s.log.RankWarn(rv.Rank, "Scheduler hit an exception: %s", distInitTrace(rv.Last))
		s.sigquit()
		s.die(rv.Reason)
	}
	s.link = res.l
	go s.watchPeers()
}

// watchPeers ends the process when another node's connection drops: the scheduler's next
// collective with it fails at once (a TCP connection closed), it raises, and SIGQUIT kills the tree.
func (s *Server) watchPeers() {
	peer := <-s.link.lost
	s.log.TPError("Scheduler hit an exception: %s", peerLostTrace(peer))
	s.sigquit()
	s.die("peer_lost")
}

// sigquit is the launcher's SIGQUIT handler line: the running-phase one of the tokenizer manager on
// node 0 once it runs (from 0.5.4, tokenizer_manager.py), else the launch-phase one (engine.py).
func (s *Server) sigquit() {
	if s.multi.NodeRank == 0 && s.running.Load() && eraAtLeast(s.Args.Era, "0.5.4") {
		s.log.Warn("SIGQUIT received. signum=<Signals.SIGQUIT: 3>, frame=None. It usually means one child failed.")
		return
	}
	s.log.Warn("Received sigquit from a child process. It usually means the child failed.")
}

// crashAfter is SGLANGSIM_FAIL=node-crash:S: d after the node loaded, its scheduler dies with a
// CUDA error and the launcher kills the tree (the other nodes see the connection drop).
func (s *Server) crashAfter(d time.Duration) {
	time.Sleep(d)
	s.log.TPError("Scheduler hit an exception: %s", schedulerCrashTrace("RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."))
	s.sigquit()
	s.die("crash")
}

// runNonZeroNode is what a node >= 1 does once its schedulers are ready (engine.py,
// _launch_subprocesses): no tokenizer or detokenizer; the dummy health server on --host:--port
// (none in 0.4.1), then wait for the schedulers, which end with the launch.
func (s *Server) runNonZeroNode(sigc <-chan os.Signal) int {
	a, log := s.Args, s.log
	if a.Era.Name != "0.4.1" {
		ln, err := listen(a.Host, a.Port)
		if err != nil {
			log.Warn("ERROR:    [Errno 98] error while attempting to bind on address ('%s', %d): %s", a.Host, a.Port, bindReason(err))
			s.truth.Exit(time.Now(), "bind_error")
			s.link.Close()
			return 1
		}
		s.port = ln.Addr().(*net.TCPAddr).Port
		srv := &http.Server{Handler: s.dummyHealthHandler(), ReadHeaderTimeout: time.Minute}
		go func() { _ = srv.Serve(ln) }()
		hp := net.JoinHostPort(a.Host, strconv.Itoa(s.port))
		switch {
		case !eraAtLeast(a.Era, "0.4.7"):
			log.Main("INFO:     Started server process [%d]", os.Getpid())
			log.Main("INFO:     Waiting for application startup.")
			log.Main("INFO:     Application startup complete.")
			log.Main("INFO:     Uvicorn running on http://%s (Press CTRL+C to quit)", hp)
		case !eraAtLeast(a.Era, "0.5.10"):
			log.Main("Starting dummy health check server at %s", hp)
		default:
			log.Main("Dummy health check server started in background thread at %s", hp)
		}
		s.truth.Ready(time.Now(), ReadyInfo{PID: os.Getpid(), Port: s.port, CUDAVisibleDevices: s.cvd, VisibleGPUs: s.gpus.Visible, GPUs: s.gpus.GPUs})
	}
	// The launcher waits in wait_for_completion (older releases join the scheduler processes): a
	// signal ends it with no drain, there being no requests here.
	<-sigc
	s.die("sigterm")
	return 0
}

// ipOr is host as NCCL's interface address would show it: the address when host is one, else
// loopback.
func ipOr(host string) string {
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return ip.String()
	}
	return "127.0.0.1"
}
