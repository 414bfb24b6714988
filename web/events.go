package web

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/specsweep/specsweep/store"
)

// The event stream, GET /api/events (Server-Sent Events). One goroutine (hub.run) reads the store
// for news, however many pages are open: a run recorded (event "run"), an event logged ("log"), a
// sweep's state or counts changed ("sweep"); the daemon's activity updates arrive at once
// ("activity"). Every message carries the id "RUN.EVENT" (the last run and event ids seen), so a
// browser that reconnects with Last-Event-ID gets the runs and events it missed before the live
// ones; the page also re-reads everything when the stream opens.

// streamStore is what the hub reads (*store.DB satisfies it).
type streamStore interface {
	ListSweeps(ctx context.Context, states ...store.SweepState) ([]store.Sweep, error)
	RunsAfter(ctx context.Context, afterID int64, limit int) ([]store.RunEvent, error)
	EventsAfter(ctx context.Context, afterID int64, limit int) ([]store.LoggedEvent, error)
	LastIDs(ctx context.Context) (runID, eventID int64, err error)
}

// catchUp bounds what one poll or one reconnect sends of runs and events.
const catchUp = 1000

type message struct {
	kind string
	data any
	run  int64 // the ids after this message
	ev   int64
}

type subscriber struct {
	ch chan message
}

type hub struct {
	st  streamStore
	log *slog.Logger

	mu      sync.Mutex
	subs    map[*subscriber]bool
	run, ev int64            // the last ids published
	sweeps  map[int64]string // a sweep's signature (state and counts) as last published
	stale   bool             // sweeps went unread while no page listened: note them afresh, quietly
	started chan struct{}    // closed once the first poll set the ids
}

func newHub(st streamStore, log *slog.Logger) *hub {
	return &hub{st: st, log: log, subs: map[*subscriber]bool{}, sweeps: map[int64]string{}, started: make(chan struct{})}
}

