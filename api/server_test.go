package api

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAPIServerDisconnectsSlowClients: a client sending one byte a second, in its headers or in its
// body, is disconnected by the server's timeouts (short ones here); before, a 1 byte/s body held a
// connection for as long as the client liked.
func TestAPIServerDisconnectsSlowClients(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	srv := NewAPIServer(a.h, ServerTimeouts{ReadHeader: 300 * time.Millisecond, Read: 600 * time.Millisecond,
		Write: 600 * time.Millisecond, Idle: 600 * time.Millisecond}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	spec := apiSpec("")
	for name, c := range map[string]struct{ head, trickle string }{
		"headers": {"POST /api/sweeps HTTP/1.1\r\n", "Host: 127.0.0.1\r\nAuthorization: Bearer " + apiToken + "\r\n\r\n"},
		"body": {"POST /api/sweeps HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + apiToken +
			"\r\nContent-Type: application/yaml\r\nContent-Length: " + strconv.Itoa(len(spec)) + "\r\n\r\n", spec},
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, c.head); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for i := 0; i < len(c.trickle); i++ {
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
					}
					if _, err := conn.Write([]byte{c.trickle[i]}); err != nil {
						return
					}
				}
			}()
			// Only a guard against hanging forever: the assertion is that the server closes.
			_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
			got, err := io.ReadAll(conn)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the server kept the connection of a 1 byte/s client open (read %q)", got)
			}
			if strings.Contains(string(got), "201 Created") {
				t.Errorf("the slow request was served: %q", got)
			}
		})
	}
}
