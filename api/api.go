// Package api is the daemon's HTTP server: its routes (the JSON API, /healthz, /metrics, and the
// dashboard's routes it mounts from package web), the Host and Origin guard, the credentials (the
// bearer token, browser sessions through SessionAuth, the hello that proves the daemon to the CLI),
// the policy for specs submitted over HTTP, the Prometheus metrics and the server's timeouts. It
// calls the orchestrator for the domain (Submit, Status, the Daemon's activity); the orchestrator
// knows nothing of HTTP.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/internal/refusals"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// APIStore is what the status API reads and writes (*store.DB satisfies it).
type APIStore interface {
	orchestrator.SubmitStore
	orchestrator.StatusStore
	orchestrator.ControlStore
	ListSweeps(ctx context.Context, states ...store.SweepState) ([]store.Sweep, error)
	ListSweepsPage(ctx context.Context, pg store.SweepPage) ([]store.Sweep, bool, error)
	StateCounts(ctx context.Context) (store.StateCounts, error)
	LatestWatches(ctx context.Context) ([]store.WatchVerdict, error)
	Events(ctx context.Context, sweepID int64, pointID string) ([]store.Event, error)
}

// SessionAuth admits a browser's requests (the dashboard's sessions, package web): implemented
// outside this package. nil in APIConfig: bearer tokens only.
type SessionAuth interface {
	// Admit reports whether r carries a live session in a credential the page sent itself (never
	// one a browser attaches by itself, such as a cookie). refusal says why a request that tried is
	// refused; "" when r carries no session at all.
	Admit(r *http.Request) (ok bool, refusal string)
	// LoginCode makes a one-time login code, valid until the time returned; LoginPath is the path
	// of the URL that logs a browser in with it.
	LoginCode() (code string, until time.Time, err error)
	LoginPath(code string) string
	// RevokeAll ends every session (and its event streams) and unused code; it returns how many
	// sessions ended.
	RevokeAll() int
}

// Route is one more path the API's server answers (the dashboard's pages and streams), under the
// same Host and Origin checks. Open routes need no credential (the login page); the others a bearer
// token or a session. Page routes answer a refusal with an HTML page (a browser shows it) instead
// of JSON.
type Route struct {
	Pattern string
	Handler http.Handler
	Open    bool
	Page    bool
}

// MaxBodyBytes caps a request body (a spec is far smaller).
const MaxBodyBytes = 1 << 20

// APIConfig wires the daemon's HTTP API.
type APIConfig struct {
	Store   APIStore
	Daemon  *orchestrator.Daemon // for the hosts' current activity; may be nil
	Metrics *Metrics
	// Token is required as "Authorization: Bearer TOKEN" on every /api/ path (compared in constant
	// time); NewAPI refuses an empty one. /healthz and /metrics are open (nothing secret in them).
	Token string
	// ListenHost is the host part of the address the API listens on. A request's Host header must
	// name it or a loopback name or address (DNS rebinding); a wildcard listen address (0.0.0.0, ::
	// or empty) also admits this machine's hostname and interface addresses.
	ListenHost string
	// Policy limits what a spec submitted over the API may ask of the daemon.
	Policy SpecPolicy
	Log    *slog.Logger
	// Sessions, when set, admits browser sessions beside the token (the dashboard); Routes are the
	// dashboard's paths.
	Sessions SessionAuth
	Routes   []Route
}

