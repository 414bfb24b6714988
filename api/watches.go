package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/specsweep/specsweep/store"
)

// WatchJSON is a host's latest watch (`specsweep watch`, issue 29) in GET /api/watches: the watch
// sweep, when it was judged, its verdict (the `watch` event's detail) and the figures that fell (its
// `regression` events; none for a clean watch).
type WatchJSON struct {
	Host        string           `json:"host"`
	SweepID     int64            `json:"sweep_id"`
	Sweep       string           `json:"sweep"`
	At          int64            `json:"at"`
	Verdict     string           `json:"verdict"`
	Regressions []RegressionJSON `json:"regressions"`
}

// RegressionJSON is one figure a watch found below the deployment's decision: its measure
// (store.Measures) and the sentence that says it ("accept_length at c=1 fell from 3.40 to 1.40
// (floor 2.97), SGLang 0.5.9 -> 0.5.10").
type RegressionJSON struct {
	Measure string `json:"measure"`
	Detail  string `json:"detail"`
}

// watches is GET /api/watches: each watched host's latest watch, by host name; [] when no host was
// ever watched. The hosts and their watch sweeps are store.LatestWatches' (as /metrics reads them);
// the verdict and the regressions are the events of that sweep and host.
func (a *api) watches(w http.ResponseWriter, r *http.Request) {
	out, err := latestWatches(r.Context(), a.c.Store)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func latestWatches(ctx context.Context, st APIStore) ([]WatchJSON, error) {
	verdicts, err := st.LatestWatches(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]WatchJSON, 0, len(verdicts))
	events := map[int64][]store.Event{} // a watch sweep's events, read once
	for _, v := range verdicts {
		j := WatchJSON{Host: v.Host, SweepID: v.SweepID, At: v.At.UnixMilli(), Regressions: []RegressionJSON{}}
		if sw, err := st.Sweep(ctx, v.SweepID); err == nil {
			j.Sweep = sw.Name
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		evs, ok := events[v.SweepID]
		if !ok {
			if evs, err = st.Events(ctx, v.SweepID, ""); err != nil {
				return nil, err
			}
			events[v.SweepID] = evs
		}
		for _, e := range evs {
			if e.Host != v.Host {
				continue
			}
			switch e.Kind {
			case store.EventWatch:
				j.Verdict = e.Detail // the last one: the events are in order
			case store.EventRegression:
				var d struct {
					Measure string `json:"measure"`
				}
				_ = json.Unmarshal(e.Data, &d) // no measure: the sentence still says it
				j.Regressions = append(j.Regressions, RegressionJSON{Measure: d.Measure, Detail: e.Detail})
			}
		}
		out = append(out, j)
	}
	return out, nil
}
