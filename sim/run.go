package sim

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Main runs sglangsim with argv (without the program name) and returns the
// exit code. Fatal paths (out of memory, scheduler crash, end of a drain)
// do not return: like SGLang, the process SIGKILLs itself. An empty
// variable counts as unset (CUDA_VISIBLE_DEVICES="" included: use MainEnv
// to tell them apart).
func Main(argv []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return MainEnv(argv, func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	}, stdout, stderr)
}

// MainEnv is Main with the environment read by lookup (os.LookupEnv), which
// tells an unset variable from an empty one: CUDA_VISIBLE_DEVICES="" hides
// every GPU.
func MainEnv(argv []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	getenv := func(k string) string {
		v, _ := lookup(k)
		return v
	}
	ver := strings.TrimSpace(getenv("SGLANGSIM_VERSION"))
	if ver == "list" {
		fmt.Fprintln(stdout, strings.Join(EraNames(), "\n"))
		return 0
	}
	era, err := LookupEra(ver)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim: %v\n", err)
		return 2
	}
	parser, err := NewParser(era)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim: %v\n", err)
		return 1
	}
	var plugins []string
	for _, n := range strings.Split(getenv("SGLANGSIM_SPEC_PLUGINS"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			plugins = append(plugins, n)
		}
	}
	a, warnings, err := ParseArgsEra(ParseOptions{Era: era, Plugins: plugins, CompatAssert: ver == ""}, argv)
	var ue *UsageError
	var ae *AssertionError
	var pe *PyError
	switch {
	case errors.As(err, &ue):
		fmt.Fprint(stderr, parser.Usage())
		fmt.Fprintf(stderr, "%s: error: %s\n", parser.Prog, ue.Msg)
		return 2
	case errors.Is(err, HelpRequested{}):
		fmt.Fprint(stdout, parser.Help())
		return 0
	case errors.As(err, &ae), errors.As(err, &pe):
		fmt.Fprint(stderr, startTraceback(err, era))
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "sglangsim: %v\n", err)
		return 1
	}
	if getenv("SGLANGSIM_CHECK_ARGS") == "1" {
		// Check only: the era's argparse and post-init rules, then exit.
		for _, w := range warnings {
			fmt.Fprintln(stderr, w)
		}
		return 0
	}
	var le *LaunchError
	if err := checkServerArgs(a); errors.As(err, &le) {
		fmt.Fprint(stderr, launchTraceback(le))
		return 1
	} else if err != nil {
		fmt.Fprintf(stderr, "sglangsim: %v\n", err)
		return 1
	}
	genv, err := HostGetenv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim: %v\n", err)
		return 1
	}
	cfg, err := LoadConfig(genv)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim: %v\n", err)
		return 1
	}
	host := NewGPUHost(cfg.GPUs, cfg.GPUMemGB)
	cvd, cvdSet := lookup("CUDA_VISIBLE_DEVICES")
	visible := host.VisibleDevices(cvd, cvdSet)
	if len(visible) == 0 && deviceAuto(a) {
		// ServerArgs.__post_init__: get_device() finds no accelerator.
		fmt.Fprint(stderr, noAcceleratorTrace(era))
		return 1
	}
	dirs, explicitDir := StateDirs(genv)
	if explicitDir {
		if err := ensureDir(dirs[0], false); err != nil {
			fmt.Fprintf(stderr, "sglangsim: invalid SGLANGSIM_STATE_DIR=%q: %v\n", dirs[0], err)
			return 1
		}
	}
	prof, err := PickProfile(cfg.Profile, a.ModelPath)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim: %v\n", err)
		return 1
	}
	truth, err := OpenTruth(cfg.TruthPath)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim: SGLANGSIM_TRUTH: %v\n", err)
		return 1
	}
	log := NewLogger(stderr, stdout)
	log.Quiet = a.LogQuiet
	multi, err := MultiOf(a)
	if err != nil {
		fmt.Fprintf(stderr, "sglangsim: %v\n", err)
		return 1
	}
	log.Base = multi.FirstRank()
	m := NewModel(a, prof, cfg.GPUMemGB)
	m.AcceptScale = cfg.AcceptScale
	m.Net = cfg.Net
	var s *Server
	var dying sync.Mutex // held for good by the first caller: one exit line, one SIGKILL
	die := func(reason string) {
		dying.Lock()
		s.reg.Remove() // the GPUs are free once the process is gone
		truth.Exit(time.Now(), reason)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	s = newServer(a, m, cfg, log, truth, die)
	s.multi = multi
	s.gpus = AssignGPUs(a, visible)
	s.stateDirs, s.explicitDir = dirs, explicitDir
	if cvdSet {
		s.cvd = &cvd
	}
	return s.run(warnings)
}

