package sweep

import (
	"errors"
	"fmt"
	"strings"

	"github.com/robfig/cron/v3"
)

// ParseCron parses a standard 5-field cron expression, a descriptor such as @daily or @every 6h, with
// an optional CRON_TZ=Zone (or TZ=Zone) prefix. It is the only way the project parses cron
// expressions: robfig/cron panics on some inputs (a zone prefix without a zone or without a
// schedule), and a stored schedule is re-parsed at every daemon start, so a panic there would
// crash-loop the daemon. ParseCron returns an error instead, never panics. The errors do not repeat
// the expression: callers quote it.
func ParseCron(expr string) (sched cron.Schedule, err error) {
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
	return cron.ParseStandard(expr)
}

// cutZonePrefix returns what follows a TZ= or CRON_TZ= prefix, as robfig/cron reads it.
func cutZonePrefix(expr string) (string, bool) {
	if rest, ok := strings.CutPrefix(expr, "CRON_TZ="); ok {
		return rest, true
	}
	return strings.CutPrefix(expr, "TZ=")
}
