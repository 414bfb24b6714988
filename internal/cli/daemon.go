package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/specsweep/specsweep/api"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
	"github.com/specsweep/specsweep/web"
)

func daemonCmd() command {
	return newCommand("daemon", "",
		"Run queued and scheduled sweeps until stopped; status API and /metrics on --listen.", daemonRun).
		withExamples("specsweep daemon --db /var/lib/specsweep/specsweep.db",
			"specsweep daemon --listen 0.0.0.0:8377 --tls-cert cert.pem --tls-key key.pem")
}

type daemonOptions struct {
	DB                string        // --db
	Listen            string        // --listen: the API's address, "" for none
	TokenFile         string        // --token-file
	AllowLocalDriver  bool          // --allow-local-driver
	AllowAnyKeyPath   bool          // --allow-any-key-path
	DatasetDir        string        // --dataset-dir
	AcceptNewHostKeys bool          // --accept-new-host-keys
	LogFormat         string        // --log-format: text or json
	LogDir            string        // --log-dir
	TLSCert, TLSKey   string        // --tls-cert, --tls-key
	MinEvery          time.Duration // --min-every
	InsecureListen    bool          // --insecure-listen
}

func (o *daemonOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8377", "the `ADDR` (host:port) of the status API and /metrics (\"\" for none)")
	fs.StringVar(&o.TokenFile, "token-file", "", "`FILE` holding the bearer token the HTTP API requires (mode 0600; default DB.token, created at the first start)")
	fs.BoolVar(&o.AllowLocalDriver, "allow-local-driver", false, "accept specs with driver: local over the HTTP API (they run commands here as the daemon's user)")
	fs.BoolVar(&o.AllowAnyKeyPath, "allow-any-key-path", false, "accept identity_file and known_hosts paths outside the daemon's ~/.ssh over the HTTP API")
	fs.StringVar(&o.DatasetDir, "dataset-dir", "", "the `DIR` that workload.dataset files of specs submitted over the HTTP API must lie in (none: refused)")
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown SSH host keys to known_hosts (a changed key is always refused)")
	fs.StringVar(&o.LogFormat, "log-format", "text", "log `FORMAT` on stderr: text or json")
	fs.StringVar(&o.LogDir, "log-dir", "", "local driver: write each host's server log to `DIR`/HOST.log")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain) `FILE` (with --tls-key)")
	fs.StringVar(&o.TLSKey, "tls-key", "", "the PEM private key `FILE` of --tls-cert")
	fs.DurationVar(&o.MinEvery, "min-every", sweep.MinEvery, "the shortest @every of a schedule the daemon fires (a shorter one is logged and skipped; the API always holds specs to the default)")
	fs.BoolVar(&o.InsecureListen, "insecure-listen", false, "allow plain HTTP on a --listen address that is not loopback (the token and sessions cross the network in clear)")
}

func (o *daemonOptions) args(pos []string) error { return noArgs(pos) }

