package sweep

import "strings"

// SGLang flags the matrix sets on points (and the one that makes a method
// speculative).
const (
	FlagNumSteps       = "--speculative-num-steps"
	FlagTopK           = "--speculative-eagle-topk"
	FlagNumDraftTokens = "--speculative-num-draft-tokens"
	FlagTPSize         = "--tp-size"
	// Per algorithm: DFLASH's block size and DSPARK's gamma carry
	// matrix.num_draft_tokens, NGRAM's BFS breadth carries matrix.topk.
	FlagDFlashBlockSize    = "--speculative-dflash-block-size"
	FlagDSparkBlockSize    = "--speculative-dspark-block-size"
	FlagNgramMaxBFSBreadth = "--speculative-ngram-max-bfs-breadth"
	flagAlgorithm          = "--speculative-algorithm"
	flagPort               = "--port"
)

// matrixFlagInfo is one flag the planner sets from a matrix list.
type matrixFlagInfo struct {
	flag string
	// min is the shortest abbreviation SGLang's argparse (allow_abbrev)
	// resolves to flag in some release: "--tp" is documented for --tp-size,
	// and shorter prefixes are ambiguous there.
	min string
	key string // the matrix list it carries
	as  string // for a flag of one algorithm, what it is to it
}

// matrixFlags lists the flags the matrix sets, in a fixed order.
func matrixFlags() [7]matrixFlagInfo {
	return [...]matrixFlagInfo{
		{FlagNumSteps, "--speculative-num-s", "num_steps", ""},
		{FlagTopK, "--speculative-eagle-t", "topk", ""},
		{FlagNumDraftTokens, "--speculative-num-d", "num_draft_tokens", ""},
		{FlagTPSize, "--tp", "tp", ""},
		{FlagDFlashBlockSize, "--speculative-df", "num_draft_tokens", "DFLASH's block size"},
		{FlagDSparkBlockSize, "--speculative-dsp", "num_draft_tokens", "DSPARK's gamma+1"},
		{FlagNgramMaxBFSBreadth, "--speculative-ngram-max-b", "topk", "NGRAM's topk"},
	}
}

// minPrefix is the shortest abbreviation of a flag that argparse resolves to it.
func minPrefix(full string) string {
	if full == flagAlgorithm {
		return "--speculative-al"
	}
	for _, f := range matrixFlags() {
		if f.flag == full {
			return f.min
		}
	}
	return full
}

// splitFlag splits "--name=value" into its parts; an arg that is not a long
// flag returns name "".
func splitFlag(arg string) (name, value string, hasValue bool) {
	if !strings.HasPrefix(arg, "--") || len(arg) < 3 {
		return "", "", false
	}
	return strings.Cut(arg, "=")
}

// isFlag reports whether name (without "=value") is full or an abbreviation
// argparse would expand to full.
func isFlag(name, full string) bool {
	return name != "" && strings.HasPrefix(full, name) && len(name) >= len(minPrefix(full))
}

// matrixFlag returns what is known of the matrix flag arg sets, and whether it sets one.
func matrixFlag(arg string) (matrixFlagInfo, bool) {
	name, _, _ := splitFlag(arg)
	for _, f := range matrixFlags() {
		if isFlag(name, f.flag) {
			return f, true
		}
	}
	return matrixFlagInfo{}, false
}
