package sim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode"
)

// Adaptive speculative decoding (--speculative-adaptive, --speculative-adaptive-config FILE): SGLang
// changes speculative_num_steps at runtime, from an EMA of the accepted draft tokens. Two versions are
// emulated, each as its era's source has it (docs/sglangsim.md, "Adaptive speculative decoding"):
//
//   - "v0510": python/sglang/srt/speculative/adaptive_spec_params.py at 6c2714f5a (2026-04-21, unchanged
//     but for a rename to bd448e51b): one set of candidate steps for every batch, a flat config, the
//     unsupported cases checked at the end of ServerArgs._handle_speculative_decoding, the file read when
//     the EAGLE worker starts (a bad one kills the scheduler);
//   - "main": the same file at 015c872: per-batch-size slots, step 0 (no drafting), a strategy, the file
//     read while the server arguments are post-processed (a bad one is a traceback at start).

// AdaptiveKnobs are an adaptive config's tuning knobs; nil leaves SGLang's default (ema_alpha 0.2,
// update_interval 5, warmup_batches 10, down_hysteresis -0.25, up_hysteresis 0, ceiling_coeff 0).
type AdaptiveKnobs struct {
	EMAAlpha       *float64 `json:"ema_alpha,omitempty"`
	UpdateInterval *float64 `json:"update_interval,omitempty"`
	WarmupBatches  *float64 `json:"warmup_batches,omitempty"`
	DownHysteresis *float64 `json:"down_hysteresis,omitempty"`
	UpHysteresis   *float64 `json:"up_hysteresis,omitempty"`
	// CeilingCoeff caps a step that does not rise at ceil(ema * coeff) ("main" only; 0: off).
	CeilingCoeff *float64 `json:"ceiling_coeff,omitempty"`
}

// AdaptiveSlot is one batch-size slot: the candidate steps of batches padded to at least BatchSize
// (and below the next slot's), and knobs that override the config's top-level ones.
type AdaptiveSlot struct {
	BatchSize      int
	CandidateSteps []int
	AdaptiveKnobs
}

// AdaptiveConfig is an --speculative-adaptive-config file. On "main" it holds one slot per
// batch-size key ({"1": {"candidate_steps": [1, 3, 5, 7], ...}, ...}); on "0.5.10" the file is flat
// ({"candidate_steps": [1, 3, 7], ...}): one slot whose BatchSize is not written.
type AdaptiveConfig struct {
	// Strategy is "" (the key left out: "ema"), "ema" or "throughput_aware" ("main" only).
	Strategy string
	AdaptiveKnobs
	Slots []AdaptiveSlot
}

// AdaptiveConfigError is why a config is refused: the exception SGLang raises (Type as Python prints
// it, e.g. "ValueError", "json.decoder.JSONDecodeError"; Msg its text), or, with Simulator set, a
// config SGLang takes but fails on later in ways the simulator does not emulate.
type AdaptiveConfigError struct {
	Type, Msg string
	Simulator bool
	slots     bool // raised reading the slots (main: in _init_adaptive_speculative_params)
}

func (e *AdaptiveConfigError) Error() string {
	if e.Simulator {
		return e.Msg
	}
	return e.Type + ": " + e.Msg
}

// adaptiveRules is the version of the mode a release has: "" none, "v0510" or "main".
func adaptiveRules(era string) (string, error) {
	e, err := LookupEra(era)
	if err != nil {
		return "", err
	}
	if e.Adaptive == "" {
		return "", fmt.Errorf("SGLang %s has no --speculative-adaptive (eras with it: %s)", e.Name, strings.Join(AdaptiveEras(), ", "))
	}
	return e.Adaptive, nil
}

// AdaptiveEras lists the releases (SGLANGSIM_VERSION names) with adaptive speculative decoding.
func AdaptiveEras() []string {
	var n []string
	for _, e := range knownEras() {
		if e.Adaptive != "" {
			n = append(n, e.Name)
		}
	}
	return n
}

func fp(f float64) *float64 { return &f }

// DefaultAdaptiveConfig is the config a release uses without --speculative-adaptive-config
// (DEFAULT_ADAPTIVE_CONFIG at 015c872; candidate_steps [1, 3, 7] at 6c2714f5a).
func DefaultAdaptiveConfig(era string) (*AdaptiveConfig, error) {
	rules, err := adaptiveRules(era)
	if err != nil {
		return nil, err
	}
	if rules == "v0510" {
		return &AdaptiveConfig{Slots: []AdaptiveSlot{{BatchSize: 1, CandidateSteps: []int{1, 3, 7}}}}, nil
	}
	slot := func(bs int, down float64, steps ...int) AdaptiveSlot {
		return AdaptiveSlot{BatchSize: bs, CandidateSteps: steps,
			AdaptiveKnobs: AdaptiveKnobs{UpHysteresis: fp(0), DownHysteresis: fp(down), CeilingCoeff: fp(0)}}
	}
	return &AdaptiveConfig{Slots: []AdaptiveSlot{
		slot(1, -0.25, 1, 3, 5, 7), slot(8, 0, 0, 1, 3), slot(32, 0, 0, 1), slot(64, 0, 0),
	}}, nil
}

