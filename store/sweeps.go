package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SweepState is the life-cycle state of a sweep.
type SweepState string

// Sweep states. A scheduled sweep is a cron template that fires new sweeps;
// queued sweeps wait for the daemon; interrupted ones were running when their
// process died.
const (
	SweepScheduled   SweepState = "scheduled"
	SweepQueued      SweepState = "queued"
	SweepRunning     SweepState = "running"
	SweepInterrupted SweepState = "interrupted"
	SweepDone        SweepState = "done"
	SweepFailed      SweepState = "failed"
	SweepCancelled   SweepState = "cancelled"
)

// sweepTransitions lists the legal sweep state changes.
var sweepTransitions = map[SweepState][]SweepState{
	SweepScheduled:   {SweepCancelled},
	SweepQueued:      {SweepRunning, SweepCancelled},
	SweepRunning:     {SweepDone, SweepFailed, SweepCancelled, SweepInterrupted, SweepQueued},
	SweepInterrupted: {SweepQueued, SweepRunning, SweepCancelled},
	SweepCancelled:   {SweepQueued, SweepScheduled, SweepRunning},
	SweepFailed:      {SweepQueued},
	SweepDone:        nil,
}

// Valid reports whether s is a known sweep state.
func (s SweepState) Valid() bool { _, ok := sweepTransitions[s]; return ok }