// daemonRun runs the daemon until ctx ends.
func daemonRun(ctx context.Context, env Env, o *daemonOptions) error {
	if o.LogFormat != "text" && o.LogFormat != "json" {
		return usagef("unknown --log-format %q (want text or json)", o.LogFormat)
	}
	listenHost, err := checkListen(o.Listen)
	if err != nil {
		return err
	}
	tlsConf, err := listenTLS(o.Listen, o.TLSCert, o.TLSKey, o.InsecureListen)
	if err != nil {
		return err
	}
	var log *slog.Logger
	if o.LogFormat == "json" {
		log = slog.New(slog.NewJSONHandler(env.Stderr, nil))
	} else {
		log = slog.New(slog.NewTextHandler(env.Stderr, nil))
	}
	dbFile := dbPath(env, o.DB)
	st, err := store.Open(ctx, dbFile)
	if err != nil {
		return err
	}
	defer st.Close()

	metrics := api.NewMetrics(st)
	// The dashboard (docs/daemon.md): its event stream hears the daemon's updates at once.
	sessions := web.NewSessions(nil)
	dash, err := web.New(web.Config{Store: st, Sessions: sessions, Log: log})
	if err != nil {
		return err
	}
	observe := func(id int64, u orchestrator.Update) {
		metrics.Observe(id, u)
		dash.Notify(id, u.ActivityKey(), api.ActivityToJSON(u))
	}
	if o.MinEvery <= 0 {
		return usagef("--min-every %s: want a positive duration", o.MinEvery)
	}
	d, err := orchestrator.NewDaemon(orchestrator.DaemonConfig{
		Store: st, Log: log, Observe: observe, MinEvery: o.MinEvery,
		LockSweep: func(sw store.Sweep) (func(), error) {
			if sw.ScheduleID != 0 {
				return func() {}, nil // a schedule's sweep: `specsweep run` never resumes it
			}
			return lockSweep(dbFile, sw.Name)
		},
		Runner: orchestrator.Config{Log: log},
		AfterSweep: func(ctx context.Context, sweepID int64, spec *sweep.Spec) {
			if err := recordWatch(ctx, st, sweepID, spec); err != nil {
				log.Error("cannot judge the watch", "sweep", sweepID, "err", err)
			}
		},
		Hosts: func(spec *sweep.Spec, sweepID int64) []orchestrator.Host {
			hs := sweepHosts(ctx, st, spec, sweepID, hostOptions{acceptNewHostKeys: o.AcceptNewHostKeys, logDir: o.LogDir, getenv: env.Getenv})
			out := make([]orchestrator.Host, len(hs))
			for i, h := range hs {
				out[i] = h
			}
			return out
		},
	})
	if err != nil {
		return err
	}
	var srv *http.Server
	if o.Listen != "" {
		token, tokenPath, err := apiToken(dbFile, o.TokenFile)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		if len(token) < 2*tokenBytes {
			// GET /api/hello answers a MAC under a key derived from the token: a guessable
			// token can be found offline from one answer.
			log.Warn("the token is short: use at least 32 random bytes (the generated token has them)",
				"token_file", tokenPath, "length", len(token))
		}
		home, err := os.UserHomeDir()
		if err != nil && !o.AllowAnyKeyPath {
			log.Warn("no home directory: specs over the API may not name identity_file or known_hosts", "err", err)
		}
		h, err := api.NewAPI(api.APIConfig{Store: st, Daemon: d, Metrics: metrics,
			Token: token, ListenHost: listenHost, Log: log, Sessions: sessions, Routes: dashboardRoutes(dash.Routes()),
			Policy: api.SpecPolicy{AllowLocalDriver: o.AllowLocalDriver, AllowAnyKeyPath: o.AllowAnyKeyPath, Home: home, DatasetDir: o.DatasetDir}})
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		ln, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return listenError(o.Listen, err)
		}
		scheme := "http"
		srv = api.NewAPIServer(h, api.ServerTimeouts{}, log)
		if tlsConf != nil {
			scheme, srv.TLSConfig = "https", tlsConf
		}
		// Where the CLI finds this daemon (client.go), once the address is ours and before it answers:
		// a client that saw /healthz answer finds the record (it did not, once, on a busy machine).
		rec := daemonRecord{Addr: ln.Addr().String(), Scheme: scheme, PID: os.Getpid(), StartedAt: time.Now().UTC()}
		if tlsConf != nil {
			rec.Cert = tlsConf.Certificates[0].Certificate[0]
			if net.ParseIP(listenHost) == nil && listenHost != "" {
				rec.ServerName = listenHost
			}
		}
		recPath := daemonRecordPath(dbFile)
		if err := writeDaemonRecord(recPath, rec); err != nil {
			log.Warn("the CLI will need --listen to find this daemon", "err", err)
		}
		defer removeDaemonRecord(recPath)
		go func() {
			var err error
			if tlsConf != nil {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("HTTP server stopped", "err", err)
			}
		}()
		// The path, never the token.
		log.Info("status API listening", "addr", ln.Addr().String(), "scheme", scheme, "token_file", tokenPath,
			"address_record", recPath, "allow_local_driver", o.AllowLocalDriver, "allow_any_key_path", o.AllowAnyKeyPath)
		go dash.Run(ctx)
		// A login URL is a credential: printed for a person at a terminal, never into a log
		// (a journal other users may read); `specsweep dashboard` makes one with the token.
		if isTerminal(env.Stderr) {
			code, until, err := sessions.LoginCode()
			if err == nil {
				fmt.Fprintf(env.Stderr, "dashboard: %s (one-time, until %s)\n",
					daemonURL(scheme, ln.Addr().String(), web.LoginPath(code)), until.UTC().Format(time.RFC3339))
			}
		} else {
			log.Info("dashboard served: `specsweep dashboard` prints a login URL", "url", daemonURL(scheme, ln.Addr().String(), "/"))
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			d.Reload()
		}
	}()
	wctx, stopWatchdog := context.WithCancel(ctx)
	defer stopWatchdog()
	log.Info("daemon starting", "db", dbFile)
	err = d.Run(ctx, func() {
		_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
		go watchdog(wctx)
		log.Info("daemon ready")
	})
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	log.Info("daemon stopped")
	return err
}

