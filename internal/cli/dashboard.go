package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/specsweep/specsweep/api"
	"github.com/specsweep/specsweep/web"
)

// dashboardRoutes turns the dashboard's routes into the API's.
func dashboardRoutes(rs []web.Route) []api.Route {
	out := make([]api.Route, len(rs))
	for i, r := range rs {
		out[i] = api.Route{Pattern: r.Pattern, Handler: r.Handler, Open: r.Open, Page: r.Page}
	}
	return out
}

func dashboardCmd() command {
	return newCommand("dashboard", "",
		"Print a one-time login URL for the daemon's web dashboard (reads the daemon's token file); --revoke ends every session.", dashboardRun).
		withExamples("sudo specsweep dashboard --db /var/lib/specsweep/specsweep.db",
			"sudo specsweep dashboard --revoke      # log every browser out")
}

type dashboardOptions struct {
	Daemon daemonFlags // --db, --listen, --token-file
	Revoke bool        // --revoke
}

func (o *dashboardOptions) flags(fs *flag.FlagSet) {
	o.Daemon.flags(fs)
	fs.BoolVar(&o.Revoke, "revoke", false, "end every dashboard session (their pages and streams) and unused login URL, instead of printing a URL")
}

func (o *dashboardOptions) args(pos []string) error { return noArgs(pos) }

// dashboardRun prints a one-time login URL of the daemon's dashboard, or ends every session.
func dashboardRun(ctx context.Context, env Env, o *dashboardOptions) error {
	if o.Revoke {
		return revokeSessions(ctx, env, o.Daemon)
	}
	// The daemon proves itself before the token is sent (client.go).
	c, code, body, err := daemonRequest(ctx, env, o.Daemon, http.MethodPost, "/api/login-codes", nil)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("dashboard: the daemon refused a login code: %s", apiError(code, body))
	}
	var lc api.LoginCodeJSON
	if err := json.Unmarshal(body, &lc); err != nil {
		return fmt.Errorf("dashboard: the daemon's answer: %w", err)
	}
	fmt.Fprintln(env.Stdout, c.Base()+lc.Path)
	fmt.Fprintf(env.Stderr, "one-time login URL, valid until %s; over SSH: ssh -L %s:127.0.0.1:%s HOST, then open it here\n",
		time.UnixMilli(lc.ExpiresAt).UTC().Format(time.RFC3339), portOf(c.addr), portOf(c.addr))
	return nil
}

// revokeSessions asks the daemon to end every dashboard session (POST /api/sessions/revoke, the
// token only, sent once the daemon proved itself) and says how many ended.
func revokeSessions(ctx context.Context, env Env, df daemonFlags) error {
	_, code, body, err := daemonRequest(ctx, env, df, http.MethodPost, "/api/sessions/revoke", nil)
	if err != nil {
		return fmt.Errorf("dashboard --revoke: %w", err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("dashboard --revoke: the daemon refused: %s", apiError(code, body))
	}
	var rv api.RevokeJSON
	if err := json.Unmarshal(body, &rv); err != nil {
		return fmt.Errorf("dashboard --revoke: the daemon's answer: %w", err)
	}
	fmt.Fprintf(env.Stdout, "%d dashboard session(s) ended; unused login URLs no longer work\n", rv.Ended)
	return nil
}

func portOf(listen string) string {
	_, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "8377"
	}
	return p
}
