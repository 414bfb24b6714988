package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The event loop (evloop_linux.go) speaks HTTP/1.1 itself, in push mode: bytes are given to these
// parsers as they arrive, and a reader returns errWouldBlock when it needs more. Only what a
// streamed answer needs: a status line, the body's framing and whether the connection is kept.

// respHead is what the load generator needs from a response's status line and headers.
type respHead struct {
	status  int
	chunked bool
	length  int64 // the Content-Length, -1: none
	close   bool  // the server closes the connection after this response
	noBody  bool  // 1xx, 204, 304
}

var errMalformedHTTP = errors.New("malformed HTTP response")

// headEnd returns the length of the header block at the start of b, its blank line included, or
// -1 when b does not hold it all yet. Lines may end with "\r\n" or "\n", as net/http accepts.
func headEnd(b []byte) int {
	n, _, _ := headEndFrom(b, 0, 0)
	return n
}

// headEndFrom is headEnd resumed where an earlier call on a shorter b stopped: line is where the
// last line it saw starts and scan how far that line is known to hold no '\n' (0, 0 at first; the
// values it returned with -1 afterwards). A header block arriving a byte per read is then scanned
// once, not once per read (quadratic, on the goroutine that reads every stream of the level).
func headEndFrom(b []byte, line, scan int) (n, nline, nscan int) {
	for {
		if line > 0 && scan == line { // at the start of a line after the first: is it blank?
			switch {
			case line < len(b) && b[line] == '\n':
				return line + 1, 0, 0
			case line+1 < len(b) && b[line] == '\r' && b[line+1] == '\n':
				return line + 2, 0, 0
			case line >= len(b) || line+1 == len(b) && b[line] == '\r':
				return -1, line, line // not known yet
			}
		}
		j := bytes.IndexByte(b[scan:], '\n')
		if j < 0 {
			return -1, line, len(b)
		}
		line = scan + j + 1
		scan = line
	}
}

// parseHead parses a header block (headEnd's bytes).
func parseHead(b []byte) (respHead, error) {
	h := respHead{length: -1}
	first, v10, keepAlive := true, false, false
	for len(b) > 0 {
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if first {
			first = false
			// HTTP/1.1 200 OK
			if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
				(len(line) > 12 && line[12] != ' ') {
				return h, fmt.Errorf("%w: status line %q", errMalformedHTTP, headExcerpt(line))
			}
			code, err := strconv.Atoi(string(line[9:12]))
			if err != nil || code < 100 {
				return h, fmt.Errorf("%w: status line %q", errMalformedHTTP, headExcerpt(line))
			}
			h.status = code
			v10 = line[7] == '0'
			continue
		}
		if len(line) == 0 {
			break
		}
		i := bytes.IndexByte(line, ':')
		if i <= 0 {
			return h, fmt.Errorf("%w: header line %q", errMalformedHTTP, headExcerpt(line))
		}
		name, value := line[:i], bytes.TrimSpace(line[i+1:])
		switch {
		case asciiEqualFold(name, "transfer-encoding"):
			// the last coding must be chunked for the body to be framed by chunks; gzip and the
			// like are never asked for (no Accept-Encoding)
			codings := bytes.Split(value, []byte(","))
			last := bytes.TrimSpace(codings[len(codings)-1])
			if !asciiEqualFold(last, "chunked") || len(codings) > 1 {
				return h, fmt.Errorf("%w: unsupported Transfer-Encoding %q", errMalformedHTTP, headExcerpt(value))
			}
			h.chunked = true
		case asciiEqualFold(name, "content-length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || (h.length >= 0 && n != h.length) {
				return h, fmt.Errorf("%w: Content-Length %q", errMalformedHTTP, headExcerpt(value))
			}
			h.length = n
		case asciiEqualFold(name, "connection"):
			for _, t := range bytes.Split(value, []byte(",")) {
				switch t = bytes.TrimSpace(t); {
				case asciiEqualFold(t, "close"):
					h.close = true
				case asciiEqualFold(t, "keep-alive"):
					keepAlive = true
				}
			}
		}
	}
	if first {
		return h, fmt.Errorf("%w: no status line", errMalformedHTTP)
	}
	if v10 && !keepAlive {
		h.close = true // HTTP/1.0 closes unless it says keep-alive
	}
	if h.chunked {
		h.length = -1 // chunked framing wins over a Content-Length (RFC 9112 6.3)
	}
	h.noBody = h.status < 200 || h.status == 204 || h.status == 304
	if !h.noBody && !h.chunked && h.length < 0 {
		h.close = true // the body ends with the connection
	}
	return h, nil
}