// Encode writes c as the config file of era, checked as that release (and the simulator) reads it.
func (c *AdaptiveConfig) Encode(era string) ([]byte, error) {
	rules, err := adaptiveRules(era)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	field := func(first *bool, k string, v any) {
		if !*first {
			b.WriteString(", ")
		}
		*first = false
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(v)
		b.Write(kb)
		b.WriteString(": ")
		b.Write(vb)
	}
	knobs := func(first *bool, k AdaptiveKnobs) {
		for _, kv := range []struct {
			k string
			v *float64
		}{{"ema_alpha", k.EMAAlpha}, {"update_interval", k.UpdateInterval}, {"warmup_batches", k.WarmupBatches},
			{"down_hysteresis", k.DownHysteresis}, {"up_hysteresis", k.UpHysteresis}, {"ceiling_coeff", k.CeilingCoeff}} {
			if kv.v != nil {
				field(first, kv.k, *kv.v)
			}
		}
	}
	first := true
	b.WriteString("{")
	if rules == "v0510" {
		if len(c.Slots) != 1 || c.Strategy != "" || c.CeilingCoeff != nil || c.Slots[0].CeilingCoeff != nil {
			return nil, fmt.Errorf("SGLang %s reads a flat config: one slot, no strategy, no ceiling_coeff", era)
		}
		knobs(&first, c.AdaptiveKnobs)
		knobs(&first, c.Slots[0].AdaptiveKnobs)
		field(&first, "candidate_steps", c.Slots[0].CandidateSteps)
	} else {
		if c.Strategy != "" {
			field(&first, "strategy", c.Strategy)
		}
		knobs(&first, c.AdaptiveKnobs)
		for _, s := range c.Slots {
			if !first {
				b.WriteString(",\n ")
			}
			first = false
			fmt.Fprintf(&b, "%q: {", strconv.Itoa(s.BatchSize))
			f2 := true
			field(&f2, "candidate_steps", s.CandidateSteps)
			knobs(&f2, s.AdaptiveKnobs)
			b.WriteString("}")
		}
	}
	b.WriteString("}\n")
	out := []byte(b.String())
	if _, err := ParseAdaptiveConfig(out, era); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseAdaptiveConfig reads a config file's bytes as era's SGLang does, with every check it makes at
// start (an *AdaptiveConfigError with its exception), then the simulator's own refusals.
func ParseAdaptiveConfig(data []byte, era string) (*AdaptiveConfig, error) {
	rules, err := adaptiveRules(era)
	if err != nil {
		return nil, err
	}
	c, _, err := loadAdaptive(rules, data)
	if err == nil && c.Strategy == "throughput_aware" {
		return c, &AdaptiveConfigError{Simulator: true, Msg: throughputAwareRefusal}
	}
	return c, err
}

// throughputAwareRefusal refuses the strategy the simulator does not run (after SGLang's checks pass).
const throughputAwareRefusal = "strategy 'throughput_aware' (startup cost profiling, per-position acceptance windows) is not emulated; the simulator runs 'ema' only"

// adaptiveSlotParams is one slot as the controller runs it: its knobs resolved.
type adaptiveSlotParams struct {
	bs                                         int
	cands                                      []int // sorted, distinct
	alpha, interval, warmup, down, up, ceiling float64
}

// MaxAdaptiveSteps bounds the candidate steps the simulator takes (SGLang has no bound; each step
// count is a set of CUDA graphs).
const MaxAdaptiveSteps = 64

// loadAdaptive parses a config of the given rules; data nil is the default config.
func loadAdaptive(rules string, data []byte) (*AdaptiveConfig, []adaptiveSlotParams, error) {
	if data == nil {
		era := "main"
		if rules == "v0510" {
			era = "0.5.10"
		}
		c, _ := DefaultAdaptiveConfig(era)
		return c, resolveSlots(rules, c), nil
	}
	v, err := pyLoadJSON(data)
	if err != nil {
		var pe *pyExc
		errors.As(err, &pe)
		return nil, nil, &AdaptiveConfigError{Type: pe.Type, Msg: pe.Msg}
	}
	d, ok := v.(*pyDict)
	if !ok {
		msg := "speculative_adaptive_config must be a JSON object, got " + pyTypeName(v)
		if rules == "main" {
			msg = "speculative adaptive config must be a JSON object, got " + pyTypeName(v)
		}
		return nil, nil, &AdaptiveConfigError{Type: "ValueError", Msg: msg}
	}
	var c *AdaptiveConfig
	if rules == "v0510" {
		c, err = loadFlat(d)
	} else {
		c, err = loadSlots(d)
	}
	if err != nil {
		return nil, nil, err
	}
	return c, resolveSlots(rules, c), nil
}

func pyErrf(typ, format string, args ...any) error {
	return &AdaptiveConfigError{Type: typ, Msg: fmt.Sprintf(format, args...)}
}

func simRefusef(format string, args ...any) error {
	return &AdaptiveConfigError{Simulator: true, Msg: fmt.Sprintf(format, args...)}
}

// pyIntOf is a decoded value isinstance(v, int) holds for (bool included), as an int when it fits.
func pyIntOf(v any) (n int64, isInt, fits bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true, true
		}
		return 0, true, true
	case int64:
		return x, true, true
	case pyBigInt:
		return 0, true, false
	}
	return 0, false, false
}