// watchdog pings systemd at half the WatchdogSec interval, when the unit sets one.
func watchdog(ctx context.Context) {
	every, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || every <= 0 {
		return
	}
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyWatchdog)
		}
	}
}

// checkListen checks the --listen address and returns its host ("" for none or a wildcard port-only
// address). The API needs its token wherever it listens, loopback too: on a shared machine any
// local user, and any web page in a local browser, can reach loopback.
func checkListen(addr string) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usagef("--listen %q: %v", addr, err)
	}
	return host, nil
}

// listenTLS checks the TLS flags against --listen and loads the certificate: both files or neither;
// a --listen that is not loopback needs TLS or --insecure-listen, for the token, the sessions and
// every sweep's data would otherwise cross the network in clear.
func listenTLS(listen, certFile, keyFile string, insecure bool) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, usagef("--tls-cert and --tls-key go together (got only one)")
	}
	if certFile == "" {
		if listen != "" && !insecure && !loopbackListen(listen) {
			return nil, usagef("--listen %q is not a loopback address: the token, the dashboard's sessions and every sweep would "+
				"cross the network in clear; serve HTTPS with --tls-cert FILE --tls-key FILE, or accept plain HTTP with --insecure-listen", listen)
		}
		return nil, nil
	}
	if listen == "" {
		return nil, usagef("--tls-cert without --listen: there is no API to serve")
	}
	c, err := api.ServerTLS(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return c, nil
}

// loopbackListen: the --listen host is a loopback address or localhost (a wildcard is not: it
// listens on every interface).
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenError words a failed bind with ExitListen, so the unit's RestartPreventExitStatus= keeps
// systemd from restarting into the same wall: address in use (and by whom, when /proc says).
func listenError(listen string, err error) error {
	msg := fmt.Sprintf("specsweep daemon: cannot listen on %s: %v", listen, err)
	if errors.Is(err, syscall.EADDRINUSE) {
		msg = fmt.Sprintf("specsweep daemon: cannot listen on %s: address in use", listen)
		if h := portHolderOf(listen); h != "" {
			msg += " (held by " + h + ")"
		}
		msg += "; stop whatever holds it or give another --listen"
	}
	return exitError{code: ExitListen, err: errors.New(msg)}
}

func submitCmd() command {
	return newCommand("submit", "SPEC",
		"Queue a sweep for the daemon: now, once at a time (--at), or on a cron schedule (--cron or the spec's schedule.cron).", submitRun).
		withExamples("specsweep submit sweep.yaml                              # as soon as its hosts are free",
			"specsweep submit --at 2026-12-01T22:00:00Z sweep.yaml    # not before then",
			"specsweep submit --cron \"0 22 * * *\" sweep.yaml          # every night at 22:00 UTC")
}

