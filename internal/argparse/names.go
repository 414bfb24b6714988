package argparse

import (
	"slices"
	"strings"
)

// The options of launch_server that specsweep reads or sets, named here once: every package
// passes these to Last, Has, Set or MayName (which also take each one's aliases, below).
const (
	Port   = "--port"
	Host   = "--host"
	APIKey = "--api-key"
	// ModelPath is also spelled --model (an alias).
	ModelPath = "--model-path"
	// TPSize is also spelled --tensor-parallel-size (an alias), and --tp is its documented
	// abbreviation.
	TPSize = "--tp-size"
	// MemFractionStatic is the share of a GPU SGLang keeps for weights and the KV cache (doctor's
	// model fit check).
	MemFractionStatic = "--mem-fraction-static"

	// Credentials, hidden from stored argvs.
	AdminAPIKey        = "--admin-api-key"
	HFToken            = "--hf-token"
	SSLKeyfilePassword = "--ssl-keyfile-password"

	// The multi-node launch: specsweep writes them for each rank of a point that spans nodes
	// (docs/spec.md, hosts[].nodes); --dist-init-addr is also spelled --nccl-init-addr.
	NNodes       = "--nnodes"
	NodeRank     = "--node-rank"
	DistInitAddr = "--dist-init-addr"

	SpeculativeAlgorithm          = "--speculative-algorithm"
	SpeculativeNumSteps           = "--speculative-num-steps"
	SpeculativeEagleTopK          = "--speculative-eagle-topk"
	SpeculativeNumDraftTokens     = "--speculative-num-draft-tokens"
	SpeculativeDFlashBlockSize    = "--speculative-dflash-block-size"
	SpeculativeDSparkBlockSize    = "--speculative-dspark-block-size"
	SpeculativeNgramMaxBFSBreadth = "--speculative-ngram-max-bfs-breadth"
)

// aliasGroups are the options declared with more than one long name (one add_argument call,
// one dest) in some release of sim/flags/*.json, one group a line; TestAliasGroups checks the
// list against those tables.
const aliasGroups = `
--attn-cp-size --attention-context-parallel-size
--data-parallel-size --dp-size
--dcp-size --decode-context-parallel-size
--dist-init-addr --nccl-init-addr
--ep-size --expert-parallel-size --ep
--hisparse-config --hierarchical-sparse-attention-extra-config
--model-path --model
--moe-dp-size --moe-data-parallel-size
--pipeline-parallel-size --pp-size
--smg-http-sidecar-port --grpc-http-sidecar-port
--speculative-draft-model-path --speculative-draft-model
--speculative-draft-window-size --speculative-dflash-draft-window-size
--tp-size --tensor-parallel-size
`

// aliasesOf returns the names of the option name is one name of (name alone when it has no
// alias).
func aliasesOf(name string) []string {
	// Only the lines name occurs in are split: this runs for every token of a spec's args.
	rest := aliasGroups
	for {
		i := strings.Index(rest, name)
		if i < 0 {
			return []string{name}
		}
		start := strings.LastIndexByte(rest[:i], '\n') + 1
		end := len(rest)
		if j := strings.IndexByte(rest[i:], '\n'); j >= 0 {
			end = i + j
		}
		if g := strings.Fields(rest[start:end]); slices.Contains(g, name) {
			return g
		}
		rest = rest[end:]
	}
}

// Canonical returns the first name of the option names one of (its group in aliasGroups), so
// that two spellings of one option compare equal.
func Canonical(name string) string { return aliasesOf(name)[0] }

