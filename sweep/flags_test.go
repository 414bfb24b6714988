package sweep

import "testing"

func TestMatrixFlag(t *testing.T) {
	tests := []struct{ arg, want string }{
		{"--tp-size", FlagTPSize},
		{"--tp", FlagTPSize},
		{"--tp-s", FlagTPSize},
		{"--tp-size=4", FlagTPSize},
		{"--tp=4", FlagTPSize},
		{"--tensor-parallel-size", FlagTPSize}, // an alias
		{"--tensor-parallel-size=2", FlagTPSize},
		{"--te", FlagTPSize},          // 0.4.1 expands it to the alias
		{"--speculative-e", FlagTopK}, // 0.4.1 knows no other --speculative-e*
		{"--speculative-eagle", FlagTopK},
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
		{"--speculative-dflash-block-size", FlagDFlashBlockSize},
		{"--speculative-dflash-block-size=16", FlagDFlashBlockSize},
		{"--speculative-df", FlagDFlashBlockSize}, // the only dflash flag of some releases
		{"--speculative-dflash-tree-width", ""},
		{"--speculative-d", ""}, // ambiguous with --speculative-draft-*
		{"--speculative-dspark-block-size", FlagDSparkBlockSize},
		{"--speculative-dspark-sps-table-path", ""},
		{"--speculative-dsa-topk-backend", ""},
		{"--speculative-ngram-max-bfs-breadth", FlagNgramMaxBFSBreadth},
		{"--speculative-ngram-max-b=4", FlagNgramMaxBFSBreadth},
		{"--speculative-ngram-max-", ""}, // ambiguous with the trie depth and the window size
		{"--speculative-ngram-min-bfs-breadth", ""},
		{"--speculative-algorithm", ""},
		{"tp-size", ""},
		{"-tp", ""},
		{"--", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, ok := matrixFlag(tt.arg)
		if got.flag != tt.want || ok != (tt.want != "") {
			t.Errorf("matrixFlag(%q) = %q, %v, want %q", tt.arg, got.flag, ok, tt.want)
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
		{"10.231.200.1:2222", true},
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

func TestEagleDraftTokens(t *testing.T) {
	tests := []struct {
		steps, topk int
		d           DraftTokens
		want        int
		skipped     bool
	}{
		{3, 1, DraftTokens{Auto: true}, 4, false},
		{3, 1, DraftTokens{N: 4}, 4, false},
		{3, 1, DraftTokens{N: 8}, 0, true},
		{3, 1, DraftTokens{N: 2}, 0, true},
		{3, 4, DraftTokens{Auto: true}, 0, true},
		{3, 4, DraftTokens{N: 13}, 13, false},
		{3, 4, DraftTokens{N: 14}, 0, true},
		{maxNumber, maxNumber, DraftTokens{N: maxNumber}, maxNumber, false}, // no overflow
	}
	for _, tt := range tests {
		got, reason := eagleDraftTokens(tt.steps, tt.topk, tt.d)
		if got != tt.want || (reason != "") != tt.skipped {
			t.Errorf("eagleDraftTokens(%d, %d, %s) = %d, %q", tt.steps, tt.topk, tt.d, got, reason)
		}
	}
}

func TestRulesOf(t *testing.T) {
	tests := []struct {
		alg  string
		want rules
	}{
		{"EAGLE", eagleRules{}}, {"EAGLE3", eagleRules{}}, {"NEXTN", eagleRules{}}, {"STANDALONE", eagleRules{}},
		{"eagle3", eagleRules{}}, // SGLang upper-cases the name
		{"DFLASH", dflashRules{}}, {"dflash", dflashRules{}},
		{"DSPARK", dsparkRules{}},
		{"NGRAM", ngramRules{}},
		{"MYTREE", pluginRules{}}, {"FROZEN_KV_MTP", pluginRules{}}, {"UNO", pluginRules{}}, {"?", pluginRules{}},
	}
	for _, tt := range tests {
		if got := rulesOf(tt.alg); got != tt.want {
			t.Errorf("rulesOf(%q) = %T, want %T", tt.alg, got, tt.want)
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
