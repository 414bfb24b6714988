package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Profile holds the calibrated numbers of one model. Times are milliseconds
// at RefTP GPUs; memory is in GB (1e9 bytes) or bytes as named. The json tags
// are the field names of a profile file (SGLANGSIM_PROFILE=/path/file.json,
// LoadProfile); docs/sglangsim.md explains every field, its unit and default,
// and how to add or fit a profile.
type Profile struct {
	Name         string   `json:"name"`
	Match        []string `json:"match"` // lower-case substrings of --model-path that select the profile when SGLANGSIM_PROFILE is unset
	ModelType    string   `json:"model_type"`
	Architecture string   `json:"architecture"`
	ContextLen   int      `json:"context_len"`

	// Decode step time at RefTP, per forward:
	//   T0 + PerToken*(tokens verified in the batch) + PerKCtx*(context tokens in the batch)/1000
	// plus, under speculation, DraftFixed + per draft step (DraftStep + DraftPerTok*batch*width)
	// and, for chain algorithms, StepsExtraMs[num_steps-1].
	RefTP        int     `json:"ref_tp"`
	TPExp        float64 `json:"tp_exp"` // step time scales by (RefTP/tp)^TPExp
	T0           float64 `json:"t0"`
	PerToken     float64 `json:"per_token"`
	PerKCtx      float64 `json:"per_kctx"`
	DraftFixed   float64 `json:"draft_fixed"`
	DraftStep    float64 `json:"draft_step"`
	DraftPerTok  float64 `json:"draft_per_tok"`
	PrefillFixed float64 `json:"prefill_fixed"` // ms per prefill batch
	PrefillPerK  float64 `json:"prefill_per_k"` // ms per 1000 prompt tokens
	// StepsExtraMs[i] is added to every decode forward of a chain algorithm
	// (EAGLE, EAGLE3, STANDALONE, plugins) run with num_steps = i+1; 0 past
	// the end. It models kernels or backends that are slow at particular
	// draft sizes: a dip in throughput against num_steps, then a second rise.
	StepsExtraMs []float64 `json:"steps_extra_ms"`

	// Acceptance: chain probability that draft position i is accepted given
	// every earlier one was, per effective algorithm. Positions past the end
	// of a table reuse its last value.
	Accept   map[string][]float64 `json:"accept"`
	TopKBeta float64              `json:"topk_beta"` // a tree with branching b turns p into 1-(1-p)*b^-TopKBeta
	// TempAlpha is how fast acceptance falls with the sampling temperature
	// (see Model.AcceptAt).
	TempAlpha float64 `json:"temp_alpha"`
	// ContentCode and ContentProse multiply the odds p/(1-p) of every draft
	// position of a code-like (>= 1) or prose-like (<= 1) request
	// (ContentScore); a neutral one keeps the table's.
	ContentCode  float64 `json:"content_code"`
	ContentProse float64 `json:"content_prose"`
	// Context decay: the odds of acceptance of a request whose prompt holds
	// more than CtxKnee tokens are multiplied by CtxFloor^x, x growing with
	// log(prompt) from 0 at CtxKnee to 1 at CtxFull (ContextFactor).
	CtxKnee  int     `json:"ctx_knee"`
	CtxFull  int     `json:"ctx_full"`
	CtxFloor float64 `json:"ctx_floor"`

	// Noise is the relative standard deviation of the server's speed: the
	// engine multiplies batch times by 1 + Noise*N(0,1), clamped to
	// [0.5, 1.5], redrawn every simulated second (Engine.speed). 0: none.
	Noise float64 `json:"noise"`

	// Memory model (per the whole model; divided by tp per GPU).
	WeightsGB       float64            `json:"weights_gb"`
	DraftGB         map[string]float64 `json:"draft_gb"`
	KVBytesPerToken float64            `json:"kv_bytes_per_token"`
	StateMBPerReq   float64            `json:"state_mb_per_req"` // recurrent state per request; x(1+num_draft_tokens) under speculation
	ActGB           float64            `json:"act_gb"`           // activations/workspace per GPU, kept out of the static pool
	GraphBaseGB     float64            `json:"graph_base_gb"`    // CUDA graph memory per GPU, fixed part
	GraphPerTokGB   float64            `json:"graph_per_tok_gb"` // CUDA graph memory per GPU per (batch size x tokens per forward)

	NaturalLen int `json:"natural_len"` // mean completion length when EOS is not ignored

	// Source is the file a profile was loaded from ("" for a built-in one).
	Source string `json:"-"`
}

