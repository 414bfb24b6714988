package sweep_test

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/specsweep/specsweep/sweep"
)

// TestParseCronRefusesZonePrefixesWithoutZoneOrSchedule: robfig/cron panics (slice bounds) on a
// zone prefix with nothing after it, and reads "TZ= 0 22 * * *" as UTC; ParseCron refuses both.
func TestParseCronRefusesZonePrefixesWithoutZoneOrSchedule(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"TZ=", "names no zone"},
		{"CRON_TZ=", "names no zone"},
		{"TZ= 0 22 * * *", "names no zone"},
		{"CRON_TZ= @daily", "names no zone"},
		{"TZ=UTC", `no schedule after the time zone "UTC"`},
		{"CRON_TZ=Europe/Berlin", `no schedule after the time zone "Europe/Berlin"`},
		{"CRON_TZ=Europe/Berlin   ", `no schedule after the time zone "Europe/Berlin"`},
		{"CRON_TZ=Mars/Olympus_Mons 0 22 * * *", "provided bad location Mars/Olympus_Mons"},
		{"TZ=../../etc/passwd 0 22 * * *", "provided bad location"},
		{"", "empty spec string"},
		{"61 22 * * *", "above maximum"},
	} {
		s, err := sweep.ParseCron(c.expr)
		if err == nil || s != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseCron(%q) = %v, %v; want an error containing %q", c.expr, s, err, c.want)
		}
	}
}

// TestParseCronRefusesShortEvery: robfig/cron turns @every 0s, negative intervals and anything under
// a second into one second; ParseCron refuses every interval under sweep.MinEvery (1m), with or
// without a zone prefix.
func TestParseCronRefusesShortEvery(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"@every 0s", "@every needs a positive interval, got 0s"},
		{"@every 0", "@every needs a positive interval, got 0s"},
		{"@every -5m", "@every needs a positive interval, got -5m0s"},
		{"@every -1ns", "@every needs a positive interval"},
		{"@every 1ns", "@every 1ns is below the minimum of 1m"},
		{"@every 59s", "@every 59s is below the minimum of 1m"},
		{"@every 59.999s", "is below the minimum of 1m"},
		{"CRON_TZ=Europe/Berlin @every 30s", "@every 30s is below the minimum of 1m"},
		{"TZ=UTC   @every 0s", "@every needs a positive interval"},
	} {
		s, err := sweep.ParseCron(c.expr)
		if err == nil || s != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseCron(%q) = %v, %v; want an error containing %q", c.expr, s, err, c.want)
		}
	}
	for _, expr := range []string{"@every 1m", "@every 60s", "@every 1h30m", "CRON_TZ=Asia/Tokyo @every 2m"} {
		if _, err := sweep.ParseCron(expr); err != nil {
			t.Errorf("ParseCron(%q): %v", expr, err)
		}
	}
}

// TestParseCronEvery: the scheduler's tests may lower the minimum, never below a positive interval.
func TestParseCronEvery(t *testing.T) {
	if s, err := sweep.ParseCronEvery("@every 1s", time.Second); err != nil || s.(cron.ConstantDelaySchedule).Delay != time.Second {
		t.Errorf("ParseCronEvery(@every 1s, 1s) = %v, %v", s, err)
	}
	for _, expr := range []string{"@every 0s", "@every -1s", "@every 999ms"} {
		if _, err := sweep.ParseCronEvery(expr, time.Second); err == nil {
			t.Errorf("ParseCronEvery(%q, 1s) accepted it", expr)
		}
	}
}

func TestParseCronAcceptsStandardForms(t *testing.T) {
	from := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		expr string
		next time.Time
	}{
		{"0 22 * * *", time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Berlin 0 22 * * *", time.Date(2026, 3, 1, 21, 0, 0, 0, time.UTC)},
		{"TZ=Asia/Tokyo 0 22 * * *", time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)},
		{"@daily", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)},
		{"@every 6h", from.Add(6 * time.Hour)},
	} {
		s, err := sweep.ParseCron(c.expr)
		if err != nil {
			t.Errorf("ParseCron(%q): %v", c.expr, err)
			continue
		}
		if got := s.Next(from); !got.Equal(c.next) {
			t.Errorf("ParseCron(%q).Next(%s) = %s, want %s", c.expr, from, got.UTC(), c.next)
		}
	}
}

// FuzzParseCron: ParseCron never panics, returns a schedule exactly when it returns no error, and
// the schedule's next time (if any) is after the time asked about.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 22 * * *", "*/15 1-5 * JAN-MAR MON-FRI", "TZ=", "CRON_TZ=", "TZ=UTC",
		"CRON_TZ=Europe/Berlin 0 22 * * *", "TZ=Asia/Tokyo 30 6 1,15 * *", "@daily", "@every 6h", "@every ",
		"@every", "0 0 30 2 *", "TZ= 0 22 * * *", "CRON_TZ=Local @hourly", "@every 0s", "@every -1m",
		"@every 59s", "@every 1m", "TZ=UTC @every 1s", "@every 1ms"} {
		f.Add(s)
	}
	from := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := sweep.ParseCron(expr)
		if (s == nil) == (err == nil) {
			t.Fatalf("ParseCron(%q) = %v, %v: want exactly one of a schedule and an error", expr, s, err)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseCron(%q): empty error", expr)
			}
			return
		}
		if next := s.Next(from); !next.IsZero() && !next.After(from) {
			t.Fatalf("ParseCron(%q).Next(%s) = %s, not after it", expr, from, next)
		}
		// An accepted @every never recurs faster than the minimum.
		if d, ok := s.(cron.ConstantDelaySchedule); ok && d.Delay < sweep.MinEvery {
			t.Fatalf("ParseCron(%q) accepted an interval of %s, under %s", expr, d.Delay, sweep.MinEvery)
		}
	})
}
