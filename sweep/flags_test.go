package sweep

import "testing"

func TestMatrixFlag(t *testing.T) {
	tests := []struct{ arg, want string }{
		{"--tp-size", FlagTPSize},
		{"--tp", FlagTPSize},
		{"--tp-s", FlagTPSize},
		{"--tp-size=4", FlagTPSize},
		{"--tp=4", FlagTPSize},
		{"--t", ""}, // too short for argparse to resolve
		{"--tp-sizes", ""},
		{"--speculative-num-steps", FlagNumSteps},
		{"--speculative-num-steps=3", FlagNumSteps},
		{"--speculative-num-s", FlagNumSteps},
		{"--speculative-num-", ""}, // ambiguous in SGLang
		{"--speculative-eagle-topk", FlagTopK},
		{"--speculative-eagle-topk=2", FlagTopK},
		{"--speculative-num-draft-tokens", FlagNumDraftTokens},
		{"--speculative-num-draft-tokens=8", FlagNumDraftTokens},
		{"--speculative-algorithm", ""},
		{"tp-size", ""},
		{"-tp", ""},
		{"--", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := matrixFlag(tt.arg); got != tt.want {
			t.Errorf("matrixFlag(%q) = %q, want %q", tt.arg, got, tt.want)
		}
	}
}

func TestAlgorithm(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--speculative-algorithm", "EAGLE3"}, "EAGLE3"},
		{[]string{"--speculative-algorithm=NEXTN"}, "NEXTN"},
		{[]string{"--speculative-algo", "EAGLE"}, "EAGLE"},
		{[]string{"--speculative-attention-mode", "decode"}, ""},
		{[]string{"--speculative-algorithm"}, "?"},
		{[]string{"--model-path", "--speculative-algorithm-x"}, ""},
	}
	for _, tt := range tests {
		if got := (Method{Args: tt.args}).Algorithm(); got != tt.want {
			t.Errorf("Algorithm(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestCheckAddress(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"llm-two.example", true},
		{"ct200.example:22", true},
		{"10.0.0.1:2222", true},
		{"[::1]:22", true},
		{"fe80::1", true},
		{"", false},
		{"root@host", false},
		{"host:0", false},
		{"host:ssh", false},
		{":22", false},
		{"a b", false},
		{"host/x", false},
	}
	for _, tt := range tests {
		if msg := checkAddress(tt.addr); (msg == "") != tt.ok {
			t.Errorf("checkAddress(%q) = %q, want ok=%v", tt.addr, msg, tt.ok)
		}
	}
}

func TestDraftTokens(t *testing.T) {
	tests := []struct {
		alg         string
		steps, topk int
		d           DraftTokens
		want        int
		skipped     bool
	}{
		{"EAGLE3", 3, 1, DraftTokens{Auto: true}, 4, false},
		{"EAGLE3", 3, 1, DraftTokens{N: 4}, 4, false},
		{"EAGLE3", 3, 1, DraftTokens{N: 8}, 0, true},
		{"EAGLE3", 3, 1, DraftTokens{N: 2}, 0, true},
		{"EAGLE", 3, 4, DraftTokens{Auto: true}, 0, true},
		{"EAGLE", 3, 4, DraftTokens{N: 13}, 13, false},
		{"EAGLE", 3, 4, DraftTokens{N: 14}, 0, true},
		{"EAGLE", maxNumber, maxNumber, DraftTokens{N: maxNumber}, maxNumber, false}, // no overflow
		{"dflash", 1, 1, DraftTokens{Auto: true}, 2, false},
		{"DSPARK", 1, 2, DraftTokens{N: 3}, 0, true},
	}
	for _, tt := range tests {
		got, reason := draftTokens(tt.alg, tt.steps, tt.topk, tt.d)
		if got != tt.want || (reason != "") != tt.skipped {
			t.Errorf("draftTokens(%s, %d, %d, %s) = %d, %q", tt.alg, tt.steps, tt.topk, tt.d, got, reason)
		}
	}
}

func TestSuggest(t *testing.T) {
	fields := []field{{key: "gpus"}, {key: "driver"}}
	if got := suggest("gpu", fields); got != `; did you mean "gpus"?` {
		t.Errorf("suggest = %q", got)
	}
	if got := suggest("colour", fields); got != " (known keys: gpus, driver)" {
		t.Errorf("suggest = %q", got)
	}
}