func (s *Server) scaled(sec float64) time.Duration {
	return time.Duration(sec * s.Config.TimeScale * float64(time.Second))
}

// run is the process lifecycle: load (port closed), warmup (503), ready,
// then SIGTERM handling.
func (s *Server) run(warnings []string) int {
	sigc := make(chan os.Signal, 4)
	if s.Config.Fail.Kind == "ignore-sigterm" {
		signal.Ignore(syscall.SIGTERM)
		signal.Notify(sigc, syscall.SIGINT)
	} else {
		signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	}
	log, pl, a := s.log, &s.Model.Plan, s.Args
	for _, w := range warnings {
		log.Warn("%s", w)
	}
	log.Main("%s", serverArgsRepr(s.info))

	// The load timeline: fractions of the load time at which each line appears.
	load := s.Config.LoadSeconds
	draft := 0.0
	if a.Spec() && s.Model.kind != "lookup" {
		draft = load * s.Config.DraftCaptureShare
	}
	at := 0.0 // simulated seconds elapsed
	wait := func(until float64) {
		if until <= at {
			return
		}
		t := time.NewTimer(s.scaled(until - at))
		defer t.Stop()
		at = until
		select {
		case <-t.C:
		case sig := <-sigc:
			log.Warn("Received %s during start-up. Killing the process tree.", sigName(sig))
			s.die("signal_during_load")
		}
	}
	defer func() { s.reg.Remove() }()
	avail := pl.GPUMemGB - 1.2
	first, local := s.multi.FirstRank(), len(s.gpus.GPUs)
	if s.gpus.BadRank >= 0 || local == 0 {
		local = s.multi.TPPerNode
	}
	for r := first; r < first+local; r++ {
		log.Rank(r, "Init torch distributed begin.")
	}
	if g := s.gpus; g.BadRank >= 0 {
		// torch.cuda.set_device(gpu_id) fails in that rank's scheduler.
		if !a.Era.OldDeviceTrace {
			log.RankWarn(g.BadRank, "Context: self.device='cuda' self.gpu_id=%d os.environ.get('CUDA_VISIBLE_DEVICES')=%s self.tp_rank=%d self.tp_size=%d",
				g.BadOrdinal, pyOptStr(derefOr(s.cvd), s.cvd != nil), g.BadRank, a.TP)
		}
		log.RankWarn(g.BadRank, "Scheduler hit an exception: %s", invalidDeviceTrace(a.Era, len(g.Visible) == 0))
		log.Warn("Received sigquit from a child process. It usually means the child failed.")
		s.die("invalid_device")
	}
	used := 1.2 // CUDA context and NCCL, per GPU
	s.register(used)
	if s.multi.Enabled() {
		s.joinNodes(sigc)
	}
	if s.Config.NCCLDebugInfo && (a.TP > 1 || s.multi.Enabled()) {
		ip := ipOr(a.Host)
		for r := first; r < first+local; r++ {
			log.Stdout(ncclInfoLines(hostnameOr(), os.Getpid(), r-first, ip, s.Config.Net.Name, r == 0))
		}
	}
	wait(0.03 * load)
	if s.multi.Enabled() && s.Config.Fail.Kind == "nccl-init-error" {
		log.TPError("Scheduler hit an exception: %s", ncclInitErrorTrace())
		s.sigquit()
		s.die("nccl_init_error")
	}
	for r := first; r < first+local; r++ {
		log.Rank(r, "Init torch distributed ends. mem usage=%.2f GB", 1.2)
	}
	log.TP("Load weight begin. avail mem=%.2f GB", avail)
	if s.Config.Fail.Kind == "exit-during-start" {
		wait(0.4 * load)
		log.TPError("Scheduler hit an exception: %s", schedulerCrashTrace("RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3"))
		log.Warn("Rank 0 scheduler is dead. Please check if there are relevant logs.")
		log.Raw("Traceback (most recent call last):\n  File \"<frozen runpy>\", line 198, in _run_module_as_main\n  File \"/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py\", line 32, in <module>\n    launch_server(server_args)\n  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/http_server.py\", line 1412, in launch_server\n    tokenizer_manager, template_manager, scheduler_info = _launch_subprocesses(server_args=server_args)\nRuntimeError: Initialization failed. Please see the error messages above.\n")
		s.truth.Exit(time.Now(), "exit_during_start")
		return 1
	}
	if pl.OOM == "weights" || s.Config.Fail.Kind == "oom-weights" {
		wait(0.3 * load)
		log.TPError("Scheduler hit an exception: %s", schedulerCrashTrace("torch.OutOfMemoryError: "+cudaOOM(pl.OOMAllocGB, pl.GPUMemGB, 0.4)))
		log.Warn("Received sigquit from a child process. It usually means the child failed.")
		s.die("oom")
	}
	wait(0.6 * load)
	avail -= pl.WeightsGB
	used += pl.WeightsGB
	s.reg.SetUsed(used)
	log.TP("Load weight end. type=%s, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB.", s.Model.Profile.Architecture, avail, pl.WeightsGB)
	if ad := a.Adaptive; ad != nil {
		// The EAGLE worker builds its adaptive policy before loading the draft model; 0.5.10 reads
		// the config file there, and a bad one kills the scheduler.
		if ad.LoadErr != nil {
			log.TPError("Scheduler hit an exception: %s", workerInitTrace(ad.LoadErr))
			log.Warn("Received sigquit from a child process. It usually means the child failed.")
			s.die("start_error")
		}
		first := s.Engine.adapt.slots[0]
		log.TP("AdaptiveSpeculativeParams initialized: steps=%d, candidate_steps=%s", first.current, pyIntList(first.cands))
	}
	if a.Spec() && s.Model.kind != "lookup" {
		log.TP("Load weight begin. avail mem=%.2f GB", avail)
		log.TP("Load weight end. type=%s, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB.", draftArch(a.SpecAlgo), avail-pl.DraftGB, pl.DraftGB)
		avail -= pl.DraftGB
		used += pl.DraftGB
		s.reg.SetUsed(used)
	}
	if pl.OOM == "kv" || s.Config.Fail.Kind == "oom-kv" {
		// The KV pool sizing finds no room left after the weights (model_runner).
		wait(0.62 * load)
		log.TPError("Scheduler hit an exception: %s", schedulerCrashTrace("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."))
		log.Warn("Received sigquit from a child process. It usually means the child failed.")
		s.die("oom")
	}
	kvGB := max(0, pl.PoolGB)
	log.TP("Using KV cache dtype: torch.bfloat16")
	log.TP("KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB", pl.MaxTotalTokens, kvGB/2, kvGB/2)
	avail -= kvGB
	used += kvGB
	s.reg.SetUsed(used)
	log.TP("Memory pool end. avail mem=%.2f GB", avail)
	target := "decode"
	perReq := 1
	if a.Spec() {
		target, perReq = "verify", a.DraftTokens
	}
	if !a.DisableCudaGraph {
		if a.Era.CaptureTarget {
			log.TP("Capture target %s CUDA graph begin. backend=full, num_tokens_per_req=%d, bs=%s, avail mem=%.2f GB", target, perReq, captureBS(pl.CudaGraphMaxBS), avail)
		} else if a.Era.ShortCapture {
			log.TP("Capture cuda graph begin. This can take up to several minutes.")
		} else {
			log.TP("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB", avail)
		}
	}
	tCap := time.Now()
	wait(load)
	graphGB := pl.GraphGB // the initial state's graphs; the other candidates' come after the draft's
	for _, gb := range pl.AdaptiveGraphGB {
		graphGB -= gb
	}
	targetGraph := graphGB
	if a.Spec() {
		targetGraph = graphGB * float64(s.Model.tokensPerForward()) / float64(s.Model.tokensPerForward()+dsw(s.Model))
	}
	if pl.OOM == "graph" && !a.Spec() {
		s.graphOOM("")
	}
	if !a.DisableCudaGraph {
		if a.Era.CaptureTarget {
			log.TP("Capture target %s CUDA graph end. elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB.", target, time.Since(tCap).Seconds(), targetGraph, avail-targetGraph)
		} else if a.Era.ShortCapture {
			log.TP("Capture cuda graph end. Time elapsed: %.2f s", time.Since(tCap).Seconds())
		} else {
			log.TP("Capture cuda graph end. Time elapsed: %.2f s. mem usage=%.2f GB. avail mem=%.2f GB.", time.Since(tCap).Seconds(), targetGraph, avail-targetGraph)
		}
	}
	avail -= targetGraph
	used += targetGraph
	s.reg.SetUsed(used)
	if draft > 0 {
		t0 := time.Now()
		if !a.DisableCudaGraph && !a.Era.ShortCapture {
			if a.Era.CaptureTarget {
				log.TP("Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=%d, bs=%s, avail mem=%.2f GB", a.TopK, captureBS(pl.CudaGraphMaxBS), avail)
			} else {
				log.TP("Capture draft cuda graph begin. This can take up to several minutes. avail mem=%.2f GB", avail)
			}
		}
		wait(load + draft)
		if pl.OOM == "graph" {
			s.graphOOM("draft ")
		}
		if !a.DisableCudaGraph && !a.Era.ShortCapture {
			if a.Era.CaptureTarget {
				log.TP("Capture draft decode CUDA graph end. elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB.", time.Since(t0).Seconds(), graphGB-targetGraph, avail-(graphGB-targetGraph))
			} else {
				log.TP("Capture draft cuda graph end. Time elapsed: %.2f s. mem usage=%.2f GB. avail mem=%.2f GB.", time.Since(t0).Seconds(), graphGB-targetGraph, avail-(graphGB-targetGraph))
			}
		}
		avail -= graphGB - targetGraph
		used += graphGB - targetGraph
		s.reg.SetUsed(used)
	}
	if ad := a.Adaptive; ad != nil {
		// init_states: one runtime state per other candidate, then the initial one activated.
		for _, k := range ad.Candidates {
			gb, ok := pl.AdaptiveGraphGB[k]
			if k == a.Steps || (!ok && !a.DisableCudaGraph) {
				continue
			}
			t0 := time.Now()
			wait(at + 0.5*draft)
			log.TP("Built adaptive runtime state steps=%d: elapsed=%.2fs, mem=%.2fGB", k, time.Since(t0).Seconds(), gb)
			avail -= gb
			used += gb
			s.reg.SetUsed(used)
		}
		s.Engine.StartAdaptive(time.Now())
	}
	if s.Config.Fail.Kind == "oom" {
		s.graphOOM("")
	}
	log.TP("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, max_running_requests=%d, context_len=%d, available_gpu_mem=%.2f GB",
		pl.MaxTotalTokens, intOr(a.Raw, "chunked_prefill_size", 8192), pl.MaxPrefillTokens, pl.MaxRunning, pl.ContextLen, avail)
	if s.Config.Fail.Kind == "node-crash" {
		go s.crashAfter(s.scaled(s.Config.Fail.Seconds))
	}
	if s.multi.NodeRank >= 1 {
		return s.runNonZeroNode(sigc) // no tokenizer, no OpenAI server: the dummy health server
	}

	// Scheduler.
	stop := make(chan struct{})
	go s.Engine.Run(stop, s.failCheck())

	// Uvicorn.
	ln, err := listen(a.Host, a.Port)
	if err != nil {
		log.Warn("ERROR:    [Errno 98] error while attempting to bind on address ('%s', %d): %s", a.Host, a.Port, bindReason(err))
		s.truth.Exit(time.Now(), "bind_error")
		return 1
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	listenAt := time.Now()
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	log.Main("INFO:     Started server process [%d]", os.Getpid())
	log.Main("INFO:     Waiting for application startup.")
	log.Main("INFO:     Application startup complete.")
	log.Main("INFO:     Uvicorn running on http://%s (Press CTRL+C to quit)", ln.Addr())

	ready := make(chan struct{})
	go s.warmup(ready)
	for {
		select {
		case <-ready:
			ready = nil
		case sig := <-sigc:
			s.shutdown(sig, listenAt) // does not return
		}
	}
}

func sigName(sig os.Signal) string {
	if sig == syscall.SIGINT {
		return "SIGINT"
	}
	return "SIGTERM"
}

func dsw(m *Model) int {
	d, w := m.draftShape()
	return d * w
}

func bindReason(err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return "address already in use"
	}
	return err.Error()
}

