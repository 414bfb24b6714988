package api

import (
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAPIHelloProvesTheTokenForTheLocalAddress: GET /api/hello needs no credential and answers
// HelloProof(token, nonce, scheme, the connection's local address), over a real loopback listener;
// the proof is not the proof of another token, nonce or address, and a malformed nonce is 400.
func TestAPIHelloProvesTheTokenForTheLocalAddress(t *testing.T) {
	a := newAPIHarness(t, APIConfig{ListenHost: "127.0.0.1"})
	ts := httptest.NewServer(a.h)
	defer ts.Close()
	nonce := []byte(strings.Repeat("n", HelloNonceBytes))
	resp, err := http.Get(ts.URL + "/api/hello?nonce=" + hex.EncodeToString(nonce))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var hj HelloJSON
	if resp.StatusCode != 200 || json.Unmarshal(body, &hj) != nil {
		t.Fatalf("hello: %d %s", resp.StatusCode, body)
	}
	addr := ts.Listener.Addr().String()
	proof, _ := hex.DecodeString(hj.Proof)
	if hj.Addr != addr || hj.Scheme != "http" || !hmac.Equal(proof, HelloProof(apiToken, nonce, "http", addr)) {
		t.Errorf("hello answered %+v, want a proof for %s", hj, addr)
	}
	other := []byte(strings.Repeat("m", HelloNonceBytes))
	for name, p := range map[string][]byte{
		"another token":   HelloProof("another-token", nonce, "http", addr),
		"another nonce":   HelloProof(apiToken, other, "http", addr),
		"another address": HelloProof(apiToken, nonce, "http", "127.0.0.1:1"),
		"another scheme":  HelloProof(apiToken, nonce, "https", addr),
	} {
		if hmac.Equal(proof, p) {
			t.Errorf("the proof equals the proof for %s", name)
		}
	}
	if strings.Contains(string(body), apiToken) {
		t.Error("the hello's answer holds the token")
	}
	for _, q := range []string{"", "?nonce=zz", "?nonce=" + hex.EncodeToString(nonce[:8])} {
		resp, err := http.Get(ts.URL + "/api/hello" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("hello%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

// TestAPIOriginUnderTLS: served over TLS, the API's own origin is https://HOST (admitted) and
// http://HOST is another origin (403).
func TestAPIOriginUnderTLS(t *testing.T) {
	a := newAPIHarness(t, APIConfig{ListenHost: "127.0.0.1"})
	ts := httptest.NewTLSServer(a.h)
	defer ts.Close()
	host := strings.TrimPrefix(ts.URL, "https://")
	for origin, want := range map[string]int{"https://" + host: 200, "http://" + host: 403} {
		req, _ := http.NewRequest("GET", ts.URL+"/api/sweeps", nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Origin", origin)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Origin %s over TLS: %d, want %d", origin, resp.StatusCode, want)
		}
	}
}