// CanTransition reports whether a sweep may move from s to to.
func (s SweepState) CanTransition(to SweepState) bool {
	for _, t := range sweepTransitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// Template reports whether the sweep is a schedule's template: a sweep with a cron schedule that
// no schedule fired and that has no points of its own (it fires NAME@TIME sweeps). A sweep that
// `specsweep run` made from a spec with schedule.cron has points, and is no template.
func (s Sweep) Template() bool {
	return s.Schedule != "" && s.ScheduleID == 0 && s.Points == 0
}

// notTemplate is the SQL condition of a sweep s that is not a schedule's template (Sweep.Template).
const notTemplate = `NOT (s.schedule <> '' AND s.schedule_id IS NULL
	AND NOT EXISTS (SELECT 1 FROM points t WHERE t.sweep_id = s.id))`

// Terminal reports whether the sweep has ended (done, failed or cancelled).
func (s SweepState) Terminal() bool {
	return s == SweepDone || s == SweepFailed || s == SweepCancelled
}

// NewSweep describes a sweep to create.
type NewSweep struct {
	Name     string
	SpecHash string
	SpecText string
	Schedule string     // cron expression, "" for none
	State    SweepState // default SweepQueued
	// NotBefore delays the start (submit --at); zero means now.
	NotBefore time.Time
	// ScheduleID is the template sweep (state scheduled) whose cron firing made this sweep; 0: none.
	ScheduleID int64
}

// NewHost describes one host of a sweep.
type NewHost struct {
	Name    string
	Address string // host[:port], "" for the local driver
	Driver  string // "ssh" (default) or "local"
	Unit    string
	GPUs    int
}

// Host is a stored host of a sweep.
type Host struct {
	SweepID int64
	NewHost
}

// NewPoint describes one point of a sweep's plan. The slice order passed to
// CreateSweep is the plan order.
type NewPoint struct {
	ID       string // the plan's stable id, unique within the sweep
	Method   string
	Baseline bool
	// NumSteps, TopK and NumDraftTokens are nil for a baseline.
	NumSteps, TopK, NumDraftTokens *int
	TP                             int
	Argv                           []string
	Env                            map[string]string
	// Runs is the number of runs the point plans (concurrency levels x
	// repeats x cells: a level measured on 3 cells is 3 runs). When
	// positive, FinishPoint refuses "done" until the current attempt has
	// recorded that many runs.
	Runs int
	// Searched: a search decides whether the point runs. CreateSweep stores it
	// waiting; ApplySearch releases it (pending) or prunes it.
	Searched bool
}

// PointCounts counts a sweep's points by state.
type PointCounts struct {
	Pending, Running, Done, Failed, Cancelled int
	// Waiting (for the search's decision) and Pruned (the search decided they need not run).
	Waiting, Pruned int
}

// Total is the number of points.
func (c PointCounts) Total() int {
	return c.Waiting + c.Pending + c.Running + c.Done + c.Failed + c.Cancelled + c.Pruned
}

// Sweep is a stored sweep.
type Sweep struct {
	ID        int64
	Name      string
	SpecHash  string
	SpecText  string
	Schedule  string
	State     SweepState
	NotBefore time.Time
	// ScheduleID is the template of the schedule that fired this sweep, 0 for none.
	ScheduleID int64
	CreatedAt  time.Time
	StartedAt  time.Time
	// FinishedAt is set when the sweep reaches a terminal state.
	FinishedAt time.Time
	// DaemonDeaths counts the daemons that died while running this sweep since it was submitted or
	// last resumed (RequeueRunning); at the daemon's limit the sweep is held.
	DaemonDeaths int
	// Holder is the last process that held the sweep (zero when none ever did).
	Holder Holder
	// Points is the number of points; PointCounts splits it by state.
	Points int
	PointCounts
}

// Holder kinds: how a process runs a sweep.
const (
	HolderRun    = "run"    // specsweep run, in the foreground
	HolderDaemon = "daemon" // specsweep daemon
)

// Holder is the process that runs (or last ran) a sweep, and its last sign of life.
type Holder struct {
	Kind string // HolderRun or HolderDaemon
	PID  int
	Host string // the holder's host name (os.Hostname)
	// Heartbeat is when the holder last said it still runs the sweep.
	Heartbeat time.Time
}

// CreateSweep stores a sweep with its hosts and its points (in the given plan
// order: pending, or waiting when searched) in one transaction and returns the
// sweep's id.
func (db *DB) CreateSweep(ctx context.Context, s NewSweep, hosts []NewHost, points []NewPoint) (int64, error) {
	if s.State == "" {
		s.State = SweepQueued
	}
	wrap := func(err error) error { return fmt.Errorf("store: create sweep %q: %w", s.Name, err) }
	if s.Name == "" {
		return 0, wrap(errors.New("empty name"))
	}
	if !s.State.Valid() {
		return 0, wrap(fmt.Errorf("unknown state %q", s.State))
	}
	var id int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		res, err := tx.ExecContext(ctx, `INSERT INTO sweeps
			(name, spec_hash, spec_text, state, schedule, not_before, created_at, schedule_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			s.Name, s.SpecHash, s.SpecText, s.State, s.Schedule, ms(s.NotBefore), now,
			sql.NullInt64{Int64: s.ScheduleID, Valid: s.ScheduleID != 0})
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		for _, h := range hosts {
			driver := h.Driver
			if driver == "" {
				driver = "ssh"
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO hosts
				(sweep_id, name, address, driver, unit, gpus) VALUES (?, ?, ?, ?, ?, ?)`,
				id, h.Name, h.Address, driver, h.Unit, h.GPUs); err != nil {
				return fmt.Errorf("host %q: %w", h.Name, err)
			}
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO points
			(sweep_id, point_id, plan_order, method, baseline, num_steps, topk, num_draft_tokens,
			 tp, argv, env, planned_runs, created_at, state, searched)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		searched := 0
		for i, p := range points {
			argv, err := json.Marshal(nonNil(p.Argv))
			if err != nil {
				return fmt.Errorf("point %s: %w", p.ID, err)
			}
			env := p.Env
			if env == nil {
				env = map[string]string{}
			}
			envJSON, err := json.Marshal(env)
			if err != nil {
				return fmt.Errorf("point %s: %w", p.ID, err)
			}
			state := PointPending
			if p.Searched {
				state = PointWaiting
				searched++
			}
			if _, err := stmt.ExecContext(ctx, id, p.ID, i, p.Method, p.Baseline,
				nullInt(p.NumSteps), nullInt(p.TopK), nullInt(p.NumDraftTokens),
				p.TP, string(argv), string(envJSON), p.Runs, now, state, p.Searched); err != nil {
				return fmt.Errorf("point %s: %w", p.ID, err)
			}
		}
		detail := fmt.Sprintf("created %s (%d points, %d hosts)", s.State, len(points), len(hosts))
		if searched > 0 {
			detail = fmt.Sprintf("created %s (%d points, %d of them searched, %d hosts)", s.State, len(points), searched, len(hosts))
		}
		return insertEvent(ctx, tx, now, id, nil, "", "sweep_state", detail)
	})
	if err != nil {
		return 0, wrap(err)
	}
	return id, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nullInt(p *int) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(*p), Valid: true}
}