func draftArch(algo string) string {
	switch algo {
	case "EAGLE3":
		return "LlamaForCausalLMEagle3"
	case "EAGLE":
		return "Qwen3_5MoeForCausalLMMTP"
	case "DFLASH", "DSPARK":
		return "DFlashDraftModel"
	}
	return "Qwen3ForCausalLM"
}

// warmup keeps /health at 503 for the warmup time while SGLang's own short
// /generate runs, then declares the server ready.
func (s *Server) warmup(ready chan<- struct{}) {
	t0 := time.Now()
	if !s.Args.SkipWarmup {
		req := NewRequest("warmup", 6, 8, true, 0, 1)
		req.Arrival = t0
		s.Engine.Submit(req)
		for {
			<-req.Notify()
			if _, _, _, done, _ := req.Take(nil); done {
				break
			}
		}
		if s.Args.LogHTTP {
			s.log.Access("INFO:     127.0.0.1:%d - \"POST /generate HTTP/1.1\" 200 OK", 40000+os.Getpid()%20000)
		}
		if rest := s.scaled(s.Config.WarmupSeconds) - time.Since(t0); rest > 0 {
			time.Sleep(rest)
		}
	}
	s.running.Store(true) // the warmup request started the tokenizer manager's loop
	if s.phase.CompareAndSwap(phaseWarmup, phaseReady) {
		s.truth.Ready(time.Now(), ReadyInfo{PID: os.Getpid(), Port: s.port, CUDAVisibleDevices: s.cvd, VisibleGPUs: s.gpus.Visible, GPUs: s.gpus.GPUs})
		s.log.Main("The server is fired up and ready to roll!")
	}
	close(ready)
}

