package sim

import (
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	phaseWarmup int32 = iota
	phaseReady
	phaseDraining
)

// Server is the simulated SGLang HTTP server.
type Server struct {
	Args   *Args
	Model  *Model
	Engine *Engine
	Config Config
	log    *Logger
	truth  *Truth

	phase    atomic.Int32
	hung     atomic.Bool
	received atomic.Int64 // client generation requests received
	inflight atomic.Int64 // generation requests inside handlers (SGLang's rid_to_state)
	seq      atomic.Uint64

	reqMu sync.Mutex
	reqs  map[string]*Request

	modelJSON string // served model name, JSON-quoted
	info      map[string]any
	// nondetSeed seeds, with the request count, the SGLANGSIM_NONDETERMINISM draws.
	nondetSeed uint64
	die        func(reason string) // truth exit line, then self-SIGKILL

	// GPUs: where the TP ranks run, the CUDA_VISIBLE_DEVICES given (nil:
	// unset), the registry's directories and this server's record in it.
	gpus        GPUAssignment
	cvd         *string
	stateDirs   []string
	explicitDir bool
	reg         *Registry
	port        int // the port listened on

	// multi is the server's place in a multi-node launch; link its connections to the other nodes
	// (nil on one node); running is set once the tokenizer manager's running-phase SIGQUIT handler
	// would be installed (after the warmup request).
	multi   Multi
	link    *peerLink
	running atomic.Bool
}

func newServer(a *Args, m *Model, c Config, log *Logger, truth *Truth, die func(string)) *Server {
	s := &Server{Args: a, Model: m, Config: c, log: log, truth: truth, reqs: map[string]*Request{}, die: die}
	q, _ := json.Marshal(a.ServedModelName)
	s.modelJSON = string(q)
	s.info = a.ServerInfo(&m.Plan)
	s.Engine = NewEngine(m, c.TimeScale, log.TP)
	if a.Adaptive != nil {
		s.Engine.OnSwitch = truth.AdaptiveSwitch
	}
	if c.Fail.Kind == "lossy" {
		s.Engine.LossyP = c.Fail.Prob // drawn only by speculative decode steps
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "sglangsim/nondeterminism/%d", a.RandomSeed)
	s.nondetSeed = h.Sum64()
	return s
}

