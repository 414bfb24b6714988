package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Event is one entry of the event log.
type Event struct {
	SweepID int64  // 0 for an event of no sweep (e.g. the daemon's)
	PointID string // "" for an event of no point
	Host    string
	At      time.Time // zero means now
	Kind    string    // e.g. state, sweep_state, stop, stop_timeout_sigkill, reconnect
	Detail  string    // for people
	// Data holds the event's structured fields, a JSON object (events.data, migration 8), for
	// readers that need its numbers; nil when it has none.
	Data json.RawMessage
}

// EventRanBeside is the kind of the event a packed point records at its end: which points ran
// beside it at some moment of its run (RanBeside).
const EventRanBeside = "ran_beside"

// RanBeside is the data of a ran_beside event.
type RanBeside struct {
	// Beside is how many other points ran beside it.
	Beside int `json:"beside"`
	// Points are their ids (absent in events recorded before migration 8).
	Points []string `json:"points,omitempty"`
}

// RanBesideEvent is the ran_beside event of a point that ran beside others (none: it ran alone).
func RanBesideEvent(sweepID int64, pointID, host string, others []string) Event {
	detail := fmt.Sprintf("ran beside %d other point(s)", len(others))
	if len(others) > 0 {
		detail += ": " + strings.Join(others, ", ")
	}
	data, _ := json.Marshal(RanBeside{Beside: len(others), Points: others}) // cannot fail: ints and strings
	return Event{SweepID: sweepID, PointID: pointID, Host: host, Kind: EventRanBeside, Detail: detail, Data: data}
}

// RanBeside decodes the data of a ran_beside event; false for another kind, or data that does not
// decode to a count.
func (e Event) RanBeside() (RanBeside, bool) {
	var r RanBeside
	if e.Kind != EventRanBeside || len(e.Data) == 0 || json.Unmarshal(e.Data, &r) != nil || r.Beside < 0 {
		return RanBeside{}, false
	}
	return r, true
}

// EventRegression is the kind of the event a watch (issue 29) records for each figure that fell
// below the deployment's decision; its data is the regression (report.Regression's fields). EventWatch
// is the watch's verdict, one per watch.
const (
	EventRegression = "regression"
	EventWatch      = "watch"
)

// The measures a watch compares (a regression event's data.measure; the metric's label).
const (
	MeasureTokS    = "tok_s"
	MeasureSpeedup = "speedup"
	MeasureAccept  = "accept_length"
	MeasureOutput  = "output_check"
)

// Measures lists them in a fixed order.
func Measures() []string { return []string{MeasureTokS, MeasureSpeedup, MeasureAccept, MeasureOutput} }

// EventPhase is the kind of the event a phased load records after each phase (workload.phases):
// the phase's place and its output tok/s over time (PhaseSeries).
const EventPhase = "phase"

// PhaseSeries is the data of a phase event.
type PhaseSeries struct {
	Phase       int   `json:"phase"` // from 1, in the spec's order
	Of          int   `json:"of"`    // the phases of one repeat
	Repeat      int   `json:"repeat"`
	Concurrency int   `json:"concurrency"`
	Occurrence  int   `json:"occurrence"` // the run's repeat (the concurrency's occurrence)
	StartMS     int64 `json:"start_ms"`   // the first measured request, unix ms
	WidthMS     int64 `json:"width_ms"`   // the interval of TokS
	// TokS is the phase's output tok/s in each interval from StartMS.
	TokS []float64 `json:"tok_s"`
	// Switches are the step changes an adaptive server logged during the phase, in order (at most
	// workload.MaxSwitches of SwitchCount).
	Switches    []StepSwitch `json:"switches,omitempty"`
	SwitchCount int          `json:"switch_count,omitempty"`
}

