package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/web"
)

// dashboardRoutes turns the dashboard's routes into the API's.
func dashboardRoutes(rs []web.Route) []orchestrator.Route {
	out := make([]orchestrator.Route, len(rs))
	for i, r := range rs {
		out[i] = orchestrator.Route{Pattern: r.Pattern, Handler: r.Handler, Open: r.Open, Page: r.Page}
	}
	return out
}

// dashboardURL is the URL of path on the daemon listening at listen (a wildcard: loopback).
func dashboardURL(listen, path string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen + path
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path
}

func dashboardCmd() command {
	return command{
		name:    "dashboard",
		args:    "",
		summary: "Print a one-time login URL for the daemon's web dashboard (reads the daemon's token file); --revoke ends every session.",
		setup: func(fs *flag.FlagSet) func(context.Context, Env, []string) error {
			db := fs.String("db", "", "the daemon's database file, for its token file DB.token (default $SPECSWEEP_DB or ./specsweep.db)")
			listen := fs.String("listen", "127.0.0.1:8377", "the daemon's --listen address")
			tokenFile := fs.String("token-file", "", "the daemon's --token-file, if it runs with one")
			revoke := fs.Bool("revoke", false, "end every dashboard session (their pages and streams) and unused login URL, instead of printing a URL")
			return func(ctx context.Context, env Env, pos []string) error {
				if len(pos) > 0 {
					return usagef("unexpected argument %q", pos[0])
				}
				if _, err := checkListen(*listen); err != nil || *listen == "" {
					return usagef("--listen %q: the daemon's host:port", *listen)
				}
				path := *tokenFile
				if path == "" {
					path = dbPath(env, *db) + ".token"
				}
				token, err := readTokenFile(path)
				if err != nil {
					return fmt.Errorf("dashboard: %w (run this as the daemon's user, with its --db or --token-file)", err)
				}
				if *revoke {
					return revokeSessions(ctx, env, *listen, token)
				}
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(cctx, http.MethodPost, dashboardURL(*listen, "/api/login-codes"), nil)
				if err != nil {
					return err
				}
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return fmt.Errorf("dashboard: asking the daemon at %s for a login code: %w (is `specsweep daemon` running with --listen %s?)", *listen, err, *listen)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
				if resp.StatusCode != http.StatusOK {
					var e struct{ Error string }
					_ = json.Unmarshal(body, &e)
					return fmt.Errorf("dashboard: the daemon refused a login code: %d %s", resp.StatusCode, strings.TrimSpace(e.Error))
				}
				var lc orchestrator.LoginCodeJSON
				if err := json.Unmarshal(body, &lc); err != nil {
					return fmt.Errorf("dashboard: the daemon's answer: %w", err)
				}
				fmt.Fprintln(env.Stdout, dashboardURL(*listen, lc.Path))
				fmt.Fprintf(env.Stderr, "one-time login URL, valid until %s; over SSH: ssh -L %s:127.0.0.1:%s HOST, then open it here\n",
					time.UnixMilli(lc.ExpiresAt).UTC().Format(time.RFC3339), portOf(*listen), portOf(*listen))
				return nil
			}
		},
	}
}

// revokeSessions asks the daemon to end every dashboard session (POST /api/sessions/revoke, the
// token only) and says how many ended.
func revokeSessions(ctx context.Context, env Env, listen, token string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, dashboardURL(listen, "/api/sessions/revoke"), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("dashboard --revoke: asking the daemon at %s to end the sessions: %w (is `specsweep daemon` running with --listen %s?)", listen, err, listen)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		_ = json.Unmarshal(body, &e)
		return fmt.Errorf("dashboard --revoke: the daemon refused: %d %s", resp.StatusCode, strings.TrimSpace(e.Error))
	}
	var rv orchestrator.RevokeJSON
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