const sweepSelect = `SELECT s.id, s.name, s.spec_hash, s.spec_text, s.schedule, s.state,
	s.not_before, s.created_at, s.started_at, s.finished_at, coalesce(s.schedule_id, 0), s.daemon_deaths,
	s.holder_kind, coalesce(s.holder_pid, 0), s.holder_host, s.heartbeat_at,
	coalesce(sum(p.state = 'pending'), 0), coalesce(sum(p.state = 'running'), 0),
	coalesce(sum(p.state = 'done'), 0), coalesce(sum(p.state = 'failed'), 0),
	coalesce(sum(p.state = 'cancelled'), 0), coalesce(sum(p.state = 'waiting'), 0),
	coalesce(sum(p.state = 'pruned'), 0)
	FROM sweeps s LEFT JOIN points p ON p.sweep_id = s.id `

func scanSweep(sc interface{ Scan(...any) error }) (Sweep, error) {
	var s Sweep
	var notBefore, created, started, finished, heartbeat sql.NullInt64
	err := sc.Scan(&s.ID, &s.Name, &s.SpecHash, &s.SpecText, &s.Schedule, &s.State,
		&notBefore, &created, &started, &finished, &s.ScheduleID, &s.DaemonDeaths,
		&s.Holder.Kind, &s.Holder.PID, &s.Holder.Host, &heartbeat,
		&s.Pending, &s.Running, &s.Done, &s.Failed, &s.Cancelled, &s.Waiting, &s.Pruned)
	s.Points = s.Total()
	s.NotBefore, s.CreatedAt, s.StartedAt, s.FinishedAt = fromMS(notBefore), fromMS(created), fromMS(started), fromMS(finished)
	s.Holder.Heartbeat = fromMS(heartbeat)
	return s, err
}

// HoldSweep records h (its kind, pid and host) as the process that runs sweep id, with a heartbeat
// now. The holder's Heartbeat field is ignored.
func (db *DB) HoldSweep(ctx context.Context, id int64, h Holder) error {
	if h.Kind != HolderRun && h.Kind != HolderDaemon {
		return fmt.Errorf("store: hold sweep %d: unknown holder kind %q", id, h.Kind)
	}
	if h.PID <= 0 {
		return fmt.Errorf("store: hold sweep %d: pid %d", id, h.PID)
	}
	return db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sweeps SET holder_kind = ?, holder_pid = ?, holder_host = ?,
			heartbeat_at = ? WHERE id = ?`, h.Kind, h.PID, h.Host, db.nowMS(), id)
		if err != nil {
			return fmt.Errorf("store: hold sweep %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: hold sweep %d: %w", id, ErrNotFound)
		}
		return nil
	})
}

// Heartbeat says that the process pid still runs sweep id. It changes nothing when another process
// holds the sweep now (a resume elsewhere took it over).
func (db *DB) Heartbeat(ctx context.Context, id int64, pid int) error {
	return db.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE sweeps SET heartbeat_at = ? WHERE id = ? AND holder_pid = ?`,
			db.nowMS(), id, pid); err != nil {
			return fmt.Errorf("store: heartbeat of sweep %d: %w", id, err)
		}
		return nil
	})
}