// Profiles are the built-in performance profiles, by name.
var Profiles = map[string]*Profile{
	"qwen3.5-122b-a10b": {
		Name: "qwen3.5-122b-a10b", Match: []string{"122b"},
		ModelType: "qwen3_5_moe", Architecture: "Qwen3_5MoeForConditionalGeneration", ContextLen: 262144,
		RefTP: 4, TPExp: 0.8,
		T0: 9.45, PerToken: 0.25, PerKCtx: 0.02,
		DraftFixed: 5.2, DraftStep: 0.1, DraftPerTok: 0.05,
		PrefillFixed: 20, PrefillPerK: 40,
		Accept: map[string][]float64{
			// Fitted to the field report (steps 1..5 -> 123,186,234,277,282 tok/s; 5.5 at 10):
			// the EAGLE-3 head is good for four positions, then falls off.
			"EAGLE3":     {0.97, 0.9506, 0.9316, 0.9129, 0.54},
			"EAGLE":      {0.90, 0.82, 0.74, 0.66, 0.58, 0.50},
			"STANDALONE": {0.82, 0.74, 0.68, 0.62, 0.56, 0.50},
			"NGRAM":      {0.55, 0.45, 0.40, 0.35, 0.30},
			"DFLASH":     {0.93, 0.88, 0.83, 0.78, 0.72, 0.66, 0.60, 0.54, 0.48, 0.42},
		},
		TopKBeta: 0.7, TempAlpha: 1.5,
		// Content as profileDefaults; the context floor puts the MTP (EAGLE) table at steps 3
		// at accept length 1.57, accept rate 0.19, from 32K prompt tokens on (SGLang issue 30763).
		ContentCode: 2, ContentProse: 0.2, CtxKnee: 4096, CtxFull: 32768, CtxFloor: 0.084,
		WeightsGB: 244, DraftGB: map[string]float64{"EAGLE3": 2, "EAGLE": 3, "STANDALONE": 1.2, "DFLASH": 2},
		KVBytesPerToken: 32768, StateMBPerReq: 200,
		ActGB: 3, GraphBaseGB: 1, GraphPerTokGB: 0.004,
		NaturalLen: 600,
	},
	"qwen3.6-27b": {
		Name: "qwen3.6-27b", Match: []string{"27b"},
		ModelType: "qwen3_5", Architecture: "Qwen3_5ForConditionalGeneration", ContextLen: 262144,
		RefTP: 2, TPExp: 0.75,
		T0: 29.7, PerToken: 0.3, PerKCtx: 0.04,
		DraftFixed: 2.5, DraftStep: 1.4, DraftPerTok: 0.1,
		PrefillFixed: 25, PrefillPerK: 110,
		Accept: map[string][]float64{
			// NEXTN (MTP) calibrated to 59.36 tok/s at TP2, concurrency 1, SGLang's default (3,1,4).
			"EAGLE":      {0.71, 0.56, 0.46, 0.40, 0.35},
			"EAGLE3":     {0.78, 0.66, 0.58, 0.52, 0.46},
			"STANDALONE": {0.70, 0.60, 0.52, 0.46, 0.40},
			"NGRAM":      {0.50, 0.40, 0.35, 0.30},
			"DFLASH":     {0.85, 0.80, 0.75, 0.70, 0.65, 0.60, 0.55, 0.50, 0.45, 0.40},
		},
		TopKBeta: 0.7, TempAlpha: 1.5,
		// As the 122B's: the MTP table at steps 3 accepts 1.57 from 32K prompt tokens on (SGLang 30763).
		ContentCode: 2, ContentProse: 0.2, CtxKnee: 4096, CtxFull: 32768, CtxFloor: 0.3,
		WeightsGB: 54, DraftGB: map[string]float64{"EAGLE3": 1, "EAGLE": 1.6, "STANDALONE": 1.2, "DFLASH": 1.5},
		KVBytesPerToken: 65536, StateMBPerReq: 100,
		ActGB: 2.5, GraphBaseGB: 0.8, GraphPerTokGB: 0.003,
		NaturalLen: 600,
	},
}

