package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/api"
	"github.com/specsweep/specsweep/store"
)

// TestDaemonExitsWithListenStatusWhenThePortIsHeld: a daemon that cannot bind exits 3 (the unit's
// RestartPreventExitStatus=), saying "address in use" and who holds the port.
func TestDaemonExitsWithListenStatusWhenThePortIsHeld(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, errs, code := runMain(t, nil, "daemon", "--db", filepath.Join(t.TempDir(), "d.db"), "--listen", addr)
	holder := fmt.Sprintf("pid %d (", os.Getpid())
	if code != ExitListen || !strings.Contains(errs, "cannot listen on "+addr+": address in use") || !strings.Contains(errs, holder) {
		t.Errorf("daemon on a held port: exit %d, want %d naming %s:\n%s", code, ExitListen, holder, errs)
	}
}

// TestDaemonListenNeedsTLSOffLoopback: plain HTTP only on loopback unless --insecure-listen; TLS
// needs both files, readable; the refusal names both ways out.
func TestDaemonListenNeedsTLSOffLoopback(t *testing.T) {
	for _, c := range []struct {
		listen, cert, key string
		insecure          bool
		want              string // "" accepted
	}{
		{"127.0.0.1:8377", "", "", false, ""},
		{"[::1]:8377", "", "", false, ""},
		{"localhost:8377", "", "", false, ""},
		{"", "", "", false, ""},
		{"0.0.0.0:8377", "", "", false, "--insecure-listen"},
		{":8377", "", "", false, "--tls-cert FILE --tls-key FILE"},
		{"10.231.255.5:8377", "", "", false, "not a loopback address"}, // parsed only: listenTLS never binds or dials
		{"gpu-box:8377", "", "", false, "not a loopback address"},
		{"0.0.0.0:8377", "", "", true, ""},
		{"0.0.0.0:8377", "/c.pem", "", false, "go together"},
		{"0.0.0.0:8377", "", "/k.pem", false, "go together"},
		{"0.0.0.0:8377", "/nonexistent/c.pem", "/nonexistent/k.pem", false, "/nonexistent/c.pem"},
	} {
		_, err := listenTLS(c.listen, c.cert, c.key, c.insecure)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("listen %q cert %q key %q insecure %v: %v, want %q", c.listen, c.cert, c.key, c.insecure, err, c.want)
		}
	}
	// Through the command: exit 2 before anything listens (the context only bounds a daemon that
	// would start).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"daemon", "--db", filepath.Join(t.TempDir(), "d.db"), "--listen", "0.0.0.0:0"},
		Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	if code != ExitUsage || !strings.Contains(errb.String(), "--insecure-listen") {
		t.Errorf("daemon --listen 0.0.0.0:0: exit %d, want %d:\n%s", code, ExitUsage, errb.String())
	}
}

// TestDaemonRecordIsPrivate: the address record is 0600 whatever the umask and read back; one
// others may write, or with a bad scheme, is refused; a daemon removes only its own.
func TestDaemonRecordIsPrivate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d.db.daemon")
	old := syscall.Umask(0)
	err := writeDaemonRecord(p, daemonRecord{Addr: "127.0.0.1:8377", Scheme: "https", PID: os.Getpid()})
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v, want mode 0600", fi, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files beside the record: %v", ents)
	}
	if rec, err := readDaemonRecord(p); err != nil || rec.Addr != "127.0.0.1:8377" || rec.Scheme != "https" {
		t.Errorf("read back: %+v %v", rec, err)
	}
	if err := os.Chmod(p, 0o622); err != nil {
		t.Fatal(err)
	}
	if _, err := readDaemonRecord(p); err == nil || !strings.Contains(err.Error(), "only its owner may write") {
		t.Errorf("a record others may write: %v", err)
	}
	if err := writeDaemonRecord(p, daemonRecord{Addr: "127.0.0.1:8377", Scheme: "gopher", PID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := readDaemonRecord(p); err == nil || !strings.Contains(err.Error(), "scheme") {
		t.Errorf("a record with scheme gopher: %v", err)
	}
	removeDaemonRecord(p) // pid 1's record: kept
	if _, err := os.Stat(p); err != nil {
		t.Errorf("another daemon's record removed: %v", err)
	}
}

// recordingListener accepts connections on loopback, keeps every byte and answers each read with a
// 200 JSON that looks like the daemon's.
type recordingListener struct {
	ln  net.Listener
	mu  sync.Mutex
	got bytes.Buffer
}

func newRecordingListener(t *testing.T) *recordingListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recordingListener{ln: ln}
	t.Cleanup(func() { ln.Close() })
	body := fmt.Sprintf(`{"addr": %q, "scheme": "http", "proof": "%s", "path": "/login?code=x"}`, ln.Addr(), strings.Repeat("00", 32))
	resp := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1<<16)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						r.mu.Lock()
						r.got.Write(buf[:n])
						r.mu.Unlock()
						_, _ = io.WriteString(c, resp)
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return r
}

func (r *recordingListener) received() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got.String()
}

// TestDashboardSendsTheTokenOnlyToTheDaemon: a listener that answers like the daemon without the
// token, and a real API with another token, get a hello and never the token; `dashboard` refuses
// both, saying the token was not sent.
func TestDashboardSendsTheTokenOnlyToTheDaemon(t *testing.T) {
	dbFile := filepath.Join(t.TempDir(), "d.db")
	token, _, err := apiToken(dbFile, "")
	if err != nil {
		t.Fatal(err)
	}
	fake := newRecordingListener(t)
	_, errOut, code := runMain(t, nil, "dashboard", "--db", dbFile, "--listen", fake.ln.Addr().String())
	if code != ExitFailure || !strings.Contains(errOut, "is not this daemon") || !strings.Contains(errOut, "the token was not sent") {
		t.Errorf("dashboard to a listener without the token: exit %d, %q", code, errOut)
	}
	if got := fake.received(); !strings.Contains(got, "GET /api/hello?nonce=") || strings.Contains(got, token) {
		t.Errorf("the listener received %q: want a hello and never the token", got)
	}

	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "other.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := api.NewAPI(api.APIConfig{Store: st, Metrics: api.NewMetrics(st), Token: "another-daemons-token"})
	if err != nil {
		t.Fatal(err)
	}
	var seen bytes.Buffer
	var mu sync.Mutex
	ts := httptest.NewUnstartedServer(h)
	inner := ts.Config.Handler
	ts.Config.Handler = httpHandlerFunc(func(r string) { mu.Lock(); seen.WriteString(r); mu.Unlock() }, inner)
	ts.Start()
	defer ts.Close()
	_, errOut, code = runMain(t, nil, "dashboard", "--db", dbFile, "--listen", strings.TrimPrefix(ts.URL, "http://"))
	if code != ExitFailure || !strings.Contains(errOut, "cannot prove it knows the token") {
		t.Errorf("dashboard to a daemon with another token: exit %d, %q", code, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(seen.String(), token) || !strings.Contains(seen.String(), "/api/hello") {
		t.Errorf("the other daemon saw %q: want the hello and never the token", seen.String())
	}
}

// httpHandlerFunc records each request's path and Authorization header, then serves it.
func httpHandlerFunc(record func(string), h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r.URL.Path + " " + r.Header.Get("Authorization") + "\n")
		h.ServeHTTP(w, r)
	})
}