type submitOptions struct {
	DB       string        // --db
	New      bool          // --new
	Cron     string        // --cron
	At       string        // --at: an RFC 3339 time
	MinEvery time.Duration // --min-every
	Spec     string        // SPEC
}

func (o *submitOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.BoolVar(&o.New, "new", false, "queue a new sweep even if one of this name exists (queued, finished, or from a changed spec)")
	fs.StringVar(&o.Cron, "cron", "", "cron schedule `EXPR`, UTC unless prefixed CRON_TZ=Zone (overrides the spec's schedule.cron)")
	fs.StringVar(&o.At, "at", "", "start no earlier than this `TIME` (RFC 3339, e.g. 2026-12-01T22:00:00Z)")
	fs.DurationVar(&o.MinEvery, "min-every", sweep.MinEvery, "the shortest @every accepted for --cron (the daemon fires it only with a --min-every as short)")
}

func (o *submitOptions) args(pos []string) (err error) {
	o.Spec, err = oneArg(pos, "SPEC")
	return err
}

// submitRun queues the sweep of o.Spec, or its schedule, in the database.
func submitRun(ctx context.Context, env Env, o *submitOptions) error {
	if o.MinEvery <= 0 {
		return usagef("--min-every %s: want a positive duration", o.MinEvery)
	}
	opts := orchestrator.SubmitOptions{Cron: o.Cron, MinEvery: o.MinEvery}
	if o.At != "" {
		at, err := time.Parse(time.RFC3339, o.At)
		if err != nil {
			return usagef("--at %q: want an RFC 3339 time such as 2026-12-01T22:00:00Z", o.At)
		}
		opts.At = at
	}
	spec, err := loadSpec(o.Spec)
	if err != nil {
		return err
	}
	if err := daemonCanResolve(spec, o.Spec); err != nil {
		return err
	}
	st, err := store.Open(ctx, dbPath(env, o.DB))
	if err != nil {
		return err
	}
	defer st.Close()
	got, err := orchestrator.SubmitNamed(ctx, st, spec, opts, o.New)
	if err != nil {
		return prepareWords("submit", submitWords(err))
	}
	sw := got.Sweep
	switch {
	case got.Resumed:
		more := ""
		if sw.Waiting > 0 {
			more = fmt.Sprintf(", %d for the search to decide", sw.Waiting)
		}
		fmt.Fprintf(env.Stdout, "%d\nsweep %s (id %d) was %s; it is queued again (as `specsweep resume %d` does): %d point(s) to run%s\n",
			sw.ID, sw.Name, sw.ID, priorWords(got.Prior), sw.ID, sw.Pending, more)
	case sw.State == store.SweepScheduled:
		fmt.Fprintf(env.Stdout, "%d\nscheduled sweep %s (id %d) on %q: the daemon fires a new sweep %s@TIME at each time\n",
			sw.ID, sw.Name, sw.ID, sw.Schedule, sw.Name)
	default:
		when := "as soon as its hosts are free"
		if !sw.NotBefore.IsZero() {
			when = "not before " + sw.NotBefore.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(env.Stdout, "%d\nqueued sweep %s (id %d, %d points): the daemon runs it %s\n",
			sw.ID, sw.Name, sw.ID, sw.Points, when)
		if got.Prior.ID != 0 {
			fmt.Fprintln(env.Stdout, afreshWords(got.Prior))
		}
	}
	return nil
}

// priorWords is the state a sweep was found in, as a person reads it: "cancelled", "interrupted",
// or "interrupted (its process died: ...)" for a running sweep whose process died.
func priorWords(sw store.Sweep) string {
	shown, note := shownState(sw, orchestrator.LocalLiveness(time.Now()))
	if note != "" {
		return fmt.Sprintf("%s (%s)", shown, strings.SplitN(note, ";", 2)[0])
	}
	return shown
}

func statusCmd() command {
	return newCommand("status", "[SWEEP]",
		"Sweeps with state, points done/failed/pending and ETA; one sweep in detail.", statusRun).
		withExamples("specsweep status                       # every sweep",
			"specsweep status qwen-nightly          # one sweep: its points, and each failed point's cause",
			"specsweep status --format json 3       # as the daemon's API has it")
}

type statusOptions struct {
	DB     string  // --db
	Format string  // --format: table or json
	JSON   bool    // --json: --format json
	Sweep  *string // [SWEEP]: nil lists every sweep
}

// statusFormats are status's --format values.
var statusFormats = []string{"table", "json"}

func (o *statusOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Format, "format", "table", formatUsage(statusFormats, true)+"; json is the API's shape")
	fs.BoolVar(&o.JSON, "json", false, "the same as --format json")
}