func (db *DB) sweepWhere(ctx context.Context, where string, args ...any) (Sweep, error) {
	row := db.rw.QueryRowContext(ctx, sweepSelect+where+" GROUP BY s.id ORDER BY s.id DESC LIMIT 1", args...)
	s, err := scanSweep(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Sweep{}, ErrNotFound
	}
	return s, err
}

// Sweep returns the sweep with the given id.
func (db *DB) Sweep(ctx context.Context, id int64) (Sweep, error) {
	s, err := db.sweepWhere(ctx, "WHERE s.id = ?", id)
	if err != nil {
		return Sweep{}, fmt.Errorf("store: sweep %d: %w", id, err)
	}
	return s, nil
}

// LatestSweepByName returns the most recently created sweep of that name that is not a schedule's
// template (templates are addressed as schedules, by id).
func (db *DB) LatestSweepByName(ctx context.Context, name string) (Sweep, error) {
	s, err := db.sweepWhere(ctx, "WHERE s.name = ? AND "+notTemplate, name)
	if err != nil {
		return Sweep{}, fmt.Errorf("store: sweep named %q: %w", name, err)
	}
	return s, nil
}

// FindSweep resolves a user's reference to a sweep: a decimal id (any sweep,
// a schedule's template too), or a name: the latest sweep of that name that
// is not a schedule's template (templates are addressed as schedules, by id).
// A name that looks like a number is tried as a name when no sweep has that id.
func (db *DB) FindSweep(ctx context.Context, ref string) (Sweep, error) {
	ref = strings.TrimSpace(ref)
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		s, err := db.sweepWhere(ctx, "WHERE s.id = ?", id)
		if err == nil || !errors.Is(err, ErrNotFound) {
			if err != nil {
				return Sweep{}, fmt.Errorf("store: find sweep %q: %w", ref, err)
			}
			return s, nil
		}
	}
	s, err := db.sweepWhere(ctx, "WHERE s.name = ? AND "+notTemplate, ref)
	if err != nil {
		return Sweep{}, fmt.Errorf("store: find sweep %q (no sweep has this id or name): %w", ref, err)
	}
	return s, nil
}

// ListSweeps returns the sweeps in the given states (all when none is
// given), oldest first, with their point counts.
func (db *DB) ListSweeps(ctx context.Context, states ...SweepState) ([]Sweep, error) {
	out, _, err := db.ListSweepsPage(ctx, SweepPage{States: states})
	return out, err
}

// SweepPage selects a page of sweeps: those in States (all when empty) with ids above After,
// oldest first, at most Limit (0: no limit).
type SweepPage struct {
	States []SweepState
	After  int64
	Limit  int
}