func headExcerpt(b []byte) string {
	if len(b) > 80 {
		b = b[:80]
	}
	return string(b)
}

// asciiEqualFold reports whether b equals the lower-case ASCII s, ignoring case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// maxChunkLine bounds a chunk's size line and a trailer line.
const maxChunkLine = 4 << 10

// chunk states
const (
	csSize = iota
	csData
	csDataEnd
	csTrailer
)

// bodyReader decodes a response body from the bytes given in src (chunked, Content-Length or
// until the connection closes). Read copies the body's bytes; with src empty it returns
// errWouldBlock, or at the end of the body io.EOF, or when the connection ended first
// io.ErrUnexpectedEOF (the connection's error when it broke).
type bodyReader struct {
	src     []byte // bytes received and not yet decoded
	chunked bool
	toClose bool  // the body ends with the connection
	left    int64 // bytes left in the current chunk, or in the body
	state   int
	line    []byte // a size or trailer line split across reads
	eof     bool   // the connection ended: src gets no more
	err     error  // the connection's error, if it broke
	done    bool   // the body ended
}

func (b *bodyReader) reset(h respHead) {
	*b = bodyReader{chunked: h.chunked, toClose: !h.chunked && h.length < 0 && !h.noBody, line: b.line[:0]}
	if !h.chunked {
		b.left = max(h.length, 0)
		b.done = h.noBody || h.length == 0
	}
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && !b.done && len(b.src) > 0 {
		switch {
		case b.toClose:
			k := copy(p[n:], b.src)
			n, b.src = n+k, b.src[k:]
		case !b.chunked:
			k := copy(p[n:], b.src[:min(int64(len(b.src)), b.left)])
			n, b.src, b.left = n+k, b.src[k:], b.left-int64(k)
			b.done = b.left == 0
		case b.state == csData:
			k := copy(p[n:], b.src[:min(int64(len(b.src)), b.left)])
			n, b.src, b.left = n+k, b.src[k:], b.left-int64(k)
			if b.left == 0 {
				b.state = csDataEnd
			}
		default:
			line, ok, err := b.takeLine()
			if err != nil {
				return n, err
			}
			if !ok {
				continue
			}
			switch b.state {
			case csSize:
				if i := bytes.IndexByte(line, ';'); i >= 0 {
					line = line[:i] // chunk extensions
				}
				line = bytes.TrimSpace(line)
				size, err := strconv.ParseUint(string(line), 16, 62)
				if err != nil || len(line) == 0 {
					return n, fmt.Errorf("%w: chunk size %q", errMalformedHTTP, headExcerpt(line))
				}
				b.left = int64(size)
				if size == 0 {
					b.state = csTrailer
				} else {
					b.state = csData
				}
			case csDataEnd:
				if len(line) != 0 {
					return n, fmt.Errorf("%w: no line end after a chunk's data", errMalformedHTTP)
				}
				b.state = csSize
			case csTrailer:
				b.done = len(line) == 0
			}
		}
	}
	if n > 0 {
		return n, nil
	}
	switch {
	case b.done:
		return 0, io.EOF
	case len(b.src) > 0:
		return 0, nil // len(p) == 0
	case b.eof && b.toClose && b.err == nil:
		b.done = true
		return 0, io.EOF
	case b.err != nil:
		return 0, b.err
	case b.eof:
		return 0, io.ErrUnexpectedEOF
	}
	return 0, errWouldBlock
}

// takeLine returns the next line of src without its end ("\n" or "\r\n"), joining a line split
// across reads; ok is false when src ended first (the part is kept).
func (b *bodyReader) takeLine() (line []byte, ok bool, err error) {
	i := bytes.IndexByte(b.src, '\n')
	if i < 0 {
		if len(b.line)+len(b.src) > maxChunkLine {
			return nil, false, fmt.Errorf("%w: a chunk size or trailer line of more than %d bytes", errMalformedHTTP, maxChunkLine)
		}
		b.line, b.src = append(b.line, b.src...), nil
		return nil, false, nil
	}
	line, b.src = b.src[:i], b.src[i+1:]
	if len(b.line) > 0 {
		if len(b.line)+len(line) > maxChunkLine {
			return nil, false, fmt.Errorf("%w: a chunk size or trailer line of more than %d bytes", errMalformedHTTP, maxChunkLine)
		}
		b.line = append(b.line, line...)
		line, b.line = b.line, b.line[:0]
	}
	return bytes.TrimSuffix(line, []byte("\r")), true, nil
}