// StepSwitch is one change of an adaptive server's speculative steps, as its log line says.
type StepSwitch struct {
	// Runtime: the worker switched the steps it runs ("Switch adaptive runtime state"); false: the
	// policy decided ("Adaptive spec params updated").
	Runtime bool     `json:"runtime,omitempty"`
	From    int      `json:"from"`
	To      int      `json:"to"`
	EMA     *float64 `json:"ema_accept_len,omitempty"`
	// Clock is the time of day of the log line, as the server's clock and zone print it.
	Clock string `json:"clock,omitempty"`
}

// PhaseEvent is the phase event of a point's phase.
func PhaseEvent(sweepID int64, pointID, host string, ph PhaseSeries) Event {
	detail := fmt.Sprintf("phase %d of %d (repeat %d): concurrency %d, %d intervals of %d ms", ph.Phase, ph.Of, ph.Repeat,
		ph.Concurrency, len(ph.TokS), ph.WidthMS)
	data, _ := json.Marshal(ph) // cannot fail: numbers (a NaN is not made by the load generator)
	return Event{SweepID: sweepID, PointID: pointID, Host: host, Kind: EventPhase, Detail: detail, Data: data}
}

// PhaseSeries decodes the data of a phase event; false for another kind or data that does not
// decode.
func (e Event) PhaseSeries() (PhaseSeries, bool) {
	var ph PhaseSeries
	if e.Kind != EventPhase || len(e.Data) == 0 || json.Unmarshal(e.Data, &ph) != nil || ph.Phase < 1 || ph.WidthMS <= 0 {
		return PhaseSeries{}, false
	}
	return ph, true
}

// AddEvent appends an event to the log.
func (db *DB) AddEvent(ctx context.Context, e Event) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		at := db.nowMS()
		if !e.At.IsZero() {
			at = e.At.UnixMilli()
		}
		var ref *int64
		if e.PointID != "" {
			r, err := lookupPoint(ctx, tx, e.SweepID, e.PointID)
			if err != nil {
				return err
			}
			ref = &r.ref
		}
		return insertEventData(ctx, tx, at, e.SweepID, ref, e.Host, e.Kind, e.Detail, e.Data)
	})
	if err != nil {
		return fmt.Errorf("store: add %s event (sweep %d, point %q): %w", e.Kind, e.SweepID, e.PointID, err)
	}
	return nil
}

func insertEvent(ctx context.Context, tx *sql.Tx, at, sweepID int64, pointRef *int64, host, kind, detail string) error {
	return insertEventData(ctx, tx, at, sweepID, pointRef, host, kind, detail, nil)
}

// insertEventData is insertEvent with the event's structured fields (nil: none).
func insertEventData(ctx context.Context, tx *sql.Tx, at, sweepID int64, pointRef *int64, host, kind, detail string,
	data json.RawMessage) error {
	if kind == "" {
		return fmt.Errorf("event without kind")
	}
	if len(data) > 0 && !json.Valid(data) {
		return fmt.Errorf("%s event: data is not JSON: %.80q", kind, data)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO events (sweep_id, point_ref, host, at, kind, detail, data)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		sql.NullInt64{Int64: sweepID, Valid: sweepID != 0}, pointRef,
		sql.NullString{String: host, Valid: host != ""}, at, kind, detail,
		sql.NullString{String: string(data), Valid: len(data) > 0})
	return err
}

