package sweep

import (
	"fmt"
	"strings"
	"time"
)

// Window is a daily time window in UTC, e.g. 22:00-07:00 (wrapping midnight) or 09:00-17:30.
type Window struct {
	Start, End time.Duration // offsets from midnight UTC; Start == End means all day
}

// ParseWindow parses "HH:MM-HH:MM".
func ParseWindow(s string) (Window, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return Window{}, fmt.Errorf("%q: want HH:MM-HH:MM (UTC), e.g. 22:00-07:00", clip(s))
	}
	start, err := clock(a)
	if err != nil {
		return Window{}, fmt.Errorf("%q: start %w", clip(s), err)
	}
	end, err := clock(b)
	if err != nil {
		return Window{}, fmt.Errorf("%q: end %w", clip(s), err)
	}
	return Window{Start: start, End: end}, nil
}

func clock(s string) (time.Duration, error) {
	var h, m int
	if n, err := fmt.Sscanf(strings.TrimSpace(s), "%d:%d", &h, &m); err != nil || n != 2 || len(strings.TrimSpace(s)) != 5 {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	if h < 0 || h > 23 || m < 0 || m > 59 {
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, nil
}

// Contains reports whether t falls inside the window.
func (w Window) Contains(t time.Time) bool {
	if w.Start == w.End {
		return true
	}
	t = t.UTC()
	off := t.Sub(time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC))
	if w.Start < w.End {
		return off >= w.Start && off < w.End
	}
	return off >= w.Start || off < w.End
}

// Next is the first instant at or after t inside the window.
func (w Window) Next(t time.Time) time.Time {
	if w.Contains(t) {
		return t
	}
	t = t.UTC()
	midnight := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	open := midnight.Add(w.Start)
	if open.Before(t) {
		open = open.Add(24 * time.Hour)
	}
	return open
}