// readKnobs reads the numeric knobs of one dict level. SGLang reads them with dict.get and no check;
// a value that is no number fails at the first decode batch (a TypeError in the EMA update), which
// the simulator refuses at start instead.
func readKnobs(d *pyDict, where string, rules string) (AdaptiveKnobs, error) {
	var k AdaptiveKnobs
	for _, e := range []struct {
		name string
		dst  **float64
	}{{"ema_alpha", &k.EMAAlpha}, {"update_interval", &k.UpdateInterval}, {"warmup_batches", &k.WarmupBatches},
		{"down_hysteresis", &k.DownHysteresis}, {"up_hysteresis", &k.UpHysteresis}, {"ceiling_coeff", &k.CeilingCoeff}} {
		if e.name == "ceiling_coeff" && rules == "v0510" {
			continue // that release has no ceiling: the key is ignored
		}
		v, ok := d.get(e.name)
		if !ok {
			continue
		}
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		default:
			n, isInt, fits := pyIntOf(v)
			if !isInt || !fits {
				return k, simRefusef("%s%s is %s: SGLang takes it and fails at the first decode batch; the simulator does not emulate that", where, e.name, pyValueRepr(v))
			}
			f = float64(n)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return k, simRefusef("%s%s is %s: not emulated (want a finite number)", where, e.name, pyValueRepr(v))
		}
		if e.name == "update_interval" && f == 0 {
			return k, simRefusef("%supdate_interval is 0: SGLang fails with ZeroDivisionError at the first update after warmup; the simulator refuses it at start", where)
		}
		*e.dst = fp(f)
	}
	return k, nil
}

// stepsOf reads a candidate step list already checked to hold ints; the simulator takes up to
// MaxAdaptiveSteps.
func stepsOf(l []any, where string) ([]int, error) {
	out := make([]int, 0, len(l))
	for _, v := range l {
		n, _, fits := pyIntOf(v)
		if !fits || n > MaxAdaptiveSteps {
			return nil, simRefusef("%scandidate step %s: the simulator takes steps up to %d", where, pyValueRepr(v), MaxAdaptiveSteps)
		}
		out = append(out, int(n))
	}
	return out, nil
}

// loadFlat is 6c2714f5a's load_adaptive_config and AdaptiveSpeculativeParams.__init__: a flat object,
// candidate_steps defaulting to [1, 3, 7], at least 2 distinct values.
func loadFlat(d *pyDict) (*AdaptiveConfig, error) {
	c := &AdaptiveConfig{}
	steps := []int{1, 3, 7}
	if v, ok := d.get("candidate_steps"); ok {
		l, isList := v.([]any)
		if !isList {
			switch v.(type) {
			case nil, bool, int64, pyBigInt, float64:
				return nil, pyErrf("TypeError", "'%s' object is not iterable", pyTypeName(v))
			}
			return nil, simRefusef("candidate_steps is %s: SGLang takes it as an iterable and fails later; not emulated", pyValueRepr(v))
		}
		for _, e := range l {
			switch e.(type) {
			case []any, *pyDict:
				return nil, pyErrf("TypeError", "unhashable type: '%s'", pyTypeName(e))
			}
		}
		allInts := true
		for _, e := range l {
			_, isInt, _ := pyIntOf(e)
			allInts = allInts && isInt
		}
		if !allInts {
			return nil, simRefusef("candidate_steps is %s: this release sorts and uses them as step counts and fails later on what is not an int; not emulated", pyValueRepr(v))
		}
		var err error
		if steps, err = stepsOf(l, ""); err != nil {
			return nil, err
		}
		if len(distinct(steps)) < 2 {
			return nil, pyErrf("AssertionError", "candidate_steps must have at least 2 distinct values")
		}
		if steps := distinct(steps); steps[0] < 1 {
			return nil, simRefusef("candidate_steps holds %d: this release has no path for fewer than 1 step (it builds a runtime state per candidate); not emulated", steps[0])
		}
	}
	k, err := readKnobs(d, "", "v0510")
	if err != nil {
		return nil, err
	}
	c.AdaptiveKnobs = k
	c.Slots = []AdaptiveSlot{{BatchSize: 1, CandidateSteps: steps}}
	return c, nil
}

// digitKey is Python's str.isdigit of a JSON key and the key's int(); ascii is false for another
// script's digits, which the simulator does not read.
func digitKey(k string) (n int, isDigit, ascii bool) {
	if k == "" {
		return 0, false, false
	}
	ascii = true
	for _, r := range k {
		if !unicode.IsDigit(r) {
			return 0, false, false
		}
		if r > '9' {
			ascii = false
			continue
		}
		if n > (math.MaxInt32-9)/10 {
			n = math.MaxInt32 // a batch size no batch reaches
			continue
		}
		n = n*10 + int(r-'0')
	}
	return n, true, ascii
}