// expand returns names with every alias of each added.
func expand(names []string) []string {
	out := make([]string, 0, len(names)+1)
	for _, n := range names {
		for _, a := range aliasesOf(n) {
			if !contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// shortestAbbrev is, for the options specsweep sets on a point, the shortest abbreviation some
// release's argparse expands to it, "option prefix" a line. It is at most the shortest unique
// prefix in the releases sim/flags models (TestShortestAbbrev checks that); some entries are
// shorter, from releases between them where the option had no sibling of that prefix (0.5.x
// knew --speculative-dflash-block-size before --speculative-dflash-draft-window-size).
const shortestAbbrev = `
--tp-size --tp
--tensor-parallel-size --te
--speculative-algorithm --speculative-a
--speculative-num-steps --speculative-num-s
--speculative-eagle-topk --speculative-e
--speculative-num-draft-tokens --speculative-num-d
--speculative-dflash-block-size --speculative-df
--speculative-dspark-block-size --speculative-dsp
--speculative-ngram-max-bfs-breadth --speculative-ngram-max-b
`

// MayName reports whether tok (without "=value") may stand for one of names (or their aliases)
// in some release of SGLang: Resolve finds it, or it is an abbreviation at least as long as the
// shortest one a release expands to that option. It is the test for refusing an option where
// specsweep sets it itself: a prefix ambiguous today but not in an older release is refused too.
func MayName(tok string, names ...string) bool {
	if !strings.HasPrefix(tok, "--") || len(tok) < 3 {
		return false
	}
	names = expand(names)
	if resolve(tok, names) != "" {
		return true
	}
	for _, n := range names {
		if !strings.HasPrefix(n, tok) {
			continue
		}
		for line := range strings.Lines(shortestAbbrev) {
			if f := strings.Fields(line); len(f) == 2 && f[0] == n && len(tok) >= len(f[1]) {
				return true
			}
		}
	}
	return false
}

// Table is launch_server's options (options.go) sorted, for reading many tokens: build it once
// with Known and keep it for a whole spec.
type Table struct{ opts []string }

// Known returns the table of every option of every release.
func Known() *Table {
	opts := strings.Fields(knownOptions)
	slices.Sort(opts)
	return &Table{opts}
}

// Option returns the long option tok (an option token, without "=value") stands for among every
// option of launch_server, by Canonical name: tok itself when it is one, else the one option it
// abbreviates. It returns "" when tok is none (unknown, ambiguous, not "--name").
func (t *Table) Option(tok string) string {
	if !strings.HasPrefix(tok, "--") || len(tok) < 3 {
		return ""
	}
	// The options tok is a prefix of are a run starting where tok would sort.
	i, exact := slices.BinarySearch(t.opts, tok)
	switch {
	case exact:
		return Canonical(tok)
	case i >= len(t.opts) || !strings.HasPrefix(t.opts[i], tok):
		return "" // unknown
	case i+1 < len(t.opts) && strings.HasPrefix(t.opts[i+1], tok):
		return "" // ambiguous
	}
	return Canonical(t.opts[i])
}

// Options returns, for each token of argv, the Canonical option it gives ("" for a value, an
// unknown option, and every token from a lone "--" on).
func (t *Table) Options(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "--" {
			break
		}
		tok, _, _ := strings.Cut(a, "=")
		out[i] = t.Option(tok)
	}
	return out
}

// Option is Known().Option(tok).
func Option(tok string) string { return Known().Option(tok) }

// Repeat is an option given more than once in an argv: argparse keeps the value of the last.
type Repeat struct {
	Option string // its Canonical name
	At     []int  // the index in argv of each occurrence's option token, in order
}

// Repeats returns the options given more than once in argv (by any name or abbreviation), in
// the order of their first occurrence. Tokens after a lone "--" are not options.
func (t *Table) Repeats(argv []string) []Repeat {
	at := map[string][]int{}
	opts := t.Options(argv)
	var order []string
	for i, o := range opts {
		if o == "" {
			continue
		}
		if _, seen := at[o]; !seen {
			order = append(order, o)
		}
		at[o] = append(at[o], i)
	}
	var out []Repeat
	for _, o := range order {
		if len(at[o]) > 1 {
			out = append(out, Repeat{Option: o, At: at[o]})
		}
	}
	return out
}
