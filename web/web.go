// Package web is the daemon's live dashboard (docs/daemon.md, "Dashboard"): one self-contained page
// (embedded, no CDN), the HTML report and the export of a sweep made on demand from the store, the
// report's tables as JSON, and a Server-Sent Events stream of what changes. The daemon's API server
// serves these routes under its own Host, Origin and credential checks; Sessions are the
// dashboard's browser credential.
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/specsweep/specsweep/internal/refusals"
	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

//go:embed static
var static embed.FS

// Config wires the dashboard.
type Config struct {
	Store    *store.DB
	Sessions *Sessions
	Log      *slog.Logger
	// Poll is how often the event stream reads the store for news (runs, events, sweep states,
	// also those of `specsweep run` beside the daemon). Default 1 s.
	Poll time.Duration
	// Keepalive is the stream's comment interval (proxies and laptops drop silent streams). Default 15 s.
	Keepalive time.Duration
}

// Route is one path of the dashboard, as the daemon's API mounts it (api.Route): Open
// needs no credential, Page answers a refusal with a login page.
type Route struct {
	Pattern string
	Handler http.Handler
	Open    bool
	Page    bool
}

// Server serves the dashboard.
type Server struct {
	c   Config
	hub *hub
	// refusals logs refused logins and streams without letting a client flood the log.
	refusals *refusals.Log

	mu      sync.Mutex
	streams map[string]int // open event streams by credential
	// repeats caches the repeats each sweep's spec plans per level (a spec never changes; parsing
	// it costs about a millisecond, at each run of a watched sweep otherwise).
	repeats map[int64]int
}

// New makes the dashboard; Run must run for the event stream to see the store's news.
func New(c Config) (*Server, error) {
	if c.Store == nil || c.Sessions == nil {
		return nil, errors.New("web: the dashboard needs a store and sessions")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.Keepalive <= 0 {
		c.Keepalive = 15 * time.Second
	}
	return &Server{c: c, hub: newHub(c.Store, c.Log), streams: map[string]int{}, repeats: map[int64]int{}, refusals: refusals.New(c.Log, nil, nil)}, nil
}

// Run follows the store for the event stream until ctx ends.
func (s *Server) Run(ctx context.Context) { s.hub.follow(ctx, s.c.Poll) }

// Notify passes what a host (or a slot) of a running sweep does now to the open streams at once
// (the daemon's updates; key is the activity's, activity its JSON).
func (s *Server) Notify(sweepID int64, key string, activity any) {
	s.hub.publish(message{kind: "activity", data: map[string]any{"sweep": sweepID, "key": key, "activity": activity}})
}

// Routes are the dashboard's paths. The page itself (HTML, script, style) holds no data and is
// open; every path with data needs the session header, a ticket or the token.
func (s *Server) Routes() []Route {
	assets, _ := fs.Sub(static, "static")
	files := http.FileServerFS(assets)
	return []Route{
		{Pattern: "GET /{$}", Handler: http.HandlerFunc(s.index), Open: true},
		{Pattern: "GET /static/{file}", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if path.Ext(r.URL.Path) == ".html" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Cache-Control", "no-cache")
			http.StripPrefix("/static/", files).ServeHTTP(w, r)
		}), Open: true},
		{Pattern: "POST /api/sessions", Handler: http.HandlerFunc(s.login), Open: true},
		{Pattern: "POST /api/logout", Handler: http.HandlerFunc(s.logout)},
		{Pattern: "POST /api/tickets", Handler: http.HandlerFunc(s.ticket)},
		{Pattern: "GET /sweeps/{id}/report", Handler: http.HandlerFunc(s.report), Page: true},
		{Pattern: "GET /sweeps/{id}/export", Handler: http.HandlerFunc(s.export), Page: true},
		{Pattern: "GET /api/sweeps/{id}/results", Handler: http.HandlerFunc(s.results)},
		{Pattern: "GET /api/events", Handler: http.HandlerFunc(s.events)},
	}
}

// security headers of every page: nothing from elsewhere, no framing.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// index is the page: the same bytes for everyone (it reads its data with its session).
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	b, err := static.ReadFile("static/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

// jsonError answers an error as the API does.
func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// readJSON reads a small JSON body into v. The body must say application/json: a type a page of
// another origin may send without a CORS preflight (text/plain, forms) is refused.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		jsonError(w, http.StatusUnsupportedMediaType, "send Content-Type: application/json")
		return false
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(v); err != nil {
		jsonError(w, http.StatusBadRequest, "reading the JSON body: "+err.Error())
		return false
	}
	return true
}

// SessionJSON is POST /api/sessions: the session's secret, for the SessionHeader of each request.
type SessionJSON struct {
	Secret string `json:"secret"`
	Header string `json:"header"`
}