// statusWriter logs uvicorn's access line when the status is written.
type statusWriter struct {
	http.ResponseWriter
	s      *Server
	r      *http.Request
	logged bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.logged {
		w.logged = true
		if w.s.Args.LogHTTP {
			w.s.log.Access("INFO:     %s - \"%s %s HTTP/%d.%d\" %d %s", w.r.RemoteAddr, w.r.Method, w.r.URL.RequestURI(),
				w.r.ProtoMajor, w.r.ProtoMinor, code, http.StatusText(code))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.logged {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	type route struct {
		methods string
		h       func(http.ResponseWriter, *http.Request)
	}
	era := s.Args.Era
	routes := map[string]route{
		"/health":              {"GET POST", s.health},
		"/health_generate":     {"GET POST", s.health},
		"/v1/models":           {"GET", s.models},
		"/get_model_info":      {"GET", s.modelInfo},
		"/get_server_info":     {"GET", s.serverInfo},
		"/metrics":             {"GET", s.metrics},
		"/flush_cache":         {"GET POST", s.flushCache},
		"/abort_request":       {"POST", s.abortRequest},
		"/generate":            {"GET POST PUT", s.generateNative},
		"/v1/completions":      {"POST", s.completions},
		"/v1/chat/completions": {"POST", s.chatCompletions},
	}
	if era.NewInfoPath {
		routes["/server_info"] = route{"GET", s.serverInfo}
		routes["/model_info"] = route{"GET", s.modelInfo}
	}
	if !era.FlushStatus {
		routes["/flush_cache"] = route{"POST", s.flushCache}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, s: s, r: r}
		rt, ok := routes[r.URL.Path]
		if !ok || (r.URL.Path == "/metrics" && !s.Args.EnableMetrics) {
			writeJSON(sw, http.StatusNotFound, map[string]any{"detail": "Not Found"})
			return
		}
		if !containsWord(rt.methods, r.Method) {
			writeJSON(sw, http.StatusMethodNotAllowed, map[string]any{"detail": "Method Not Allowed"})
			return
		}
		if s.Args.APIKey != "" && !s.keyExempt(r.URL.Path) && r.Header.Get("Authorization") != "Bearer "+s.Args.APIKey {
			writeJSON(sw, http.StatusUnauthorized, map[string]any{"error": "Unauthorized"})
			return
		}
		rt.h(sw, r)
	})
}

// keyExempt reports whether a path is served without the API key: /health*
// always, /metrics in releases that exempt it.
func (s *Server) keyExempt(path string) bool {
	return strings.HasPrefix(path, "/health") || (s.Args.Era.MetricsNoKey && strings.HasPrefix(path, "/metrics"))
}

func containsWord(list, w string) bool {
	for len(list) > 0 {
		i := 0
		for i < len(list) && list[i] != ' ' {
			i++
		}
		if list[:i] == w {
			return true
		}
		if i == len(list) {
			break
		}
		list = list[i+1:]
	}
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func openAIError(w http.ResponseWriter, code int, msg string) {
	typ := "BadRequestError"
	switch code {
	case http.StatusServiceUnavailable:
		typ = "ServiceUnavailableError"
	case http.StatusNotFound:
		typ = "NotFoundError"
	}
	writeJSON(w, code, map[string]any{"object": "error", "message": msg, "type": typ, "param": nil, "code": code})
}

// hang blocks a handler for good (until the client goes away) once the
// server is hung.
func (s *Server) hang(r *http.Request) bool {
	if !s.hung.Load() {
		return false
	}
	<-r.Context().Done()
	return true
}

// health is /health and /health_generate as the era answers them: 503
// while starting (gated eras) or draining, 200 at once on the fast path,
// else after a one-token generation shows the scheduler alive.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	era := s.Args.Era
	phase := s.phase.Load()
	if era.Gate && (phase == phaseDraining || phase == phaseWarmup) {
		if phase == phaseDraining {
			s.log.Main("Health check request received during shutdown. Returning 503.")
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path == "/health" && (!era.Generate || (!era.NoHealthBypass && !s.Config.HealthGenerate)) {
		w.WriteHeader(http.StatusOK)
		return
	}
	if !era.Gate && phase == phaseDraining {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	tic := time.Now()
	req := NewRequest(fmt.Sprintf("HEALTH_CHECK_%d", s.seq.Add(1)), 1, 1, true, 0, uint64(tic.UnixNano()))
	req.Internal = true
	req.Arrival = tic
	s.Engine.Submit(req)
	defer func() { req.Abort(); s.Engine.Wake() }()
	if era.HealthTimeout == 0 {
		// No timeout: the answer waits for the token (for ever when hung).
		select {
		case <-req.Notify():
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
		}
		return
	}
	// As SGLang: every second, any scheduler output since tic means healthy.
	tick := time.NewTicker(max(s.scaled(1), time.Millisecond))
	defer tick.Stop()
	deadline := tic.Add(s.scaled(era.HealthTimeout))
	for {
		select {
		case <-r.Context().Done():
			return
		case now := <-tick.C:
			if s.Engine.LastProgress().After(tic) {
				w.WriteHeader(http.StatusOK)
				return
			}
			if now.After(deadline) {
				last := s.Engine.LastProgress()
				s.log.Warn("Health check failed. Server couldn't get a response from detokenizer for last %d seconds. tic start time: %s. last_heartbeat time: %s",
					int(era.HealthTimeout), tic.Format("15:04:05"), last.Format("15:04:05"))
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
	}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.Args.ServedModelName, "object": "model", "created": time.Now().Unix(), "owned_by": "sglang",
		"root": s.Args.ServedModelName, "parent": nil, "max_model_len": s.Model.Plan.ContextLen,
	}}})
}

func (s *Server) modelInfo(w http.ResponseWriter, r *http.Request) {
	if !s.Args.Era.NewInfoPath {
		writeJSON(w, 200, map[string]any{"model_path": s.Args.ModelPath, "tokenizer_path": s.Args.TokenizerPath, "is_generation": true})
		return
	}
	if r.URL.Path == "/get_model_info" {
		s.log.Warn("Endpoint '/get_model_info' is deprecated and will be removed in a future version. Please use '/model_info' instead.")
	}
	writeJSON(w, 200, map[string]any{
		"model_path": s.Args.ModelPath, "tokenizer_path": s.Args.TokenizerPath, "is_generation": true,
		"preferred_sampling_params": nil, "weight_version": "default",
		"has_image_understanding": false, "has_audio_understanding": false,
		"model_type": s.Model.Profile.ModelType, "architectures": []string{s.Model.Profile.Architecture},
	})
}

func (s *Server) serverInfo(w http.ResponseWriter, r *http.Request) {
	era := s.Args.Era
	if era.NewInfoPath && r.URL.Path == "/get_server_info" {
		s.log.Warn("Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.")
	}
	pl := &s.Model.Plan
	out := make(map[string]any, len(s.info)+8)
	for k, v := range s.info {
		out[k] = v
	}
	// scheduler_info, as the scheduler reports it at start
	out["status"] = "ready"
	out["max_total_num_tokens"] = pl.MaxTotalTokens
	out["max_req_input_len"] = pl.ContextLen - 1
	out["version"] = era.Name
	if v := s.Config.EngineVersion; v != "" {
		out["version"] = v // SGLANGSIM_ENGINE_VERSION: the same release profile under another version
	}
	prof := s.Model.Profile.Name
	if src := s.Model.Profile.Source; src != "" {
		prof += " from " + src
	}
	out["simulator"] = "sglangsim (profile " + prof + ", SGLANGSIM_VERSION " + era.Name + ")"
	if era.InternalStates {
		// The internal state comes from the scheduler: a hung one never answers.
		if s.hang(r) {
			return
		}
		st := s.Engine.Snapshot()
		state := map[string]any{
			"last_gen_throughput": st.GenThroughput,
			"memory_usage": map[string]any{
				"weight": round2(pl.WeightsGB + pl.DraftGB), "kvcache": round2(pl.PoolGB),
				"token_capacity": pl.MaxTotalTokens, "graph": round2(pl.GraphGB),
			},
			"effective_max_running_requests_per_dp": pl.MaxRunning,
		}
		if al, ok := s.Engine.AvgAcceptLen(); ok && s.Args.Spec() {
			state["avg_spec_accept_length"] = al
		}
		if k, ok := s.Engine.AdaptiveSteps(); ok {
			// The scheduler's server args, which the worker updates at every switch.
			state["speculative_num_steps"], state["speculative_num_draft_tokens"] = k, k+1
		}
		if era.FlatInternalState {
			for k, v := range state {
				out[k] = v
			}
		} else {
			out["internal_states"] = []any{state}
		}
	}
	writeJSON(w, 200, out)
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(200)
	_, _ = io.WriteString(w, renderMetrics(s.Engine.Snapshot(), s.Args.ServedModelName, s.Args.Spec(), s.Args.Era))
}

const flushText = "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"

// flushCache is /flush_cache: when idle it empties the caches and resets the
// accept-length counters (interval and lifetime, releases that keep them);
// refused while requests run (400, or 200 in releases that always say 200).
func (s *Server) flushCache(w http.ResponseWriter, r *http.Request) {
	ok := s.inflight.Load() == 0 && s.Engine.FlushCache(s.Args.Era.InternalStates)
	code := 200
	if ok {
		s.log.TP("Cache flushed successfully!")
	} else {
		if s.Args.Era.FlushStatus {
			code = 400
		}
		st := s.Engine.Snapshot()
		s.log.Warn("Cache not flushed because there are pending requests. #queue-req: %d, #running-req: %d", st.Queued, st.Running)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, flushText)
}

func (s *Server) abortRequest(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RID      string `json:"rid"`
		AbortAll bool   `json:"abort_all"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.reqMu.Lock()
	for rid, q := range s.reqs {
		if body.AbortAll || rid == body.RID {
			q.Abort()
		}
	}
	s.reqMu.Unlock()
	if body.AbortAll || body.RID != "" {
		s.Engine.Wake() // the scheduler drops them now
	}
	w.WriteHeader(200)
}

// ---- generation ----

// CountTokens is the simulator's tokenizer: one token per whitespace-separated word.
func CountTokens(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		sp := c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
		if !sp && !in {
			n++
		}
		in = !sp
	}
	return n
}

// countContent counts the tokens of a JSON prompt or message content: a
// string, a list of token ids, or a list of {"type":"text","text":...} parts;
// it returns the decoded content too (nil for none).
func countContent(raw json.RawMessage) (int, any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, nil, err
	}
	switch x := v.(type) {
	case string:
		return CountTokens(x), v, nil
	case []any:
		n := 0
		for _, e := range x {
			switch y := e.(type) {
			case float64:
				n++
			case string:
				if len(x) > 1 {
					return 0, nil, fmt.Errorf("batched prompts are not supported by sglangsim")
				}
				n += CountTokens(y)
			case []any:
				if len(x) > 1 {
					return 0, nil, fmt.Errorf("batched prompts are not supported by sglangsim")
				}
				n += len(y)
			case map[string]any:
				if t, ok := y["text"].(string); ok {
					n += CountTokens(t)
				}
			}
		}
		return n, v, nil
	}
	return 0, nil, fmt.Errorf("unsupported prompt type")
}

var vocab = []string{"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
	"not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
	"their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so",
	"model", "token", "draft", "verify", "speed", "batch", "cache", "tree", "step", "graph", "server", "queue", "accept", "length"}

func appendWords(b []byte, start, n int, salt uint64) []byte {
	for i := start; i < start+n; i++ {
		b = append(b, ' ')
		b = append(b, vocab[(salt+uint64(i)*0x9E3779B1)>>7%uint64(len(vocab))]...)
	}
	return b
}

type genParams struct {
	api          string // "chat", "completions", "generate"
	prompt       int
	maxNew       int
	maxNewSet    bool
	ignoreEOS    bool
	stream       bool
	includeUsage bool
	seed         *int64
	rid          string
	temperature  *float64
	key          uint64  // greedy key: hash of the model and the prompt's content
	content      Content // what the prompt's text is (ContentScore)
}

func (s *Server) newRID() string {
	return fmt.Sprintf("%016x%016x", s.seq.Add(1), rand.Uint64())
}

func (s *Server) requestSeed(p *genParams, n uint64) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/", s.Args.RandomSeed)
	if p.seed != nil {
		fmt.Fprintf(h, "seed/%d", *p.seed)
	} else {
		fmt.Fprintf(h, "n/%d", n)
	}
	return h.Sum64()
}

// greedyHasher starts a greedy key of this server's model for a prompt kind.
func (s *Server) greedyHasher(kind string) hash.Hash64 {
	return greedyHasher(s.Args.ModelPath, s.Model.Profile.Name, kind)
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	s.openAI(w, r, "chat")
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	s.openAI(w, r, "completions")
}

func (s *Server) openAI(w http.ResponseWriter, r *http.Request, api string) {
	arrival := time.Now()
	var body struct {
		Prompt   json.RawMessage `json:"prompt"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		MaxTokens           *int     `json:"max_tokens"`
		MaxCompletionTokens *int     `json:"max_completion_tokens"`
		Stream              bool     `json:"stream"`
		IgnoreEOS           bool     `json:"ignore_eos"`
		Seed                *int64   `json:"seed"`
		RID                 string   `json:"rid"`
		Temperature         *float64 `json:"temperature"`
		StreamOptions       *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		openAIError(w, 400, "Invalid request body: "+err.Error())
		return
	}
	p := genParams{api: api, ignoreEOS: body.IgnoreEOS, stream: body.Stream, seed: body.Seed, rid: body.RID, temperature: body.Temperature}
	p.includeUsage = body.StreamOptions != nil && body.StreamOptions.IncludeUsage
	var err error
	if api == "chat" {
		if len(body.Messages) == 0 {
			openAIError(w, 400, "messages: field required")
			return
		}
		h := s.greedyHasher("chat")
		var sc contentScorer // the messages' texts, one after another
		for _, m := range body.Messages {
			n, v, e := countContent(m.Content)
			if e != nil {
				err = e
			}
			p.prompt += n
			io.WriteString(h, m.Role)
			h.Write([]byte{0})
			hashContent(h, v)
			h.Write([]byte{1})
			scoreContent(&sc, v)
		}
		p.key = h.Sum64()
		p.content = sc.result()
	} else {
		if len(body.Prompt) == 0 {
			openAIError(w, 400, "prompt: field required")
			return
		}
		var v any
		p.prompt, v, err = countContent(body.Prompt)
		h := s.greedyHasher("text")
		hashContent(h, v)
		p.key = h.Sum64()
		var sc contentScorer
		scoreContent(&sc, v)
		p.content = sc.result()
	}
	if err != nil {
		openAIError(w, 400, err.Error())
		return
	}
	if body.MaxCompletionTokens != nil {
		body.MaxTokens = body.MaxCompletionTokens
	}
	if body.MaxTokens != nil {
		p.maxNew, p.maxNewSet = *body.MaxTokens, true
	}
	s.generate(w, r, &p, arrival)
}

func (s *Server) generateNative(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	var body struct {
		Text           *string `json:"text"`
		InputIDs       []int   `json:"input_ids"`
		Stream         bool    `json:"stream"`
		RID            string  `json:"rid"`
		SamplingParams struct {
			MaxNewTokens *int     `json:"max_new_tokens"`
			IgnoreEOS    bool     `json:"ignore_eos"`
			Seed         *int64   `json:"sampling_seed"`
			Temperature  *float64 `json:"temperature"`
		} `json:"sampling_params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "Invalid request body: " + err.Error()}})
		return
	}
	if body.Text == nil && body.InputIDs == nil {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "Either text or input_ids should be provided."}})
		return
	}
	p := genParams{api: "generate", stream: body.Stream, rid: body.RID, ignoreEOS: body.SamplingParams.IgnoreEOS,
		seed: body.SamplingParams.Seed, maxNew: 128, maxNewSet: true, temperature: body.SamplingParams.Temperature}
	h := s.greedyHasher("text")
	if body.Text != nil {
		p.prompt = CountTokens(*body.Text)
		hashContent(h, *body.Text)
		p.content = ContentScore(*body.Text)
	} else { // token ids: no text to score, neutral
		p.prompt = len(body.InputIDs)
		hashIDs(h, body.InputIDs)
	}
	p.key = h.Sum64()
	if body.SamplingParams.MaxNewTokens != nil {
		p.maxNew = *body.SamplingParams.MaxNewTokens
	}
	s.generate(w, r, &p, arrival)
}

func (s *Server) errorOut(w http.ResponseWriter, p *genParams, code int, msg string) {
	if p.api == "generate" {
		writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg}})
		return
	}
	openAIError(w, code, msg)
}

// generate runs one generation request through the scheduler and streams
// (or returns) its output in the format of its API.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, p *genParams, arrival time.Time) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if s.hang(r) {
		return
	}
	if s.phase.Load() == phaseDraining {
		s.errorOut(w, p, 503, "The server is shutting down.")
		return
	}
	ctxLen := s.Model.Plan.ContextLen
	if p.prompt < 1 {
		p.prompt = 1
	}
	if p.prompt >= ctxLen {
		s.errorOut(w, p, 400, fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", p.prompt, ctxLen))
		return
	}
	if !p.maxNewSet {
		p.maxNew = ctxLen - p.prompt
	}
	if p.maxNew < 0 {
		s.errorOut(w, p, 400, "max_tokens must be at least 0, got "+strconv.Itoa(p.maxNew)+".")
		return
	}
	if p.prompt+p.maxNew > ctxLen {
		s.errorOut(w, p, 400, fmt.Sprintf("Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			ctxLen, p.prompt+p.maxNew, p.prompt, p.maxNew))
		return
	}
	n := uint64(s.received.Add(1))
	rid := p.rid
	if rid == "" {
		rid = s.newRID()
	}
	seed := s.requestSeed(p, n)
	temp := 1.0 // SGLang's SamplingParams default
	if p.temperature != nil {
		if *p.temperature < 0 || math.IsNaN(*p.temperature) {
			s.errorOut(w, p, 400, fmt.Sprintf("temperature must be non-negative, got %v.", *p.temperature))
			return
		}
		temp = *p.temperature
	}
	var req *Request
	if temp < GreedyTemperature {
		// Greedy: the words (and the EOS position) are the model's for this prompt.
		req = NewGreedyRequest(rid, p.prompt, max(p.maxNew, 1), p.ignoreEOS, s.Model.Profile.NaturalLen, seed, p.key)
		if p.maxNew > 0 {
			req.nondet = nondeterminism(s.nondetSeed, n, s.Config.Nondeterminism, req.target)
		}
	} else {
		req = NewRequest(rid, p.prompt, max(p.maxNew, 1), p.ignoreEOS, s.Model.Profile.NaturalLen, seed)
	}
	req.Arrival = arrival
	req.Temperature = temp
	req.Content = p.content
	s.reqMu.Lock()
	s.reqs[rid] = req
	s.reqMu.Unlock()
	defer func() {
		s.reqMu.Lock()
		delete(s.reqs, rid)
		s.reqMu.Unlock()
	}()
	if p.maxNew == 0 {
		// Nothing to generate: SGLang answers with the prompt usage only.
		s.respond(w, r, p, req, true)
		return
	}
	s.Engine.Submit(req)
	s.respond(w, r, p, req, false)
}

// respond consumes the request's output and writes the API's format.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, p *genParams, req *Request, empty bool) {
	created := strconv.FormatInt(time.Now().Unix(), 10)
	flusher, _ := w.(http.Flusher)
	var (
		buf, text       []byte
		steps           []int
		total, verify   int
		done            bool
		finish          string
		first, finishAt time.Time
		sent            int
		lastDone        bool
	)
	if p.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(200)
	}
	for !lastDone {
		if empty {
			done, finish = true, "length"
		} else {
			select {
			case <-req.Notify():
			case <-r.Context().Done():
				req.Abort()
				s.Engine.Wake()
				_, total, verify, _, _ = req.Take(nil)
				s.truthRequest(req, first, time.Now(), total, verify)
				return
			}
			steps, total, verify, done, finish = req.Take(steps)
		}
		lastDone = done
		if !p.stream {
			continue
		}
		buf = buf[:0]
		div := req.divergence() // set before the steps it diverges were pushed
		for _, k := range steps {
			text = req.appendText(text[:0], sent, k, div)
			buf = s.appendChunk(buf, p, req, created, text, sent == 0, "", sent+k, verify, div)
			sent += k
		}
		if done {
			buf = s.appendChunk(buf, p, req, created, nil, sent == 0 && p.api == "chat", finish, sent, verify, div)
			if p.includeUsage && p.api != "generate" {
				buf = s.appendUsage(buf, p, req, created, total)
			}
			buf = append(buf, "data: [DONE]\n\n"...)
		}
		if len(buf) > 0 {
			_, err := w.Write(buf)
			if flusher != nil {
				flusher.Flush()
			}
			if err != nil {
				req.Abort()
				s.Engine.Wake()
				s.truthRequest(req, first, time.Now(), total, verify)
				return
			}
			if first.IsZero() && sent > 0 {
				first = time.Now()
			}
		}
	}
	if !p.stream {
		first = req.FirstGen()
		text = req.appendText(text[:0], 0, total, req.divergence())
		s.writeFull(w, p, req, created, string(text), finish, total, verify)
	}
	finishAt = time.Now()
	s.truthRequest(req, first, finishAt, total, verify)
}

// truthRequest writes req's line to the truth file.
func (s *Server) truthRequest(req *Request, first, finish time.Time, total, verify int) {
	p := s.Model.Profile
	s.truth.Request(RequestTruth{RID: req.RID, Arrival: req.Arrival, First: first, Finish: finish,
		PromptTokens: req.Prompt, CompletionTokens: total, VerifySteps: verify, Content: req.Content,
		ContentFactor: p.ContentFactor(req.Content.Class), ContextFactor: p.ContextFactor(req.Prompt)})
}

func finishJSON(finish string) (reason, matched string) {
	switch finish {
	case "":
		return "null", "null"
	case "stop":
		return `"stop"`, "151645"
	}
	return strconv.Quote(finish), "null"
}

func (s *Server) appendChunk(b []byte, p *genParams, req *Request, created string, text []byte, first bool, finish string, sent, verify int, div divergence) []byte {
	reason, matched := finishJSON(finish)
	switch p.api {
	case "chat":
		b = append(b, `data: {"id":"`...)
		b = append(b, req.RID...)
		b = append(b, `","object":"chat.completion.chunk","created":`...)
		b = append(b, created...)
		b = append(b, `,"model":`...)
		b = append(b, s.modelJSON...)
		b = append(b, `,"choices":[{"index":0,"delta":{`...)
		if first {
			b = append(b, `"role":"assistant",`...)
		}
		if finish == "" || first {
			b = append(b, `"content":"`...)
			b = append(b, text...)
			b = append(b, '"')
		}
		b = append(b, `},"logprobs":null,"finish_reason":`...)
	case "completions":
		b = append(b, `data: {"id":"`...)
		b = append(b, req.RID...)
		b = append(b, `","object":"text_completion","created":`...)
		b = append(b, created...)
		b = append(b, `,"model":`...)
		b = append(b, s.modelJSON...)
		b = append(b, `,"choices":[{"index":0,"text":"`...)
		b = append(b, text...)
		b = append(b, `","logprobs":null,"finish_reason":`...)
	default: // native /generate: cumulative text
		b = append(b, `data: {"text":"`...)
		b = req.appendText(b, 0, sent, div)
		b = append(b, `","meta_info":`...)
		b = s.appendMeta(b, req, finish, sent, verify)
		return append(b, "}\n\n"...)
	}
	b = append(b, reason...)
	b = append(b, `,"matched_stop":`...)
	b = append(b, matched...)
	return append(b, "}],\"usage\":null}\n\n"...)
}

func (s *Server) appendMeta(b []byte, req *Request, finish string, sent, verify int) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, req.RID...)
	b = append(b, `","finish_reason":`...)
	switch finish {
	case "":
		b = append(b, "null"...)
	case "stop":
		b = append(b, `{"type":"stop","matched":151645}`...)
	case "length":
		b = append(b, `{"type":"length","length":`...)
		b = strconv.AppendInt(b, int64(sent), 10)
		b = append(b, '}')
	default:
		b = append(b, `{"type":"abort","message":"Abort request `...)
		b = append(b, req.RID...)
		b = append(b, `"}`...)
	}
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(req.Prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(sent), 10)
	b = append(b, `,"cached_tokens":0`...)
	if s.Args.Spec() {
		b = append(b, `,"spec_verify_ct":`...)
		b = strconv.AppendInt(b, int64(verify), 10)
		al := 0.0
		if verify > 0 {
			al = float64(sent-1) / float64(verify)
		}
		b = append(b, `,"spec_accept_length":`...)
		b = strconv.AppendFloat(b, al, 'f', 4, 64)
	}
	b = append(b, `,"e2e_latency":`...)
	b = strconv.AppendFloat(b, time.Since(req.Arrival).Seconds(), 'f', 6, 64)
	return append(b, '}')
}