// loadSlots is 015c872's resolve_adaptive_strategy and _load_adaptive_config (and, for
// "throughput_aware", the cost controller's _parse_bs_candidates, read at 088c5ab): SGLang's checks
// over every key first, then the simulator's.
func loadSlots(d *pyDict) (*AdaptiveConfig, error) {
	c := &AdaptiveConfig{}
	strategy := any("ema")
	if v, ok := d.get("strategy"); ok {
		strategy = v
		c.Strategy, _ = v.(string)
	}
	if s, _ := strategy.(string); s != "ema" && s != "throughput_aware" {
		return nil, pyErrf("ValueError", "speculative adaptive config 'strategy' must be 'ema' or 'throughput_aware', got %s", pyValueRepr(strategy))
	}
	ta := c.Strategy == "throughput_aware"
	slotErr := func(typ, format string, args ...any) error {
		e := pyErrf(typ, format, args...).(*AdaptiveConfigError)
		e.slots = true
		return e
	}
	var keys []string
	for _, key := range d.keys {
		if _, ok, _ := digitKey(key); !ok {
			continue
		}
		keys = append(keys, key)
		entry, isDict := d.vals[key].(*pyDict)
		if !isDict {
			return nil, slotErr("AttributeError", "'%s' object has no attribute 'get'", pyTypeName(d.vals[key]))
		}
		v, _ := entry.get("candidate_steps")
		l, isList := v.([]any)
		good := isList && len(l) > 0
		for _, e := range l {
			n, isInt, fits := pyIntOf(e)
			if !isInt || (fits && (n < 0 || (ta && n == 0))) || (!fits && strings.HasPrefix(string(e.(pyBigInt)), "-")) {
				good = false
			}
		}
		if !good && ta {
			return nil, slotErr("ValueError", "throughput-aware config key '%s': candidate_steps must be a non-empty list of positive ints, got %s", key, pyValueRepr(v))
		}
		if !good {
			return nil, slotErr("ValueError", "BS %s: candidate_steps must be a list of non-negative ints, got %s", key, pyValueRepr(v))
		}
	}
	if len(keys) == 0 {
		all := make([]string, len(d.keys))
		for i, k := range d.keys {
			all[i] = pyStrRepr(k)
		}
		if ta {
			return nil, slotErr("ValueError", `throughput-aware adaptive config must contain at least one integer-string BS key, e.g. {"1": {"candidate_steps": [1, 3, 7]}}. Got keys: [%s]`, strings.Join(all, ", "))
		}
		return nil, slotErr("ValueError", `speculative_adaptive_config must contain at least one integer-string BS key, e.g. {"1": {"candidate_steps": [1,3,7]}}. Got keys: [%s]`, strings.Join(all, ", "))
	}
	for _, key := range keys {
		bs, _, ascii := digitKey(key)
		if !ascii {
			return nil, simRefusef("slot %s: a key of non-ASCII digits is not emulated", pyStrRepr(key))
		}
		entry := d.vals[key].(*pyDict)
		v, _ := entry.get("candidate_steps")
		where := fmt.Sprintf("slot %q: ", key)
		steps, err := stepsOf(v.([]any), where)
		if err != nil {
			return nil, err
		}
		k, err := readKnobs(entry, where, "main")
		if err != nil {
			return nil, err
		}
		slot := AdaptiveSlot{BatchSize: bs, CandidateSteps: steps, AdaptiveKnobs: k}
		replaced := false
		for i := range c.Slots {
			if c.Slots[i].BatchSize == bs { // "1" and "01": the later entry wins
				c.Slots[i], replaced = slot, true
			}
		}
		if !replaced {
			c.Slots = append(c.Slots, slot)
		}
	}
	sort.SliceStable(c.Slots, func(i, j int) bool { return c.Slots[i].BatchSize < c.Slots[j].BatchSize })
	k, err := readKnobs(d, "", "main")
	if err != nil {
		return nil, err
	}
	c.AdaptiveKnobs = k
	return c, nil
}

func distinct(s []int) []int {
	out := append([]int(nil), s...)
	sort.Ints(out)
	k := 0
	for i, v := range out {
		if i == 0 || v != out[k-1] {
			out[k] = v
			k++
		}
	}
	return out[:k]
}

// resolveSlots gives each slot its knobs: the slot's, else the config's top-level ones, else
// SGLang's defaults (AdaptiveStepSlot reads cfg.get(...) of {**cfg, **entry}).
func resolveSlots(rules string, c *AdaptiveConfig) []adaptiveSlotParams {
	pick := func(slot, top *float64, def float64) float64 {
		if slot != nil {
			return *slot
		}
		if top != nil {
			return *top
		}
		return def
	}
	out := make([]adaptiveSlotParams, 0, len(c.Slots))
	for _, s := range c.Slots {
		p := adaptiveSlotParams{bs: s.BatchSize, cands: distinct(s.CandidateSteps),
			alpha:    pick(s.EMAAlpha, c.EMAAlpha, 0.2),
			interval: pick(s.UpdateInterval, c.UpdateInterval, 5),
			warmup:   pick(s.WarmupBatches, c.WarmupBatches, 10),
			down:     pick(s.DownHysteresis, c.DownHysteresis, -0.25),
			up:       pick(s.UpHysteresis, c.UpHysteresis, 0),
		}
		if rules == "main" {
			p.ceiling = pick(s.CeilingCoeff, c.CeilingCoeff, 0)
		}
		out = append(out, p)
	}
	return out
}

// candidateUnion is every slot's candidate steps, sorted (resolve_candidate_steps_from_config).
func candidateUnion(slots []adaptiveSlotParams) []int {
	var all []int
	for _, s := range slots {
		all = append(all, s.cands...)
	}
	return distinct(all)
}

// AdaptiveMode is the adaptive speculative decoding a server runs (Args.Adaptive; nil: static).
type AdaptiveMode struct {
	Rules      string          // "v0510" or "main"
	ConfigPath string          // --speculative-adaptive-config ("": the release's default config)
	Config     *AdaptiveConfig // as read (nil when the file fails: LoadErr)
	// Candidates are the step counts the server builds a runtime state for: every slot's candidates,
	// and on "v0510" the initial steps too (its pre-built state stays registered).
	Candidates []int
	// LoadErr is the 0.5.10 worker's failure to read the file, raised in the scheduler at start.
	LoadErr *AdaptiveConfigError
	slots   []adaptiveSlotParams
}

