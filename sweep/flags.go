package sweep

import "strings"

// SGLang flags the matrix sets on every point (and the one that makes a method
// speculative).
const (
	FlagNumSteps       = "--speculative-num-steps"
	FlagTopK           = "--speculative-eagle-topk"
	FlagNumDraftTokens = "--speculative-num-draft-tokens"
	FlagTPSize         = "--tp-size"
	flagAlgorithm      = "--speculative-algorithm"
	flagPort           = "--port"
)

// minPrefix is the shortest abbreviation of a flag that SGLang's argparse
// (allow_abbrev) still resolves to it: "--tp" is documented for --tp-size, and
// shorter prefixes of the speculative flags would be ambiguous there.
func minPrefix(full string) string {
	switch full {
	case FlagNumSteps:
		return "--speculative-num-s"
	case FlagTopK:
		return "--speculative-eagle-t"
	case FlagNumDraftTokens:
		return "--speculative-num-d"
	case FlagTPSize:
		return "--tp"
	case flagAlgorithm:
		return "--speculative-al"
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

// matrixFlag returns the matrix flag that arg sets, or "".
func matrixFlag(arg string) string {
	name, _, _ := splitFlag(arg)
	for _, f := range [...]string{FlagNumSteps, FlagTopK, FlagNumDraftTokens, FlagTPSize} {
		if isFlag(name, f) {
			return f
		}
	}
	return ""
}
