package orchestrator

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// APIStore is what the status API reads and writes (*store.DB satisfies it).
type APIStore interface {
	SubmitStore
	StatusStore
	ListSweeps(ctx context.Context, states ...store.SweepState) ([]store.Sweep, error)
	CancelSweep(ctx context.Context, id int64, reason string) error
	Query(ctx context.Context, query string, args ...any) (*store.Rows, error)
}

// Metrics are the daemon's Prometheus metrics: sweeps by state and points by state and failure
// class (read from the store at each scrape), point durations, time to ready, hosts up.
type Metrics struct {
	reg      *prometheus.Registry
	duration *prometheus.HistogramVec
	ready    prometheus.Histogram
	hostUp   *prometheus.GaugeVec
}

// NewMetrics registers the metrics on a registry of their own.
func NewMetrics(st APIStore) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "specsweep_point_duration_seconds",
			Help:    "Time a point held its host, from claim to done or failed.",
			Buckets: prometheus.ExponentialBuckets(5, 2, 12)}, []string{"outcome"}),
		ready: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "specsweep_ready_seconds",
			Help:    "Time from a server's start to its readiness (load time plus detection lag).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		hostUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "specsweep_host_up",
			Help: "1 while the host answers, 0 after host trouble (until it answers again)."}, []string{"host"}),
	}
	m.reg.MustRegister(m.duration, m.ready, m.hostUp, &storeCollector{st: st},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Observe feeds a sweep's update into the metrics.
func (m *Metrics) Observe(_ int64, u Update) {
	switch u.Phase {
	case PhaseReady:
		m.ready.Observe(u.Duration.Seconds())
		m.hostUp.WithLabelValues(u.Host).Set(1)
	case PhaseDone:
		m.duration.WithLabelValues("done").Observe(u.Duration.Seconds())
	case PhaseFailed:
		m.duration.WithLabelValues("failed").Observe(u.Duration.Seconds())
	case PhaseRetry:
		m.hostUp.WithLabelValues(u.Host).Set(0)
	case PhaseStarting:
		// Set on first sight, so every host of a running sweep is listed.
		m.hostUp.WithLabelValues(u.Host)
	}
}

var (
	sweepsDesc = prometheus.NewDesc("specsweep_sweeps", "Sweeps in the store by state.", []string{"state"}, nil)
	pointsDesc = prometheus.NewDesc("specsweep_points", "Points in the store by state and failure class.",
		[]string{"state", "failure_class"}, nil)
)

// storeCollector reads the counts at scrape time: the store is the truth, also for sweeps run by
// `specsweep run` beside the daemon.
type storeCollector struct{ st APIStore }

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sweepsDesc; ch <- pointsDesc }

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts := map[string]float64{}
	for _, s := range []store.SweepState{store.SweepScheduled, store.SweepQueued, store.SweepRunning,
		store.SweepInterrupted, store.SweepDone, store.SweepFailed, store.SweepCancelled} {
		counts[string(s)] = 0
	}
	if rows, err := c.st.Query(ctx, "SELECT state, count(*) FROM sweeps GROUP BY state"); err == nil {
		for _, v := range rows.Values {
			counts[fmt.Sprint(v[0])] = toFloat(v[1])
		}
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(sweepsDesc, prometheus.GaugeValue, n, s)
	}
	if rows, err := c.st.Query(ctx, "SELECT state, coalesce(failure_class, ''), count(*) FROM points GROUP BY 1, 2"); err == nil {
		for _, v := range rows.Values {
			ch <- prometheus.MustNewConstMetric(pointsDesc, prometheus.GaugeValue, toFloat(v[2]), fmt.Sprint(v[0]), fmt.Sprint(v[1]))
		}
	}
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// APIConfig wires the daemon's HTTP API.
type APIConfig struct {
	Store   APIStore
	Daemon  *Daemon // for the hosts' current activity; may be nil
	Metrics *Metrics
	// Token, when not empty, is required as "Authorization: Bearer TOKEN" on every path but /healthz.
	Token string
	Log   *slog.Logger
}

// NewAPI returns the daemon's HTTP handler: GET /healthz, GET /metrics, GET /api/sweeps,
// GET /api/sweeps/{id}, POST /api/sweeps (a spec in the body; ?cron=EXPR or ?at=RFC3339),
// POST /api/sweeps/{id}/cancel.
func NewAPI(c APIConfig) http.Handler {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	a := &api{c: c}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("GET /metrics", a.auth(promhttp.HandlerFor(c.Metrics.reg, promhttp.HandlerOpts{})))
	mux.Handle("GET /api/sweeps", a.auth(http.HandlerFunc(a.list)))
	mux.Handle("GET /api/sweeps/{id}", a.auth(http.HandlerFunc(a.get)))
	mux.Handle("POST /api/sweeps", a.auth(http.HandlerFunc(a.submit)))
	mux.Handle("POST /api/sweeps/{id}/cancel", a.auth(http.HandlerFunc(a.cancel)))
	return mux
}

