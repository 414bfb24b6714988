package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/specsweep/specsweep/api"
	"github.com/specsweep/specsweep/orchestrator"
)

// The CLI's client of the daemon's API (docs/security.md, "The CLI authenticates the daemon"): it
// finds the daemon in the address record the daemon wrote beside its database (DB.daemon), makes it
// prove on one connection that it knows the token (GET /api/hello, api/hello.go), and only
// then sends the token, on that same connection.

// daemonRecord is DB.daemon: where the daemon listens, written (0600, atomically) once it has bound
// the address, removed when it stops.
type daemonRecord struct {
	Addr      string    `json:"addr"`   // ln.Addr(): the address it bound
	Scheme    string    `json:"scheme"` // http or https
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// Cert is the DER of the certificate the daemon serves under TLS: the CLI trusts it beside the
	// system's roots (a self-signed certificate works without a CA).
	Cert []byte `json:"cert,omitempty"`
	// ServerName is the --listen host when it is a name (gpu-box.example): the name the CLI checks
	// the certificate for, while it dials Addr.
	ServerName string `json:"server_name,omitempty"`
}

// daemonRecordPath is the address record of the daemon of the database dbFile.
func daemonRecordPath(dbFile string) string { return dbFile + ".daemon" }

// writeDaemonRecord writes rec to path: a 0600 temporary file in the same directory, renamed into
// place, so a reader never sees half a record.
func writeDaemonRecord(path string, rec daemonRecord) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("daemon address record %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("daemon address record %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("daemon address record %s: %w", path, err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("daemon address record %s: writing: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("daemon address record %s: writing: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("daemon address record %s: writing: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("daemon address record %s: %w", path, err)
	}
	return nil
}

// removeDaemonRecord removes path if it is still this process's record (another daemon may have
// written its own since).
func removeDaemonRecord(path string) {
	if rec, err := readDaemonRecord(path); err == nil && rec.PID == os.Getpid() {
		_ = os.Remove(path)
	}
}

// readDaemonRecord reads an address record, refusing one that others may write or that belongs to
// another user (whoever writes it chooses where the CLI goes; the hello still guards the token).
func readDaemonRecord(path string) (daemonRecord, error) {
	var rec daemonRecord
	f, err := os.Open(path)
	if err != nil {
		return rec, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rec, err
	}
	if m := fi.Mode().Perm(); !fi.Mode().IsRegular() || m&0o022 != 0 {
		return rec, fmt.Errorf("daemon address record %s: not a regular file only its owner may write (mode %v)", path, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return rec, fmt.Errorf("daemon address record %s belongs to uid %d, not to you (uid %d)", path, st.Uid, os.Geteuid())
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<16))
	if err != nil {
		return rec, fmt.Errorf("daemon address record %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("daemon address record %s: %w", path, err)
	}
	if _, _, err := net.SplitHostPort(rec.Addr); err != nil || (rec.Scheme != "http" && rec.Scheme != "https") {
		return rec, fmt.Errorf("daemon address record %s: want an address and a scheme http or https, got %q %q", path, rec.Addr, rec.Scheme)
	}
	return rec, nil
}

// daemonURL is the URL of path on the daemon listening at listen (a wildcard address: loopback).
func daemonURL(scheme, listen, path string) string {
	return scheme + "://" + dialAddr(listen) + path
}

// dialAddr is the address a client on this machine dials for a daemon listening at listen: a
// wildcard host (0.0.0.0, ::, none) becomes 127.0.0.1.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// daemonFlags are the flags by which a command finds the daemon and its token.
type daemonFlags struct {
	DB        string // --db: the daemon's database, beside which its token file and address record lie
	Listen    string // --listen: [https://]HOST:PORT, "" for the recorded address
	TokenFile string // --token-file
}

func (d *daemonFlags) flags(fs *flag.FlagSet) {
	fs.StringVar(&d.DB, "db", "", "the daemon's database `PATH`, for its token file DB.token and address record DB.daemon (default $SPECSWEEP_DB or ./specsweep.db)")
	fs.StringVar(&d.Listen, "listen", "", "the daemon's address, `[https://]HOST:PORT` (default: the address the daemon recorded in DB.daemon)")
	fs.StringVar(&d.TokenFile, "token-file", "", "the daemon's --token-file `FILE`, if it runs with one")
}

// daemonConn is one connection to a daemon that proved it knows the token; requests on it carry
// the token.
type daemonConn struct {
	client *http.Client
	scheme string
	addr   string // as dialed, host:port
	host   string // in URLs: addr, or the certificate's name and addr's port
	token  string
}

// Base is the daemon's URL without a path (https://127.0.0.1:8377).
func (c *daemonConn) Base() string { return c.scheme + "://" + c.host }

// notDaemonHint ends every refusal: what was kept back and how to look at the port.
const notDaemonHint = "the token was not sent"

// connectDaemon finds the daemon (the --listen override, else its address record), reads the
// token and makes the daemon prove it knows it (GET /api/hello) before anything carries the token.
func connectDaemon(ctx context.Context, env Env, df daemonFlags) (*daemonConn, error) {
	dbFile := dbPath(env, df.DB)
	tokenPath := df.TokenFile
	if tokenPath == "" {
		tokenPath = dbFile + ".token"
	}
	token, err := readTokenFile(tokenPath)
	if err != nil {
		return nil, fmt.Errorf("%w (run this as the daemon's user, with its --db or --token-file)", err)
	}
	recPath := daemonRecordPath(dbFile)
	rec, recErr := readDaemonRecord(recPath)
	var addr, scheme, serverName string
	fromRecord := false
	switch {
	case df.Listen != "":
		addr, scheme = df.Listen, ""
		if s, rest, ok := strings.Cut(addr, "://"); ok {
			addr, scheme = rest, s
		}
		if scheme != "" && scheme != "http" && scheme != "https" {
			return nil, usagef("--listen %q: the scheme is http or https", df.Listen)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, usagef("--listen %q: want the daemon's [https://]HOST:PORT", df.Listen)
		}
		if scheme == "" {
			scheme = "http"
			if recErr == nil {
				scheme = rec.Scheme
			}
		}
	case errors.Is(recErr, fs.ErrNotExist):
		return nil, fmt.Errorf("no daemon address record %s: the daemon of %s is not running (it writes the record once it "+
			"listens, and removes it when it stops), or it runs with --listen \"\" or another --db; start it, or give --listen HOST:PORT", recPath, dbFile)
	case recErr != nil:
		return nil, recErr
	default:
		addr, scheme, serverName, fromRecord = rec.Addr, rec.Scheme, rec.ServerName, true
	}
	addr = dialAddr(addr)
	where := addr
	if fromRecord {
		where = fmt.Sprintf("%s (recorded in %s by pid %d at %s)", addr, recPath, rec.PID, rec.StartedAt.UTC().Format(time.RFC3339))
	}

	var tlsConf *tls.Config
	if scheme == "https" {
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if recErr == nil && len(rec.Cert) > 0 {
			cert, err := x509.ParseCertificate(rec.Cert)
			if err != nil {
				return nil, fmt.Errorf("daemon address record %s: its certificate: %w", recPath, err)
			}
			roots.AddCert(cert)
		}
		tlsConf = &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	}
	one := &oneConn{target: addr}
	host := addr
	if serverName != "" {
		_, port, _ := net.SplitHostPort(addr)
		host = net.JoinHostPort(serverName, port)
	}
	c := &daemonConn{scheme: scheme, addr: addr, host: host, token: token, client: &http.Client{
		Transport: &http.Transport{
			Proxy:               nil, // never through a proxy: the token goes to the daemon only
			DialContext:         one.dial,
			TLSClientConfig:     tlsConf,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxConnsPerHost:     1,
			IdleConnTimeout:     time.Minute,
		},
		// A redirect would leave the proven connection.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}

	nonce := make([]byte, api.HelloNonceBytes)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("hello to the daemon: generating a nonce: %w", err)
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, c.Base()+"/api/hello?nonce="+hex.EncodeToString(nonce), nil)
	if err != nil {
		return nil, fmt.Errorf("hello to the daemon at %s: %w", where, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, dialWords(err, where, rec, fromRecord)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("hello to the daemon at %s: reading the answer: %w", where, err)
	}
	notDaemon := func(why string) error {
		msg := fmt.Sprintf("whatever listens on %s is not this daemon: %s; %s", where, why, notDaemonHint)
		if h := portHolderOf(addr); h != "" {
			msg += "; the port is held by " + h
		}
		if fromRecord && !orchestrator.ProcessAlive(rec.PID) {
			msg += fmt.Sprintf("; the daemon that recorded the address (pid %d) is not running", rec.PID)
		}
		return errors.New(msg)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, notDaemon(fmt.Sprintf("it answers GET /api/hello with %s", resp.Status))
	}
	var hj api.HelloJSON
	if err := json.Unmarshal(body, &hj); err != nil {
		return nil, notDaemon("its answer to GET /api/hello is not the daemon's")
	}
	proof, err := hex.DecodeString(hj.Proof)
	if err != nil {
		return nil, notDaemon("its answer to GET /api/hello is not the daemon's")
	}
	remote := api.NormalAddr(one.remoteAddr())
	if !hmac.Equal(proof, api.HelloProof(token, nonce, scheme, remote)) {
		if signed := api.NormalAddr(hj.Addr); signed != remote &&
			hmac.Equal(proof, api.HelloProof(token, nonce, scheme, signed)) {
			return nil, fmt.Errorf("the daemon answering at %s (connected to %s) proves itself for %s: a relay or port forward "+
				"stands between; %s (give --listen %s to reach the daemon itself)", where, remote, signed, notDaemonHint, signed)
		}
		return nil, notDaemon(fmt.Sprintf("it cannot prove it knows the token of %s (or the daemon runs with another --token-file)", tokenPath))
	}
	return c, nil
}

// request sends method path (a JSON body when body is not nil) with the token on the proven
// connection; it returns the status and up to 1 MiB of the answer.
func (c *daemonConn) request(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return c.send(ctx, method, path, "application/json", body)
}

// send is request with a body of the given Content-Type.
func (c *daemonConn) send(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, c.Base()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s on the daemon at %s: %w", method, path, c.addr, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, out, fmt.Errorf("%s %s on the daemon at %s: reading the answer: %w", method, path, c.addr, err)
	}
	return resp.StatusCode, out, nil
}

// daemonRequest connects to the daemon as connectDaemon does and sends one request with the token.
func daemonRequest(ctx context.Context, env Env, df daemonFlags, method, path string, body []byte) (*daemonConn, int, []byte, error) {
	c, err := connectDaemon(ctx, env, df)
	if err != nil {
		return nil, 0, nil, err
	}
	code, out, err := c.request(ctx, method, path, body)
	return c, code, out, err
}

// apiError is the "error" field of an API's refusal, or the status.
func apiError(code int, body []byte) string {
	var e struct{ Error string }
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return fmt.Sprintf("%d %s", code, strings.TrimSpace(e.Error))
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// dialWords words a failed hello that never got an answer: nothing listens (a stale record), TLS
// refused, or the network.
func dialWords(err error, where string, rec daemonRecord, fromRecord bool) error {
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &certErr):
		return fmt.Errorf("the daemon at %s: its TLS certificate is not trusted (%v): %s", where, certErr.Err, notDaemonHint)
	case errors.Is(err, syscall.ECONNREFUSED):
		if fromRecord && !orchestrator.ProcessAlive(rec.PID) {
			return fmt.Errorf("nothing listens on %s: the record is stale, the daemon (pid %d) is no longer running; "+
				"start it (systemctl start specsweep)", where, rec.PID)
		}
		return fmt.Errorf("nothing listens on %s: is `specsweep daemon` running, with this --listen?", where)
	}
	return fmt.Errorf("hello to the daemon at %s: %w", where, err)
}

// oneConn dials once: the connection on which the daemon proved itself is the only one the token
// travels on (a second dial could reach another listener, had the daemon died in between).
type oneConn struct {
	target string // what is dialed, whatever the URL's host
	mu     sync.Mutex
	dialed bool
	remote string
}

func (o *oneConn) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dialed {
		return nil, errors.New("the connection to the daemon closed; it is not dialed again (the daemon proved itself on that one)")
	}
	o.dialed = true
	var d net.Dialer
	c, err := d.DialContext(ctx, network, o.target)
	if err != nil {
		return nil, err
	}
	o.remote = c.RemoteAddr().String()
	return c, nil
}

func (o *oneConn) remoteAddr() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.remote
}

func apiCmd() command {
	return newCommand("api", "METHOD PATH",
		"Send one request to the daemon's HTTP API with its token, once the daemon proved it knows the token; print the answer.", apiRun).
		withExamples("sudo specsweep api --db /var/lib/specsweep/specsweep.db GET /api/sweeps/3",
			"specsweep api --data sweep.yaml POST '/api/sweeps?at=2026-12-01T22:00:00Z'",
			"specsweep api POST /api/sweeps/3/cancel")
}

type apiOptions struct {
	Daemon daemonFlags // --db, --listen, --token-file
	Data   string      // --data: a file, "-" for stdin
	Method string      // METHOD, upper case
	Path   string      // PATH: starts with /
}

func (o *apiOptions) flags(fs *flag.FlagSet) {
	o.Daemon.flags(fs)
	fs.StringVar(&o.Data, "data", "", "the request's body: a `FILE` (\"-\": stdin), sent as application/json when it starts with {, else application/yaml")
}

func (o *apiOptions) args(pos []string) error {
	if len(pos) != 2 {
		return usagef("want METHOD PATH (e.g. GET /api/sweeps), got %d arguments", len(pos))
	}
	o.Method, o.Path = strings.ToUpper(pos[0]), pos[1]
	if !strings.HasPrefix(o.Path, "/") {
		return usagef("PATH %q: want a path on the daemon such as /api/sweeps", o.Path)
	}
	return nil
}

// apiRun sends one request to the daemon, once it proved it knows the token, and prints the answer.
func apiRun(ctx context.Context, env Env, o *apiOptions) error {
	var body []byte
	ctype := "application/yaml"
	if o.Data != "" {
		var err error
		if o.Data == "-" && env.Stdin == nil {
			err = errors.New("no standard input")
		} else if o.Data == "-" {
			body, err = io.ReadAll(io.LimitReader(env.Stdin, api.MaxBodyBytes+1))
		} else {
			body, err = os.ReadFile(o.Data)
		}
		if err != nil {
			return fmt.Errorf("api: reading --data: %w", err)
		}
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
			ctype = "application/json"
		}
	}
	c, err := connectDaemon(ctx, env, o.Daemon)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	code, out, err := c.send(ctx, o.Method, o.Path, ctype, body)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	if code < 200 || code > 299 {
		return fmt.Errorf("api: %s %s: %s", o.Method, o.Path, apiError(code, out))
	}
	_, err = env.Stdout.Write(out)
	return err
}
