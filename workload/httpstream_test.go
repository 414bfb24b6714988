package workload

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"testing"
)

// decodeCut feeds body to a bodyReader in pieces cut at the given offsets, reading through a
// buffer of size rb, and returns what it decoded, whether the body ended and the error it stopped
// on (nil: it ran out of bytes first).
func decodeCut(h respHead, body []byte, cuts []int, rb int) (out []byte, done bool, err error) {
	var b bodyReader
	b.reset(h)
	p := make([]byte, rb)
	prev := 0
	for i := 0; i <= len(cuts); i++ {
		end := len(body)
		if i < len(cuts) {
			end = min(max(cuts[i], prev), len(body))
		}
		b.src = body[prev:end]
		prev = end
		for {
			n, err := b.Read(p)
			out = append(out, p[:n]...)
			if err == errWouldBlock {
				if len(b.src) != 0 {
					return out, false, errors.New("would block with bytes left")
				}
				break
			}
			if err == io.EOF {
				return out, true, nil
			}
			if err != nil {
				return out, false, err
			}
		}
	}
	return out, false, nil
}

func TestBodyReaderChunked(t *testing.T) {
	h := respHead{status: 200, chunked: true, length: -1}
	body := []byte("5;ext=1\r\nhello\r\n1\nx\n0\r\nTrailer: v\r\n\r\n")
	for rb := 1; rb < 8; rb++ {
		for cut := 0; cut <= len(body); cut++ {
			out, done, err := decodeCut(h, body, []int{cut}, rb)
			if string(out) != "hellox" || !done || err != nil {
				t.Fatalf("cut %d read %d: %q done %v err %v; want \"hellox\" done", cut, rb, out, done, err)
			}
		}
	}
	for _, bad := range []string{"zz\r\n", "5\r\nhelloXX\r\n", "3\r\nabc\r\n" + string(bytes.Repeat([]byte("1"), maxChunkLine+1))} {
		if _, _, err := decodeCut(h, []byte(bad), nil, 64); err == nil || !errors.Is(err, errMalformedHTTP) {
			t.Errorf("%.20q: err %v; want malformed", bad, err)
		}
	}
	// the connection ends inside the body
	var b bodyReader
	b.reset(h)
	b.src, b.eof = []byte("5\r\nhel"), true
	p := make([]byte, 16)
	if n, err := b.Read(p); n != 3 || err != nil {
		t.Fatalf("read %d, %v; want 3", n, err)
	}
	if _, err := b.Read(p); err != io.ErrUnexpectedEOF {
		t.Fatalf("at the cut: %v; want unexpected EOF", err)
	}
}

func TestBodyReaderLengthAndClose(t *testing.T) {
	out, done, err := decodeCut(respHead{status: 200, length: 4}, []byte("abcdEXTRA"), []int{2}, 3)
	if string(out) != "abcd" || !done || err != nil {
		t.Fatalf("length 4: %q %v %v", out, done, err)
	}
	var b bodyReader
	b.reset(respHead{status: 200, length: -1})
	b.src, b.eof = []byte("to the end"), true
	got, err := io.ReadAll(&b)
	if string(got) != "to the end" || err != nil {
		t.Fatalf("until close: %q %v", got, err)
	}
}

func TestParseHead(t *testing.T) {
	for _, c := range []struct {
		in   string
		want respHead
	}{
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n", respHead{status: 200, chunked: true, length: -1}},
		{"HTTP/1.1 200 OK\nContent-Length: 12\n\n", respHead{status: 200, length: 12}},
		{"HTTP/1.1 400 Bad Request\r\nconnection: Close\r\ncontent-length: 3\r\n\r\n", respHead{status: 400, length: 3, close: true}},
		{"HTTP/1.0 200 OK\r\n\r\n", respHead{status: 200, length: -1, close: true}},
		{"HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n", respHead{status: 204, length: -1, noBody: true}},
		{"HTTP/1.1 100 Continue\r\n\r\n", respHead{status: 100, length: -1, noBody: true}},
	} {
		n := headEnd([]byte(c.in + "rest"))
		if n != len(c.in) {
			t.Errorf("headEnd(%q) = %d; want %d", c.in, n, len(c.in))
			continue
		}
		if got, err := parseHead([]byte(c.in)); err != nil || got != c.want {
			t.Errorf("parseHead(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"HTTP/2 200\r\n\r\n", "HTTP/1.1 20x OK\r\n\r\n", "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"} {
		if _, err := parseHead([]byte(bad)); !errors.Is(err, errMalformedHTTP) {
			t.Errorf("parseHead(%q): %v; want malformed", bad, err)
		}
	}
	if headEnd([]byte("HTTP/1.1 200 OK\r\nA: b\r\n")) != -1 {
		t.Error("headEnd found the end of an unfinished block")
	}
}

// FuzzChunked: the decoded bytes do not depend on how the body is cut across reads or on the read
// size, and agree with net/http's chunked reader as far as both go.
func FuzzChunked(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\n\r\n"), uint16(3), uint16(9), uint8(2))
	f.Add([]byte("1a;x=y\r\ndata: {\"choices\":[]}\n\n\r\n0\r\nA: b\r\n\r\n"), uint16(1), uint16(30), uint8(7))
	f.Add([]byte("3\nabc\n0\n\n"), uint16(0), uint16(0), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, c1, c2 uint16, rb uint8) {
		h := respHead{status: 200, chunked: true, length: -1}
		whole, wdone, werr := decodeCut(h, body, nil, 4096)
		cut, cdone, cerr := decodeCut(h, body, []int{int(c1), int(c2)}, int(rb)+1)
		if !bytes.Equal(whole, cut) || wdone != cdone || (werr == nil) != (cerr == nil) {
			t.Fatalf("whole: %q %v %v; cut at %d, %d, read %d: %q %v %v", whole, wdone, werr, c1, c2, int(rb)+1, cut, cdone, cerr)
		}
		ref, _ := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(bytes.NewReader(body))))
		if n := min(len(ref), len(whole)); !bytes.Equal(ref[:n], whole[:n]) {
			t.Fatalf("decoded %q; net/http %q", whole, ref)
		}
	})
}

// headEndFrom resumed after every cut finds what headEnd finds in the whole block.
func TestHeadEndFromCut(t *testing.T) {
	for _, in := range []string{"HTTP/1.1 200 OK\r\nA: b\r\n\r\nrest", "HTTP/1.1 200 OK\nA: b\n\nrest", "HTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\r\n\rX: y\r\n\r\n", "\nHTTP/1.1 200 OK\n\n", "HTTP/1.1 200 OK\r\nA: b\r\n"} {
		want := headEnd([]byte(in))
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j++ {
				line, scan, got := 0, 0, -1
				for _, end := range []int{i, j, len(in)} {
					if got, line, scan = headEndFrom([]byte(in[:end]), line, scan); got >= 0 {
						break
					}
				}
				if got != want {
					t.Fatalf("%q cut at %d and %d: %d; whole %d", in, i, j, got, want)
				}
			}
		}
	}
}
