// Package sim is sglangsim, a stand-in for SGLang's launch_server
// (python -m sglang.launch_server) that needs no GPU and no Python. To a
// client, load generator or supervisor it looks like the real server: the
// same flags and argparse errors, start-up timeline and log lines, endpoints
// and JSON/SSE formats, /metrics, and shutdown (drain, then a SIGKILL of
// itself). cmd/sglangsim only calls [Main].
//
// The package holds:
//
//   - Release profiles ([Era], SGLANGSIM_VERSION): each simulated SGLang
//     release's flag table (sim/flags/<era>.json, read by the small argparse
//     in args.go, giving [Args]), its log lines, endpoints and error rules.
//   - The speed model ([Profile], [Model]): memory plan, prefill and verify
//     step times and draft acceptance for speculative decoding, driving the
//     batch scheduler ([Engine]); [Simulate] runs it offline, without HTTP.
//     Profiles are built in ([Profiles]) or read from a JSON file
//     (SGLANGSIM_PROFILE=FILE, [LoadProfile], strict, [Profile.Validate]).
//   - Content and context (content.go): a request's acceptance follows its
//     prompt's class ([ContentScore]: code-like accepts more, prose-like
//     less) and decays with the prompt's length past a knee
//     ([Profile.ContextFactor]); [Model.AcceptFor] and [SimulateContent]
//     give what the model expects of a class and length.
//   - Adaptive speculative decoding (adaptive.go, --speculative-adaptive): the
//     config file read as each release reads it ([ParseAdaptiveConfig],
//     Python's json and exceptions), its fallbacks, and SGLang's policy (EMA
//     per batch-size slot, routing, step 0) switching the steps the model runs;
//     switches go to the log and the truth file ([ReadAdaptiveSwitches]).
//   - The HTTP server ([Server]) and its lifecycle: load, warmup, ready,
//     drain.
//   - The output text (output.go): a greedy request's words and length are a
//     function of the model and the prompt only, so speculative decoding is
//     lossless; SGLANGSIM_NONDETERMINISM makes some diverge late, as BF16
//     batching does.
//   - Failure modes ([FailMode], SGLANGSIM_FAIL): out of memory, crash
//     during load, exit during start, hang, ignored SIGTERM, slow drain, a
//     lossy speculative path (wrong accepted draft tokens).
//   - Regressions on purpose: SGLANGSIM_ACCEPT_SCALE lowers every draft
//     acceptance probability ([Model.AcceptScale]), so accept length and
//     speculative speed fall while the baseline does not;
//     SGLANGSIM_ENGINE_VERSION changes only the version the server reports.
//   - The truth file ([Truth], SGLANGSIM_TRUTH): JSON lines of the server's
//     own readiness, per-request and exit times, and what each request
//     accepted and why, to check a client against.
//   - GPUs ([GPUHost], SGLANGSIM_GPUS): CUDA_VISIBLE_DEVICES read as CUDA
//     reads it, each TP rank on its GPU (a rank without one fails as SGLang
//     does), a registry of the GPUs each running server holds ([Registry],
//     SGLANGSIM_STATE_DIR), and [NvidiaSMI], the nvidia-smi stand-in that
//     answers from it (the binary run under the name nvidia-smi).
//
// The flags, knobs, profiles and model are described in docs/sglangsim.md.
package sim
