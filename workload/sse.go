package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// errWouldBlock is returned by a stream reader that has no byte for now but more may come (the
// event loop's, evloop_linux.go); SSEReader.Next passes it on and keeps its state.
var errWouldBlock = errors.New("no data yet")

// ErrEventTooLarge is returned when one server-sent event (or one line) exceeds the reader's limit.
var ErrEventTooLarge = errors.New("server-sent event too large")

const (
	// sseInitialBuf is a reader's buffer until a longer line needs more (a streamed chunk is a few
	// hundred bytes); a reader that grew gets it back at Reset, so a level of many streams holds
	// large buffers only while a large event is being read.
	sseInitialBuf = 4 << 10
	// DefaultMaxEvent bounds one event's data (and one line). A chunk of an OpenAI-compatible stream
	// carries one step's tokens, a few hundred bytes; the bound keeps a server's runaway line from
	// costing more than 2 x 256 KiB per stream in flight (the line's buffer and the event's data).
	DefaultMaxEvent = 256 << 10
)

// SSEReader reads server-sent events (text/event-stream) from a stream without allocating per event.
//
// Each event is timestamped with the moment the read that delivered its last byte returned, before
// any parsing: events that arrived together share one timestamp. Lines end with "\n", "\r\n" or "\r";
// lines starting with ':' are comments; fields other than "data" are ignored; several data lines of
// one event are joined with "\n". Unlike a browser, an event left unterminated at the end of the
// stream is still delivered (servers that forget the last blank line lose nothing).
type SSEReader struct {
	r        io.Reader
	now      func() time.Time
	buf      []byte
	start    int  // first unconsumed byte
	end      int  // end of valid data
	eof      bool // r returned io.EOF (or another error, kept in err)
	err      error
	skipLF   bool // the last line ended with '\r': a following '\n' belongs to it
	scanned  int  // bytes after start known to hold no line end
	stamp    time.Time
	data     []byte // data of the event being assembled
	hasData  bool
	maxEvent int
}

// NewSSEReader returns a reader of r. now may be nil (time.Now); maxEvent <= 0 means DefaultMaxEvent.
func NewSSEReader(r io.Reader, now func() time.Time, maxEvent int) *SSEReader {
	s := &SSEReader{}
	s.Reset(r, now, maxEvent)
	return s
}

// Reset makes s read a new stream, keeping its buffers.
func (s *SSEReader) Reset(r io.Reader, now func() time.Time, maxEvent int) {
	if now == nil {
		now = time.Now
	}
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	buf, data := s.buf, s.data[:0]
	if len(buf) != sseInitialBuf {
		buf = make([]byte, sseInitialBuf)
	}
	if cap(data) > sseInitialBuf {
		data = nil
	}
	*s = SSEReader{r: r, now: now, buf: buf, data: data, maxEvent: maxEvent}
}

// Next returns the data of the next event and when it arrived. The slice is valid until the next
// call. At the end of the stream it returns io.EOF; a read error is returned as is.
func (s *SSEReader) Next() (data []byte, at time.Time, err error) {
	for {
		line, ok, err := s.line()
		if err != nil {
			if s.hasData && err == io.EOF {
				// deliver an unterminated last event of a cleanly ended stream
				s.hasData = false
				return s.data, s.stamp, nil
			}
			return nil, time.Time{}, err
		}
		if !ok {
			continue
		}
		if len(line) == 0 { // blank line: dispatch
			if s.hasData {
				s.hasData = false
				return s.data, s.stamp, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(field) != "data" {
			continue
		}
		if !s.hasData {
			s.data = s.data[:0]
			s.hasData = true
		} else {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > s.maxEvent {
			return nil, time.Time{}, s.tooLarge()
		}
		s.data = append(s.data, value...)
	}
}

// line returns the next line without its terminator. ok is false when the caller should just call
// again (a lone '\n' completing a "\r\n" was skipped). The line aliases the buffer.
func (s *SSEReader) line() (line []byte, ok bool, err error) {
	for {
		b := s.buf[s.start:s.end]
		if s.skipLF && len(b) > 0 {
			s.skipLF = false
			if b[0] == '\n' {
				s.start++
				return nil, false, nil
			}
		}
		if len(b) > s.scanned {
			// look for the end of the line only in bytes not seen yet: a long line arriving in many
			// reads stays linear
			rest := b[s.scanned:]
			i := bytes.IndexByte(rest, '\n')
			seg := rest
			if i >= 0 {
				seg = rest[:i]
			}
			if j := bytes.IndexByte(seg, '\r'); j >= 0 {
				j += s.scanned
				s.start += j + 1
				s.scanned = 0
				if j+1 < len(b) {
					if b[j+1] == '\n' {
						s.start++
					}
				} else {
					s.skipLF = true
				}
				return b[:j], true, nil
			}
			if i >= 0 {
				i += s.scanned
				s.start += i + 1
				s.scanned = 0
				return b[:i], true, nil
			}
			s.scanned = len(b)
		}
		if s.eof {
			if s.err != nil { // a partial line before a read error is dropped
				return nil, false, s.err
			}
			if len(b) > 0 { // last line without terminator
				s.start, s.scanned = s.end, 0
				return b, true, nil
			}
			return nil, false, io.EOF
		}
		if err := s.fill(); err != nil {
			return nil, false, err
		}
	}
}

// tooLarge is the error of an event or line over the limit, naming the limit.
func (s *SSEReader) tooLarge() error {
	return fmt.Errorf("%w: a line or event of more than %d bytes (the limit)", ErrEventTooLarge, s.maxEvent)
}

// fill reads more bytes, compacting or growing the buffer first.
func (s *SSEReader) fill() error {
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= s.maxEvent {
			return s.tooLarge()
		}
		nb := make([]byte, min(2*len(s.buf), s.maxEvent))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for range 100 {
		n, err := s.r.Read(s.buf[s.end:])
		if n > 0 {
			s.stamp = s.now()
			s.end += n
		}
		if err == errWouldBlock && n == 0 {
			// the event loop's reader has nothing more for now: Next returns and is called again
			// when bytes arrive, the partial line and event kept
			return err
		}
		if err != nil {
			s.eof = true
			if err != io.EOF {
				s.err = err
			}
			return nil
		}
		if n > 0 {
			return nil
		}
	}
	s.eof, s.err = true, fmt.Errorf("sse: %w", io.ErrNoProgress)
	return nil
}
