package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// progress shows a running sweep: on a terminal a live block (one line per host, then counts and
// ETA) redrawn at each update; otherwise nothing beyond the log lines.
type progress struct {
	w   io.Writer
	tty bool

	mu     sync.Mutex
	hosts  []string
	last   map[string]orchestrator.Update
	total  int
	done   int
	failed int
	// A searched sweep: pruned counts the points the search decided not to run, read again from
	// the store (st, id) as the sweep goes, since the search decides between points.
	searched   bool
	pruned     int
	st         *store.DB
	id         int64
	startedAt  map[string]time.Time // point start per host
	durations  []time.Duration
	drawnLines int
}

func newProgress(w io.Writer, tty bool, spec *sweep.Spec, hosts []sweep.Host) *progress {
	p := &progress{w: w, tty: tty, last: map[string]orchestrator.Update{}, total: len(spec.Plan().Points),
		startedAt: map[string]time.Time{}, searched: spec.Searched()}
	for _, h := range hosts {
		p.hosts = append(p.hosts, h.Name)
	}
	return p
}

// load takes the counts of a resumed sweep from the store.
func (p *progress) load(ctx context.Context, st *store.DB, id int64) error {
	sw, err := st.Sweep(ctx, id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.done, p.failed, p.pruned = sw.Points, sw.Done, sw.Failed, sw.Pruned
	p.st, p.id = st, id
	return nil
}

// refresh reads the pruned points of a searched sweep again (the search prunes between points).
func (p *progress) refresh() {
	if !p.searched || p.st == nil {
		return
	}
	if sw, err := p.st.Sweep(context.Background(), p.id); err == nil {
		p.pruned = sw.Pruned
	}
}

func (p *progress) printf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, format, a...)
	p.draw()
}

func (p *progress) update(u orchestrator.Update) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch u.Phase {
	case orchestrator.PhaseStarting:
		p.startedAt[u.Host] = u.At
	case orchestrator.PhaseDone, orchestrator.PhaseFailed:
		if u.Phase == orchestrator.PhaseDone {
			p.done++
		} else {
			p.failed++
		}
		if t, ok := p.startedAt[u.Host]; ok {
			p.durations = append(p.durations, u.At.Sub(t))
			delete(p.startedAt, u.Host)
		}
	}
	p.last[u.Host] = u
	if !p.tty {
		return
	}
	switch u.Phase {
	case orchestrator.PhaseStarting, orchestrator.PhaseDone, orchestrator.PhaseFailed, orchestrator.PhaseIdle:
		p.refresh()
	}
	p.clear()
	if u.Phase == orchestrator.PhaseDone || u.Phase == orchestrator.PhaseFailed {
		// Keep a permanent line per finished point above the live block.
		mark := "done"
		if u.Phase == orchestrator.PhaseFailed {
			mark = "FAILED " + u.Detail
		}
		fmt.Fprintf(p.w, "%-12s %-32s %s\n", u.Host, u.Label, mark)
	}
	p.draw()
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

// clear erases the live block (terminal only).
func (p *progress) clear() {
	if !p.tty || p.drawnLines == 0 {
		return
	}
	fmt.Fprintf(p.w, "\x1b[%dA", p.drawnLines)
	for range p.drawnLines {
		fmt.Fprint(p.w, "\x1b[2K\n")
	}
	fmt.Fprintf(p.w, "\x1b[%dA", p.drawnLines)
	p.drawnLines = 0
}

func (p *progress) draw() {
	if !p.tty {
		return
	}
	var b strings.Builder
	for _, h := range p.hosts {
		u, ok := p.last[h]
		what := "waiting"
		if ok {
			what = hostLine(u)
		}
		fmt.Fprintf(&b, "  %-12s %s\n", h, what)
	}
	pending := p.total - p.done - p.failed - p.pruned
	if p.searched {
		// Points still waiting for the search's decision may be pruned: an upper bound.
		fmt.Fprintf(&b, "  %d/%d points done, %d failed, %d pruned by the search, at most %d to go%s\n",
			p.done, p.total, p.failed, p.pruned, pending, p.eta(pending))
	} else {
		fmt.Fprintf(&b, "  %d/%d points done, %d failed, %d to go%s\n", p.done, p.total, p.failed, pending, p.eta(pending))
	}
	fmt.Fprint(p.w, b.String())
	p.drawnLines = len(p.hosts) + 1
}

// hostLine is what a host does now: its point, the phase and the detail, the phase said once when
// the detail starts with it ("eagle3 s=3 k=1 n=4 tp=4 ready after 1.2 s", not "ready ready after").
func hostLine(u orchestrator.Update) string {
	phase := string(u.Phase)
	if phase != "" && strings.HasPrefix(u.Detail, phase) {
		phase = ""
	}
	return strings.Join(strings.Fields(u.Label+" "+phase+" "+u.Detail), " ")
}

// eta estimates the remaining time from the measured point durations, spread over the hosts.
func (p *progress) eta(pending int) string {
	if len(p.durations) == 0 || pending <= 0 {
		return ""
	}
	var sum time.Duration
	for _, d := range p.durations {
		sum += d
	}
	mean := sum / time.Duration(len(p.durations))
	eta := mean * time.Duration(pending) / time.Duration(max(1, len(p.hosts)))
	if p.searched {
		return ", ETA at most " + roundDuration(eta)
	}
	return ", ETA " + roundDuration(eta)
}