// pyOpenError is the OSError open(path) raises, as Python words it.
func pyOpenError(path string, err error) *AdaptiveConfigError {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &AdaptiveConfigError{Type: "FileNotFoundError", Msg: "[Errno 2] No such file or directory: " + pyStrRepr(path)}
	case errors.Is(err, syscall.EISDIR):
		return &AdaptiveConfigError{Type: "IsADirectoryError", Msg: "[Errno 21] Is a directory: " + pyStrRepr(path)}
	case errors.Is(err, fs.ErrPermission):
		return &AdaptiveConfigError{Type: "PermissionError", Msg: "[Errno 13] Permission denied: " + pyStrRepr(path)}
	}
	return &AdaptiveConfigError{Type: "OSError", Msg: err.Error()}
}

// readAdaptive reads the config of a server: the file, or nil data for the default.
func readAdaptive(rules, path string, readFile func(string) ([]byte, error)) (*AdaptiveConfig, []adaptiveSlotParams, error) {
	var data []byte
	if path != "" {
		if readFile == nil {
			readFile = os.ReadFile
		}
		b, err := readFile(path)
		if err != nil {
			return nil, nil, pyOpenError(path, err)
		}
		if b == nil {
			b = []byte{}
		}
		data = b
	}
	return loadAdaptive(rules, data)
}

const adaptiveFallback = "speculative_adaptive disabled: %s. Falling back to static speculative params."

// adaptiveUnsupportedMain is 015c872's adaptive_unsupported_reason before the strategy's pp check
// (topk as given: the adaptive init sets it to 1 when unset).
func adaptiveUnsupportedMain(a *Args, algo string, topk int, hk bool) string {
	flag := func(k string) bool { v, _ := a.Raw[k].(bool); return v }
	switch {
	case algo != "EAGLE" && algo != "EAGLE3":
		return fmt.Sprintf("speculative_algorithm=%s (only EAGLE/EAGLE3 are supported)", pyAlgo(algo))
	case hk && topk != 1:
		return fmt.Sprintf("speculative_eagle_topk=%d (only topk=1 is supported)", topk)
	case flag("enable_dp_attention"):
		return "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
	case flag("enable_multi_layer_eagle"):
		return "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"
	case flag("enable_two_batch_overlap"):
		return "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)"
	case flag("enable_pdmux"):
		return "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"
	}
	return ""
}

// adaptiveUnsupported0510 is 6c2714f5a's adaptive_unsupported_reason, on the effective arguments
// at the end of _handle_speculative_decoding.
func adaptiveUnsupported0510(a *Args, overlapOn bool) string {
	flag := func(k string) bool { v, _ := a.Raw[k].(bool); return v }
	switch {
	case a.SpecAlgo != "EAGLE" && a.SpecAlgo != "EAGLE3":
		return fmt.Sprintf("speculative_algorithm=%s (only EAGLE/EAGLE3 are supported)", pyAlgo(a.SpecAlgo))
	case a.TopK != 1:
		return fmt.Sprintf("speculative_eagle_topk=%d (only topk=1 is supported)", a.TopK)
	case flag("enable_dp_attention"):
		return "enable_dp_attention=True is not supported (adaptive tier decisions are not synchronized across DP ranks)"
	case overlapOn:
		return "the overlap scheduler (spec v2) is enabled (adaptive is only implemented for EAGLEWorker v1)"
	case flag("enable_multi_layer_eagle"):
		return "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorker does not implement adaptive)"
	case flag("enable_two_batch_overlap"):
		return "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)"
	case flag("enable_pdmux"):
		return "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"
	}
	return ""
}

func pyAlgo(algo string) string {
	if algo == "" {
		return "None"
	}
	return algo
}

// adaptiveArgsError is the traceback of a config error raised while the arguments are post-processed
// (main: _maybe_disable_adaptive reads the strategy, _init_adaptive_speculative_params the slots);
// a simulator refusal is a plain error.
func adaptiveArgsError(e *AdaptiveConfigError, init bool) error {
	if e.Simulator {
		return fmt.Errorf("--speculative-adaptive-config: %s", e.Msg)
	}
	params := "/usr/local/lib/python3.12/dist-packages/sglang/srt/speculative/adaptive_spec_params.py"
	frames := append(hookFrames(false),
		`    reason = adaptive_unsupported_reason(server_args)`,
		`  File "`+params+`", line 118, in adaptive_unsupported_reason`,
		`    resolve_adaptive_strategy(cfg.speculative_adaptive_config) == "throughput_aware"`,
		`  File "`+params+`", line 31, in resolve_adaptive_strategy`)
	if init {
		frames = append(hookFrames(true),
			`    candidate_steps = resolve_candidate_steps_from_config(`,
			`  File "`+params+`", line 176, in resolve_candidate_steps_from_config`,
			`    _, bs_entries = _load_adaptive_config(cfg_path)`,
			`  File "`+params+`", line 142, in _load_adaptive_config`)
	}
	frames = append(frames, pyRaiseFrames(e)...)
	return &PyError{Type: e.Type, Msg: e.Msg, Frames: frames}
}

