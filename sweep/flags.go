package sweep

import (
	"strconv"
	"strings"

	"github.com/specsweep/specsweep/internal/argparse"
)

// SGLang flags the matrix sets on points (and the one that makes a method
// speculative); internal/argparse owns the names and their aliases.
const (
	FlagNumSteps       = argparse.SpeculativeNumSteps
	FlagTopK           = argparse.SpeculativeEagleTopK
	FlagNumDraftTokens = argparse.SpeculativeNumDraftTokens
	FlagTPSize         = argparse.TPSize
	// Per algorithm: DFLASH's block size and DSPARK's gamma carry
	// matrix.num_draft_tokens, NGRAM's BFS breadth carries matrix.topk.
	FlagDFlashBlockSize    = argparse.SpeculativeDFlashBlockSize
	FlagDSparkBlockSize    = argparse.SpeculativeDSparkBlockSize
	FlagNgramMaxBFSBreadth = argparse.SpeculativeNgramMaxBFSBreadth
	flagAlgorithm          = argparse.SpeculativeAlgorithm
	flagPort               = argparse.Port
)

// matrixFlagInfo is one flag the planner sets from a matrix list.
type matrixFlagInfo struct {
	flag string
	key  string // the matrix list it carries
	as   string // for a flag of one algorithm, what it is to it
}

// matrixFlags lists the flags the matrix sets, in a fixed order.
func matrixFlags() [7]matrixFlagInfo {
	return [...]matrixFlagInfo{
		{FlagNumSteps, "num_steps", ""},
		{FlagTopK, "topk", ""},
		{FlagNumDraftTokens, "num_draft_tokens", ""},
		{FlagTPSize, "tp", ""},
		{FlagDFlashBlockSize, "num_draft_tokens", "DFLASH's block size"},
		{FlagDSparkBlockSize, "num_draft_tokens", "DSPARK's gamma+1"},
		{FlagNgramMaxBFSBreadth, "topk", "NGRAM's topk"},
	}
}

// flagName returns the option token of arg ("--name" of "--name=value"), or "" for an arg that
// is not a long option.
func flagName(arg string) string {
	if !strings.HasPrefix(arg, "--") || len(arg) < 3 {
		return ""
	}
	name, _, _ := strings.Cut(arg, "=")
	return name
}

// rankFlag returns the multi-node flag arg may set in some release of SGLang (specsweep writes
// them per rank), or "".
func rankFlag(arg string) string {
	name := flagName(arg)
	for _, f := range []string{argparse.NNodes, argparse.NodeRank, argparse.DistInitAddr} {
		if name != "" && argparse.MayName(name, f) {
			return f
		}
	}
	return ""
}

// RankArgs are the flags one rank of a point spanning nnodes nodes adds to the point's argv:
// SGLang's --nnodes, --node-rank and --dist-init-addr (rank 0's host:port, the same on every rank).
func RankArgs(nnodes, rank int, distInit string) []string {
	return []string{argparse.NNodes, strconv.Itoa(nnodes), argparse.NodeRank, strconv.Itoa(rank), argparse.DistInitAddr, distInit}
}

// matrixFlag returns what is known of the matrix flag arg may set in some release of SGLang
// (the flag, an alias, or an abbreviation: argparse.MayName), and whether it may set one.
func matrixFlag(arg string) (matrixFlagInfo, bool) {
	name := flagName(arg)
	for _, f := range matrixFlags() {
		if name != "" && argparse.MayName(name, f.flag) {
			return f, true
		}
	}
	return matrixFlagInfo{}, false
}
