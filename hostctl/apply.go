// Applied configuration (`specsweep apply`): a launch made the host's server durably, through a
// persistent drop-in beside the operator's unit, with a rollback record written before any change
// (docs/hostctl.md "Applied configuration").

package hostctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Applier is a host whose server a launch can be made durably (`specsweep apply`, docs/hostctl.md "Applied configuration").
type Applier interface {
	// Applied is what is applied on the host now, from the host's own record (nil: nothing).
	Applied(ctx context.Context) (*AppliedRecord, error)
	// Apply makes l the host's server: it saves what was applied before (a rollback record on the host,
	// written before any change; an existing one, left by an apply that died, is kept: it describes the
	// state before that first attempt), writes l's files, its environment file and a persistent drop-in,
	// daemon-reload, and restarts the unit (stopping what runs with the usual stop loop). It returns the
	// started instance (WaitReady/Check/Logs/Stop as a sweep point's). Refused while a sweep runs on the
	// host (a restore marker exists): run `specsweep restore` first.
	Apply(ctx context.Context, l Launch, rec AppliedRecord) (Instance, error)
	// Rollback puts back what the rollback record holds (the previous applied drop-in, environment file,
	// record and files, or none of them), daemon-reload, restarts the unit if it was active before the
	// apply (else leaves it stopped), and removes the rollback record. No rollback record: nothing to do.
	Rollback(ctx context.Context) error
	// Commit ends an apply that passed its checks: the rollback record is removed.
	Commit(ctx context.Context) error
	// Unapply returns the operator's unit: stops the server, removes the applied drop-in, its environment
	// file, the files it wrote, the applied record and any rollback record, daemon-reload, reset-failed, and
	// starts the unit if it was active before the first apply (recorded then). The operator's unit file is
	// byte-identical (never touched). Refused while a sweep runs on the host (marker exists).
	Unapply(ctx context.Context) error
}

// AppliedRecord says what is applied (kept on the host, JSON).
type AppliedRecord struct {
	Sweep     string    `json:"sweep"`
	SweepID   int64     `json:"sweep_id"`
	Point     string    `json:"point"`           // point id
	Label     string    `json:"label"`           // e.g. "eagle3 s=3 k=1 n=4 tp=4"
	Choice    string    `json:"choice"`          // recommended, adaptive or point
	AppliedAt time.Time `json:"applied_at"`      // set by Apply when zero
	By        string    `json:"by"`              // specsweep@HOSTNAME; set by Apply when empty
	Files     []string  `json:"files,omitempty"` // the paths of l.Files written (Unapply removes them)
	// WasActive: the operator's unit was active before the FIRST apply (kept through re-applies).
	WasActive bool `json:"was_active"`
}

// ErrSweepOnHost refuses an apply, rollback or unapply while a sweep has the unit (its restore
// marker or its drop-in is on the host).
var ErrSweepOnHost = errors.New("a sweep runs on the host")

var (
	_ Applier = (*Remote)(nil)
	_ Applier = (*openSSH)(nil)
)

// Bounds of what a rollback record saves: the previous drop-in, environment file and record are
// specsweep's own small files; the previous files are a launch's (MaxFiles of MaxFileSize), so
// the record, base64 in JSON, stays under maxRollback.
const (
	maxSavedUnitFile = 4 << 20
	maxRollback      = 64 << 20
)

// savedFile is one file as it was before an apply: its bytes, or absent.
type savedFile struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Data   []byte `json:"data,omitempty"`
}

