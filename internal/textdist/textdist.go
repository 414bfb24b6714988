// Package textdist measures how far apart two words are, for "did you mean" hints: a leaf shared by
// the spec parser and the simulator's profile loader.
package textdist

// maxLen bounds the inputs: a longer word is far from every known one, and the quadratic table
// of a huge key is not worth computing.
const maxLen = 64

// Distance is the Levenshtein distance of a and b (bytes), or maxLen when either is longer.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return maxLen
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
