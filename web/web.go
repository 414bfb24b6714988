// Package web is the daemon's live dashboard (docs/daemon.md, "Dashboard"): one self-contained page
// (embedded, no CDN), the HTML report and the export of a sweep made on demand from the store, the
// report's tables as JSON, and a Server-Sent Events stream of what changes. The daemon's API server
// serves these routes under its own Host, Origin and credential checks; Sessions are the
// dashboard's browser credential.
package web

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"time"

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

// Route is one path of the dashboard, as the daemon's API mounts it (orchestrator.Route): Open
// needs no credential, Page answers a refusal with a login page.
type Route struct {
	Pattern string
	Handler http.Handler
	Open    bool
	Page    bool
}

// Server serves the dashboard.
type Server struct {
	c    Config
	page *template.Template
	hub  *hub
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
	page, err := template.ParseFS(static, "static/index.html")
	if err != nil {
		return nil, fmt.Errorf("web: the page template: %w", err)
	}
	return &Server{c: c, page: page, hub: newHub(c.Store, c.Log)}, nil
}

// Run follows the store for the event stream until ctx ends.
func (s *Server) Run(ctx context.Context) { s.hub.follow(ctx, s.c.Poll) }

// Notify passes what a host (or a slot) of a running sweep does now to the open streams at once
// (the daemon's updates; key is the activity's, activity its JSON).
func (s *Server) Notify(sweepID int64, key string, activity any) {
	s.hub.publish(message{kind: "activity", data: map[string]any{"sweep": sweepID, "key": key, "activity": activity}})
}

// Routes are the dashboard's paths.
func (s *Server) Routes() []Route {
	assets, _ := fs.Sub(static, "static")
	files := http.FileServerFS(assets)
	return []Route{
		{Pattern: "GET /{$}", Handler: http.HandlerFunc(s.index), Page: true},
		{Pattern: "GET /login", Handler: http.HandlerFunc(s.login), Open: true},
		{Pattern: "GET /static/{file}", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if path.Ext(r.URL.Path) == ".html" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Cache-Control", "no-cache")
			http.StripPrefix("/static/", files).ServeHTTP(w, r)
		}), Page: true},
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

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	if err := s.page.Execute(&b, map[string]string{"CSRF": s.c.Sessions.csrfOf(r), "Header": CSRFHeader}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

// login trades a login code for a session cookie, then sends the browser to the page. The move is
// a page of this origin (a refresh), not a 303: a cookie that is SameSite=Strict is not sent on a
// redirect that a link from another site started.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	cookie, _, ok := s.c.Sessions.redeem(r.URL.Query().Get("code"))
	if !ok {
		s.c.Log.Warn("dashboard login refused", "remote", r.RemoteAddr, "reason", "unknown, used or expired code")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `<!doctype html><meta charset="utf-8"><title>specsweep: log in</title>`+
			`<p>This login link was used already or has expired (a link works once, for 15 minutes). `+
			`Make a new one on the daemon's machine: <code>specsweep dashboard</code></p>`)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(SessionMax / time.Second)})
	s.c.Log.Info("dashboard login", "remote", r.RemoteAddr)
	fmt.Fprint(w, `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=/">`+
		`<title>specsweep</title><p>Logged in. <a href="/">Open the dashboard</a>.</p>`)
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

// results is the report's tables of a sweep, as the report has them.
func (s *Server) results(w http.ResponseWriter, r *http.Request) {
	sw, ok := s.loadSweep(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(report.LiveTables(sw))
}
