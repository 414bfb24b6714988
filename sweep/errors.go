package sweep

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem at a position in a spec file.
// Line and Col are 1-based; 0 means the position is unknown.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

// Error formats the problem as "FILE:LINE:COL: message", the form editors and
// compilers use, so a terminal or an IDE can jump to it.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList holds every problem found in a spec, sorted by position.
type ErrorList []*Error

// Error joins the problems, one per line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap exposes the individual problems to errors.Is/As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sort orders the problems by line and column; problems at the same position
// keep the order in which they were found.
func (l ErrorList) sort() {
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Line != l[j].Line {
			return l[i].Line < l[j].Line
		}
		return l[i].Col < l[j].Col
	})
}