// Events returns a sweep's events in order (all of them, or those of one
// point when pointID is not empty).
func (db *DB) Events(ctx context.Context, sweepID int64, pointID string) ([]Event, error) {
	rows, err := db.rw.QueryContext(ctx, `SELECT coalesce(p.point_id, ''), coalesce(e.host, ''), e.at, e.kind, e.detail,
		coalesce(e.data, '')
		FROM events e LEFT JOIN points p ON p.id = e.point_ref
		WHERE e.sweep_id = ? AND (? = '' OR p.point_id = ?) ORDER BY e.at, e.id`, sweepID, pointID, pointID)
	if err != nil {
		return nil, fmt.Errorf("store: events of sweep %d: %w", sweepID, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{SweepID: sweepID}
		var at int64
		var data string
		if err := rows.Scan(&e.PointID, &e.Host, &at, &e.Kind, &e.Detail, &data); err != nil {
			return nil, fmt.Errorf("store: events of sweep %d: %w", sweepID, err)
		}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		e.At = time.UnixMilli(at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: events of sweep %d: %w", sweepID, err)
	}
	return out, nil
}

// LoggedEvent is one event as the log holds it, with its id (EventsAfter). The id is the events
// table's INTEGER PRIMARY KEY, growing in insertion order as a run's does (see RunEvent); the
// Event is what AddEvent was given, its At the time recorded (UTC). The id is not part of Event,
// which is what a caller writes: the store assigns it.
type LoggedEvent struct {
	ID int64
	Event
}

// eventsAfterSQL reads the events by their primary key from an id on, each with its point (if
// any) by the points' primary key.
const eventsAfterSQL = `SELECT e.id, coalesce(e.sweep_id, 0), coalesce(p.point_id, ''), coalesce(e.host, ''), e.at, e.kind, e.detail
	FROM events e LEFT JOIN points p ON p.id = e.point_ref
	WHERE e.id > ? ORDER BY e.id LIMIT ?`

// EventsAfter reads the events whose id is larger than afterID, of every sweep (and of none), in
// ascending id order, at most limit (at least 1) of them, on the read-only connection: what a
// live stream polls. Id order is insertion order; event_log orders by at first, which differs for
// an event added with an earlier At than one before it.
func (db *DB) EventsAfter(ctx context.Context, afterID int64, limit int) ([]LoggedEvent, error) {
	if limit < 1 {
		return nil, fmt.Errorf("store: reading events after %d: limit %d, want at least 1", afterID, limit)
	}
	var out []LoggedEvent
	err := db.scan(ctx, eventsAfterSQL, []any{afterID, limit}, func(_ []string, v []driver.Value) error {
		out = append(out, LoggedEvent{ID: vInt64(v[0]), Event: Event{SweepID: vInt64(v[1]), PointID: vString(v[2]),
			Host: vString(v[3]), At: vTime(v[4]), Kind: vString(v[5]), Detail: vString(v[6])}})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading events after %d: %w", afterID, err)
	}
	return out, nil
}

// WatchVerdict is a host's latest watch (issue 29): its sweep, when it was judged, and how many
// regressions it found by measure (none: a clean watch).
type WatchVerdict struct {
	Host        string
	SweepID     int64
	At          time.Time
	Regressions map[string]int
}

// LatestWatches is each host's latest watch verdict (its `watch` event) with the `regression` events
// of the same watch, by host name.
func (db *DB) LatestWatches(ctx context.Context) ([]WatchVerdict, error) {
	rows, err := db.rw.QueryContext(ctx, `SELECT w.host, w.sweep_id, w.at,
		coalesce(json_extract(r.data, '$.measure'), ''), count(r.id)
		FROM events w
		LEFT JOIN events r ON r.sweep_id = w.sweep_id AND r.kind = 'regression' AND r.host = w.host
		WHERE w.kind = 'watch' AND w.host IS NOT NULL AND w.id = (
			SELECT id FROM events WHERE kind = 'watch' AND host = w.host ORDER BY at DESC, id DESC LIMIT 1)
		GROUP BY w.host, w.sweep_id, w.at, 4 ORDER BY w.host`)
	if err != nil {
		return nil, fmt.Errorf("store: latest watches: %w", err)
	}
	defer rows.Close()
	var out []WatchVerdict
	for rows.Next() {
		var v WatchVerdict
		var at int64
		var measure string
		var n int
		if err := rows.Scan(&v.Host, &v.SweepID, &at, &measure, &n); err != nil {
			return nil, fmt.Errorf("store: latest watches: %w", err)
		}
		v.At = time.UnixMilli(at).UTC()
		if len(out) == 0 || out[len(out)-1].Host != v.Host {
			v.Regressions = map[string]int{}
			out = append(out, v)
		}
		if measure != "" && n > 0 {
			out[len(out)-1].Regressions[measure] += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: latest watches: %w", err)
	}
	return out, nil
}