func (o *statusOptions) args(pos []string) error {
	if len(pos) > 1 {
		return usagef("expected at most one SWEEP, got %d arguments", len(pos))
	}
	if len(pos) == 1 {
		o.Sweep = &pos[0]
	}
	return nil
}

// statusRun prints every sweep, or one in detail.
func statusRun(ctx context.Context, env Env, o *statusOptions) error {
	format, err := outputFormat(o.Format, o.JSON, statusFormats...)
	if err != nil {
		return err
	}
	asJSON := format == "json"
	st, err := store.OpenReadOnly(ctx, dbPath(env, o.DB))
	if err != nil {
		return err
	}
	defer st.Close()
	if o.Sweep == nil {
		return statusList(ctx, env, st, asJSON)
	}
	sw, err := findSweep(ctx, st, *o.Sweep)
	if err != nil {
		return err
	}
	if sw.Template() && !asJSON {
		return printSchedule(ctx, env, st, sw)
	}
	s, err := orchestrator.Status(ctx, st, sw.ID)
	if err != nil {
		return err
	}
	if asJSON {
		out := api.SweepDetailJSON{SweepJSON: sweepJSON(s.Sweep, s.ETA, time.Now())}
		for _, p := range s.Points {
			out.Points = append(out.Points, api.PointToJSON(p))
		}
		return writeIndentedJSON(env.Stdout, out)
	}
	outs, err := st.OutputChecks(ctx, sw.ID)
	if err != nil {
		return err
	}
	checks := map[string]store.PointOutputs{}
	for _, oc := range outs {
		if oc.Check != "" {
			checks[oc.PointID] = oc
		}
	}
	printStatus(env, s, checks)
	return printWatchEvents(ctx, env, st, sw.ID)
}

// printWatchEvents adds a watch's verdict and regressions (its `watch` and `regression` events) to
// its status.
func printWatchEvents(ctx context.Context, env Env, st *store.DB, sweepID int64) error {
	evs, err := st.Events(ctx, sweepID, "")
	if err != nil {
		return err
	}
	for _, e := range evs {
		switch e.Kind {
		case store.EventWatch:
			fmt.Fprintf(env.Stdout, "\nwatch of %s: %s\n", e.Host, e.Detail)
		case store.EventRegression:
			fmt.Fprintf(env.Stdout, "  regression: %s\n", e.Detail)
		}
	}
	return nil
}

func statusList(ctx context.Context, env Env, st *store.DB, asJSON bool) error {
	sws, err := st.ListSweeps(ctx)
	if err != nil {
		return err
	}
	var out []api.SweepJSON
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	searched := slices.ContainsFunc(sws, func(s store.Sweep) bool { return s.Waiting+s.Pruned > 0 })
	if !asJSON {
		head := "ID\tNAME\tSTATE\tPOINTS\tDONE\tFAILED\tPENDING\tRUNNING"
		if searched {
			head += "\tWAITING\tPRUNED"
		}
		fmt.Fprintln(tw, head+"\tETA\tCREATED")
	}
	live := orchestrator.LocalLiveness(time.Now())
	for _, s := range sws {
		var e time.Duration
		shown, note := shownState(s, live)
		if s.State == store.SweepRunning && note == "" {
			if full, err := orchestrator.Status(ctx, st, s.ID); err == nil {
				e = full.ETA
			}
		}
		if asJSON {
			out = append(out, sweepJSON(s, e, time.Now()))
			continue
		}
		state := shown
		if note != "" {
			state += " (no process since " + s.Holder.Heartbeat.UTC().Format("15:04Z") + ")"
		}
		switch next := nextFire(s, time.Now()); {
		case s.Template() && !next.IsZero():
			state += " (" + s.Schedule + ", next " + next.UTC().Format("2006-01-02 15:04Z") + ")"
		case s.Schedule != "":
			state += " (" + s.Schedule + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t", s.ID, s.Name, state, s.Points, s.Done, s.Failed,
			s.Pending, s.Running)
		if searched {
			fmt.Fprintf(tw, "%d\t%d\t", s.Waiting, s.Pruned)
		}
		fmt.Fprintf(tw, "%s\t%s\n", etaText(e), s.CreatedAt.UTC().Format("2006-01-02 15:04Z"))
	}
	if asJSON {
		if out == nil {
			out = []api.SweepJSON{}
		}
		return writeIndentedJSON(env.Stdout, out)
	}
	return tw.Flush()
}

