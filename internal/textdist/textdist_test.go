package textdist

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"gpus", "gpu", 1}, {"patiense", "patience", 1}, {"kitten", "sitting", 3},
		{"tpexp", "tp_exp", 1}, {"abc", "", 3}, {string(make([]byte, 65)), "a", maxLen},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