// failCheck returns the scheduler hook that injects crash-during-load and
// hang-after.
func (s *Server) failCheck() func() {
	f := s.Config.Fail
	switch f.Kind {
	case "crash-during-load":
		return func() {
			if s.received.Load() > int64(f.Requests) {
				s.log.TPError("Scheduler hit an exception: %s", schedulerCrashTrace("RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."))
				s.log.Warn("Received sigquit from a child process. It usually means the child failed.")
				s.die("crash")
			}
		}
	case "hang-after":
		return func() {
			if s.received.Load() > int64(f.Requests) {
				s.hung.Store(true)
				select {}
			}
		}
	}
	return nil
}

// shutdown is SGLang's SIGTERM path: log, /health 503, drain in-flight
// requests checking every 5 s without bound (unless SGL_FORCE_SHUTDOWN),
// then SIGKILL itself.
func (s *Server) shutdown(sig os.Signal, since time.Time) {
	t0 := time.Now()
	s.log.Warn("%s received. signum=%s frame=None. Draining requests and shutting down...", sigName(sig), sigNum(sig))
	s.phase.Store(phaseDraining)
	period := s.scaled(5)
	if period > 0 {
		// the watchdog wakes every 5 s since start
		time.Sleep(period - time.Since(since)%period)
	}
	for {
		n := s.inflight.Load()
		if s.Config.ForceShutdown {
			s.log.Warn("Signal SIGTERM received while force shutdown flag set. Force exiting... remaining number of requests %d", n)
			break
		}
		s.log.Main("Gracefully exiting... remaining number of requests %d", n)
		if n == 0 {
			break
		}
		time.Sleep(max(period, time.Millisecond))
	}
	if rest := s.scaled(s.Config.Fail.Seconds) - time.Since(t0); s.Config.Fail.Kind == "slow-drain" && rest > 0 {
		time.Sleep(rest)
	}
	reason := "sigterm"
	if s.Config.ForceShutdown {
		reason = "sigterm_force"
	}
	s.die(reason)
}