// NewAPI returns the daemon's HTTP handler: GET /healthz, GET /metrics, GET /api/sweeps,
// GET /api/sweeps/{id}, POST /api/sweeps (a spec in the body; ?cron=EXPR or ?at=RFC3339),
// POST /api/sweeps/{id}/cancel, POST /api/sweeps/{id}/resume, GET /api/watches (each host's latest
// watch).
//
// Every request is refused when its Host header names another machine (421) or it carries an Origin
// other than the daemon's own (403): a web page in a browser on the machine must not reach the API.
// /api/ paths need the token (401); a POST with a body must say Content-Type application/json or
// application/yaml (415; a body-less POST such as cancel may omit it); bodies are capped at
// MaxBodyBytes (413); a submitted spec must pass cfg.Policy (403).
func NewAPI(c APIConfig) (http.Handler, error) {
	if c.Token == "" {
		return nil, errors.New("api: the API needs a bearer token")
	}
	if c.Store == nil || c.Metrics == nil {
		return nil, errors.New("api: the API needs a store and metrics")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	a := &api{c: c, hosts: allowedHosts(c.ListenHost), want: []byte("Bearer " + c.Token), refusals: refusals.New(c.Log, nil, nil)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("GET /metrics", c.Metrics)
	mux.Handle("GET /api/sweeps", a.protect(a.list))
	mux.Handle("GET /api/sweeps/{id}", a.protect(a.get))
	mux.Handle("POST /api/sweeps", a.protect(a.submit))
	mux.Handle("POST /api/sweeps/{id}/cancel", a.protect(a.cancel))
	mux.Handle("POST /api/sweeps/{id}/resume", a.protect(a.resume))
	mux.Handle("GET /api/watches", a.protect(a.watches))
	mux.Handle("POST /api/login-codes", a.protectToken(a.loginCode))
	mux.HandleFunc("GET /api/hello", a.hello) // open: the daemon proves itself to the CLI (hello.go)
	mux.Handle("POST /api/sessions/revoke", a.protectToken(a.revokeSessions))
	for _, rt := range c.Routes {
		switch {
		case rt.Open:
			mux.Handle(rt.Pattern, rt.Handler)
		case rt.Page:
			mux.Handle(rt.Pattern, a.protectPage(rt.Handler))
		default:
			mux.Handle(rt.Pattern, a.protect(rt.Handler.ServeHTTP))
		}
	}
	// Unknown /api/ paths answer 401 too, so nothing about the API is visible without the token.
	mux.Handle("/api/", a.protect(http.NotFound))
	return a.guard(mux), nil
}

type api struct {
	c     APIConfig
	hosts map[string]bool // Host header names besides loopback ones
	want  []byte          // the Authorization header expected
	// refusals logs refused requests, a line for an address's first in a minute and one counting
	// the rest: anyone may send them, as fast as they like.
	refusals *refusals.Log
}

// refuse answers an error and logs it (never a header: the token stays out of the log).
func (a *api) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	a.logRefusal(r, code, msg)
	httpError(w, code, msg)
}

func (a *api) logRefusal(r *http.Request, code int, msg string) {
	a.refusals.Refused("API request refused", r.RemoteAddr, r.Method, r.URL.Path, code, msg)
}

// guard refuses requests a browser was made to send: to a name that is not this daemon's (DNS
// rebinding), or from a page of another origin.
func (a *api) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An HTTP/1.0 request may lack Host; browsers always send one.
		if r.Host != "" && !a.hostAllowed(r.Host) {
			a.refuse(w, r, http.StatusMisdirectedRequest, fmt.Sprintf(
				"Host %q is not this daemon's address: use a loopback address, localhost or the --listen host", r.Host))
			return
		}
		origin := "http://" + r.Host
		if r.TLS != nil {
			origin = "https://" + r.Host
		}
		for _, o := range r.Header.Values("Origin") {
			if !strings.EqualFold(o, origin) {
				a.refuse(w, r, http.StatusForbidden, fmt.Sprintf(
					"cross-origin request from %q refused: the API does not serve web pages", o))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

const tokenHint = "missing or wrong bearer token (Authorization: Bearer TOKEN; " +
	"the daemon's token file is DB.token beside its database unless it runs with --token-file)"

// hasToken: r carries the bearer token.
func (a *api) hasToken(r *http.Request) bool {
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), a.want) == 1
}

// credential checks r's credential, the token or a session: 0 when admitted, else the status and
// why.
func (a *api) credential(r *http.Request) (int, string) {
	if a.hasToken(r) {
		return 0, ""
	}
	if a.c.Sessions != nil && r.Header.Get("Authorization") == "" {
		ok, refusal := a.c.Sessions.Admit(r)
		if ok {
			return 0, ""
		}
		if refusal != "" {
			return http.StatusForbidden, refusal
		}
	}
	return http.StatusUnauthorized, tokenHint
}

// protectToken is protect for what only the token may do (minting login codes: a session must not
// make more sessions).
func (a *api) protectToken(h http.HandlerFunc) http.Handler {
	inner := a.protect(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hasToken(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="specsweep"`)
			a.refuse(w, r, http.StatusUnauthorized, tokenHint)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// protectPage admits a page's request like protect, but refuses with an HTML page that says how
// to log in.
func (a *api) protectPage(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, msg := a.credential(r); code != 0 {
			a.logRefusal(r, code, msg)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(code)
			io.WriteString(w, loginPage)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loginPage is what a browser without a session sees.
const loginPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>specsweep: log in</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em}code{background:#eee;padding:0 .2em}</style></head>
<body><h1>specsweep</h1><p>This link needs the dashboard's session: open it from the dashboard's page (a report or
export link works once, for a minute). Not logged in? Open the login URL the daemon printed when it started,
or make a new one on the daemon's machine (it reads the daemon's token file):</p>
<pre><code>specsweep dashboard</code></pre><p>A login URL works once, for 15 minutes.</p></body></html>
`

// protect requires a credential (the token, or a session), an accepted Content-Type on POST
// bodies, and caps the body.
func (a *api) protect(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, msg := a.credential(r); code != 0 {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="specsweep"`)
			}
			a.refuse(w, r, code, msg)
			return
		}
		if r.Method == http.MethodPost {
			if msg := checkContentType(r); msg != "" {
				a.refuse(w, r, http.StatusUnsupportedMediaType, msg)
				return
			}
		}
		if r.ContentLength > MaxBodyBytes {
			a.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		h(w, r)
	})
}

// checkContentType returns what is wrong with a POST's Content-Type, or "". A body must be JSON or
// YAML: the types a browser may send without asking first (text/plain, forms) are refused. A
// POST without a body (cancel) may omit the header.
func checkContentType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength == 0 {
			return ""
		}
		return "a request body needs Content-Type: application/json or application/yaml"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && mt != "application/yaml") {
		return fmt.Sprintf("Content-Type %q refused: send application/json or application/yaml", ct)
	}
	return ""
}

// hostAllowed: a Host header (host or host:port) names a loopback name or address, or the daemon's
// listen host.
func (a *api) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = normalHost(host)
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return a.hosts[host]
}

// normalHost is a host name or address in one spelling: lower case, no trailing dot, an IP address
// in its canonical form (IPv6 without brackets).
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// allowedHosts are the Host names a request may use besides loopback ones.
func allowedHosts(listen string) map[string]bool {
	out := map[string]bool{}
	h := normalHost(listen)
	if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
		out[h] = true
		return out
	}
	// A wildcard: the machine's own names and addresses (interfaces added later are not seen).
	if name, err := os.Hostname(); err == nil {
		out[normalHost(name)] = true
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, ad := range addrs {
			if ipn, ok := ad.(*net.IPNet); ok {
				out[ipn.IP.String()] = true
			}
		}
	}
	return out
}

// SweepJSON is a sweep in the API.
type SweepJSON struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	State      string `json:"state"`
	Schedule   string `json:"schedule,omitempty"`
	ScheduleID int64  `json:"schedule_id,omitempty"`
	SpecHash   string `json:"spec_hash"`
	Points     int    `json:"points"`
	Done       int    `json:"done"`
	Failed     int    `json:"failed"`
	Pending    int    `json:"pending"`
	Running    int    `json:"running"`
	Cancelled  int    `json:"cancelled"`
	// Waiting and Pruned count the points a search has not decided yet and those it decided not
	// to run (0 for a grid).
	Waiting    int     `json:"waiting"`
	Pruned     int     `json:"pruned"`
	CreatedAt  int64   `json:"created_at"`
	StartedAt  *int64  `json:"started_at"`
	FinishedAt *int64  `json:"finished_at"`
	NotBefore  *int64  `json:"not_before,omitempty"`
	ETASeconds float64 `json:"eta_s,omitempty"`
	// NextFire is a schedule's next firing (the API's list and detail, and `status --json`).
	NextFire *int64 `json:"next_fire,omitempty"`
	// DaemonDeaths counts the daemons that died running the sweep since it was submitted or
	// resumed; at DefaultHoldAfterDeaths it is held (interrupted) until resumed.
	DaemonDeaths int `json:"daemon_deaths,omitempty"`
	// Holder is the process that holds (or last held) the sweep; absent when none ever did.
	Holder *HolderJSON `json:"holder,omitempty"`
	// OrphanedSince: the sweep is stored as running but its process died (orchestrator.Liveness):
	// its holder's last heartbeat, unix ms. Such a sweep has no ETA.
	OrphanedSince *int64 `json:"orphaned_since,omitempty"`
}

// HolderJSON is the process that runs a sweep: how ("run" or "daemon"), its pid and host name,
// and its last heartbeat (unix ms).
type HolderJSON struct {
	Kind      string `json:"kind"`
	PID       int    `json:"pid"`
	Host      string `json:"host,omitempty"`
	Heartbeat *int64 `json:"heartbeat,omitempty"`
}

// nextFire sets a scheduled template's next firing time from its cron expression.
func nextFire(j *SweepJSON, s store.Sweep, now time.Time) {
	if s.State != store.SweepScheduled || s.Schedule == "" {
		return
	}
	if sched, err := sweep.ParseCron(s.Schedule); err == nil {
		j.NextFire = msPtr(sched.Next(now))
	}
}

// PointJSON is a point in the API.
type PointJSON struct {
	ID             string `json:"id"`
	Method         string `json:"method"`
	NumSteps       *int   `json:"num_steps"`
	TopK           *int   `json:"topk"`
	NumDraftTokens *int   `json:"num_draft_tokens"`
	TP             int    `json:"tp"`
	State          string `json:"state"`
	Host           string `json:"host,omitempty"`
	Attempts       int    `json:"attempts"`
	FailureClass   string `json:"failure_class,omitempty"`
	FailureDetail  string `json:"failure_detail,omitempty"`
	// Reason is the search's reason for running or pruning the point (docs/spec.md, "search").
	Reason string `json:"reason,omitempty"`
}

// ActivityJSON is what a host (or a packing host's slot) is doing.
type ActivityJSON struct {
	Host   string `json:"host"`
	Slot   *int   `json:"slot,omitempty"` // a packing host's slot, from 0
	GPUs   []int  `json:"gpus,omitempty"` // the GPUs the slot's point holds
	Point  string `json:"point,omitempty"`
	Label  string `json:"label,omitempty"`
	Phase  string `json:"phase"`
	Detail string `json:"detail,omitempty"`
	At     int64  `json:"at"`
}

// SweepDetailJSON is GET /api/sweeps/{id}.
type SweepDetailJSON struct {
	SweepJSON
	Points   []PointJSON             `json:"point_list"`
	Activity map[string]ActivityJSON `json:"activity"`
	// Hosts are the sweep's hosts with their GPU counts (the dashboard's GPUs column of a host that
	// runs one point at a time); absent in `status --json`.
	Hosts []HostJSON `json:"hosts,omitempty"`
}

// HostJSON is a host of a sweep: its name and GPU count (spec hosts[].gpus).
type HostJSON struct {
	Name string `json:"name"`
	GPUs int    `json:"gpus"`
}

func msPtr(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

// SweepToJSON renders a sweep (and its ETA) for the API and `status --json`; a running sweep whose
// process died, as seen from this process now, gets OrphanedSince and no ETA.
func SweepToJSON(s store.Sweep, eta time.Duration) SweepJSON {
	j := sweepToJSON(s, eta)
	if s.Holder.Kind != "" {
		j.Holder = &HolderJSON{Kind: s.Holder.Kind, PID: s.Holder.PID, Host: s.Holder.Host, Heartbeat: msPtr(s.Holder.Heartbeat)}
	}
	if s.State == store.SweepRunning {
		if orphan, since := orchestrator.LocalLiveness(time.Now()).Orphaned(s); orphan {
			j.OrphanedSince, j.ETASeconds = msPtr(since), 0
		}
	}
	return j
}

func sweepToJSON(s store.Sweep, eta time.Duration) SweepJSON {
	return SweepJSON{ID: s.ID, Name: s.Name, State: string(s.State), Schedule: s.Schedule, ScheduleID: s.ScheduleID,
		SpecHash: s.SpecHash, Points: s.Points, Done: s.Done, Failed: s.Failed, Pending: s.Pending, Running: s.Running,
		Cancelled: s.Cancelled, Waiting: s.Waiting, Pruned: s.Pruned, CreatedAt: s.CreatedAt.UnixMilli(), StartedAt: msPtr(s.StartedAt),
		FinishedAt: msPtr(s.FinishedAt), NotBefore: msPtr(s.NotBefore), ETASeconds: eta.Round(time.Second).Seconds(),
		DaemonDeaths: s.DaemonDeaths}
}

// PointToJSON renders a point for the API and `status --json`.
func PointToJSON(p store.Point) PointJSON {
	return PointJSON{ID: p.ID, Method: p.Method, NumSteps: p.NumSteps, TopK: p.TopK, NumDraftTokens: p.NumDraftTokens,
		TP: p.TP, State: string(p.State), Host: p.Host, Attempts: p.Attempts, FailureClass: string(p.FailureClass),
		FailureDetail: p.FailureDetail, Reason: p.Reason}
}

// ActivityToJSON renders what a host or slot is doing (the API's activity, the dashboard's events).
func ActivityToJSON(u orchestrator.Update) ActivityJSON {
	j := ActivityJSON{Host: u.Host, GPUs: u.GPUs, Point: u.Point, Label: u.Label, Phase: string(u.Phase), Detail: u.Detail, At: u.At.UnixMilli()}
	if u.Slot > 0 {
		k := u.Slot - 1
		j.Slot = &k
	}
	return j
}

// The pages of GET /api/sweeps: DefaultPageSize sweeps unless ?limit= says otherwise, at most
// MaxPageSize (each sweep's ETA reads its points: a page bounds the work of one request).
const (
	DefaultPageSize = 200
	MaxPageSize     = 1000
)

// listPage reads ?limit=, ?after= and ?state= (repeated or comma-separated) of GET /api/sweeps.
func listPage(q url.Values) (store.SweepPage, string) {
	pg := store.SweepPage{Limit: DefaultPageSize}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return pg, fmt.Sprintf("limit=%q: want a number from 1 to %d", v, MaxPageSize)
		}
		pg.Limit = n
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return pg, fmt.Sprintf("after=%q: want a sweep id (the last id of the previous page)", v)
		}
		pg.After = n
	}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if !store.SweepState(st).Valid() {
				return pg, fmt.Sprintf("state=%q: want scheduled, queued, running, interrupted, done, failed or cancelled", st)
			}
			pg.States = append(pg.States, store.SweepState(st))
		}
	}
	return pg, ""
}

// list is GET /api/sweeps: a page of sweeps, oldest first; when more follow, a Link header with
// rel="next" names the next page.
func (a *api) list(w http.ResponseWriter, r *http.Request) {
	pg, bad := listPage(r.URL.Query())
	if bad != "" {
		httpError(w, http.StatusBadRequest, bad)
		return
	}
	sws, more, err := a.c.Store.ListSweepsPage(r.Context(), pg)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := make([]SweepJSON, 0, len(sws))
	for _, s := range sws {
		var e time.Duration
		if s.State == store.SweepRunning {
			if st, err := orchestrator.Status(r.Context(), a.c.Store, s.ID); err == nil {
				e = st.ETA
			}
		}
		j := SweepToJSON(s, e)
		nextFire(&j, s, time.Now())
		out = append(out, j)
	}
	if more {
		q := r.URL.Query()
		q.Set("after", strconv.FormatInt(sws[len(sws)-1].ID, 10))
		q.Set("limit", strconv.Itoa(pg.Limit))
		w.Header().Set("Link", fmt.Sprintf(`</api/sweeps?%s>; rel="next"`, q.Encode()))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) sweepID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("sweep id %q is not a positive number", r.PathValue("id")))
		return 0, false
	}
	return id, true
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	id, ok := a.sweepID(w, r)
	if !ok {
		return
	}
	st, err := orchestrator.Status(r.Context(), a.c.Store, id)
	if errors.Is(err, store.ErrNotFound) {
		httpError(w, http.StatusNotFound, fmt.Sprintf("no sweep %d", id))
		return
	}
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := SweepDetailJSON{SweepJSON: SweepToJSON(st.Sweep, st.ETA), Points: []PointJSON{}, Activity: map[string]ActivityJSON{}}
	nextFire(&out.SweepJSON, st.Sweep, time.Now())
	for _, p := range st.Points {
		out.Points = append(out.Points, PointToJSON(p))
	}
	for _, h := range st.Hosts {
		out.Hosts = append(out.Hosts, HostJSON{Name: h.Name, GPUs: h.GPUs})
	}
	if a.c.Daemon != nil {
		for k, u := range a.c.Daemon.Activity(id) {
			out.Activity[k] = ActivityToJSON(u)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) submit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		a.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("spec larger than %d bytes", tooBig.Limit))
		return
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, "reading the spec: "+err.Error())
		return
	}
	spec, err := sweep.Parse("request", body)
	if err != nil {
		var list sweep.ErrorList
		if errors.As(err, &list) {
			msgs := make([]string, len(list))
			for i, e := range list {
				msgs[i] = e.Error()
			}
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid spec", "errors": msgs})
			return
		}
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := a.c.Policy.CheckSpec(spec); err != nil {
		var pe *PolicyError
		if !errors.As(err, &pe) {
			pe = &PolicyError{Problems: []string{err.Error()}}
		}
		a.c.Log.Warn("spec refused by the API's policy", "remote", r.RemoteAddr, "name", spec.Name, "err", err)
		writeJSON(w, http.StatusForbidden, map[string]any{"error": "spec refused: " + pe.Error(), "errors": pe.Problems})
		return
	}
	opts := orchestrator.SubmitOptions{Cron: r.URL.Query().Get("cron")}
	if at := r.URL.Query().Get("at"); at != "" {
		if opts.At, err = time.Parse(time.RFC3339, at); err != nil {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("at=%q is not an RFC 3339 time", at))
			return
		}
	}
	sw, err := orchestrator.Submit(r.Context(), a.c.Store, spec, opts)
	var conflict *orchestrator.ScheduleConflictError
	var bad *orchestrator.CronError
	var badSet *orchestrator.PromptSetError
	switch {
	case errors.As(err, &conflict) && conflict.FromSpec:
		httpError(w, http.StatusBadRequest, "at= conflicts with the spec's schedule.cron: a scheduled spec fires by itself")
		return
	case errors.As(err, &conflict):
		httpError(w, http.StatusBadRequest, "cron= and at= exclude each other")
		return
	case errors.As(err, &bad):
		httpError(w, http.StatusBadRequest, "cron="+err.Error())
		return
	case errors.As(err, &badSet):
		httpError(w, http.StatusBadRequest, "workload.datasets: "+err.Error())
		return
	case err != nil:
		// The request was fine; the daemon could not store it.
		a.c.Log.Error("cannot store a submitted sweep", "name", spec.Name, "err", err)
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.c.Log.Info("sweep submitted over HTTP", "sweep", sw.ID, "name", sw.Name, "state", sw.State)
	writeJSON(w, http.StatusCreated, SweepToJSON(sw, 0))
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	id, ok := a.sweepID(w, r)
	if !ok {
		return
	}
	// As the CLI does (orchestrator.Cancel): a sweep whose process died gives its running points back first.
	sw, err := a.c.Store.Sweep(r.Context(), id)
	if err == nil {
		err = orchestrator.Cancel(r.Context(), a.c.Store, sw, orchestrator.LocalLiveness(time.Now()), "cancelled over HTTP")
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		httpError(w, http.StatusNotFound, fmt.Sprintf("no sweep %d", id))
	case errors.Is(err, store.ErrTransition):
		httpError(w, http.StatusConflict, err.Error())
	case err != nil:
		httpError(w, http.StatusInternalServerError, err.Error())
	default:
		sw, _ := a.c.Store.Sweep(r.Context(), id)
		writeJSON(w, http.StatusOK, SweepToJSON(sw, 0))
	}
}

func (a *api) resume(w http.ResponseWriter, r *http.Request) {
	id, ok := a.sweepID(w, r)
	if !ok {
		return
	}
	// As the CLI does (orchestrator.Resume): a running sweep whose process died can be queued again.
	sw, err := a.c.Store.Sweep(r.Context(), id)
	if err == nil {
		sw, err = orchestrator.Resume(r.Context(), a.c.Store, sw, orchestrator.LocalLiveness(time.Now()), "resumed over HTTP")
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		httpError(w, http.StatusNotFound, fmt.Sprintf("no sweep %d", id))
	case errors.Is(err, store.ErrNotResumable):
		httpError(w, http.StatusConflict, err.Error())
	case err != nil:
		httpError(w, http.StatusInternalServerError, err.Error())
	default:
		a.c.Log.Info("sweep resumed over HTTP", "sweep", id)
		writeJSON(w, http.StatusOK, SweepToJSON(sw, 0))
	}
}

// LoginCodeJSON is POST /api/login-codes: the path to open (on the daemon's address) and until when.
type LoginCodeJSON struct {
	Path      string `json:"path"`
	ExpiresAt int64  `json:"expires_at"`
}

func (a *api) loginCode(w http.ResponseWriter, r *http.Request) {
	if a.c.Sessions == nil {
		httpError(w, http.StatusNotFound, "this daemon serves no dashboard")
		return
	}
	code, until, err := a.c.Sessions.LoginCode()
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.c.Log.Info("dashboard login code made", "remote", r.RemoteAddr, "expires", until.UTC().Format(time.RFC3339))
	writeJSON(w, http.StatusOK, LoginCodeJSON{Path: a.c.Sessions.LoginPath(code), ExpiresAt: until.UnixMilli()})
}

// RevokeJSON is POST /api/sessions/revoke: how many dashboard sessions it ended.
type RevokeJSON struct {
	Ended int `json:"ended"`
}

// revokeSessions ends every dashboard session (the token only: `specsweep dashboard --revoke`).
func (a *api) revokeSessions(w http.ResponseWriter, r *http.Request) {
	if a.c.Sessions == nil {
		httpError(w, http.StatusNotFound, "this daemon serves no dashboard")
		return
	}
	n := a.c.Sessions.RevokeAll()
	a.c.Log.Info("dashboard sessions revoked", "remote", r.RemoteAddr, "ended", n)
	writeJSON(w, http.StatusOK, RevokeJSON{Ended: n})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": strings.TrimSpace(msg)})
}