func (h *hub) subscribe() *subscriber {
	s := &subscriber{ch: make(chan message, 256)}
	h.mu.Lock()
	h.subs[s] = true
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// publish sends m to every subscriber, with the ids as they are now. A subscriber that cannot keep
// up is dropped (its channel closed): its page reconnects and catches up.
func (h *hub) publish(m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked(m)
}

func (h *hub) publishLocked(m message) {
	if m.run < h.run {
		m.run = h.run
	}
	if m.ev < h.ev {
		m.ev = h.ev
	}
	for s := range h.subs {
		select {
		case s.ch <- m:
		default:
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// ids are the last run and event ids published.
func (h *hub) ids() (int64, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.run, h.ev
}

func (h *hub) follow(ctx context.Context, every time.Duration) {
	first := true
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		h.mu.Lock()
		idle := len(h.subs) == 0
		h.mu.Unlock()
		if err := h.poll(ctx, first, idle); err != nil && ctx.Err() == nil {
			h.log.Warn("dashboard: reading the store for the event stream", "err", err)
		} else if first && err == nil {
			first = false
			close(h.started)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll publishes what is new in the store; the first poll only notes where the store stands, and
// so does a poll while no page listens (two MAX lookups: a daemon nobody watches reads no sweeps,
// runs or events, and a page that opens still gets current ids).
func (h *hub) poll(ctx context.Context, first, idle bool) error {
	if first || idle {
		run, ev, err := h.st.LastIDs(ctx)
		if err != nil {
			return err
		}
		h.mu.Lock()
		// A page that subscribed since idle was read took the ids as they were for its hello:
		// moving them to the store's newest now would skip what was logged in between (the next
		// poll publishes from them). It has rebased the sweeps itself.
		if first || len(h.subs) == 0 {
			h.run, h.ev = run, ev
		}
		h.stale = h.stale || (idle && len(h.subs) == 0)
		h.mu.Unlock()
		if idle {
			return nil
		}
	}
	sws, err := h.st.ListSweeps(ctx)
	if err != nil {
		return err
	}
	run, ev := h.ids()
	runs, err := h.st.RunsAfter(ctx, run, catchUp)
	if err != nil {
		return err
	}
	evs, err := h.st.EventsAfter(ctx, ev, catchUp)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	quiet := first || h.stale
	h.stale = false
	for _, r := range runs {
		h.run = r.ID
		h.publishLocked(message{kind: "run", data: runJSON(r)})
	}
	for _, e := range evs {
		h.ev = e.ID
		h.publishLocked(message{kind: "log", data: eventJSON(e)})
	}
	seen := map[int64]bool{}
	for _, sw := range sws {
		seen[sw.ID] = true
		sig := signature(sw)
		if h.sweeps[sw.ID] == sig {
			continue
		}
		h.sweeps[sw.ID] = sig
		if !quiet {
			h.publishLocked(message{kind: "sweep", data: map[string]any{"id": sw.ID, "name": sw.Name, "state": sw.State}})
		}
	}
	for id := range h.sweeps {
		if !seen[id] {
			delete(h.sweeps, id)
		}
	}
	return nil
}

// signature is what of a sweep a change is announced for: its state and counts.
func signature(sw store.Sweep) string {
	return fmt.Sprintf("%s %d %d %d %d %d %d %d", sw.State, sw.Done, sw.Failed, sw.Pending, sw.Running, sw.Cancelled, sw.Waiting, sw.Pruned)
}

// rebase notes the sweeps as they are now if they went unread while no page listened, so that a page
// subscribing now hears of every change after its hello.
func (h *hub) rebase(ctx context.Context) error {
	h.mu.Lock()
	stale := h.stale
	h.mu.Unlock()
	if !stale {
		return nil
	}
	sws, err := h.st.ListSweeps(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.sweeps)
	for _, sw := range sws {
		h.sweeps[sw.ID] = signature(sw)
	}
	h.stale = false
	return nil
}

func runJSON(r store.RunEvent) map[string]any {
	return map[string]any{"id": r.ID, "sweep": r.SweepID, "point": r.PointID, "concurrency": r.Concurrency,
		"repeat": r.Repeat, "status": r.Status, "output_tok_s": r.OutputTokS, "at": r.At.UnixMilli()}
}

func eventJSON(e store.LoggedEvent) map[string]any {
	return map[string]any{"id": e.ID, "sweep": e.SweepID, "point": e.PointID, "host": e.Host, "kind": e.Kind,
		"detail": e.Detail, "at": e.At.UnixMilli()}
}

// parseLastID reads "RUN.EVENT".
func parseLastID(s string) (run, ev int64, ok bool) {
	a, b, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	run, err1 := strconv.ParseInt(a, 10, 64)
	ev, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || run < 0 || ev < 0 {
		return 0, 0, false
	}
	return run, ev, true
}

// MaxStreams is how many event streams one credential (a session, or the token) may hold open: a
// browser needs one (its tabs share it through the SharedWorker), a browser without SharedWorker one
// per tab, and a reconnect may overlap the stream it replaces until the daemon sees that one close.
// Eight covers those; the 2000 streams one session held before cost a goroutine and a buffer each.
const MaxStreams = 8

// openStream counts a stream of key, or refuses the one beyond MaxStreams; done uncounts it.
func (s *Server) openStream(key string) (done func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[key] >= MaxStreams {
		return nil, false
	}
	s.streams[key]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.streams[key]--; s.streams[key] <= 0 {
			delete(s.streams, key)
		}
	}, true
}

// events streams the hub's messages to one page, until the page goes or its session ends (logout
// and revoke close it at once; expiry at the session's deadline).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := s.hub
	// The API admitted r with a session's header or the token; a session's stream ends with it.
	key, ended, isSession := s.c.Sessions.streamOf(r)
	if !isSession {
		key = "token"
	}
	done, ok := s.openStream(key)
	if !ok {
		s.refusals.Refused("dashboard: event stream refused", r.RemoteAddr, r.Method, r.URL.Path, http.StatusTooManyRequests, "too many streams")
		jsonError(w, http.StatusTooManyRequests, fmt.Sprintf("this credential holds %d event streams already (the most); close some: the tabs of one browser share one", MaxStreams))
		return
	}
	defer done()
	var expiry <-chan time.Time // a session's deadline (nil for the token: never)
	var timer *time.Timer
	if isSession {
		timer = time.NewTimer(time.Until(s.c.Sessions.deadline(r)))
		defer timer.Stop()
		expiry = timer.C
	}
	select {
	case <-h.started:
	case <-r.Context().Done():
		return
	case <-time.After(5 * time.Second):
		http.Error(w, "the event stream is not ready: the store cannot be read", http.StatusServiceUnavailable)
		return
	}
	sub := h.subscribe()
	defer h.unsubscribe(sub)
	if err := h.rebase(r.Context()); err != nil {
		http.Error(w, "reading the sweeps: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(m message) error {
		// The API server's write timeout is for requests, not for a stream: each write gets its own.
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		b, err := json.Marshal(m.data)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "id: %d.%d\nevent: %s\ndata: %s\n\n", m.run, m.ev, m.kind, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	run, ev := h.ids()
	// A reconnect: what was missed first, from the store.
	if lrun, lev, ok := parseLastID(r.Header.Get("Last-Event-ID")); ok && (lrun < run || lev < ev) {
		runs, err := s.c.Store.RunsAfter(r.Context(), lrun, catchUp)
		if err == nil {
			for _, x := range runs {
				if x.ID > run {
					break
				}
				if send(message{kind: "run", data: runJSON(x), run: x.ID, ev: lev}) != nil {
					return
				}
			}
		}
		evs, err := s.c.Store.EventsAfter(r.Context(), lev, catchUp)
		if err == nil {
			for _, x := range evs {
				if x.ID > ev {
					break
				}
				if send(message{kind: "log", data: eventJSON(x), run: run, ev: x.ID}) != nil {
					return
				}
			}
		}
	}
	if send(message{kind: "hello", data: map[string]any{"run": run, "event": ev}, run: run, ev: ev}) != nil {
		return
	}
	ping := time.NewTicker(s.c.Keepalive)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ended:
			return // logged out or revoked
		case <-expiry:
			if !s.c.Sessions.alive(r) {
				return
			}
			timer.Reset(time.Until(s.c.Sessions.deadline(r))) // used since: its new deadline
		case m, ok := <-sub.ch:
			if !ok {
				return // too slow: the page reconnects
			}
			if send(m) != nil {
				return
			}
		case <-ping.C:
			if isSession && !s.c.Sessions.alive(r) {
				return // expired (the clock moved past the deadline's timer)
			}
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