// hookFrames are the traceback lines from main's handle_speculative_decoding into
// _maybe_disable_adaptive (init false) or _init_adaptive_speculative_params.
func hookFrames(init bool) []string {
	hook := "/usr/local/lib/python3.12/dist-packages/sglang/srt/arg_groups/speculative_hook.py"
	if !init {
		return []string{
			`  File "` + hook + `", line 128, in handle_speculative_decoding`,
			`    _maybe_disable_adaptive(server_args)`,
			`  File "` + hook + `", line 462, in _maybe_disable_adaptive`,
		}
	}
	return []string{
		`  File "` + hook + `", line 130, in handle_speculative_decoding`,
		`    _init_adaptive_speculative_params(server_args)`,
		`  File "` + hook + `", line 476, in _init_adaptive_speculative_params`,
	}
}

// pyRaiseFrames are the last lines of a traceback ending in e: the statement that raised it, and
// for a JSON error json's own frames.
func pyRaiseFrames(e *AdaptiveConfigError) []string {
	switch e.Type {
	case "FileNotFoundError", "IsADirectoryError", "PermissionError", "OSError":
		return []string{"    with open(cfg_path) as f:"}
	case "json.decoder.JSONDecodeError", "UnicodeDecodeError":
		return []string{
			"    cfg = json.load(f)",
			`  File "/usr/lib/python3.12/json/__init__.py", line 293, in load`,
			"    return loads(fp.read(),",
		}
	case "AttributeError":
		return []string{`    steps = entry.get("candidate_steps")`}
	case "AssertionError", "TypeError":
		return []string{`    candidates = set(cfg.get("candidate_steps", [1, 3, 7]))`}
	}
	return []string{"    raise " + e.Type + "("}
}

// workerInitTrace is the scheduler's traceback when the 0.5.10 EAGLE worker fails to read the
// adaptive config (AdaptiveController.__init__ in EAGLEWorker.__init__).
func workerInitTrace(e *AdaptiveConfigError) string {
	pkg := "/usr/local/lib/python3.12/dist-packages/sglang/srt/"
	lines := []string{
		"Traceback (most recent call last):",
		`  File "` + pkg + `managers/scheduler.py", line 3125, in run_scheduler_process`,
		"    scheduler = Scheduler(",
		`  File "` + pkg + `managers/scheduler.py", line 358, in __init__`,
		"    self.init_model_worker()",
		`  File "` + pkg + `managers/scheduler.py", line 531, in init_model_worker`,
		"    self.draft_worker = DraftWorkerClass(**draft_worker_kwargs)",
		`  File "` + pkg + `speculative/eagle_worker.py", line 117, in __init__`,
		"    self.adaptive_controller = AdaptiveController(",
		`  File "` + pkg + `speculative/adaptive_runtime_state.py", line 79, in __init__`,
	}
	switch e.Type {
	case "AssertionError", "TypeError":
		lines = append(lines, "    self.params = AdaptiveSpeculativeParams(",
			`  File "`+pkg+`speculative/adaptive_spec_params.py", line 96, in __init__`)
		if e.Type == "AssertionError" {
			lines = append(lines, "    assert (")
		} else {
			lines = append(lines, `    self.candidate_steps = sorted(set(cfg.get("candidate_steps", [1, 3, 7])))`)
		}
	default:
		lines = append(lines, "    cfg = load_adaptive_config(config_path)",
			`  File "`+pkg+`speculative/adaptive_spec_params.py", line 69, in load_adaptive_config`)
		if e.Type == "ValueError" {
			lines = append(lines, "    raise ValueError(")
		} else {
			lines = append(lines, pyRaiseFrames(e)...)
		}
	}
	return strings.Join(append(lines, e.Type+": "+e.Msg, ""), "\n")
}

// resolveAdaptiveMain is 2026 main's adaptive handling in handle_speculative_decoding, before the
// algorithm's own rules: the fallback, then _init_adaptive_speculative_params (topk 1 when unset,
// steps the middle candidate when unset and refused outside them, draft tokens steps+1). It returns
// the mode (nil: static) and the triple as the algorithm's rules then see it.
func resolveAdaptiveMain(o ParseOptions, a *Args, algo string, steps, topk, draft int, hs, hk, hn bool) (mode *AdaptiveMode, warnings []string, _ [3]int, _ [3]bool, err error) {
	triple, given := [3]int{steps, topk, draft}, [3]bool{hs, hk, hn}
	path, _ := a.Raw["speculative_adaptive_config"].(string)
	if why := adaptiveUnsupportedMain(a, algo, topk, hk); why != "" {
		return nil, []string{fmt.Sprintf(adaptiveFallback, why)}, triple, given, nil
	}
	cfg, slots, err := readAdaptive("main", path, o.ReadFile)
	var ce *AdaptiveConfigError
	if errors.As(err, &ce) {
		// The strategy is read first (the reason's pp check), the slots by the init.
		return nil, nil, triple, given, adaptiveArgsError(ce, ce.slots)
	}
	if cfg.Strategy == "throughput_aware" && intOr(a.Raw, "pp_size", 1) != 1 {
		why := fmt.Sprintf("pp_size=%d is not supported by throughput-aware adaptive profiling (synthetic startup batches do not traverse PP stages)", intOr(a.Raw, "pp_size", 1))
		return nil, []string{fmt.Sprintf(adaptiveFallback, why)}, triple, given, nil
	}
	cands := candidateUnion(slots)
	if !hk {
		topk, hk = 1, true
	}
	if !hs {
		steps, hs = cands[len(cands)/2], true
	}
	if !containsInt(cands, steps) {
		return nil, nil, triple, given, &PyError{Type: "ValueError", Frames: append(hookFrames(true), "    raise ValueError("),
			Msg: fmt.Sprintf("--speculative-num-steps=%d is not in the adaptive config candidate_steps %s. Pass one of those values.", steps, pyIntList(cands))}
	}
	if cfg.Strategy == "throughput_aware" {
		return nil, nil, triple, given, errors.New("--speculative-adaptive-config: " + throughputAwareRefusal)
	}
	draft, hn = steps+1, true
	mode = &AdaptiveMode{Rules: "main", ConfigPath: path, Config: cfg, Candidates: cands, slots: slots}
	return mode, nil, [3]int{steps, topk, draft}, [3]bool{hs, hk, hn}, nil
}

