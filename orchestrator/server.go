package orchestrator

import (
	"log/slog"
	"net/http"
	"time"
)

// The API server's default timeouts: a client gets this long to send its headers, its whole request
// (bodies are at most MaxBodyBytes), and to read the answer; an idle keep-alive connection is closed
// after IdleTimeout. No endpoint streams, so WriteTimeout applies to all (a streaming one would clear
// its write deadline with http.ResponseController).
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	// maxHeaderBytes caps request headers (net/http's default is 1 MiB).
	maxHeaderBytes = 64 << 10
)

// ServerTimeouts bound how long one client may hold a connection; zero fields take the defaults.
type ServerTimeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// NewAPIServer is the HTTP server of the daemon's API (NewAPI's handler): the one place its
// timeouts are set, so a slow client cannot hold connections open. The server's own errors go to
// log (nil: discarded).
func NewAPIServer(h http.Handler, t ServerTimeouts, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	orDefault := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: orDefault(t.ReadHeader, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(t.Read, DefaultReadTimeout),
		WriteTimeout:      orDefault(t.Write, DefaultWriteTimeout),
		IdleTimeout:       orDefault(t.Idle, DefaultIdleTimeout),
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
