package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strconv"
)

// The daemon's hello (GET /api/hello?nonce=HEX, open): a client that is about to send the token
// first makes the daemon prove it knows the token, for the very address the client dialed. The
// proof is HMAC-SHA256 under a key derived from the token, over a domain-separation string, the
// client's fresh nonce, the scheme and the daemon's own local address of that connection
// (http.LocalAddrContextKey). A process holding the port without the token cannot answer; a relay
// on another address forwarding to the daemon gets a proof for the daemon's address, not its own.
// docs/security.md, "The CLI authenticates the daemon".

// HelloNonceBytes is the size of a hello's nonce (sent hex-encoded).
const HelloNonceBytes = 32

// helloDomain separates the hello's MACs from any other use of the token.
const helloDomain = "specsweep daemon hello v1"

// HelloJSON is GET /api/hello's answer: the address and scheme the daemon signed, and the proof
// (hex).
type HelloJSON struct {
	Addr   string `json:"addr"`
	Scheme string `json:"scheme"`
	Proof  string `json:"proof"`
}

// HelloProof is the MAC the daemon answers a hello with, and the client recomputes: addr is the
// daemon's side of the connection, scheme "http" or "https".
func HelloProof(token string, nonce []byte, scheme, addr string) []byte {
	kdf := hmac.New(sha256.New, []byte(token))
	kdf.Write([]byte(helloDomain + " key"))
	m := hmac.New(sha256.New, kdf.Sum(nil))
	// The nonce has a fixed size and neither scheme nor address holds a NUL: the fields cannot run
	// into each other.
	m.Write([]byte(helloDomain))
	m.Write([]byte{0})
	m.Write(nonce)
	m.Write([]byte{0})
	m.Write([]byte(scheme))
	m.Write([]byte{0})
	m.Write([]byte(NormalAddr(addr)))
	return m.Sum(nil)
}

// NormalAddr spells a host:port address one way on both sides of a connection: an IPv4 address
// accepted on a dual-stack socket (::ffff:127.0.0.1) as plain IPv4, IPv6 without zone variations.
func NormalAddr(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

// hello answers GET /api/hello: no credential needed (it proves the daemon to the client, not the
// other way round) and nothing secret in it (an HMAC of the client's nonce).
func (a *api) hello(w http.ResponseWriter, r *http.Request) {
	nonce, err := hex.DecodeString(r.URL.Query().Get("nonce"))
	if err != nil || len(nonce) != HelloNonceBytes {
		httpError(w, http.StatusBadRequest, "nonce: want "+strconv.Itoa(2*HelloNonceBytes)+" hex digits")
		return
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		httpError(w, http.StatusInternalServerError, "the connection's local address is unknown")
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	addr := NormalAddr(local.String())
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, HelloJSON{Addr: addr, Scheme: scheme,
		Proof: hex.EncodeToString(HelloProof(a.c.Token, nonce, scheme, addr))})
}