// sweepJSON is the API's shape of a sweep (api.SweepToJSON), with a schedule's next firing, as the
// API's list and detail carry it.
func sweepJSON(s store.Sweep, eta time.Duration, now time.Time) api.SweepJSON {
	j := api.SweepToJSON(s, eta)
	if next := nextFire(s, now); !next.IsZero() {
		ms := next.UnixMilli()
		j.NextFire = &ms
	}
	return j
}

// printStatus writes one sweep's state: its counts, the output check's block when points do not
// answer as the baseline does, the points (with a CHECK column when some point has an output
// check, checks by point id) and the points the search pruned.
func printStatus(env Env, s orchestrator.SweepStatus, checks map[string]store.PointOutputs) {
	w := env.Stdout
	sw := s.Sweep
	shown, note := shownState(sw, orchestrator.LocalLiveness(time.Now()))
	fmt.Fprintf(w, "sweep %s (id %d): %s", sw.Name, sw.ID, shown)
	if note != "" {
		fmt.Fprintf(w, ": %s", note)
	}
	if sw.Schedule != "" {
		fmt.Fprintf(w, ", schedule %q", sw.Schedule)
	}
	eta := etaText(s.ETA)
	if note != "" {
		eta = "-"
	}
	fmt.Fprintf(w, "\n%d points: %d done, %d failed, %d pending, %d running, %d cancelled%s; ETA %s\n\n",
		sw.Points, sw.Done, sw.Failed, sw.Pending, sw.Running, sw.Cancelled, searchCounts(sw.PointCounts), eta)
	if len(s.Points) == 0 {
		return
	}
	if ms := storedMismatches(s.Points, checks); len(ms) > 0 {
		printMismatches(w, ms)
		fmt.Fprintln(w)
	}
	checked := len(checks) > 0
	var pruned []prunedPoint
	var failed []failedPoint
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "#\tID\tMETHOD\tSTEPS\tTOPK\tDRAFT\tTP\tSTATE\tHOST\tATTEMPTS"
	if checked {
		head += "\tCHECK"
	}
	fmt.Fprintln(tw, head+"\tFAILURE")
	for i, p := range s.Points {
		failure := string(p.FailureClass)
		if p.FailureDetail != "" && p.State == store.PointFailed {
			failure += ": " + firstLine(p.FailureDetail)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t", i+1, p.ID, p.Method, optInt(p.NumSteps),
			optInt(p.TopK), optInt(p.NumDraftTokens), p.TP, p.State, orDash(p.Host), p.Attempts)
		if checked {
			fmt.Fprintf(tw, "%s\t", checkCell(checks[p.ID].Check))
		}
		fmt.Fprintf(tw, "%s\n", failure)
		switch p.State {
		case store.PointPruned:
			pruned = append(pruned, prunedPoint{label: pointLabel(p), reason: p.Reason})
		case store.PointFailed:
			failed = append(failed, failedPoint{label: pointLabel(p), class: string(p.FailureClass), detail: p.FailureDetail})
		}
	}
	tw.Flush()
	printFailures(w, failed)
	printPruned(w, pruned)
}