func sigNum(sig os.Signal) string {
	if sig == syscall.SIGINT {
		return "<Signals.SIGINT: 2>"
	}
	return "<Signals.SIGTERM: 15>"
}

func (s *Server) graphOOM(which string) {
	pl := &s.Model.Plan
	s.log.TPError("Scheduler hit an exception: %s", schedulerCrashTrace(
		"Exception: Capture "+which+"cuda graph failed: "+cudaOOM(pl.OOMAllocGB, pl.GPUMemGB, 0.3)+"\n"+
			"Possible solutions:\n"+
			"1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"+
			"2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"+
			"3. disable torch compile by not using --enable-torch-compile\n"+
			"4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"+
			"Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose"))
	s.log.Warn("Received sigquit from a child process. It usually means the child failed.")
	s.die("oom")
}

func cudaOOM(alloc, total, free float64) string {
	if alloc <= 0 {
		alloc = 2
	}
	return fmt.Sprintf("CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity of %.2f GiB of which %.2f GiB is free. "+
		"Including non-PyTorch memory, this process has %.2f GiB memory in use. Of the allocated memory %.2f GiB is allocated by PyTorch, "+
		"and %.2f MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "+
		"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  "+
		"(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)", alloc, total*0.931, free, total*0.931-free, total*0.9-free, 187.5)
}

