// Packing on an ssh host (docs/spec.md, hosts[].pack): each concurrent server runs in a unit of
// its own, a copy of the operator's unit (its [Service] settings: User, WorkingDirectory,
// Environment, limits) with specsweep's drop-in beside it, as for the operator's unit alone.

package hostctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SlotUnit is the unit slot k of a packing host runs in, for the operator's unit unitName:
// specsweep-sglang-slot3.service for sglang.service. An @ becomes - (the name must not read as an
// instance of a template unit).
func SlotUnit(unitName string, k int) string {
	return slotPrefix(unitName) + strconv.Itoa(k) + ".service"
}

func slotPrefix(unitName string) string {
	base := strings.ReplaceAll(strings.TrimSuffix(unitName, ".service"), "@", "-")
	return "specsweep-" + base + "-slot"
}

// slotGlobs are shell words matching every file of every slot of unitName on a host: the markers,
// the unit files and what is in their drop-in directories.
func slotGlobs(unitName string) []string {
	p := slotPrefix(unitName)
	return []string{
		ShellQuote(MarkerDir+"/restore-"+p) + "*" + ShellQuote(".service.json"),
		ShellQuote("/etc/systemd/system/"+p) + "*" + ShellQuote(".service"),
		ShellQuote("/etc/systemd/system/"+p) + "*" + ShellQuote(".service.d") + "/*",
	}
}

