package sweep

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseCron parses a standard 5-field cron expression, a descriptor such as @daily or @every 6h, with
// an optional CRON_TZ=Zone (or TZ=Zone) prefix. An @every interval must be at least MinEvery:
// robfig/cron turns @every 0s and negative intervals into one second, which would start a sweep
// every second. It is the only way the project parses cron
// expressions: robfig/cron panics on some inputs (a zone prefix without a zone or without a
// schedule), and a stored schedule is re-parsed at every daemon start, so a panic there would
// crash-loop the daemon. ParseCron returns an error instead, never panics. The errors do not repeat
// the expression: callers quote it.
func ParseCron(expr string) (cron.Schedule, error) { return ParseCronEvery(expr, MinEvery) }

// ParseCronEvery is ParseCron with another minimum for @every (still positive): for a caller whose
// clock is not the wall clock's minutes, such as a test of the scheduler; user input goes through
// ParseCron.
func ParseCronEvery(expr string, minEvery time.Duration) (sched cron.Schedule, err error) {
	if rest, ok := cutZonePrefix(expr); ok {
		zone, schedule, found := strings.Cut(rest, " ")
		switch {
		case zone == "":
			return nil, errors.New("the time zone prefix names no zone (want CRON_TZ=Zone before the schedule, e.g. \"CRON_TZ=Europe/Berlin 0 22 * * *\")")
		case !found || strings.TrimSpace(schedule) == "":
			return nil, fmt.Errorf("no schedule after the time zone %q (want e.g. \"CRON_TZ=%s 0 22 * * *\")", zone, zone)
		}
	}
	defer func() {
		// Whatever else robfig/cron panics on is a bad expression, not a crash.
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("not a cron expression (the parser failed: %v)", r)
		}
	}()
	sched, err = cron.ParseStandard(expr)
	if err != nil {
		return nil, err
	}
	if d, ok := everyOf(expr); ok {
		switch {
		case d <= 0:
			return nil, fmt.Errorf("@every needs a positive interval, got %s", d)
		case d < minEvery:
			return nil, fmt.Errorf("@every %s is below the minimum of %s (a sweep restarts servers and measures for minutes)", d, formatDuration(minEvery))
		}
	}
	return sched, nil
}

// everyOf returns the interval of an @every descriptor, read as robfig/cron reads it (after the
// zone prefix, the rest trimmed, then "@every " and a Go duration), before it rounds it.
func everyOf(expr string) (time.Duration, bool) {
	if _, ok := cutZonePrefix(expr); ok {
		i := strings.Index(expr, " ")
		if i < 0 {
			return 0, false
		}
		expr = strings.TrimSpace(expr[i:])
	}
	rest, ok := strings.CutPrefix(expr, "@every ")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(rest)
	return d, err == nil
}

// cutZonePrefix returns what follows a TZ= or CRON_TZ= prefix, as robfig/cron reads it.
func cutZonePrefix(expr string) (string, bool) {
	if rest, ok := strings.CutPrefix(expr, "CRON_TZ="); ok {
		return rest, true
	}
	return strings.CutPrefix(expr, "TZ=")
}