func schedulerCrashTrace(last string) string {
	return strings.Join([]string{
		"Traceback (most recent call last):",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 2987, in run_scheduler_process",
		"    scheduler.event_loop_overlap()",
		"  File \"/usr/local/lib/python3.12/dist-packages/torch/utils/_contextlib.py\", line 120, in decorate_context",
		"    return func(*args, **kwargs)",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 1034, in event_loop_overlap",
		"    batch_result = self.run_batch(batch)",
		"  File \"/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py\", line 2121, in run_batch",
		"    batch_result = self.model_worker.forward_batch_generation(batch_or_worker_batch)",
		last,
		"",
	}, "\n")
}

// register records the server's GPUs in the registry once its ranks hold
// them (usedGB each). Without SGLANGSIM_STATE_DIR a registry that cannot be
// written is a warning: the server runs, nvidia-smi does not list it.
func (s *Server) register(usedGB float64) {
	rec := GPURecord{PID: os.Getpid(), Port: s.Args.Port, GPUs: s.gpus.GPUs, ProcessName: os.Args[0], CUDAVisibleDevices: s.cvd}
	reg, err := OpenRegistry(s.stateDirs, s.explicitDir, rec)
	s.reg = reg
	if err != nil {
		s.log.Warn("sglangsim: GPU registry: %v (nvidia-smi will not list this server)", err)
	}
	s.reg.SetUsed(usedGB)
}

func derefOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// captureBS is the batch-size list a 2026 capture line prints: 1, 2, 4, 8, 12,
// then steps of 8 up to the largest captured batch (which is always in it).
func captureBS(maxBS int) string { return pyIntList(defaultGraphBS(maxBS)) }

func defaultGraphBS(maxBS int) []int {
	var bs []int
	for _, n := range []int{1, 2, 4, 8, 12} {
		if n <= maxBS {
			bs = append(bs, n)
		}
	}
	for n := 16; n <= maxBS; n += 8 {
		bs = append(bs, n)
	}
	if maxBS > 12 && maxBS%8 != 0 {
		bs = append(bs, maxBS)
	}
	if len(bs) == 0 {
		bs = append(bs, 1)
	}
	return bs
}

// cudaGraphBS is server_args.cuda_graph_bs: the batch sizes given (--cuda-graph-bs, 2026
// --cuda-graph-bs-decode), else the default list; nil without CUDA graphs.
func cudaGraphBS(a *Args, maxBS int) []int {
	if a.DisableCudaGraph {
		return nil
	}
	for _, k := range []string{"cuda_graph_bs_decode", "cuda_graph_bs"} {
		if l, ok := a.Raw[k].([]any); ok && len(l) > 0 {
			var bs []int
			for _, v := range l {
				if n, ok := v.(int); ok {
					bs = append(bs, n)
				}
			}
			sort.Ints(bs)
			return bs
		}
	}
	return defaultGraphBS(maxBS)
}