// DefaultProfile is used when neither SGLANGSIM_PROFILE nor the model path picks one.
const DefaultProfile = "qwen3.5-122b-a10b"

// ProfileNames lists the built-in profiles, sorted.
func ProfileNames() []string {
	var n []string
	for k := range Profiles {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// PickProfile returns the profile SGLANGSIM_PROFILE names: a file (a value
// holding a "/" or ending in ".json", read by LoadProfile) or a built-in
// profile; with name empty, the first built-in whose Match substring occurs
// in the model path, or the default.
func PickProfile(name, modelPath string) (*Profile, error) {
	if IsProfilePath(name) {
		return LoadProfile(name)
	}
	if name != "" {
		if p, ok := Profiles[strings.ToLower(name)]; ok {
			return p, nil
		}
		return nil, fmt.Errorf("unknown SGLANGSIM_PROFILE %q (known: %s)", name, strings.Join(ProfileNames(), ", "))
	}
	lp := strings.ToLower(modelPath)
	for _, n := range ProfileNames() {
		for _, m := range Profiles[n].Match {
			if strings.Contains(lp, m) {
				return Profiles[n], nil
			}
		}
	}
	return Profiles[DefaultProfile], nil
}

// MemPlan is the memory layout of one GPU and what follows from it.
type MemPlan struct {
	GPUMemGB, MemFraction               float64
	WeightsGB, DraftGB, GraphGB, PoolGB float64 // per GPU
	MaxTotalTokens                      int     // KV pool in tokens
	StateTokens                         int     // token-equivalent of one request's recurrent state
	MaxRunning, CudaGraphMaxBS          int
	MaxPrefillTokens                    int // prompt tokens per prefill batch
	ContextLen                          int
	// OOM is "" when the plan fits, else the stage that runs out of memory:
	// "weights" (during weight loading) or "graph" (KV pool + CUDA graphs).
	OOM        string
	OOMAllocGB float64
	// AdaptiveGraphGB is, per candidate step count other than the initial one, the graph memory of
	// its runtime state (an adaptive server); GraphGB includes it.
	AdaptiveGraphGB map[int]float64
}

// Model is the performance model of one server configuration.
type Model struct {
	Profile  *Profile
	Args     *Args
	Plan     MemPlan
	accept   []float64 // effective per-position acceptance; len = max accepted drafts per step
	tpFactor float64
	kind     string // "" (no speculation), "chain", "block", "lookup"
	// AcceptScale multiplies every per-position acceptance probability the requests draw, after
	// the content, context and temperature (SGLANGSIM_ACCEPT_SCALE, in (0, 1]): a regression made
	// on purpose. 0 and 1 change nothing; step costs, memory and the baseline never depend on it.
	AcceptScale float64
	// NNodes and Net: a tensor-parallel group spanning NNodes nodes all-reduces every layer across
	// them over Net (interNodeMs); 0 or 1 node costs nothing more.
	NNodes int
	Net    NetModel
}

// NewModel builds the model of args under profile p on GPUs of gpuMemGB.
func NewModel(a *Args, p *Profile, gpuMemGB float64) *Model {
	m := &Model{Profile: p, Args: a, tpFactor: math.Pow(float64(p.RefTP)/float64(a.TP), p.TPExp),
		NNodes: max(a.NNodes, 1), Net: netDefaults("IB")}
	if a.Spec() {
		switch a.SpecAlgo {
		case "DFLASH", "DSPARK":
			m.kind = "block"
		case "NGRAM":
			m.kind = "lookup"
		default:
			m.kind = "chain"
		}
		m.accept = m.acceptTable()
	}
	m.Plan = m.plan(gpuMemGB)
	return m
}

// acceptTable is the per-position acceptance of the model's algorithm and shape.
func (m *Model) acceptTable() []float64 {
	a, p := m.Args, m.Profile
	table := p.Accept[algoKey(a.SpecAlgo)]
	if len(table) == 0 {
		table = []float64{0.6}
	}
	n := a.Steps
	if m.kind != "chain" {
		n = a.DraftTokens - 1
	}
	n = max(0, min(n, a.DraftTokens-1))
	b := 1.0
	if m.kind == "chain" && a.TopK > 1 {
		b = math.Max(1, math.Min(float64(a.TopK), float64(a.DraftTokens-1)/float64(a.Steps)))
	}
	accept := make([]float64, n)
	for i := range accept {
		pi := table[min(i, len(table)-1)]
		accept[i] = 1 - (1-pi)*math.Pow(b, -p.TopKBeta)
	}
	return accept
}

// forSteps is the model of the same server running num_steps k (topk 1, k+1 draft tokens), as an
// adaptive server runs it: a step costs and accepts what it does on a server started with k steps
// (k = 0 drafts nothing: a one-token verify, and the draft extend still runs), while the memory
// plan stays the server's.
func (m *Model) forSteps(k int) *Model {
	a := *m.Args
	a.Steps, a.TopK, a.DraftTokens = k, 1, k+1
	v := *m
	v.Args = &a
	v.accept = v.acceptTable()
	return &v
}

func algoKey(a string) string {
	if a == "DSPARK" {
		return "DFLASH"
	}
	return a
}

// tokensPerForward is how many tokens the target verifies per request per step.
func (m *Model) tokensPerForward() int {
	if m.kind == "" {
		return 1
	}
	return m.Args.DraftTokens
}

// draftShape returns the number of sequential draft forwards per step and
// the tokens each drafts per request.
func (m *Model) draftShape() (steps int, width int) {
	switch m.kind {
	case "chain":
		return m.Args.Steps, m.Args.TopK
	case "block":
		return 1, m.Args.DraftTokens - 1
	}
	return 0, 0
}

func (m *Model) plan(gpuMemGB float64) MemPlan {
	a, p := m.Args, m.Profile
	tp := float64(a.TP)
	pl := MemPlan{GPUMemGB: gpuMemGB, ContextLen: p.ContextLen}
	if a.ContextLen > 0 {
		pl.ContextLen = a.ContextLen
	}
	pl.WeightsGB = p.WeightsGB / tp
	if m.kind != "" {
		pl.DraftGB = p.DraftGB[algoKey(a.SpecAlgo)] / tp
	}
	pl.MaxRunning = a.MaxRunning
	pl.MaxPrefillTokens = intOr(a.Raw, "max_prefill_tokens", 16384)
	pl.CudaGraphMaxBS = a.CudaGraphMaxBS
	if pl.CudaGraphMaxBS == 0 {
		pl.CudaGraphMaxBS = 256
		if m.kind != "" && a.MaxRunning > 0 {
			pl.CudaGraphMaxBS = min(a.MaxRunning, 256)
		}
	}
	ds, dw := m.draftShape()
	if !a.DisableCudaGraph {
		pl.GraphGB = p.GraphBaseGB + p.GraphPerTokGB*float64(pl.CudaGraphMaxBS)*float64(m.tokensPerForward()+ds*dw)
		if ad := a.Adaptive; ad != nil {
			// One runtime state (target verify, draft and extend graphs) per other candidate, captured
			// for the batch sizes that can route to it (main prunes them per slot).
			pl.AdaptiveGraphGB = map[int]float64{}
			bsList := cudaGraphBS(a, pl.CudaGraphMaxBS)
			ctl := newAdaptiveController(ad.Rules, ad.slots, a.Steps, bsList)
			for _, k := range ad.Candidates {
				if k == a.Steps {
					continue
				}
				top := 0
				for _, bs := range bsList {
					if ad.Rules == "v0510" || containsInt(ctl.route(bs).cands, k) {
						top = max(top, bs)
					}
				}
				gb := p.GraphPerTokGB * float64(top) * float64(2*k+1)
				pl.AdaptiveGraphGB[k] = gb
				pl.GraphGB += gb
			}
		}
	}
	reserve := p.ActGB + pl.GraphGB
	pl.MemFraction = a.MemFraction
	if pl.MemFraction == 0 {
		pl.MemFraction = math.Round(math.Max(0.3, (gpuMemGB-reserve)/gpuMemGB)*1000) / 1000
	}
	if pl.WeightsGB+pl.DraftGB > gpuMemGB*0.98 {
		pl.OOM, pl.OOMAllocGB = "weights", math.Min(pl.WeightsGB, 4.5)
		return pl
	}
	pl.PoolGB = gpuMemGB*pl.MemFraction - pl.WeightsGB - pl.DraftGB
	kvPerGPU := p.KVBytesPerToken / tp
	pl.MaxTotalTokens = int(math.Max(0, pl.PoolGB) * 1e9 / kvPerGPU)
	stateMul := 1.0
	if m.kind != "" {
		stateMul = float64(1 + a.DraftTokens)
	}
	if ad := a.Adaptive; ad != nil && len(ad.Candidates) > 0 {
		stateMul = float64(2 + ad.Candidates[len(ad.Candidates)-1]) // sized for the largest candidate
	}
	pl.StateTokens = int(p.StateMBPerReq * 1e6 * stateMul / p.KVBytesPerToken)
	if pl.MaxRunning == 0 {
		pl.MaxRunning = max(1, min(2048, pl.MaxTotalTokens/(pl.StateTokens+2048)))
	}
	free := gpuMemGB*(1-pl.MemFraction) - p.ActGB
	if pl.MaxTotalTokens <= 0 {
		pl.OOM = "kv" // "Not enough memory": the static fraction does not even hold the weights
		return pl
	}
	if pl.MaxTotalTokens < pl.StateTokens+4096 || (a.MemFraction > 0 && free < pl.GraphGB) {
		pl.OOM = "graph"
		pl.OOMAllocGB = math.Max(0.5, math.Round(pl.GraphGB*0.37*100)/100)
	}
	return pl
}

// ReserveCap bounds the completion tokens a request reserves at admission
// (SGLang estimates future tokens instead of reserving max_new_tokens).
const ReserveCap = 4096

// Footprint is the KV pool share (tokens) a request reserves while running:
// prompt + min(max_new_tokens, ReserveCap) + its recurrent state.
func (m *Model) Footprint(prompt, maxNew int) int {
	return prompt + min(maxNew, ReserveCap) + m.Plan.StateTokens
}

// StepTime is the duration of one decode (verify) forward for a batch of bs
// requests holding ctx context tokens in total, at time scale 1.
func (m *Model) StepTime(bs, ctx int) time.Duration {
	p := m.Profile
	ms := p.T0 + p.PerToken*float64(bs*m.tokensPerForward()) + p.PerKCtx*float64(ctx)/1000
	switch m.kind {
	case "chain", "block":
		ds, dw := m.draftShape()
		per := p.DraftStep + p.DraftPerTok*float64(bs*dw)
		if m.Args.SpecAlgo == "STANDALONE" {
			per *= 4
		}
		ms += p.DraftFixed + float64(ds)*per
		if m.kind == "chain" && m.Args.Steps >= 1 && m.Args.Steps <= len(p.StepsExtraMs) {
			ms += p.StepsExtraMs[m.Args.Steps-1]
		}
	case "lookup":
		ms += 0.5
	}
	if m.Args.DisableCudaGraph || bs > m.Plan.CudaGraphMaxBS {
		ms *= 1.3
	}
	return time.Duration((ms*m.tpFactor + m.interNodeStepMs(bs)) * float64(time.Millisecond))
}

// interNodeStepMs is a decode step's time in all-reduces across nodes: the target's layers over
// the tokens it verifies, and one layer per draft forward over the tokens it drafts.
func (m *Model) interNodeStepMs(bs int) float64 {
	if m.NNodes <= 1 {
		return 0
	}
	ms := interNodeMs(m.Net, m.NNodes, bs*m.tokensPerForward(), interNodeLayers)
	if ds, dw := m.draftShape(); ds > 0 {
		ms += interNodeMs(m.Net, m.NNodes, bs*max(dw, 1), ds)
	}
	return ms
}

// PrefillTime is the duration of a prefill batch of newTokens prompt tokens.
func (m *Model) PrefillTime(newTokens int) time.Duration {
	ms := m.Profile.PrefillFixed + m.Profile.PrefillPerK*float64(newTokens)/1000
	if m.kind != "" {
		ms *= 1.1 // draft extend
	}
	inter := 0.0
	if m.NNodes > 1 {
		inter = interNodeMs(m.Net, m.NNodes, newTokens, interNodeLayers)
	}
	return time.Duration((ms*m.tpFactor + inter) * float64(time.Millisecond))
}

// SampleAccept draws the accepted length of one greedy verify step (bonus
// token included): 1 plus the run of accepted draft positions.
func (m *Model) SampleAccept(r *rand.Rand) int { return sampleChain(r, m.AcceptAt(0)) }

func sampleChain(r *rand.Rand, accept []float64) int {
	n := 1
	for _, p := range accept {
		if r.Float64() >= p {
			break
		}
		n++
	}
	return n
}

// AcceptAt is the per-position acceptance at sampling temperature t. Greedy
// (t below 1e-5, SGLang's sampling epsilon) keeps the profile's table;
// above it the verifier samples and accepts a draft token with the overlap
// of the two distributions, modelled as p^(1 + TempAlpha*min(t, 2)). Both
// are then multiplied by AcceptScale.
func (m *Model) AcceptAt(t float64) []float64 { return m.scaleAccept(m.temperAccept(m.accept, t)) }

// scaleAccept multiplies each probability of accept by AcceptScale; without
// a scale (0 or 1) it returns accept itself, so the draws are those of a
// server without the knob.
func (m *Model) scaleAccept(accept []float64) []float64 {
	s := m.AcceptScale
	if s == 0 || s == 1 || len(accept) == 0 {
		return accept
	}
	out := make([]float64, len(accept))
	for i, p := range accept {
		out[i] = s * p
	}
	return out
}

// temperAccept lowers per-position acceptance for sampling at temperature
// t (AcceptAt); greedy returns accept itself.
func (m *Model) temperAccept(accept []float64, t float64) []float64 {
	if t < GreedyTemperature || len(accept) == 0 {
		return accept
	}
	k := 1 + m.Profile.TempAlpha*math.Min(t, 2)
	out := make([]float64, len(accept))
	for i, p := range accept {
		out[i] = math.Pow(p, k)
	}
	return out
}

// ExpectedAccept is the mean of SampleAccept.
func (m *Model) ExpectedAccept() float64 { return expectedAccept(m.AcceptAt(0)) }

func expectedAccept(accept []float64) float64 {
	e, c := 1.0, 1.0
	for _, p := range accept {
		c *= p
		e += c
	}
	return e
}

// ContentFactor is the factor on the odds of acceptance of a request of
// class c: ContentCode, ContentProse, or 1 for neutral text.
func (p *Profile) ContentFactor(c ContentClass) float64 {
	switch c {
	case ContentCode:
		return p.ContentCode
	case ContentProse:
		return p.ContentProse
	}
	return 1
}

// ContextFactor is the factor on the odds of acceptance of a request with
// promptTokens prompt tokens: 1 up to CtxKnee, CtxFloor from CtxFull on, and
// between them CtxFloor^x with x = ln(prompt/CtxKnee) / ln(CtxFull/CtxKnee),
// so it falls by the same ratio every time the prompt doubles. It never
// rises with the prompt.
func (p *Profile) ContextFactor(promptTokens int) float64 {
	switch {
	case promptTokens <= p.CtxKnee:
		return 1
	case promptTokens >= p.CtxFull:
		return p.CtxFloor
	}
	x := math.Log(float64(promptTokens)/float64(p.CtxKnee)) / math.Log(float64(p.CtxFull)/float64(p.CtxKnee))
	return math.Pow(p.CtxFloor, x)
}

// AcceptFor is the per-position acceptance of a request of content class c
// with promptTokens prompt tokens, sampled at temperature t: the table's
// (a tree's, after its branching), its odds multiplied by the content and
// context factors, then lowered by the temperature as AcceptAt lowers it,
// then multiplied by AcceptScale. A neutral request below the knee gets
// AcceptAt(t) exactly.
func (m *Model) AcceptFor(c ContentClass, promptTokens int, t float64) []float64 {
	f := m.Profile.ContentFactor(c) * m.Profile.ContextFactor(promptTokens)
	if f == 1 {
		return m.AcceptAt(t)
	}
	return m.scaleAccept(m.temperAccept(oddsScale(m.accept, f), t))
}

// ExpectedAcceptFor is the mean accept length of one verify step (the bonus
// token included) of a request as AcceptFor describes it: what the request's
// accepted tokens over its verify steps tend to with a long output.
func (m *Model) ExpectedAcceptFor(c ContentClass, promptTokens int, t float64) float64 {
	return expectedAccept(m.AcceptFor(c, promptTokens, t))
}

// MaxAccept is the largest accepted length of one step.
func (m *Model) MaxAccept() int { return len(m.accept) + 1 }

// SingleStreamTokS is the analytic decode speed of one request alone with
// ctx context tokens (tokens per second, time scale 1).
func (m *Model) SingleStreamTokS(ctx int) float64 {
	return m.ExpectedAccept() / m.StepTime(1, ctx).Seconds()
}