func (s *Server) appendUsage(b []byte, p *genParams, req *Request, created string, total int) []byte {
	obj := "chat.completion.chunk"
	if p.api == "completions" {
		obj = "text_completion"
	}
	b = append(b, `data: {"id":"`...)
	b = append(b, req.RID...)
	b = append(b, `","object":"`+obj+`","created":`...)
	b = append(b, created...)
	b = append(b, `,"model":`...)
	b = append(b, s.modelJSON...)
	b = append(b, `,"choices":[],"usage":`...)
	b = appendUsageObj(b, req.Prompt, total)
	return append(b, "}\n\n"...)
}

func appendUsageObj(b []byte, prompt, total int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+total), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	return append(b, `,"prompt_tokens_details":null}`...)
}

func (s *Server) writeFull(w http.ResponseWriter, p *genParams, req *Request, created, text, finish string, total, verify int) {
	reason, matched := finishJSON(finish)
	var b []byte
	switch p.api {
	case "chat":
		b = fmt.Appendf(b, `{"id":"%s","object":"chat.completion","created":%s,"model":%s,"choices":[{"index":0,"message":{"role":"assistant","content":%q,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":%s,"matched_stop":%s}],"usage":`,
			req.RID, created, s.modelJSON, text, reason, matched)
		b = append(appendUsageObj(b, req.Prompt, total), '}')
	case "completions":
		b = fmt.Appendf(b, `{"id":"%s","object":"text_completion","created":%s,"model":%s,"choices":[{"index":0,"text":%q,"logprobs":null,"finish_reason":%s,"matched_stop":%s}],"usage":`,
			req.RID, created, s.modelJSON, text, reason, matched)
		b = append(appendUsageObj(b, req.Prompt, total), '}')
	default:
		b = fmt.Appendf(b, `{"text":%q,"meta_info":`, text)
		b = append(s.appendMeta(b, req, finish, total, verify), '}')
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write(b)
}

// listen opens the server socket the way uvicorn reports it.
func listen(host string, port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
}
