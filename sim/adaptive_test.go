package sim

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Python's json.loads (3.11 and 3.12, the C scanner) gives these messages; checked against a real
// interpreter when written.
func TestPyJSONErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "Expecting value: line 1 column 1 (char 0)"},
		{"   ", "Expecting value: line 1 column 4 (char 3)"},
		{"{", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"},
		{`{"a"`, "Expecting ':' delimiter: line 1 column 5 (char 4)"},
		{`{"a" 1}`, "Expecting ':' delimiter: line 1 column 6 (char 5)"},
		{`{"a":1 "b":2}`, "Expecting ',' delimiter: line 1 column 8 (char 7)"},
		{`{"a":1,}`, "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)"},
		{`[1,]`, "Expecting value: line 1 column 4 (char 3)"},
		{`[1 2]`, "Expecting ',' delimiter: line 1 column 4 (char 3)"},
		{`{"a":1}x`, "Extra data: line 1 column 8 (char 7)"},
		{`{"a": "b`, "Unterminated string starting at: line 1 column 7 (char 6)"},
		{`{"a": "b\q"}`, `Invalid \escape: line 1 column 9 (char 8)`},
		{`{"a": "\u12"}`, `Invalid \uXXXX escape: line 1 column 9 (char 8)`},
		{`{"a": tru}`, "Expecting value: line 1 column 7 (char 6)"},
		{`{"a": -}`, "Expecting value: line 1 column 7 (char 6)"},
		{`{"a": 01}`, "Expecting ',' delimiter: line 1 column 8 (char 7)"},
		{`{"a": 1.}`, "Expecting ',' delimiter: line 1 column 8 (char 7)"},
		{`{"a":`, "Expecting value: line 1 column 6 (char 5)"},
		{`[`, "Expecting value: line 1 column 2 (char 1)"},
		{`"abc`, "Unterminated string starting at: line 1 column 1 (char 0)"},
		{"{\n  \"1\": {\"candidate_steps\": [1, 3]},\n  \"8\": {\"candidate_steps\": [0, 1]}\n  \"32\": {}\n}", "Expecting ',' delimiter: line 4 column 3 (char 75)"},
		{`{"é": 1, "ü": x}`, "Expecting value: line 1 column 15 (char 14)"}, // characters, not bytes
		{"\ufeff{}", "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)"},
		{"{\"a\": \"x\ty\"}", "Invalid control character at: line 1 column 9 (char 8)"},
		{"{\"1\": {\"candidate_steps\": [1, 3]}} \n\n ]", "Extra data: line 3 column 2 (char 38)"},
	} {
		_, err := pyLoadJSON([]byte(c.in))
		if err == nil {
			t.Errorf("%q: parsed, want %s", c.in, c.want)
			continue
		}
		if got, want := err.Error(), "json.decoder.JSONDecodeError: "+c.want; got != want {
			t.Errorf("%q:\n got %s\nwant %s", c.in, got, want)
		}
	}
	_, err := pyLoadJSON([]byte{'{', 0xff, '}'})
	if got, want := fmt.Sprint(err), "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"; got != want {
		t.Errorf("bad UTF-8:\n got %s\nwant %s", got, want)
	}
	v, err := pyLoadJSON([]byte(`{"b": [1, 2.0, true, null, NaN, -Infinity, 12345678901234567890], "a": {"x": "it's"}, "b": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	// Python keeps the first position of a repeated key and its last value.
	if got, want := pyValueRepr(v), `{'b': 3, 'a': {'x': "it's"}}`; got != want {
		t.Errorf("repr %s, want %s", got, want)
	}
}

// repr() of floats and strings as Python prints them.
func TestPyRepr(t *testing.T) {
	for f, want := range map[float64]string{1e16: "1e+16", 1e15: "1000000000000000.0", 100000: "100000.0", 1.5e-7: "1.5e-07",
		0.0001: "0.0001", 2.5: "2.5", 1e22: "1e+22", 123456789.123: "123456789.123", 0: "0.0"} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("repr(%v) = %s, want %s", f, got, want)
		}
	}
	for s, want := range map[string]string{"it's": `"it's"`, `a"b'c`: `'a"b\'c'`, "tab\there": `'tab\there'`, "\x7f\u00e9\u2028": `'\x7fé\u2028'`} {
		if got := pyStrRepr(s); got != want {
			t.Errorf("repr(%q) = %s, want %s", s, got, want)
		}
	}
}

// Each file of testdata/adaptive/ERA gives what ERA/want.txt says: the union of its candidate
// steps, SGLang's exception, or the simulator's refusal.
func TestAdaptiveConfigFiles(t *testing.T) {
	for _, era := range AdaptiveEras() {
		dir := filepath.Join("testdata", "adaptive", era)
		f, err := os.Open(filepath.Join(dir, "want.txt"))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
				name, msg, ok := strings.Cut(line, ": ")
				if !ok {
					t.Fatalf("%s/want.txt: bad line %q", dir, line)
				}
				want[name] = msg
			}
		}
		f.Close()
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		if len(files) != len(want) {
			t.Errorf("%s: %d files, %d lines in want.txt", dir, len(files), len(want))
		}
		for _, path := range files {
			w, ok := want[filepath.Base(path)]
			if !ok {
				t.Errorf("%s: no line in want.txt", path)
				continue
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseAdaptiveConfig(data, era)
			var got string
			switch e, _ := err.(*AdaptiveConfigError); {
			case err == nil:
				rules, _ := adaptiveRules(era)
				got = "ok " + pyIntList(candidateUnion(resolveSlots(rules, c)))
			case e != nil && e.Simulator:
				got = "simulator: " + e.Msg
			default:
				got = err.Error()
			}
			if got != w {
				t.Errorf("%s (%s):\n got %s\nwant %s", path, era, got, w)
			}
		}
	}
}

// The knobs of a slot come from the slot, else the top level, else SGLang's defaults.
func TestAdaptiveSlotKnobs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "adaptive", "main", "good-knobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseAdaptiveConfig(data, "main")
	if err != nil {
		t.Fatal(err)
	}
	got := resolveSlots("main", c)
	want := []adaptiveSlotParams{
		{bs: 2, cands: []int{1, 5}, alpha: 0.3, interval: 2, warmup: 4, down: -0.25, up: 0, ceiling: 1.5},
		{bs: 16, cands: []int{1, 3}, alpha: 0.5, interval: 2, warmup: 4, down: -0.25, up: 0, ceiling: 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slots\n got %+v\nwant %+v", got, want)
	}
}

// A config written by Encode reads back the same, in each era's format.
func TestAdaptiveConfigEncode(t *testing.T) {
	for _, era := range AdaptiveEras() {
		c, err := DefaultAdaptiveConfig(era)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Encode(era)
		if err != nil {
			t.Fatalf("%s: %v", era, err)
		}
		back, err := ParseAdaptiveConfig(b, era)
		if err != nil {
			t.Fatalf("%s: %s does not read back: %v", era, b, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Errorf("%s: %s read back as %+v, want %+v", era, b, back, c)
		}
	}
	two := &AdaptiveConfig{Slots: []AdaptiveSlot{{BatchSize: 1, CandidateSteps: []int{1, 3}}, {BatchSize: 8, CandidateSteps: []int{1}}}}
	if _, err := two.Encode("0.5.10"); err == nil {
		t.Error("0.5.10 took two slots")
	}
	if _, err := two.Encode("0.5.2"); err == nil {
		t.Error("0.5.2 (no adaptive mode) took a config")
	}
	bad := &AdaptiveConfig{Slots: []AdaptiveSlot{{BatchSize: 1, CandidateSteps: []int{1, -2}}}}
	if _, err := bad.Encode("main"); err == nil || !strings.Contains(err.Error(), "non-negative ints") {
		t.Errorf("a negative step encoded: %v", err)
	}
}

// drivePhase is one stretch of decode batches of one size, each request accepting drafts(k)
// draft tokens at k steps.
type drivePhase struct {
	batches, bs int
	drafts      func(k int) int
}

// drive runs the policy over phases as the scheduler does (main: route and activate before the
// batch; then the verify's feedback) and returns its log lines and switches, "B<batch> ...".
func drive(c *adaptiveController, phases []drivePhase) []string {
	var out []string
	n := 0
	for _, p := range phases {
		for range p.batches {
			n++
			from := c.worker
			if _, sw := c.activateForBatch(p.bs); sw {
				out = append(out, fmt.Sprintf("B%d SWITCH %d -> %d", n, from, c.worker))
			}
			drafts := make([]int, p.bs)
			for i := range drafts {
				drafts[i] = p.drafts(c.worker)
			}
			from = c.worker
			s, old, updated := c.onVerify(drafts, p.bs)
			if updated {
				out = append(out, fmt.Sprintf("B%d Adaptive spec params updated: steps %d -> %d (ema_accept_len=%.2f)", n, old, s.current, s.ema))
			}
			if c.worker != from {
				out = append(out, fmt.Sprintf("B%d SWITCH %d -> %d", n, from, c.worker))
			}
		}
	}
	return out
}

func all(k int) int            { return k }
func upTo(m int) func(int) int { return func(k int) int { return min(k, m) } }
func none(int) int             { return 0 }

// The policy switches as SGLang's does. The expected lines are what adaptive_spec_params.py (015c872
// with adaptive_step_router.py at a12239f; 6c2714f5a for 0.5.10) printed for the same batches when
// the source's classes were run on them; the comments give the thresholds that decide each switch.
func TestAdaptivePolicyTraces(t *testing.T) {
	graphBS := defaultGraphBS(64)
	_, defSlots, _ := loadAdaptive("main", nil)
	t.Run("main default slots", func(t *testing.T) {
		c := newAdaptiveController("main", defSlots, 3, graphBS)
		got := drive(c, []drivePhase{
			{40, 1, all},     // slot 1 [1 3 5 7]: EMA from 2 climbs past 2.5 (3->5) then 4.5 (5->7)
			{30, 64, all},    // slot 64 [0]: no drafting
			{30, 16, all},    // 16 routes to slot 8 [0 1 3], still at the initial 3
			{10, 1, all},     // back to slot 1 at 7
			{60, 1, upTo(1)}, // acceptance falls: down at EMA <= 4.25 (7->5), <= 2.25 (5->3)
			{40, 24, none},   // 24 routes to slot 8: down to 0, then a probe of 1 every 5 batches
		})
		want := []string{
			"B15 Adaptive spec params updated: steps 3 -> 5 (ema_accept_len=2.96)", "B15 SWITCH 3 -> 5",
			"B25 Adaptive spec params updated: steps 5 -> 7 (ema_accept_len=4.78)", "B25 SWITCH 5 -> 7",
			"B41 SWITCH 7 -> 0", "B71 SWITCH 0 -> 3", "B101 SWITCH 3 -> 7",
			"B115 Adaptive spec params updated: steps 7 -> 5 (ema_accept_len=2.96)", "B115 SWITCH 7 -> 5",
			"B120 Adaptive spec params updated: steps 5 -> 3 (ema_accept_len=1.64)", "B120 SWITCH 5 -> 3",
			"B180 Adaptive spec params updated: steps 3 -> 0 (ema_accept_len=0.32)", "B180 SWITCH 3 -> 0",
			"B185 Adaptive spec params updated: steps 0 -> 1 (ema_accept_len=0.32)", "B185 SWITCH 0 -> 1",
			"B190 Adaptive spec params updated: steps 1 -> 0 (ema_accept_len=0.11)", "B190 SWITCH 1 -> 0",
			"B195 Adaptive spec params updated: steps 0 -> 1 (ema_accept_len=0.11)", "B195 SWITCH 0 -> 1",
			"B200 Adaptive spec params updated: steps 1 -> 0 (ema_accept_len=0.03)", "B200 SWITCH 1 -> 0",
			"B205 Adaptive spec params updated: steps 0 -> 1 (ema_accept_len=0.03)", "B205 SWITCH 0 -> 1",
			"B210 Adaptive spec params updated: steps 1 -> 0 (ema_accept_len=0.01)", "B210 SWITCH 1 -> 0",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("main ceiling and no graphs", func(t *testing.T) {
		data := []byte(`{"warmup_batches": 2, "update_interval": 1, "1": {"candidate_steps": [1, 3, 5, 7], "ceiling_coeff": 1.0}, "4": {"candidate_steps": [0, 2]}}`)
		_, slots, err := loadAdaptive("main", data)
		if err != nil {
			t.Fatal(err)
		}
		c := newAdaptiveController("main", slots, 5, nil) // slot 4 starts at its middle candidate, 2
		got := drive(c, []drivePhase{{12, 1, upTo(3)}, {4, 3, all}, {8, 5, upTo(1)}, {4, 1, upTo(3)}})
		// The ceiling (ceil(EMA) = 4) caps 5 to 3; from 3 the EMA (> 2.5) rises again: it oscillates.
		var want []string
		emas := []string{"3.51", "3.41", "3.33", "3.26", "3.21", "3.17", "3.13", "3.11", "3.09", "3.07", "3.45", "3.36", "3.69", "3.55"}
		for i, ema := range emas {
			from, to := 5, 3
			if i%2 == 1 {
				from, to = 3, 5
			}
			want = append(want, fmt.Sprintf("B%d Adaptive spec params updated: steps %d -> %d (ema_accept_len=%s)", i+3, from, to, ema), fmt.Sprintf("B%d SWITCH %d -> %d", i+3, from, to))
		}
		want = append(want, "B17 SWITCH 5 -> 2", "B25 SWITCH 2 -> 5",
			"B25 Adaptive spec params updated: steps 5 -> 3 (ema_accept_len=3.44)", "B25 SWITCH 5 -> 3",
			"B26 Adaptive spec params updated: steps 3 -> 5 (ema_accept_len=3.35)", "B26 SWITCH 3 -> 5",
			"B27 Adaptive spec params updated: steps 5 -> 3 (ema_accept_len=3.28)", "B27 SWITCH 5 -> 3",
			"B28 Adaptive spec params updated: steps 3 -> 5 (ema_accept_len=3.23)", "B28 SWITCH 3 -> 5")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for bs, key := range map[int]int{1: 1, 3: 1, 4: 4, 5: 4, 100: 4} {
			if got := c.route(bs).bs; got != key {
				t.Errorf("batch %d routes to slot %d, want %d", bs, got, key)
			}
		}
	})
	t.Run("routing pads to the CUDA-graph batch sizes", func(t *testing.T) {
		c := newAdaptiveController("main", defSlots, 3, graphBS)
		for bs, key := range map[int]int{1: 1, 2: 1, 5: 8, 8: 8, 9: 8, 31: 32, 33: 32, 48: 32, 57: 64, 64: 64, 200: 64} {
			if got := c.route(bs).bs; got != key {
				t.Errorf("batch %d routes to slot %d, want %d", bs, got, key)
			}
		}
		c = newAdaptiveController("main", defSlots, 3, nil)
		for bs, key := range map[int]int{5: 1, 31: 8, 57: 32} {
			if got := c.route(bs).bs; got != key {
				t.Errorf("without graphs batch %d routes to slot %d, want %d", bs, got, key)
			}
		}
	})
	t.Run("0.5.10", func(t *testing.T) {
		_, slots, _ := loadAdaptive("v0510", nil)
		for _, c := range []struct {
			init  int
			data  string
			want  []string
			first int
		}{
			// The initial steps snap to the nearest candidate, the larger on a tie.
			{2, "", []string{"B0 SWITCH 2 -> 3",
				"B15 Adaptive spec params updated: steps 3 -> 7 (ema_accept_len=2.96)", "B15 SWITCH 3 -> 7",
				"B40 Adaptive spec params updated: steps 7 -> 3 (ema_accept_len=1.63)", "B40 SWITCH 7 -> 3",
				"B80 Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=0.11)", "B80 SWITCH 3 -> 1"}, 3},
			{5, "", []string{"B0 SWITCH 5 -> 7",
				"B40 Adaptive spec params updated: steps 7 -> 3 (ema_accept_len=1.64)", "B40 SWITCH 7 -> 3",
				"B80 Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=0.11)", "B80 SWITCH 3 -> 1"}, 7},
			{4, `{"candidate_steps": [2, 4, 6], "ema_alpha": 0.5, "warmup_batches": 4, "update_interval": 2, "down_hysteresis": 0.1}`, []string{
				"B6 Adaptive spec params updated: steps 4 -> 6 (ema_accept_len=3.98)", "B6 SWITCH 4 -> 6",
				"B32 Adaptive spec params updated: steps 6 -> 4 (ema_accept_len=2.25)", "B32 SWITCH 6 -> 4",
				"B34 Adaptive spec params updated: steps 4 -> 2 (ema_accept_len=1.31)", "B34 SWITCH 4 -> 2"}, 4},
		} {
			s := slots
			if c.data != "" {
				var err error
				if _, s, err = loadAdaptive("v0510", []byte(c.data)); err != nil {
					t.Fatal(err)
				}
			}
			ctl := newAdaptiveController("v0510", s, c.init, graphBS)
			var got []string
			if from := ctl.worker; ctl.start() {
				got = append(got, fmt.Sprintf("B0 SWITCH %d -> %d", from, ctl.worker))
			}
			if ctl.worker != c.first {
				t.Errorf("initial %d starts at %d, want %d", c.init, ctl.worker, c.first)
			}
			// One set of candidates for every batch size: 4 requests a batch, as the source run had.
			got = append(got, drive(ctl, []drivePhase{{30, 4, all}, {40, 4, upTo(1)}, {30, 4, none}})...)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("initial %d %s: got\n%s\nwant\n%s", c.init, c.data, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		}
	})
}
