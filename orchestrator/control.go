package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/specsweep/specsweep/store"
)

// ControlStore is what Resume and Cancel need of the store (*store.DB satisfies it).
type ControlStore interface {
	SetSweepState(ctx context.Context, id int64, to store.SweepState, detail string) error
	ResumeSweep(ctx context.Context, id int64, reason string) (store.Sweep, error)
	CancelSweep(ctx context.Context, id int64, reason string) error
	RecoverInterrupted(ctx context.Context, sweepID int64, reason string) (int, error)
}

// Resume puts sweep sw back in the daemon's queue (store.ResumeSweep: a cancelled, interrupted or
// failed sweep; a cancelled schedule's template fires again). A sweep stored as running whose
// process died (l.Orphaned) is first marked interrupted, saying since when no process holds it.
// Any other state is refused with store.ErrNotResumable.
func Resume(ctx context.Context, st ControlStore, sw store.Sweep, l Liveness, reason string) (store.Sweep, error) {
	if orphan, since := l.Orphaned(sw); orphan {
		if err := st.SetSweepState(ctx, sw.ID, store.SweepInterrupted, orphanDetail(sw, since)); err != nil {
			return store.Sweep{}, fmt.Errorf("orchestrator: resume sweep %d: %w", sw.ID, err)
		}
	}
	return st.ResumeSweep(ctx, sw.ID, reason)
}

// Cancel cancels sweep sw (store.CancelSweep: its pending and waiting points at once, its running
// points by the process that runs them). Of a sweep stored as running whose process died, the
// points it left running are released first, so that they end cancelled with the others instead of
// showing as running under a cancelled sweep.
func Cancel(ctx context.Context, st ControlStore, sw store.Sweep, l Liveness, reason string) error {
	if orphan, since := l.Orphaned(sw); orphan {
		if _, err := st.RecoverInterrupted(ctx, sw.ID, orphanDetail(sw, since)); err != nil {
			return fmt.Errorf("orchestrator: cancel sweep %d: %w", sw.ID, err)
		}
	}
	return st.CancelSweep(ctx, sw.ID, reason)
}

// orphanDetail says why a sweep stored as running is taken as interrupted.
func orphanDetail(sw store.Sweep, since time.Time) string {
	return fmt.Sprintf("no process has held it since %s (specsweep %s, pid %d on %q)",
		since.UTC().Format("2006-01-02 15:04:05Z"), sw.Holder.Kind, sw.Holder.PID, sw.Holder.Host)
}