// login trades a one-time login code (POST {"code": ...}, which the page read from its URL's
// fragment) for a session secret.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Code string `json:"code"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	sec, ok := s.c.Sessions.redeem(in.Code)
	if !ok {
		s.refusals.Refused("dashboard login refused", r.RemoteAddr, r.Method, r.URL.Path, http.StatusUnauthorized, "unknown, used or expired code")
		jsonError(w, http.StatusUnauthorized, "this login URL was used already or has expired (a URL works once, for 15 minutes): make a new one on the daemon's machine with `specsweep dashboard`")
		return
	}
	s.c.Log.Info("dashboard login", "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(SessionJSON{Secret: sec, Header: SessionHeader})
}

// logout ends the session of the request's header (its streams close at once).
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !s.c.Sessions.logout(r) {
		jsonError(w, http.StatusBadRequest, "no session to end: send its secret in "+SessionHeader)
		return
	}
	s.c.Log.Info("dashboard logout", "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}

// ticketPath is a path a ticket may be made for: the navigations of the page.
var ticketPath = regexp.MustCompile(`^/sweeps/[1-9][0-9]{0,18}/(report|export)$`)

// TicketJSON is POST /api/tickets: the URL to navigate to, good once, for TicketTTL.
type TicketJSON struct {
	URL string `json:"url"`
}

// ticket makes a one-time ticket for a navigation of the page (POST {"path": "/sweeps/1/report"}):
// a link cannot carry the session header.
func (s *Server) ticket(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Path string `json:"path"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	if !ticketPath.MatchString(in.Path) {
		jsonError(w, http.StatusBadRequest, fmt.Sprintf("path %q: a ticket opens /sweeps/ID/report or /sweeps/ID/export", in.Path))
		return
	}
	tk, ok, err := s.c.Sessions.ticketFor(r, in.Path)
	switch {
	case err != nil:
		jsonError(w, http.StatusInternalServerError, err.Error())
	case !ok:
		jsonError(w, http.StatusBadRequest, "a ticket is made by a session: send its secret in "+SessionHeader)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(TicketJSON{URL: in.Path + "?ticket=" + tk})
	}
}

func sweepID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, fmt.Sprintf("sweep id %q is not a positive number", r.PathValue("id")), http.StatusBadRequest)
		return 0, false
	}
	return id, true
}

// loadSweep reads a sweep for the report; a miss answers 404.
func (s *Server) loadSweep(w http.ResponseWriter, r *http.Request) (*report.Sweep, bool) {
	id, ok := sweepID(w, r)
	if !ok {
		return nil, false
	}
	sw, err := report.LoadID(r.Context(), s.c.Store, id)
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, fmt.Sprintf("no sweep %d", id), http.StatusNotFound)
		return nil, false
	}
	if err != nil {
		s.c.Log.Error("cannot read a sweep for the dashboard", "sweep", id, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return nil, false
	}
	return sw, true
}

func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	sw, ok := s.loadSweep(w, r)
	if !ok {
		return
	}
	b, err := report.HTML(sw, report.Options{Format: "html", Now: time.Now()})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	id, ok := sweepID(w, r)
	if !ok {
		return
	}
	if _, err := s.c.Store.Sweep(r.Context(), id); errors.Is(err, store.ErrNotFound) {
		http.Error(w, fmt.Sprintf("no sweep %d", id), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="sweep-%d.jsonl"`, id))
	w.Header().Set("Cache-Control", "no-store")
	if _, err := report.ExportJSONL(r.Context(), s.c.Store, id, w); err != nil {
		s.c.Log.Error("export for the dashboard failed", "sweep", id, "err", err)
	}
}

// results is the report's tables of a sweep, as the report has them, with the page's live chart
// and how settled each level's best is (ResultsJSON).
func (s *Server) results(w http.ResponseWriter, r *http.Request) {
	sw, ok := s.loadSweep(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(liveResults(sw, s.plannedRepeats(r.Context(), sw)))
}

// plannedRepeats is the repeats sw's spec plans per level, read once per sweep.
func (s *Server) plannedRepeats(ctx context.Context, sw *report.Sweep) int {
	s.mu.Lock()
	n, ok := s.repeats[sw.ID]
	s.mu.Unlock()
	if ok {
		return n
	}
	st, err := s.c.Store.Sweep(ctx, sw.ID)
	if err != nil {
		return max(1, sw.Repeats)
	}
	n, ok = plannedRepeats(st.SpecText, sw.Repeats)
	if ok { // the spec's word holds for good; the recorded repeats may grow
		s.mu.Lock()
		s.repeats[sw.ID] = n
		s.mu.Unlock()
	}
	return n
}
