package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The CLI talks only to the daemon (docs/security.md, "The CLI authenticates the daemon"): the real
// binaries over real sockets. Before, `specsweep dashboard` sent `Authorization: Bearer TOKEN` to
// whatever listened on --listen, and a daemon that could not bind crash-looped.

// recorderScript listens on argv[1]:argv[2] and writes every byte it receives to stdout, answering
// each read with 200 and a JSON that looks like a hello and a login code: what a port thief that
// wants the token would do.
const recorderScript = `
import socket, sys, threading
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port))
s.listen(16)
body = ('{"addr": "%s:%d", "scheme": "http", "proof": "%s", "path": "/login?code=x", "expires_at": 1}' % (host, port, "00" * 32)).encode()
resp = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
lock = threading.Lock()
def serve(c):
    c.settimeout(10)
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            with lock:
                sys.stdout.buffer.write(b)
                sys.stdout.buffer.flush()
            c.sendall(resp)
    except Exception:
        pass
    c.close()
sys.stderr.write("listening\n"); sys.stderr.flush()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// portThief starts another process (python3, as user nobody when the test runs as root) holding
// addr and recording all it receives; stop ends it and returns the bytes.
func portThief(t *testing.T, addr string) (stop func() []byte) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("/usr/bin/python3", "-c", recorderScript, host, port)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Dir = "/"
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("the port thief: %v", err)
	}
	done := false
	stop = func() []byte {
		if !done {
			done = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return out.Bytes()
	}
	t.Cleanup(func() { stop() })
	waitFor(t, 20*time.Second, "the port thief listening", func() bool {
		if strings.Contains(errb.String(), "Error") {
			t.Fatalf("the port thief: %s", errb.String())
		}
		return strings.Contains(errb.String(), "listening")
	})
	return stop
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }

// relay listens on a free loopback port and forwards every connection to target, recording what
// clients send.
func relay(t *testing.T, target string) (addr string, sent *syncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	sent = &syncBuffer{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(c, up); c.Close() }()
				_, _ = io.Copy(io.MultiWriter(up, sent), c)
			}()
		}
	}()
	return ln.Addr().String(), sent
}

// TestDashboardTalksOnlyToTheDaemon: `specsweep dashboard` finds the daemon from its address record
// (no --listen) and gets a login URL; through a relay on another port it refuses; with the daemon
// dead (its record stale) it says so; with another user's listener on the daemon's port it refuses
// and that listener never receives the token; and the daemon cannot start there: exit 3, "address in
// use", naming the holder.
func TestDashboardTalksOnlyToTheDaemon(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "d.db")
	d := startDaemon(t, db)

	// The record: the real address, 0600, this daemon's pid.
	var rec struct {
		Addr, Scheme string
		PID          int
	}
	if fi, err := os.Stat(db + ".daemon"); err != nil {
		t.Errorf("the daemon's address record: %v", err)
	} else if err := json.Unmarshal([]byte(mustRead(t, db+".daemon")), &rec); err != nil || fi.Mode().Perm() != 0o600 ||
		rec.Addr != d.addr || rec.Scheme != "http" || rec.PID != d.cmd.Process.Pid {
		t.Errorf("address record mode %04o, %+v %v; want 0600, %s http pid %d", fi.Mode().Perm(), rec, err, d.addr, d.cmd.Process.Pid)
	}
	r := specsweep(t, 30*time.Second, "dashboard", "--db", db)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "http://"+d.addr+"/") {
		t.Errorf("dashboard from the address record:\n%s", r)
	}
	// `specsweep api`, what the docs show instead of curl: a submit and a read.
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte(apiSSHSpec("via-api", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	r = specsweep(t, 30*time.Second, "api", "--db", db, "--data", spec, "POST", "/api/sweeps"+later)
	if r.code != 0 || !strings.Contains(r.stdout, `"via-api"`) {
		t.Errorf("specsweep api POST /api/sweeps:\n%s", r)
	}
	r = specsweep(t, 30*time.Second, "api", "--db", db, "GET", "/api/sweeps/1")
	if r.code != 0 || !strings.Contains(r.stdout, `"via-api"`) {
		t.Errorf("specsweep api GET /api/sweeps/1:\n%s", r)
	}
	r = specsweep(t, 30*time.Second, "api", "--db", db, "GET", "/api/sweeps/99")
	if r.code != 1 || !strings.Contains(r.stderr, "404") {
		t.Errorf("specsweep api GET /api/sweeps/99:\n%s", r)
	}

	// A relay on another port in front of the real daemon: refused, naming the daemon's address.
	raddr, sent := relay(t, d.addr)
	r = specsweep(t, 30*time.Second, "dashboard", "--db", db, "--listen", raddr)
	if r.code != 1 || !strings.Contains(r.stderr, "relay") || !strings.Contains(r.stderr, d.addr) ||
		!strings.Contains(r.stderr, "the token was not sent") {
		t.Errorf("dashboard through a relay:\n%s", r)
	}
	t.Logf("through a relay: %s", r.stderr)
	if got := sent.String(); !strings.Contains(got, "GET /api/hello") || strings.Contains(got, d.token) {
		t.Errorf("the relay received %q: want the hello and never the token", got)
	}

	// The daemon dies without removing its record: the CLI says the record is stale.
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait()
	r = specsweep(t, 30*time.Second, "dashboard", "--db", db)
	if r.code != 1 || !strings.Contains(r.stderr, "nothing listens on "+d.addr) || !strings.Contains(r.stderr, "no longer running") {
		t.Errorf("dashboard with a stale record:\n%s", r)
	}
	t.Logf("stale record: %s", r.stderr)

	// Another user takes the port while the daemon is down.
	stop := portThief(t, d.addr)
	for _, args := range [][]string{{"dashboard", "--db", db}, {"dashboard", "--db", db, "--listen", d.addr},
		{"api", "--db", db, "GET", "/api/sweeps"}} {
		r = specsweep(t, 30*time.Second, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "is not this daemon") || !strings.Contains(r.stderr, "the token was not sent") ||
			strings.Contains(r.stdout, "login") {
			t.Errorf("dashboard %v with a port thief:\n%s", args, r)
		}
		t.Logf("port thief: %s", r.stderr)
	}
	// The daemon cannot start on the held port: exit 3 (the unit does not restart on it), saying why.
	r = specsweep(t, 30*time.Second, "daemon", "--db", db, "--listen", d.addr)
	holder := "uid 0 (root)"
	if os.Geteuid() == 0 {
		holder = "uid 65534 (nobody)"
	}
	if r.code != 3 || !strings.Contains(r.stderr, "cannot listen on "+d.addr+": address in use") || !strings.Contains(r.stderr, holder) {
		t.Errorf("daemon on a held port, want exit 3 naming %s:\n%s", holder, r)
	}
	t.Logf("held port: %s", r.stderr)
	got := stop()
	if !bytes.Contains(got, []byte("GET /api/hello")) {
		t.Errorf("the port thief received no hello: %q", got)
	}
	if bytes.Contains(got, []byte(d.token)) {
		t.Errorf("the port thief received the token:\n%s", got)
	}
}

// TestDaemonRefusesAnExposedPlainListen: a --listen that is not loopback needs TLS or
// --insecure-listen (exit 2, naming both), so the token does not cross the network in clear.
func TestDaemonRefusesAnExposedPlainListen(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	db := filepath.Join(t.TempDir(), "d.db")
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		r := specsweep(t, 20*time.Second, "daemon", "--db", db, "--listen", listen)
		if r.code != 2 || !strings.Contains(r.stderr, "--tls-cert FILE --tls-key FILE") || !strings.Contains(r.stderr, "--insecure-listen") {
			t.Errorf("daemon --listen %s without TLS:\n%s", listen, r)
		}
	}
	if _, err := os.Stat(db + ".daemon"); err == nil {
		t.Error("a refused daemon wrote an address record")
	}
}

// selfSigned writes a self-signed certificate for ips and names, and its key, into dir.
func selfSigned(t *testing.T, dir string, ips []net.IP, names ...string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "specsweep test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: ips, DNSNames: names,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return certFile, keyFile, cert
}

// TestDashboardOverTLS: a daemon with --tls-cert/--tls-key on every interface (accepted without
// --insecure-listen) serves HTTPS only; `specsweep dashboard` finds it from its record, verifies its
// self-signed certificate (pinned in the record, no InsecureSkipVerify), and prints an https URL; the
// API admits its own https origin.
func TestDashboardOverTLS(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "d.db")
	certFile, keyFile, cert := selfSigned(t, dir, []net.IP{net.IPv4(127, 0, 0, 1)})
	_, port, _ := net.SplitHostPort(freePort(t))
	cmd, out := startSpecsweep(t, "daemon", "--db", db, "--listen", "0.0.0.0:"+port, "--tls-cert", certFile, "--tls-key", keyFile)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://127.0.0.1:" + port
	waitFor(t, 30*time.Second, "the TLS daemon's /healthz", func() bool {
		if cmd.ProcessState != nil {
			t.Fatalf("the daemon exited:\n%s", out)
		}
		resp, err := client.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if resp, err := http.Get("http://127.0.0.1:" + port + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("the TLS daemon answered plain HTTP")
		}
	}
	r := specsweep(t, 30*time.Second, "dashboard", "--db", db)
	if r.code != 0 || !strings.HasPrefix(r.stdout, base+"/") {
		t.Errorf("dashboard of the TLS daemon:\n%s\ndaemon:\n%s", r, out)
	}
	token := strings.TrimSpace(mustRead(t, db+".token"))
	for origin, want := range map[string]int{base: 200, "http://127.0.0.1:" + port: 403} {
		req, _ := http.NewRequest("GET", base+"/api/sweeps", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Origin", origin)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Origin %s over TLS: %d, want %d", origin, resp.StatusCode, want)
		}
	}
	signal(t, cmd, syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("daemon exit: %v\n%s", err, out)
	}
	if _, err := os.Stat(db + ".daemon"); err == nil {
		t.Error("the stopped daemon left its address record")
	}
	r = specsweep(t, 30*time.Second, "dashboard", "--db", db)
	if r.code != 1 || !strings.Contains(r.stderr, "no daemon address record") {
		t.Errorf("dashboard with the daemon stopped:\n%s", r)
	}

	// A certificate for a name only (--listen NAME:PORT): the CLI dials the recorded address and
	// checks the certificate for the name, which its URL uses.
	named := t.TempDir()
	certFile, keyFile, _ = selfSigned(t, named, nil, "localhost")
	_, port, _ = net.SplitHostPort(freePort(t))
	cmd, out = startSpecsweep(t, "daemon", "--db", db, "--listen", "localhost:"+port, "--tls-cert", certFile, "--tls-key", keyFile)
	waitFor(t, 30*time.Second, "the daemon's address record", func() bool {
		if cmd.ProcessState != nil {
			t.Fatalf("the daemon exited:\n%s", out)
		}
		_, err := os.Stat(db + ".daemon")
		return err == nil
	})
	r = specsweep(t, 30*time.Second, "dashboard", "--db", db)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "https://localhost:"+port+"/") {
		t.Errorf("dashboard of a TLS daemon with a certificate for localhost:\n%s\ndaemon:\n%s", r, out)
	}
	r = specsweep(t, 30*time.Second, "api", "--db", db, "GET", "/api/sweeps")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("specsweep api GET /api/sweeps over TLS:\n%s", r)
	}
	// The certificate is for localhost, not 127.0.0.1: a client that checks it there refuses.
	r = specsweep(t, 30*time.Second, "api", "--db", db, "--listen", "https://127.0.0.1:"+port, "GET", "/api/sweeps")
	if r.code != 1 || !strings.Contains(r.stderr, "certificate is not trusted") {
		t.Errorf("api with the certificate checked for 127.0.0.1:\n%s", r)
	}
	signal(t, cmd, syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("daemon exit: %v\n%s", err, out)
	}
}