// applyRollback is the rollback record: the applied configuration before an apply, written
// before the apply changes anything, so a rollback (or an unapply) after a crash still knows.
type applyRollback struct {
	Unit string `json:"unit"`
	// WasActive: the unit was active before the apply (Rollback starts it again).
	WasActive bool      `json:"was_active"`
	DropIn    savedFile `json:"dropin"`
	EnvFile   savedFile `json:"env_file"`
	Record    savedFile `json:"record"`
	// Files are the previous record's files as they were.
	Files []savedFile `json:"files,omitempty"`
	// Writing are the files of the apply (and of any apply that died before it): those Rollback
	// removes unless the previous configuration had them.
	Writing   []string  `json:"writing,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	By        string    `json:"by,omitempty"`
}

// firstWasActive is whether the unit was active before the first apply: the previous record
// says so, or, without one, this record's state before the apply.
func (rb applyRollback) firstWasActive() (bool, error) {
	if !rb.Record.Exists {
		return rb.WasActive, nil
	}
	rec, err := decodeAppliedRecord(rb.Record.Data)
	if err != nil {
		return false, err
	}
	return rec.WasActive, nil
}

func decodeAppliedRecord(b []byte) (AppliedRecord, error) {
	var rec AppliedRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("applied record: %w", err)
	}
	return rec, nil
}

func encodeJSON(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "  ")
	return append(b, '\n')
}

// commentText is s fit for one line of a unit file's comment.
func commentText(s string) string {
	return strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, s)
}

// RenderAppliedDropIn renders the applied configuration's drop-in of unitName for l on host
// hostName, as RenderDropIn does a sweep point's, its environment in AppliedEnvFilePath, under a
// comment saying what it is, where from, and how to undo it.
func RenderAppliedDropIn(hostName, unitName string, l Launch, rec AppliedRecord) ([]byte, error) {
	head := fmt.Sprintf("# specsweep's applied configuration of %s (`specsweep apply`): sweep %s (id %d), point %s\n"+
		"# (%s; %s), applied %s by %s. It stays across reboots; a sweep's %s overrides it while the sweep runs.\n"+
		"# The operator's unit is untouched. To undo: `specsweep restore --applied %s`, or by hand: delete this\n"+
		"# file, %s beside it and %s, then `systemctl daemon-reload` and restart the unit.\n",
		unitName, commentText(rec.Sweep), rec.SweepID, commentText(rec.Point), commentText(rec.Label), commentText(rec.Choice),
		rec.AppliedAt.UTC().Format(time.RFC3339), commentText(rec.By), DropInName, commentText(hostName),
		AppliedEnvFileName, AppliedRecordPath(unitName))
	return renderDropIn(l, dropInText{head: head, envFile: AppliedEnvFilePath(unitName)})
}

// renderAppliedEnvFile is the applied configuration's environment file (RenderEnvFile's format).
func renderAppliedEnvFile(env map[string]string) ([]byte, error) {
	return renderEnvFile("# Written by `specsweep apply` (root only): the applied configuration's environment; removed with its drop-in.\n", env)
}

// envFilesLine is one entry of `systemctl show -p EnvironmentFiles`.
var envFilesLine = regexp.MustCompile(`^EnvironmentFiles=(.*) \(ignore_errors=(yes|no)\)$`)

// parseEnvFiles reads `systemctl show -p EnvironmentFiles` (one "path (ignore_errors=no)" per
// line) as EnvironmentFile= values ("-path" when a missing file is fine), in order, each once,
// without the paths of drop.
func parseEnvFiles(out []byte, drop ...string) []string {
	var files []string
	for _, line := range strings.Split(string(out), "\n") {
		m := envFilesLine.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m == nil || m[1] == "" || slices.Contains(drop, m[1]) {
			continue
		}
		f := m[1]
		if m[2] == "yes" {
			f = "-" + f
		}
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return files
}

// sweepDropIn is a sweep point's drop-in for l (rendered as dropIn) on a host with an applied
// configuration: EnvironmentFile= accumulates across drop-ins, so the point would inherit the
// applied environment; it empties the list and names the unit's own files again (the operator's;
// the applied one and the point's own left out). Without an applied drop-in: dropIn.
func (r *Remote) sweepDropIn(ctx context.Context, l Launch, dropIn []byte) ([]byte, error) {
	if r.parent != nil { // a slot's unit is made without the applied drop-in
		return dropIn, nil
	}
	if _, err := r.conn.Stat(ctx, AppliedDropInPath(r.o.Unit)); errors.Is(err, os.ErrNotExist) {
		return dropIn, nil
	} else if err != nil {
		return nil, fmt.Errorf("sftp: cannot stat %q: %w", AppliedDropInPath(r.o.Unit), err)
	}
	out, err := r.run(ctx, "systemctl show -p EnvironmentFiles -- "+ShellQuote(r.o.Unit), 15*time.Second)
	if err != nil {
		return nil, fmt.Errorf("reading the environment files of %s: %w", r.o.Unit, err)
	}
	keep := parseEnvFiles(out.Stdout, AppliedEnvFilePath(r.o.Unit), EnvFilePath(r.o.Unit))
	return renderDropIn(l, dropInText{head: sweepDropInHead(r.o.Unit), envFile: EnvFilePath(r.o.Unit), resetEnv: true, keepEnv: keep})
}

// notSlot refuses what only the host's own unit does.
func (r *Remote) notSlot(what string) error {
	if r.parent != nil {
		return fmt.Errorf("%s on %s: slot %d of a packed host has no applied configuration (only the host's own unit %s)",
			what, r.o.Name, r.slotNo, r.parent.o.Unit)
	}
	return nil
}

// noSweep refuses while a sweep has the unit: its restore marker, or its drop-in left by hand.
func (r *Remote) noSweep(ctx context.Context, what string) error {
	for _, p := range []string{MarkerPath(r.o.Unit), DropInPath(r.o.Unit)} {
		_, err := r.conn.Stat(ctx, p)
		if err == nil {
			return fmt.Errorf("%s on %s: %w (%s is there): run `specsweep restore` first", what, r.o.Name, ErrSweepOnHost, p)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sftp: cannot stat %q: %w", p, err)
		}
	}
	return nil
}

// readRecord reads the JSON record at p into v; false when there is none.
func (r *Remote) readRecord(ctx context.Context, p string, max int64, v any) (bool, error) {
	b, err := r.conn.readFileMax(ctx, p, max)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sftp: cannot read %q: %w", p, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", p, err)
	}
	return true, nil
}

// appliedRecord is the host's applied record, nil when there is none.
func (r *Remote) appliedRecord(ctx context.Context) (*AppliedRecord, error) {
	var rec AppliedRecord
	ok, err := r.readRecord(ctx, AppliedRecordPath(r.o.Unit), maxSavedUnitFile, &rec)
	if !ok || err != nil {
		return nil, err
	}
	return &rec, nil
}

// rollbackRecord is the host's rollback record, nil when there is none.
func (r *Remote) rollbackRecord(ctx context.Context) (*applyRollback, error) {
	var rb applyRollback
	ok, err := r.readRecord(ctx, ApplyRollbackPath(r.o.Unit), maxRollback, &rb)
	if !ok || err != nil {
		return nil, err
	}
	return &rb, nil
}

// save reads p as it is now (at most max bytes), or notes it absent.
func (r *Remote) save(ctx context.Context, p string, max int64) (savedFile, error) {
	b, err := r.conn.readFileMax(ctx, p, max)
	if errors.Is(err, os.ErrNotExist) {
		return savedFile{Path: p}, nil
	}
	if err != nil {
		return savedFile{}, fmt.Errorf("sftp: cannot read %q to save it: %w", p, err)
	}
	return savedFile{Path: p, Exists: true, Data: b}, nil
}

// putBack writes f as it was (mode), or removes it when it was absent.
func (r *Remote) putBack(ctx context.Context, f savedFile, mode os.FileMode) error {
	if !f.Exists {
		if err := r.conn.Remove(ctx, f.Path); err != nil {
			return fmt.Errorf("sftp: cannot remove %q: %w", f.Path, err)
		}
		return nil
	}
	if err := r.conn.WriteFileAtomic(ctx, f.Path, f.Data, mode); err != nil {
		return fmt.Errorf("sftp: cannot write %q: %w", f.Path, err)
	}
	return nil
}

// removeAll removes the files at paths (missing ones are fine).
func (r *Remote) removeAll(ctx context.Context, paths []string) error {
	for _, p := range paths {
		if err := r.conn.Remove(ctx, p); err != nil {
			return fmt.Errorf("sftp: cannot remove %q: %w", p, err)
		}
	}
	return nil
}

func filePaths(fs []File) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Path
	}
	return out
}

// union is a's paths, then b's not in a.
func union(a []string, b ...[]string) []string {
	out := slices.Clone(a)
	for _, l := range b {
		for _, p := range l {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// without is a's paths not in b.
func without(a, b []string) []string {
	var out []string
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}

// active is whether the unit counts as running for a restore marker or a rollback record (started
// again afterwards).
func active(st State) bool {
	return st.ActiveState == "active" || st.ActiveState == "activating" || st.ActiveState == "reloading"
}

// by names this specsweep in what it records on a host.
func (r *Remote) by() string { return appliedBy() }

// appliedBy is "specsweep@HOSTNAME".
func appliedBy() string {
	if hn, err := os.Hostname(); err == nil {
		return "specsweep@" + hn
	}
	return "specsweep"
}

// saveRollback writes the rollback record before an apply of the files at writing changes
// anything: the applied drop-in, environment file, record and the record's files as they are
// now, and whether the unit is active (st). An existing record (an apply that died) is kept: it
// describes the state before that first attempt; only writing is added to it.
func (r *Remote) saveRollback(ctx context.Context, st State, writing []string) (applyRollback, error) {
	u := r.o.Unit
	if old, err := r.rollbackRecord(ctx); err != nil || old != nil {
		if err != nil {
			return applyRollback{}, err
		}
		if w := union(old.Writing, writing); len(w) > len(old.Writing) {
			old.Writing = w
			if err := r.conn.WriteFileAtomic(ctx, ApplyRollbackPath(u), encodeJSON(old), 0o600); err != nil {
				return applyRollback{}, fmt.Errorf("sftp: cannot write %q: %w", ApplyRollbackPath(u), err)
			}
		}
		return *old, nil
	}
	rb := applyRollback{Unit: u, WasActive: active(st), Writing: writing, CreatedAt: r.o.Clock.Now().UTC(), By: r.by()}
	var err error
	if rb.DropIn, err = r.save(ctx, AppliedDropInPath(u), maxSavedUnitFile); err != nil {
		return rb, err
	}
	if rb.EnvFile, err = r.save(ctx, AppliedEnvFilePath(u), maxSavedUnitFile); err != nil {
		return rb, err
	}
	if rb.Record, err = r.save(ctx, AppliedRecordPath(u), maxSavedUnitFile); err != nil {
		return rb, err
	}
	if rb.Record.Exists {
		prev, err := decodeAppliedRecord(rb.Record.Data)
		if err != nil {
			return rb, err
		}
		for _, p := range prev.Files {
			f, err := r.save(ctx, p, MaxFileSize)
			if err != nil {
				return rb, err
			}
			rb.Files = append(rb.Files, f)
		}
	}
	// Private: it holds the previous environment file.
	if err := r.conn.WriteFileAtomic(ctx, ApplyRollbackPath(u), encodeJSON(rb), 0o600); err != nil {
		return rb, fmt.Errorf("sftp: cannot write %q: %w", ApplyRollbackPath(u), err)
	}
	return rb, nil
}

// Applied implements Applier.
func (r *Remote) Applied(ctx context.Context) (*AppliedRecord, error) {
	if err := r.notSlot("applied"); err != nil {
		return nil, err
	}
	return r.appliedRecord(ctx)
}

// Apply implements Applier. Order: the rollback record first (a crash at any later step leaves a
// host Rollback and Unapply can put back), then the stop, the files, the environment file, the
// drop-in and the record, and the start.
func (r *Remote) Apply(ctx context.Context, l Launch, rec AppliedRecord) (Instance, error) {
	if err := r.notSlot("apply"); err != nil {
		return nil, err
	}
	l = l.withDefaults()
	if err := l.Validate(); err != nil {
		return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
	}
	if rec.AppliedAt.IsZero() {
		rec.AppliedAt = r.o.Clock.Now().UTC()
	}
	if rec.By == "" {
		rec.By = r.by()
	}
	rec.Files = filePaths(l.Files)
	dropIn, err := RenderAppliedDropIn(r.o.Name, r.o.Unit, l, rec)
	if err != nil {
		return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
	}
	var envFile []byte
	if len(l.Env) > 0 {
		if envFile, err = renderAppliedEnvFile(l.Env); err != nil {
			return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
		}
	}
	if err := r.noSweep(ctx, "apply"); err != nil {
		return nil, wrapUnreachable(err)
	}
	st, err := r.UnitState(ctx)
	if err != nil {
		return nil, wrapUnreachable(err)
	}
	if st.LoadState == "not-found" || st.LoadState == "" {
		return nil, fmt.Errorf("apply on %s: unit %s does not exist (install it: create_unit is for sweeps only)", r.o.Name, r.o.Unit)
	}
	rb, err := r.saveRollback(ctx, st, rec.Files)
	if err != nil {
		return nil, wrapUnreachable(err)
	}
	if rec.WasActive, err = rb.firstWasActive(); err != nil {
		return nil, err
	}
	prev, err := r.stopRunning(ctx, l)
	if err != nil {
		return nil, wrapUnreachable(err)
	}
	if err := r.gpuFree(ctx, l); err != nil {
		return nil, wrapUnreachable(err)
	}
	if err := r.installApplied(ctx, l, rec, rb, dropIn, envFile); err != nil {
		return nil, err
	}
	return r.startUnit(ctx, l, prev.Final.InvocationID, true, true)
}

// installApplied writes what makes l the applied configuration: its files (those of an earlier
// configuration it does not name removed: the rollback record holds them), its environment file,
// its drop-in and the record.
func (r *Remote) installApplied(ctx context.Context, l Launch, rec AppliedRecord, rb applyRollback, dropIn, envFile []byte) error {
	u := r.o.Unit
	var before []string
	for _, f := range rb.Files {
		before = append(before, f.Path)
	}
	if cur, err := r.appliedRecord(ctx); err != nil {
		return wrapUnreachable(err)
	} else if cur != nil {
		before = union(before, cur.Files)
	}
	if err := r.removeAll(ctx, without(union(before, rb.Writing), rec.Files)); err != nil {
		return wrapUnreachable(err)
	}
	for _, f := range l.Files {
		if err := r.conn.WriteFileAtomic(ctx, f.Path, f.Data, 0o644); err != nil {
			return filesFailed(fmt.Errorf("sftp: cannot write %q: %w", f.Path, err))
		}
	}
	// The environment first (root only), then the drop-in that names it.
	if envFile != nil {
		if err := r.conn.WriteFileAtomic(ctx, AppliedEnvFilePath(u), envFile, 0o600); err != nil {
			return wrapUnreachable(fmt.Errorf("writing the applied environment file: %w", err))
		}
	} else if err := r.conn.Remove(ctx, AppliedEnvFilePath(u)); err != nil {
		return wrapUnreachable(fmt.Errorf("sftp: cannot remove %q: %w", AppliedEnvFilePath(u), err))
	}
	if err := r.conn.WriteFileAtomic(ctx, AppliedDropInPath(u), dropIn, 0o644); err != nil {
		return wrapUnreachable(fmt.Errorf("writing the applied drop-in: %w", err))
	}
	if err := r.conn.WriteFileAtomic(ctx, AppliedRecordPath(u), encodeJSON(rec), 0o644); err != nil {
		return wrapUnreachable(fmt.Errorf("writing the applied record: %w", err))
	}
	return nil
}

// Rollback implements Applier.
func (r *Remote) Rollback(ctx context.Context) error {
	if err := r.notSlot("rollback"); err != nil {
		return err
	}
	rb, err := r.rollbackRecord(ctx)
	if err != nil || rb == nil {
		return err
	}
	if err := r.noSweep(ctx, "rollback"); err != nil {
		return err
	}
	if _, err := r.stopRunning(ctx, Launch{}.withDefaults()); err != nil {
		return err
	}
	// The files of the apply (and its record's) the previous configuration did not have, then the
	// previous ones as they were.
	var prevFiles []string
	for _, f := range rb.Files {
		prevFiles = append(prevFiles, f.Path)
	}
	written := rb.Writing
	if cur, err := r.appliedRecord(ctx); err != nil {
		return err
	} else if cur != nil {
		written = union(written, cur.Files)
	}
	if err := r.removeAll(ctx, without(written, prevFiles)); err != nil {
		return err
	}
	for _, f := range rb.Files {
		if err := r.putBack(ctx, f, 0o644); err != nil {
			return err
		}
	}
	// The environment file before the drop-in that names it; the record last.
	if err := r.putBack(ctx, rb.EnvFile, 0o600); err != nil {
		return err
	}
	if err := r.putBack(ctx, rb.DropIn, 0o644); err != nil {
		return err
	}
	if err := r.putBack(ctx, rb.Record, 0o644); err != nil {
		return err
	}
	if err := r.reloadAndStart(ctx, rb.WasActive); err != nil {
		return err
	}
	if err := r.conn.Remove(ctx, ApplyRollbackPath(r.o.Unit)); err != nil {
		return fmt.Errorf("sftp: cannot remove %q: %w", ApplyRollbackPath(r.o.Unit), err)
	}
	return nil
}

// reloadAndStart removes <unit>.d when nothing is left in it, reloads systemd, forgets a failed
// state and, with start, starts the unit (through the unit's transport: systemctl or D-Bus).
func (r *Remote) reloadAndStart(ctx context.Context, start bool) error {
	// rmdir fails on a directory with files in it (the operator's drop-ins): fine.
	if _, err := r.run(ctx, "rmdir /etc/systemd/system/"+ShellQuote(r.o.Unit+".d")+" 2>/dev/null; true", 15*time.Second); err != nil {
		return err
	}
	if start {
		if _, err := r.unit.start(ctx, true, true); err != nil {
			return fmt.Errorf("starting %s: %w", r.o.Unit, err)
		}
		return nil
	}
	if err := r.unit.reload(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	r.unit.resetFailed(ctx)
	return nil
}

// Commit implements Applier.
func (r *Remote) Commit(ctx context.Context) error {
	if err := r.notSlot("commit"); err != nil {
		return err
	}
	if err := r.conn.Remove(ctx, ApplyRollbackPath(r.o.Unit)); err != nil {
		return fmt.Errorf("sftp: cannot remove %q: %w", ApplyRollbackPath(r.o.Unit), err)
	}
	return nil
}

// Unapply implements Applier. The records go last: a crash before leaves what the next Unapply
// needs (which files, whether the unit ran before the first apply).
func (r *Remote) Unapply(ctx context.Context) error {
	if err := r.notSlot("unapply"); err != nil {
		return err
	}
	if err := r.noSweep(ctx, "unapply"); err != nil {
		return err
	}
	u := r.o.Unit
	rec, err := r.appliedRecord(ctx)
	if err != nil {
		return err
	}
	rb, err := r.rollbackRecord(ctx)
	if err != nil {
		return err
	}
	var files []string
	var wasActive, known bool
	if rec != nil {
		files, wasActive, known = rec.Files, rec.WasActive, true
	}
	if rb != nil {
		// The state before the first attempt, when an apply died or is not committed yet.
		if wasActive, err = rb.firstWasActive(); err != nil {
			return err
		}
		known = true
		files = union(files, rb.Writing)
		for _, f := range rb.Files {
			files = union(files, []string{f.Path})
		}
	}
	if !known {
		// No record: nothing was applied, unless a drop-in was left by hand; then the unit runs
		// on as the operator's if it ran.
		_, derr := r.conn.Stat(ctx, AppliedDropInPath(u))
		_, eerr := r.conn.Stat(ctx, AppliedEnvFilePath(u))
		switch {
		case errors.Is(derr, os.ErrNotExist) && errors.Is(eerr, os.ErrNotExist):
			return nil
		case derr != nil && !errors.Is(derr, os.ErrNotExist):
			return fmt.Errorf("sftp: cannot stat %q: %w", AppliedDropInPath(u), derr)
		}
		st, err := r.UnitState(ctx)
		if err != nil {
			return err
		}
		wasActive = st.Running()
	}
	if _, err := r.stopRunning(ctx, Launch{}.withDefaults()); err != nil {
		return err
	}
	if err := r.removeAll(ctx, append(files, AppliedDropInPath(u), AppliedEnvFilePath(u))); err != nil {
		return err
	}
	if err := r.reloadAndStart(ctx, wasActive); err != nil {
		return err
	}
	if err := r.removeAll(ctx, []string{AppliedRecordPath(u), ApplyRollbackPath(u)}); err != nil {
		return err
	}
	r.mu.Lock()
	r.current, r.onHost = nil, sweepFiles{}
	r.mu.Unlock()
	return nil
}

// The spec's ssh host applies through its connection (the CLI asks Open's driver for Applier).

func (d *openSSH) Applied(ctx context.Context) (*AppliedRecord, error) {
	r, err := d.conn.get(ctx)
	if err != nil {
		return nil, err
	}
	return r.Applied(ctx)
}

func (d *openSSH) Apply(ctx context.Context, l Launch, rec AppliedRecord) (Instance, error) {
	r, err := d.conn.get(ctx)
	if err != nil {
		return nil, err
	}
	return r.Apply(ctx, l, rec)
}

func (d *openSSH) Rollback(ctx context.Context) error {
	r, err := d.conn.get(ctx)
	if err != nil {
		return err
	}
	return r.Rollback(ctx)
}

func (d *openSSH) Commit(ctx context.Context) error {
	r, err := d.conn.get(ctx)
	if err != nil {
		return err
	}
	return r.Commit(ctx)
}

func (d *openSSH) Unapply(ctx context.Context) error {
	r, err := d.conn.get(ctx)
	if err != nil {
		return err
	}
	return r.Unapply(ctx)
}
