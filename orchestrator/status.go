package orchestrator

import (
	"context"
	"time"

	"github.com/specsweep/specsweep/store"
)

// StatusStore is what Status needs of the store.
type StatusStore interface {
	Sweep(ctx context.Context, id int64) (store.Sweep, error)
	Points(ctx context.Context, sweepID int64) ([]store.Point, error)
	Hosts(ctx context.Context, sweepID int64) ([]store.Host, error)
}

// SweepStatus is a sweep with its points and an estimate of the time left.
type SweepStatus struct {
	Sweep  store.Sweep
	Points []store.Point
	Hosts  []store.Host
	// ETA is the estimated time to the end from the measured point durations, 0 when unknown or
	// nothing is left.
	ETA time.Duration
}

// Status reads a sweep's progress.
func Status(ctx context.Context, st StatusStore, id int64) (SweepStatus, error) {
	sw, err := st.Sweep(ctx, id)
	if err != nil {
		return SweepStatus{}, err
	}
	pts, err := st.Points(ctx, id)
	if err != nil {
		return SweepStatus{}, err
	}
	hosts, err := st.Hosts(ctx, id)
	if err != nil {
		return SweepStatus{}, err
	}
	return SweepStatus{Sweep: sw, Points: pts, Hosts: hosts, ETA: eta(pts, len(hosts), time.Now())}, nil
}

// eta spreads the mean duration of the finished points over the points left and the hosts; a
// running point counts as half done.
func eta(pts []store.Point, hosts int, now time.Time) time.Duration {
	var sum time.Duration
	var n int
	left := 0.0
	for _, p := range pts {
		switch p.State {
		case store.PointDone, store.PointFailed:
			if !p.StartedAt.IsZero() && p.FinishedAt.After(p.StartedAt) {
				sum += p.FinishedAt.Sub(p.StartedAt)
				n++
			}
		case store.PointPending:
			left++
		case store.PointRunning:
			left += 0.5
		}
	}
	if n == 0 || left == 0 || hosts == 0 {
		return 0
	}
	mean := sum / time.Duration(n)
	return time.Duration(float64(mean) * left / float64(hosts))
}