// Slot is the handle of the k-th concurrent server of the host (k from 0): its own unit
// (SlotUnit), over the host's connection. Close it before the host; it does not close the
// connection. Slots drive their unit with systemctl even when the host uses D-Bus.
func (r *Remote) Slot(k int) *Remote {
	if r.parent != nil {
		return r.parent.Slot(k)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.slots[k]; s != nil {
		return s
	}
	o := r.o
	o.Unit = SlotUnit(r.o.Unit, k)
	// A slot is driven as its host is: over D-Bus when the host's unit is (a systemctl process
	// for every command of every slot was most of a packed sweep's processes on the host).
	var u unitControl = &systemctlUnit{conn: r.conn, unit: o.Unit}
	if _, bus := r.unit.(*dbusUnit); bus {
		u = slotDBusUnit(r.conn, o.Unit)
	}
	s := &Remote{o: o, conn: r.conn, unit: u, parent: r, slotNo: k}
	if r.slots == nil {
		r.slots = map[int]*Remote{}
	}
	r.slots[k] = s
	return s
}

// slotMarkers lists the slot numbers with a restore marker on the host (this sweep's, or left by
// one that died).
func (r *Remote) slotMarkers(ctx context.Context) ([]int, error) {
	p := "restore-" + slotPrefix(r.o.Unit)
	out, err := r.run(ctx, "cd "+ShellQuote(MarkerDir)+" 2>/dev/null || exit 0; for f in "+ShellQuote(p)+"*"+ShellQuote(".service.json")+
		"; do [ -e \"$f\" ] && echo \"$f\"; done; true", 15*time.Second)
	if err != nil {
		return nil, fmt.Errorf("listing the slot markers of %s: %w", r.o.Unit, err)
	}
	var ks []int
	for _, l := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
		num, ok := strings.CutSuffix(strings.TrimPrefix(l, p), ".service.json")
		if k, err := strconv.Atoi(num); ok && err == nil && k >= 0 && strings.HasPrefix(l, p) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks, nil
}

// stopLeftoverSlots stops the servers of the slots an earlier sweep left running (a kill -9 of
// specsweep leaves them, on GPUs this sweep will want), once per connection of the host.
func (r *Remote) stopLeftoverSlots(ctx context.Context) (stopped bool, err error) {
	if r.slotsSwept {
		return false, nil
	}
	ks, err := r.slotMarkers(ctx)
	if err != nil {
		return false, err
	}
	for _, k := range ks {
		s := r.Slot(k)
		res, err := s.stopRunning(ctx, Launch{}.withDefaults())
		if err != nil {
			return stopped, fmt.Errorf("stopping %s left by an earlier sweep: %w", s.o.Unit, err)
		}
		if !res.Already {
			stopped = true
			if r.o.Event != nil {
				r.o.Event("stopped_leftover", fmt.Sprintf("%s of an earlier sweep was still running: stopped in %v", s.o.Unit, res.Duration.Round(time.Millisecond)))
			}
		}
	}
	r.slotsSwept = true
	return stopped, nil
}

// prepareSlots readies the host for its slots, once: the operator's marker written, the servers
// of an earlier sweep's slots and the operator's own server stopped (the slots use its GPUs), and
// the text of the slot units read from the operator's unit, with the mode their file gets.
func (r *Remote) prepareSlots(ctx context.Context) ([]byte, os.FileMode, error) {
	r.prepMu.Lock()
	defer r.prepMu.Unlock()
	if r.slotText != nil {
		return r.slotText, r.slotMode, nil
	}
	if _, err := r.ensureMarker(ctx); err != nil {
		return nil, 0, err
	}
	if _, err := r.stopLeftoverSlots(ctx); err != nil {
		return nil, 0, err
	}
	if _, err := r.stopRunning(ctx, Launch{}.withDefaults()); err != nil {
		return nil, 0, fmt.Errorf("stopping %s for the packed sweep: %w", r.o.Unit, err)
	}
	text, mode, err := r.slotUnitText(ctx)
	if err != nil {
		return nil, 0, err
	}
	r.slotText, r.slotMode = text, mode
	return text, mode, nil
}

// slotUnitMode is the mode of a slot's unit file made from files of these modes: readable by all
// (0644) only if every one of them is, else root's alone (0600). A setting the operator kept from
// other users (a token in a 0600 drop-in, a 0640 file of a group) is never readable by more users
// in the copy than in the original.
func slotUnitMode(modes []os.FileMode) os.FileMode {
	for _, m := range modes {
		if m.Perm()&0o004 == 0 {
			return 0o600
		}
	}
	return 0o644
}

// slotUnitText is the unit file of a slot and its mode (slotUnitMode): the operator's unit file and
// its drop-ins (but specsweep's own: a sweep's and the applied one), in systemd's order, one after
// the other (later settings override earlier ones in one file as in drop-ins, and an empty
// ExecStart= still resets the list).
func (r *Remote) slotUnitText(ctx context.Context) ([]byte, os.FileMode, error) {
	out, err := r.run(ctx, "systemctl show -p FragmentPath,DropInPaths -- "+ShellQuote(r.o.Unit), 15*time.Second)
	if err != nil {
		return nil, 0, fmt.Errorf("reading where %s is defined: %w", r.o.Unit, err)
	}
	var files []string
	for _, l := range strings.Split(string(out.Stdout), "\n") {
		if v, ok := strings.CutPrefix(l, "FragmentPath="); ok && v != "" {
			files = append([]string{v}, files...)
		}
		if v, ok := strings.CutPrefix(l, "DropInPaths="); ok {
			for _, f := range strings.Fields(v) {
				// specsweep's own drop-ins: the sweep's, and the applied configuration (the slot
				// runs a point, with the operator's settings only).
				if b := path.Base(f); b != DropInName && b != AppliedDropInName {
					files = append(files, f)
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Made by specsweep for one slot of a packed sweep (hosts[].pack) from %s as it was when the sweep\n"+
		"# began; its drop-in sets ExecStart= and CUDA_VISIBLE_DEVICES. Removed when the sweep ends, on SIGTERM,\n"+
		"# and by `specsweep restore SPEC`.\n", r.o.Unit)
	if len(files) == 0 || !strings.HasPrefix(files[0], "/") {
		// No unit file (create_unit): the managed unit's settings.
		b.Write(ManagedUnit(r.o.Unit))
		return []byte(b.String()), 0o644, nil
	}
	var modes []os.FileMode
	for _, f := range files {
		body, mode, err := r.conn.ReadFileMode(ctx, f)
		if errors.Is(err, os.ErrNotExist) && f != files[0] {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("reading %s to copy its settings: %w", f, err)
		}
		modes = append(modes, mode)
		fmt.Fprintf(&b, "\n# from %s\n", f)
		b.Write(body)
		if len(body) > 0 && body[len(body)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return []byte(b.String()), slotUnitMode(modes), nil
}

// ensureSlot readies a slot's unit for a start: the host prepared, the slot's marker (restore
// finds the slot by it) and then its unit file.
func (r *Remote) ensureSlot(ctx context.Context) error {
	text, mode, err := r.parent.prepareSlots(ctx)
	if err != nil {
		return err
	}
	mp := MarkerPath(r.o.Unit)
	if _, err := r.conn.Stat(ctx, mp); errors.Is(err, os.ErrNotExist) {
		m := Marker{Unit: r.o.Unit, UnitCreated: true, SlotOf: r.parent.o.Unit, DropIn: DropInPath(r.o.Unit),
			CreatedAt: r.o.Clock.Now().UTC(), By: "specsweep"}
		if err := r.conn.WriteFileAtomic(ctx, mp, m.Encode(), 0o644); err != nil {
			return fmt.Errorf("writing the restore marker of %s: %w", r.o.Unit, err)
		}
	} else if err != nil {
		return err
	}
	up := "/etc/systemd/system/" + r.o.Unit
	// Rewritten unless it is already this text with this mode (a file left 0644 by an earlier
	// version is made private).
	if cur, m, err := r.conn.ReadFileMode(ctx, up); err == nil && string(cur) == string(text) && m.Perm() == mode {
		return nil
	}
	if err := r.conn.WriteFileAtomic(ctx, up, text, mode); err != nil {
		return fmt.Errorf("writing %s: %w", up, err)
	}
	return nil
}

// restoreSlots restores every slot of the host that has a marker: its server stopped, its unit
// and drop-in removed.
func (r *Remote) restoreSlots(ctx context.Context) error {
	ks, err := r.slotMarkers(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range ks {
		if err := r.Slot(k).Restore(ctx); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", SlotUnit(r.o.Unit, k), err))
		}
	}
	r.prepMu.Lock()
	r.slotText, r.slotMode = nil, 0
	r.prepMu.Unlock()
	return errors.Join(errs...)
}

// slotLeftovers lists the files of every slot on the host.
func (r *Remote) slotLeftovers(ctx context.Context) ([]string, error) {
	out, err := r.run(ctx, "for f in "+strings.Join(slotGlobs(r.o.Unit), " ")+"; do [ -e \"$f\" ] && echo \"$f\"; done; true", 15*time.Second)
	if err != nil {
		return nil, fmt.Errorf("listing the slot units of %s on %s: %w", r.o.Unit, r.o.Name, err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
		if l != "" {
			files = append(files, l)
		}
	}
	return files, nil
}