type api struct {
	c  APIConfig
	mu sync.Mutex
}

func (a *api) auth(h http.Handler) http.Handler {
	if a.c.Token == "" {
		return h
	}
	want := []byte("Bearer " + a.c.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="specsweep"`)
			httpError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// SweepJSON is a sweep in the API.
type SweepJSON struct {
	ID         int64   `json:"id"`
	Name       string  `json:"name"`
	State      string  `json:"state"`
	Schedule   string  `json:"schedule,omitempty"`
	ScheduleID int64   `json:"schedule_id,omitempty"`
	SpecHash   string  `json:"spec_hash"`
	Points     int     `json:"points"`
	Done       int     `json:"done"`
	Failed     int     `json:"failed"`
	Pending    int     `json:"pending"`
	Running    int     `json:"running"`
	Cancelled  int     `json:"cancelled"`
	CreatedAt  int64   `json:"created_at"`
	StartedAt  *int64  `json:"started_at"`
	FinishedAt *int64  `json:"finished_at"`
	NotBefore  *int64  `json:"not_before,omitempty"`
	ETASeconds float64 `json:"eta_s,omitempty"`
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
}

// ActivityJSON is what a host is doing.
type ActivityJSON struct {
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
}

func msPtr(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

// SweepToJSON renders a sweep (and its ETA) for the API and `status --json`.
func SweepToJSON(s store.Sweep, eta time.Duration) SweepJSON {
	return SweepJSON{ID: s.ID, Name: s.Name, State: string(s.State), Schedule: s.Schedule, ScheduleID: s.ScheduleID,
		SpecHash: s.SpecHash, Points: s.Points, Done: s.Done, Failed: s.Failed, Pending: s.Pending, Running: s.Running,
		Cancelled: s.Cancelled, CreatedAt: s.CreatedAt.UnixMilli(), StartedAt: msPtr(s.StartedAt),
		FinishedAt: msPtr(s.FinishedAt), NotBefore: msPtr(s.NotBefore), ETASeconds: eta.Round(time.Second).Seconds()}
}

// PointToJSON renders a point for the API and `status --json`.
func PointToJSON(p store.Point) PointJSON {
	return PointJSON{ID: p.ID, Method: p.Method, NumSteps: p.NumSteps, TopK: p.TopK, NumDraftTokens: p.NumDraftTokens,
		TP: p.TP, State: string(p.State), Host: p.Host, Attempts: p.Attempts, FailureClass: string(p.FailureClass),
		FailureDetail: p.FailureDetail}
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	sws, err := a.c.Store.ListSweeps(r.Context())
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := make([]SweepJSON, 0, len(sws))
	for _, s := range sws {
		var e time.Duration
		if s.State == store.SweepRunning {
			if st, err := Status(r.Context(), a.c.Store, s.ID); err == nil {
				e = st.ETA
			}
		}
		out = append(out, SweepToJSON(s, e))
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
	st, err := Status(r.Context(), a.c.Store, id)
	if errors.Is(err, store.ErrNotFound) {
		httpError(w, http.StatusNotFound, fmt.Sprintf("no sweep %d", id))
		return
	}
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := SweepDetailJSON{SweepJSON: SweepToJSON(st.Sweep, st.ETA), Points: []PointJSON{}, Activity: map[string]ActivityJSON{}}
	for _, p := range st.Points {
		out.Points = append(out.Points, PointToJSON(p))
	}
	if a.c.Daemon != nil {
		for h, u := range a.c.Daemon.Activity(id) {
			out.Activity[h] = ActivityJSON{Point: u.Point, Label: u.Label, Phase: string(u.Phase), Detail: u.Detail, At: u.At.UnixMilli()}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) submit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		httpError(w, http.StatusBadRequest, "reading the spec: "+err.Error())
		return
	}
	if len(body) > 1<<20 {
		httpError(w, http.StatusRequestEntityTooLarge, "spec larger than 1 MiB")
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
	opts := SubmitOptions{Cron: r.URL.Query().Get("cron")}
	if at := r.URL.Query().Get("at"); at != "" {
		if opts.At, err = time.Parse(time.RFC3339, at); err != nil {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("at=%q is not an RFC 3339 time", at))
			return
		}
	}
	sw, err := Submit(r.Context(), a.c.Store, spec, opts)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
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
	err := a.c.Store.CancelSweep(r.Context(), id, "cancelled over HTTP")
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