// resolveAdaptive0510 is 0.5.10's check at the end of _handle_speculative_decoding; the worker reads
// the file later (LoadErr), so a bad file passes the arguments and kills the scheduler at start.
func resolveAdaptive0510(o ParseOptions, a *Args, overlapOn bool) (*AdaptiveMode, []string, error) {
	if why := adaptiveUnsupported0510(a, overlapOn); why != "" {
		return nil, []string{fmt.Sprintf(adaptiveFallback, why)}, nil
	}
	path, _ := a.Raw["speculative_adaptive_config"].(string)
	mode := &AdaptiveMode{Rules: "v0510", ConfigPath: path}
	cfg, slots, err := readAdaptive("v0510", path, o.ReadFile)
	var ce *AdaptiveConfigError
	if errors.As(err, &ce) {
		if ce.Simulator {
			return nil, nil, fmt.Errorf("--speculative-adaptive-config: %s", ce.Msg)
		}
		mode.LoadErr = ce
		return mode, nil, nil
	}
	mode.Config, mode.slots = cfg, slots
	// The worker's own state (the initial steps) is built and registered even when no candidate.
	mode.Candidates = distinct(append(candidateUnion(slots), a.Steps))
	return mode, nil, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func pyIntList(s []int) string {
	p := make([]string, len(s))
	for i, v := range s {
		p[i] = strconv.Itoa(v)
	}
	return "[" + strings.Join(p, ", ") + "]"
}

// adaptSlot is one AdaptiveStepSlot (one AdaptiveSpeculativeParams on "v0510").
type adaptSlot struct {
	adaptiveSlotParams
	current int
	ema     float64
	count   int
}

// adaptiveController is SGLang's AdaptiveController with its policy: the slots, the routing of a
// batch size to a slot, and the steps the worker runs.
type adaptiveController struct {
	rules   string
	slots   []*adaptSlot
	graphBS []int // CUDA-graph batch sizes a batch is padded to before routing (nil: graphs off)
	worker  int   // the steps of the runtime state in use
}

// newAdaptiveController builds the policy for a worker that starts at initial steps.
func newAdaptiveController(rules string, slots []adaptiveSlotParams, initial int, graphBS []int) *adaptiveController {
	c := &adaptiveController{rules: rules, worker: initial}
	if rules == "main" {
		c.graphBS = append([]int(nil), graphBS...)
		sort.Ints(c.graphBS)
	}
	for _, p := range slots {
		s := &adaptSlot{adaptiveSlotParams: p}
		switch {
		case rules == "v0510":
			// min(candidate_steps, key=lambda step: (abs(step - initial_steps), -step))
			s.current = p.cands[0]
			for _, k := range p.cands {
				if d, best := abs(k-initial), abs(s.current-initial); d < best || (d == best && k > s.current) {
					s.current = k
				}
			}
		case containsInt(p.cands, initial):
			s.current = initial
		default:
			s.current = p.cands[len(p.cands)/2]
		}
		s.ema = float64(s.current - 1)
		c.slots = append(c.slots, s)
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// route is the slot of a batch: its size padded up to the next CUDA-graph batch size, then the
// slot with the largest key not above it (the first slot below every key).
func (c *adaptiveController) route(bs int) *adaptSlot {
	if len(c.slots) == 1 {
		return c.slots[0]
	}
	if c.graphBS != nil {
		if i := sort.SearchInts(c.graphBS, bs); i < len(c.graphBS) {
			bs = c.graphBS[i]
		}
	}
	i := sort.Search(len(c.slots), func(i int) bool { return c.slots[i].bs > bs }) - 1
	return c.slots[max(0, i)]
}

// update is AdaptiveStepSlot.update: the EMA of the mean accepted drafts per request (main: only
// while drafting), then after warmup, every update_interval batches, a recompute. It reports whether
// the slot's steps changed.
func (s *adaptSlot) update(rules string, drafts []int) bool {
	if len(drafts) == 0 {
		return false
	}
	if rules == "v0510" || s.current > 0 {
		sum := 0
		for _, d := range drafts {
			sum += d
		}
		s.ema = (1-s.alpha)*s.ema + s.alpha*float64(sum)/float64(len(drafts))
	}
	s.count++
	if float64(s.count) <= s.warmup {
		return false
	}
	if math.Mod(float64(s.count)-s.warmup, s.interval) != 0 {
		return false
	}
	return s.recompute(rules)
}

// recompute is _recompute_params: down while the EMA is at or below the next lower candidate's
// threshold (prev - 0.5 + down_hysteresis; 0.5 + down_hysteresis for a 0 below), else up while above
// the current one's (cur - 0.5 + up_hysteresis). On "main" a slot at 0 probes the next candidate, a
// move down skips the climb, and ceiling_coeff caps a step that does not rise.
func (s *adaptSlot) recompute(rules string) bool {
	old := s.current
	idx := sort.SearchInts(s.cands, old)
	oldIdx := idx
	if rules == "main" && old == 0 {
		idx = min(idx+1, len(s.cands)-1)
		target := s.cands[idx]
		if target > 0 && s.ema < 0 {
			s.ema = float64(target - 1)
		}
		s.current = target
		return target != old
	}
	for idx > 0 {
		prev := s.cands[idx-1]
		thr := float64(prev) - 0.5
		if rules == "main" && prev == 0 {
			thr = 0.5
		}
		if s.ema <= thr+s.down {
			idx--
		} else {
			break
		}
	}
	if rules == "v0510" || idx >= oldIdx {
		for idx < len(s.cands)-1 {
			if s.ema > float64(s.cands[idx])-0.5+s.up {
				idx++
			} else {
				break
			}
		}
	}
	target := s.cands[idx]
	if rules == "main" && s.ceiling > 0 {
		ceiling := max(1, int(math.Ceil(s.ema*s.ceiling)))
		if target > ceiling && target <= old {
			for idx > 0 && s.cands[idx] > ceiling {
				idx--
			}
			target = s.cands[idx]
		}
	}
	s.current = target
	return target != old
}

// start is init_states' activation: 0.5.10 runs the candidate its policy snapped the initial steps
// to (2026 main starts on the worker's own steps, always a candidate). It reports a switch.
func (c *adaptiveController) start() bool {
	if s := c.slots[0]; c.rules == "v0510" && s.current != c.worker {
		c.worker = s.current
		return true
	}
	return false
}

// activateForBatch is activate_step_by_batch (2026 main, before drafting): the batch's slot's steps
// become those in use. It returns the slot and whether the steps in use changed.
func (c *adaptiveController) activateForBatch(bs int) (*adaptSlot, bool) {
	s := c.route(bs)
	if c.rules != "main" || s.current == c.worker {
		return s, false
	}
	c.worker = s.current
	return s, true
}

// onVerify is on_verify_complete: the batch's accepted drafts per request update its slot; when the
// slot's steps change (from old) they become those in use.
func (c *adaptiveController) onVerify(drafts []int, bs int) (s *adaptSlot, old int, updated bool) {
	s = c.route(bs)
	old = s.current
	if !s.update(c.rules, drafts) {
		return s, old, false
	}
	c.worker = s.current
	return s, old, true
}

// AdaptiveSwitch is a change of the steps a server runs, as the truth file records it
// ({"event":"adaptive_switch",...}).
type AdaptiveSwitch struct {
	UnixMs float64 `json:"unix_ms"`
	From   int     `json:"from"`
	To     int     `json:"to"`
	// BatchSize is the batch that decided it (0 for the start's).
	BatchSize int `json:"batch_size"`
	// Slot is the batch-size key the batch routed to; nil on 0.5.10 (one slot for every batch).
	Slot *int `json:"slot"`
	// Reason: "ema" (the slot's EMA moved its steps after a verify), "batch_size" (the batch routed to
	// a slot whose steps differ from those in use), "init" (0.5.10 snapping the initial steps to the
	// nearest candidate).
	Reason string `json:"reason"`
	// EMAAcceptLen is the slot's EMA of accepted drafts per request at the switch.
	EMAAcceptLen float64 `json:"ema_accept_len"`
}

// AdaptiveSwitch appends a switch line to the truth file.
func (t *Truth) AdaptiveSwitch(sw AdaptiveSwitch) {
	slot := "null"
	if sw.Slot != nil {
		slot = strconv.Itoa(*sw.Slot)
	}
	ema := "null"
	if !math.IsNaN(sw.EMAAcceptLen) && !math.IsInf(sw.EMAAcceptLen, 0) {
		ema = strconv.FormatFloat(sw.EMAAcceptLen, 'f', 4, 64)
	}
	t.write(`{"event":"adaptive_switch","unix_ms":` + strconv.FormatFloat(sw.UnixMs, 'f', 3, 64) +
		`,"from":` + strconv.Itoa(sw.From) + `,"to":` + strconv.Itoa(sw.To) + `,"batch_size":` + strconv.Itoa(sw.BatchSize) +
		`,"slot":` + slot + `,"reason":` + strconv.Quote(sw.Reason) + `,"ema_accept_len":` + ema + `}`)
}

// ReadAdaptiveSwitches returns the adaptive_switch lines of a truth file, in order.
func ReadAdaptiveSwitches(r io.Reader) ([]AdaptiveSwitch, error) {
	var out []AdaptiveSwitch
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"adaptive_switch"`) {
			continue
		}
		var ev struct {
			Event string `json:"event"`
			AdaptiveSwitch
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("truth line %d: %w", n, err)
		}
		if ev.Event == "adaptive_switch" {
			out = append(out, ev.AdaptiveSwitch)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the truth file: %w", err)
	}
	return out, nil
}