// ListSweepsPage returns a page of sweeps with their point counts, and whether more follow it.
func (db *DB) ListSweepsPage(ctx context.Context, pg SweepPage) ([]Sweep, bool, error) {
	var conds []string
	var args []any
	if len(pg.States) > 0 {
		conds = append(conds, "s.state IN (?"+strings.Repeat(", ?", len(pg.States)-1)+")")
		for _, s := range pg.States {
			args = append(args, s)
		}
	}
	if pg.After > 0 {
		conds = append(conds, "s.id > ?")
		args = append(args, pg.After)
	}
	where := ""
	if len(conds) > 0 {
		where = "WHERE " + strings.Join(conds, " AND ")
	}
	limit := ""
	if pg.Limit > 0 {
		// One more than asked tells whether more follow.
		limit = " LIMIT ?"
		args = append(args, pg.Limit+1)
	}
	rows, err := db.rw.QueryContext(ctx, sweepSelect+where+" GROUP BY s.id ORDER BY s.id"+limit, args...)
	if err != nil {
		return nil, false, fmt.Errorf("store: list sweeps: %w", err)
	}
	defer rows.Close()
	var out []Sweep
	for rows.Next() {
		s, err := scanSweep(rows)
		if err != nil {
			return nil, false, fmt.Errorf("store: list sweeps: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("store: list sweeps: %w", err)
	}
	more := pg.Limit > 0 && len(out) > pg.Limit
	if more {
		out = out[:pg.Limit]
	}
	return out, more, nil
}

// Hosts returns a sweep's hosts in the order they were given.
func (db *DB) Hosts(ctx context.Context, sweepID int64) ([]Host, error) {
	rows, err := db.rw.QueryContext(ctx, `SELECT name, address, driver, unit, gpus
		FROM hosts WHERE sweep_id = ? ORDER BY id`, sweepID)
	if err != nil {
		return nil, fmt.Errorf("store: hosts of sweep %d: %w", sweepID, err)
	}
	defer rows.Close()
	var out []Host
	for rows.Next() {
		h := Host{SweepID: sweepID}
		if err := rows.Scan(&h.Name, &h.Address, &h.Driver, &h.Unit, &h.GPUs); err != nil {
			return nil, fmt.Errorf("store: hosts of sweep %d: %w", sweepID, err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: hosts of sweep %d: %w", sweepID, err)
	}
	return out, nil
}

// SetSweepState moves a sweep to state to, if its current state allows it
// (ErrTransition otherwise), and logs a "sweep_state" event with detail.
// Entering running sets started_at (first time only); entering a terminal
// state sets finished_at; leaving one clears it.
func (db *DB) SetSweepState(ctx context.Context, id int64, to SweepState, detail string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		return setSweepState(ctx, tx, db.nowMS(), id, to, detail)
	})
	if err != nil {
		return fmt.Errorf("store: set sweep %d state to %s: %w", id, to, err)
	}
	return nil
}

func setSweepState(ctx context.Context, tx *sql.Tx, now, id int64, to SweepState, detail string) error {
	if !to.Valid() {
		return fmt.Errorf("unknown state %q", to)
	}
	var from SweepState
	if err := tx.QueryRowContext(ctx, "SELECT state FROM sweeps WHERE id = ?", id).Scan(&from); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	}
	if !from.CanTransition(to) {
		return fmt.Errorf("sweep is %s: %w", from, ErrTransition)
	}
	var finished sql.NullInt64
	if to.Terminal() {
		finished = sql.NullInt64{Int64: now, Valid: true}
	}
	var started any
	if to == SweepRunning {
		started = now
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sweeps SET state = ?, finished_at = ?,
		started_at = coalesce(started_at, ?) WHERE id = ? AND state = ?`,
		to, finished, started, id, from); err != nil {
		return err
	}
	msg := fmt.Sprintf("%s -> %s", from, to)
	if detail != "" {
		msg += ": " + detail
	}
	return insertEvent(ctx, tx, now, id, nil, "", "sweep_state", msg)
}

// ClaimNextSweep moves the oldest queued sweep whose NotBefore has passed
// (other than the except ids) to running and returns it; ErrNotFound when
// there is none. Two daemons cannot claim the same sweep.
func (db *DB) ClaimNextSweep(ctx context.Context, except ...int64) (Sweep, error) {
	var id int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		args := []any{now}
		skip := ""
		for _, e := range except {
			skip += " AND id <> ?"
			args = append(args, e)
		}
		err := tx.QueryRowContext(ctx, `SELECT id FROM sweeps
			WHERE state = 'queued' AND coalesce(not_before, 0) <= ?`+skip+`
			ORDER BY coalesce(not_before, created_at), id LIMIT 1`, args...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return setSweepState(ctx, tx, now, id, SweepRunning, "claimed")
	})
	if err != nil {
		return Sweep{}, fmt.Errorf("store: claim next queued sweep: %w", err)
	}
	return db.Sweep(ctx, id)
}