// pointLabel is a stored point's label as the plan spells it ("eagle3 s=3 k=1 n=4 tp=4").
func pointLabel(p store.Point) string {
	return sweep.Point{Method: p.Method, Baseline: p.Baseline, Algorithm: sweep.ArgvAlgorithm(p.Argv),
		NumSteps: p.NumSteps, TopK: p.TopK, NumDraftTokens: p.NumDraftTokens, TP: p.TP}.Label()
}

func etaText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return roundDuration(d)
}

// sweepOptions are the options of a command acting on one stored sweep or schedule (cancel, resume).
type sweepOptions struct {
	DB       string // --db
	Schedule string // --schedule: a schedule's id, instead of SWEEP
	Sweep    string // SWEEP: an id or a name
}

func (o *sweepOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Schedule, "schedule", "", "act on the schedule of this `ID` (specsweep schedules lists them) instead of a SWEEP")
}

func (o *sweepOptions) args(pos []string) (err error) {
	if o.Schedule != "" {
		if len(pos) > 0 {
			return usagef("give a SWEEP or --schedule ID, not both")
		}
		return nil
	}
	o.Sweep, err = oneArg(pos, "SWEEP (or --schedule ID)")
	return err
}

// onSweep resolves o.Sweep (or o.Schedule) in the read-write store and hands it to act.
func onSweep(ctx context.Context, env Env, o *sweepOptions, act func(st *store.DB, sw store.Sweep) error) error {
	st, err := store.Open(ctx, dbPath(env, o.DB))
	if err != nil {
		return err
	}
	defer st.Close()
	var sw store.Sweep
	if o.Schedule != "" {
		sw, err = findSchedule(ctx, st, o.Schedule)
	} else {
		sw, err = findSweep(ctx, st, o.Sweep)
	}
	if err != nil {
		return err
	}
	return act(st, sw)
}

func cancelCmd() command {
	return newCommand("cancel", "SWEEP",
		"Cancel a sweep: its pending points are cancelled; the process running it stops its points and restores the units.", cancelRun).
		withExamples("specsweep cancel 3",
			"specsweep cancel --schedule 2          # a schedule stops firing (specsweep schedules lists them)")
}

// cancelRun cancels the sweep o.Sweep.
func cancelRun(ctx context.Context, env Env, o *sweepOptions) error {
	return onSweep(ctx, env, o, func(st *store.DB, sw store.Sweep) error {
		live := orchestrator.LocalLiveness(time.Now())
		if sw.Template() && sw.State == store.SweepCancelled {
			return fmt.Errorf("schedule %s (id %d, %q) is already cancelled: it fires no more; `specsweep resume --schedule %d` starts it again",
				sw.Name, sw.ID, sw.Schedule, sw.ID)
		}
		if sw.State.Terminal() {
			return fmt.Errorf("sweep %s (id %d) has already ended (%s: %s): nothing to cancel", sw.Name, sw.ID, sw.State, countsText(sw))
		}
		orphan, _ := live.Orphaned(sw)
		if err := orchestrator.Cancel(ctx, st, sw, live, "cancelled by specsweep cancel"); err != nil {
			if errors.Is(err, store.ErrTransition) {
				return fmt.Errorf("sweep %s (id %d) is %s and cannot be cancelled", sw.Name, sw.ID, sw.State)
			}
			return err
		}
		if sw.State == store.SweepScheduled {
			fmt.Fprintf(env.Stdout, "cancelled schedule %s (id %d, %q): it fires no more (its sweeps already fired are left as they are); `specsweep resume --schedule %d` starts it again\n",
				sw.Name, sw.ID, sw.Schedule, sw.ID)
			return nil
		}
		var msg string
		switch {
		case orphan:
			_, note := shownState(sw, live)
			msg = "no process was running it (" + strings.SplitN(note, ";", 2)[0] + ")"
		case sw.Running > 0:
			msg = fmt.Sprintf("%d running point(s) stop within seconds (units restored by the process running them: %s)", sw.Running, holderText(sw.Holder, false))
		case sw.State == store.SweepRunning:
			msg = "the process running it (" + holderText(sw.Holder, false) + ") stops within seconds"
		default:
			msg = fmt.Sprintf("it was %s, no point was running", sw.State)
		}
		fmt.Fprintf(env.Stdout, "cancelled sweep %s (id %d): %s; %s\n", sw.Name, sw.ID, msg, resumeHint(sw))
		return nil
	})
}

