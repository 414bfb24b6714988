package api

import (
	"crypto/tls"
	"fmt"
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

// ServerTLS is the API server's TLS configuration from a PEM certificate (chain) and key file,
// loaded once at start so a bad file stops the daemon with its name. TLS 1.2 at least.
func ServerTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