func resumeCmd() command {
	return newCommand("resume", "SWEEP",
		"Put a cancelled, interrupted or failed sweep back in the daemon's queue (cancelled and interrupted points re-run).", resumeRun).
		withExamples("specsweep resume 3",
			"specsweep resume --schedule 2          # a cancelled schedule fires again")
}

// resumeRun puts the sweep o.Sweep back in the daemon's queue.
func resumeRun(ctx context.Context, env Env, o *sweepOptions) error {
	return onSweep(ctx, env, o, func(st *store.DB, sw store.Sweep) error {
		live := orchestrator.LocalLiveness(time.Now())
		if orchestrator.HeldElsewhere(sw, live) || (sw.State == store.SweepRunning && sw.Holder.Kind == "") {
			return fmt.Errorf("sweep %s (id %d) is running (%s): nothing to resume; `specsweep status %d` follows it",
				sw.Name, sw.ID, holderText(sw.Holder, true), sw.ID)
		}
		got, err := orchestrator.Resume(ctx, st, sw, live, "resumed by specsweep resume")
		if errors.Is(err, store.ErrNotResumable) {
			return notResumable(sw)
		}
		if err != nil {
			return err
		}
		if got.State == store.SweepScheduled {
			fmt.Fprintf(env.Stdout, "schedule %s (id %d) is active again: it fires on %q, next at %s\n", got.Name, got.ID, got.Schedule,
				fireText(nextFire(got, time.Now())))
			return nil
		}
		more := ""
		if got.Waiting > 0 {
			more = fmt.Sprintf(", %d for the search to decide", got.Waiting)
		}
		if got.Pending+got.Waiting == 0 && got.Failed > 0 {
			more += fmt.Sprintf(" (its %d failed point(s) stay failed: `specsweep run --new SPEC` or `specsweep submit --new SPEC` starts afresh)", got.Failed)
		}
		fmt.Fprintf(env.Stdout, "sweep %s (id %d) is %s again: %d point(s) to run%s\n", got.Name, got.ID, got.State, got.Pending, more)
		return nil
	})
}

// notResumable words resume's refusal of a sweep in a state it cannot resume from.
func notResumable(sw store.Sweep) error {
	switch sw.State {
	case store.SweepQueued:
		return fmt.Errorf("sweep %s (id %d) is already queued: nothing to resume; the daemon runs it %s", sw.Name, sw.ID, queuedWhen(sw))
	case store.SweepDone:
		return fmt.Errorf("sweep %s (id %d) is done (%s): nothing to resume; `specsweep report %d` shows its results, "+
			"`specsweep run --new SPEC` or `specsweep submit --new SPEC` runs it again as a new sweep", sw.Name, sw.ID, countsText(sw), sw.ID)
	case store.SweepScheduled:
		return fmt.Errorf("schedule %s (id %d) is active (it fires on %q, next at %s): nothing to resume", sw.Name, sw.ID, sw.Schedule,
			fireText(nextFire(sw, time.Now())))
	}
	return fmt.Errorf("sweep %s (id %d) is %s: only cancelled, interrupted or failed sweeps can be resumed", sw.Name, sw.ID, sw.State)
}

// queuedWhen says when the daemon runs a queued sweep: "as soon as its hosts are free", or "not
// before TIME".
func queuedWhen(sw store.Sweep) string {
	if !sw.NotBefore.IsZero() && sw.NotBefore.After(time.Now()) {
		return "not before " + sw.NotBefore.UTC().Format(time.RFC3339)
	}
	return "as soon as its hosts are free"
}
