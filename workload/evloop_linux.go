//go:build linux

package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// evLoop reads the streams of a level the way an event loop does (issue 31): one goroutine owns an
// epoll set of the level's connections and, per wake-up, takes every ready socket from one
// epoll_wait, reads each once into one buffer, and parses its events there (dechunk, SSE, JSON),
// timestamped by that read. A worker goroutine only writes its request and waits for the end of
// the answer. With net/http each event costs a goroutine wake-up, a read and a second read that
// finds the socket empty, plus the scheduler's futex and epoll calls.
//
// The connections are the loop's own (dialled with the client's DialContext, then taken out of
// Go's netpoller), so the netpoller never wakes for a stream's bytes: it only wakes the loop's
// goroutine when the loop's epoll set, itself registered with the netpoller, has a ready socket.
// No thread blocks in epoll_wait.
//
// With $SPECSWEEP_EVLOOP=io_uring the loop reads through io_uring instead (evloop_uring_linux.go):
// one multishot receive per connection, whose completions the loop takes without a system call.
// It makes half the syscalls or fewer but costs more CPU per token (the kernel runs each receive
// on the thread that armed it, which it must wake: docs/benchmarks.md, "The io_uring reader"), so
// epoll is the default, and the fallback where io_uring is missing.
type evLoop struct {
	ring    *uring // the io_uring reader; nil: the epoll set
	closing atomic.Bool
	epfd    *os.File // the epoll set, non-blocking, in Go's netpoller
	ep      int      // its descriptor
	rc      syscall.RawConn
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	addr    string // host:port to dial
	head    []byte // the request's line and headers up to Content-Length's value
	maxHead int    // bound of a response's header block
	maxIdle int
	exited  chan struct{}

	mu      sync.Mutex
	streams map[uint64]*loopStream // by the id their epoll registration carries
	next    uint64
	idle    []int                // kept-alive connections (fds), most recent last
	rconns  map[uint64]*ringConn // the ring's connections by their recv's user_data
	rfds    map[int]*ringConn    // and by descriptor

	// only the loop goroutine
	buf  []byte
	evs  []unix.EpollEvent
	todo []*loopStream
	cqs  []ringCQ
}

// evLoopEnv names the environment variable that picks the event loop's reader: "epoll" (the
// default) or "io_uring" (epoll where the kernel has no io_uring with multishot receives).
const evLoopEnv = "SPECSWEEP_EVLOOP"

// newEvLoop returns the runner's event loop, started, or nil when client's requests cannot go
// through one (HTTPS, a proxy, a cookie jar, an overall timeout, a transport that is not
// net/http's): those keep net/http. Close stops it.
func newEvLoop(client *http.Client, u *url.URL, apiKey string, maxIdle int) (*evLoop, error) {
	t, ok := client.Transport.(*http.Transport)
	if !ok || u.Scheme != "http" || t.Proxy != nil || client.Jar != nil || client.Timeout != 0 {
		return nil, nil
	}
	if !headerValueOK(apiKey) {
		// A key net/http refuses to send (a CR or LF would split the request's headers): the
		// requests go through net/http, which says so, as before.
		return nil, nil
	}
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	l := &evLoop{dial: dial, addr: net.JoinHostPort(u.Hostname(), port), maxHead: int(t.MaxResponseHeaderBytes),
		maxIdle: maxIdle, exited: make(chan struct{}), streams: map[uint64]*loopStream{}}
	if l.maxHead <= 0 {
		l.maxHead = 10 << 20 // net/http's default
	}
	// the same request line and headers net/http sends
	h := "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: Go-http-client/1.1\r\n"
	if apiKey != "" {
		h += "Authorization: Bearer " + apiKey + "\r\n"
	}
	h += "Accept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: "
	l.head = []byte(h)

	switch mode := os.Getenv(evLoopEnv); mode {
	case "io_uring":
		r, err := newUring()
		if err == nil {
			l.ring, l.rconns, l.rfds = r, map[uint64]*ringConn{}, map[int]*ringConn{}
			go l.runRing()
			return l, nil
		}
		slog.Debug("the load generator reads with epoll", "reason", err)
	case "", "epoll":
	default:
		return nil, fmt.Errorf("%s=%q: want epoll or io_uring", evLoopEnv, mode)
	}
	l.buf, l.evs = make([]byte, 64<<10), make([]unix.EpollEvent, 128)
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create the load generator's epoll set: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make the epoll set non-blocking: %w", err)
	}
	l.ep = fd
	l.epfd = os.NewFile(uintptr(fd), "epoll") // non-blocking: os registers it with the netpoller
	if l.rc, err = l.epfd.SyscallConn(); err != nil {
		l.epfd.Close()
		return nil, fmt.Errorf("wrap the epoll set: %w", err)
	}
	go l.run()
	return l, nil
}

// Close stops the loop and closes its idle connections. Every stream must have ended.
func (l *evLoop) Close() {
	if r := l.ring; r != nil {
		l.closing.Store(true)
		r.stop()
		r.file.Close() // wakes the loop's goroutine, which then exits; the kernel cancels the recvs
		<-l.exited
		r.unmap()
	} else {
		l.epfd.Close() // wakes the loop's goroutine, which then exits
		<-l.exited
	}
	l.mu.Lock()
	for _, fd := range l.idle {
		unix.Close(fd)
	}
	l.idle = nil
	l.mu.Unlock()
}

// run is the loop's goroutine, until Close (after the last stream: a cancelled level's workers
// leave their streams themselves).
func (l *evLoop) run() {
	defer close(l.exited)
	_ = l.rc.Read(func(fd uintptr) bool {
		for {
			n, err := epollPoll(int(fd), l.evs)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n == 0 {
				return err != nil // nothing ready: park on the netpoller until the set is
			}
			l.batch(l.evs[:n])
			if n < len(l.evs) {
				// Sockets are edge-triggered and read until a short read, so none is left ready
				// unseen; the set becomes readable again for the next byte.
				return false
			}
		}
	})
}

// batch handles one epoll_wait's ready sockets.
func (l *evLoop) batch(evs []unix.EpollEvent) {
	l.todo = l.todo[:0]
	l.mu.Lock()
	for _, e := range evs {
		l.todo = append(l.todo, l.streams[evID(e)]) // nil: a stream that ended since
	}
	l.mu.Unlock()
	for i, s := range l.todo {
		if s != nil {
			l.todo[i] = nil
			l.serve(s, evID(evs[i]), evs[i].Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0)
		}
	}
}

// rawRead is read(2) without Go's syscall bookkeeping: the socket is non-blocking, so the call
// is short, and entersyscall would wake the runtime's sysmon thread (a futex, then its
// nanosleeps) on nearly every read of an otherwise idle process.
func rawRead(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// epollPoll is epoll_wait(2) that does not wait (timeout 0), raw for rawRead's reason.
func epollPoll(ep int, evs []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func evID(e unix.EpollEvent) uint64 { return uint64(uint32(e.Fd)) | uint64(uint32(e.Pad))<<32 }

// serve reads s's socket until a short read (edge-triggered: all it holds) and parses what came;
// when the event says the peer closed, until the end (the close came with the last bytes and
// brings no edge of its own).
func (l *evLoop) serve(s *loopStream, id uint64, hup bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.id == id && !s.ended {
		n, err := rawRead(s.fd, l.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return
		}
		at := time.Now()
		s.last.Store(at.UnixNano())
		switch {
		case err != nil:
			s.broke(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", err)})
		case n == 0:
			s.broke(nil)
		default:
			s.at = at
			s.got = true
			s.feed(l.buf[:n])
		}
		if s.ended {
			l.unregister(s)
			select {
			case s.done <- struct{}{}:
			default:
			}
			return
		}
		if n < len(l.buf) && !hup {
			return
		}
	}
}

func (l *evLoop) register(s *loopStream) error {
	if l.ring != nil {
		return nil // attach did it
	}
	l.mu.Lock()
	l.next++
	id := l.next
	l.streams[id] = s
	l.mu.Unlock()
	s.mu.Lock()
	s.id = id
	s.mu.Unlock()
	e := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, s.fd, &e); err != nil {
		l.mu.Lock()
		delete(l.streams, id)
		l.mu.Unlock()
		return fmt.Errorf("add a connection to the epoll set: %w", err)
	}
	return nil
}

// unregister takes s out of the set; s.mu is held.
func (l *evLoop) unregister(s *loopStream) {
	if l.ring != nil {
		l.mu.Lock()
		if rc := l.rfds[s.fd]; rc != nil && rc.s == s {
			rc.s = nil
		}
		l.mu.Unlock()
		return
	}
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, s.fd, nil)
	l.mu.Lock()
	delete(l.streams, s.id)
	l.mu.Unlock()
}

// errIdleClosed is a kept-alive connection's end seen before its next request.
var errIdleClosed = errors.New("server closed the connection before answering (EOF)")

// attach puts s on the ring before its request goes out (so that no byte of the answer comes
// before the ring knows whose it is), arming the connection's recv at its first request; a no-op
// for the epoll set, which register joins after the request.
func (l *evLoop) attach(s *loopStream) error {
	if l.ring == nil {
		return nil
	}
	s.mu.Lock()
	l.mu.Lock()
	rc := l.rfds[s.fd]
	if rc != nil && rc.dead {
		l.mu.Unlock()
		s.mu.Unlock()
		return errIdleClosed
	}
	fresh := rc == nil
	if fresh {
		l.next++
		rc = &ringConn{fd: s.fd, id: l.next, armed: true}
		l.rfds[rc.fd], l.rconns[rc.id] = rc, rc
		l.ring.mu.Lock()
		l.ring.queueRecv(rc.fd, rc.id)
		l.ring.mu.Unlock()
	}
	l.next++
	s.id = l.next
	rc.s, rc.sid = s, s.id
	l.mu.Unlock()
	s.mu.Unlock()
	if fresh {
		if err := l.ring.submit(); err != nil {
			return fmt.Errorf("io_uring: cannot arm a receive: %w", err)
		}
	}
	return nil
}

// detach takes s off the ring after its request failed to go out.
func (l *evLoop) detach(s *loopStream) {
	if l.ring == nil {
		return
	}
	s.mu.Lock()
	l.unregister(s)
	s.id = 0 // what the loop took for s before is dropped
	s.mu.Unlock()
}

// drop closes a connection; on the ring, its recv is cancelled first (the request holds the
// socket open).
func (l *evLoop) drop(fd int) {
	if r := l.ring; r != nil {
		cancel := false
		l.mu.Lock()
		if rc := l.rfds[fd]; rc != nil {
			delete(l.rfds, fd)
			delete(l.rconns, rc.id)
			if cancel = rc.armed; cancel {
				r.mu.Lock()
				r.queueCancel(rc.id)
				r.mu.Unlock()
			}
		}
		l.mu.Unlock()
		if cancel {
			// returns once the cancel (and any arm queued before it) is in the kernel, so the
			// descriptor's number is free for reuse only after
			_ = r.submit()
		}
	}
	unix.Close(fd)
}

// conn returns a kept-alive connection, or a new one.
func (l *evLoop) conn(ctx context.Context) (fd int, reused bool, err error) {
	l.mu.Lock()
	if n := len(l.idle); n > 0 {
		fd = l.idle[n-1]
		l.idle = l.idle[:n-1]
		l.mu.Unlock()
		return fd, true, nil
	}
	l.mu.Unlock()
	return l.dial1(ctx)
}

// dial1 opens a connection.
func (l *evLoop) dial1(ctx context.Context) (fd int, reused bool, err error) {
	c, err := l.dial(ctx, "tcp", l.addr)
	if err != nil {
		return -1, false, err // "dial tcp ADDR: ...", as net/http's request said it
	}
	defer c.Close() // takes the original descriptor out of Go's netpoller; the copy stays open
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, false, fmt.Errorf("dial %s: a %T has no file descriptor", l.addr, c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, false, fmt.Errorf("dial %s: %w", l.addr, err)
	}
	fd = -1
	cerr := rc.Control(func(f uintptr) { fd, err = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) })
	if err = errors.Join(cerr, err); err != nil {
		return -1, false, fmt.Errorf("take the connection to %s from the netpoller: %w", l.addr, err)
	}
	return fd, false, nil // non-blocking: the copy shares the file's flags
}

// warm opens connections until n are idle (the measured requests then pay for no handshake).
func (l *evLoop) warm(ctx context.Context, n int) {
	l.mu.Lock()
	n = min(n, l.maxIdle) - len(l.idle)
	l.mu.Unlock()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if fd, _, err := l.dial1(ctx); err == nil {
				l.keep(fd)
			}
		})
	}
	wg.Wait()
}

// keep returns a connection whose answer was read to its end for the next request.
func (l *evLoop) keep(fd int) {
	l.mu.Lock()
	if len(l.idle) < l.maxIdle {
		l.idle = append(l.idle, fd)
		fd = -1
	}
	l.mu.Unlock()
	if fd >= 0 {
		l.drop(fd)
	}
}

// send writes c's current request on fd: its head and the start of its body in one send, the
// rest of a long one 32 kB at a time (a prompt is never held whole).
func (w *worker) send(ctx context.Context, c *conversation, fd int) error {
	body, size := w.r.body(c)
	if cap(w.req) < 32<<10 {
		w.req = make([]byte, 0, 32<<10)
	}
	req := append(append(w.req[:0], w.r.loop.head...), strconv.FormatInt(size, 10)...)
	req = append(req, "\r\n\r\n"...)
	for {
		n, err := io.ReadFull(body, req[len(req):cap(req)])
		req = req[:len(req)+n]
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return fmt.Errorf("build request: %w", err)
		}
		if werr := write(ctx, fd, req); werr != nil {
			return werr
		}
		if err != nil {
			return nil
		}
		req = req[:0]
	}
}

// write sends p on fd. A request is a few kB and almost always goes in one send; when the socket's
// buffer is full (a long prompt, a slow server) the rest waits on Go's netpoller through a copy of
// the descriptor registered for the time of this write, so no thread blocks.
func write(ctx context.Context, fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.SendmsgN(fd, p, nil, nil, unix.MSG_NOSIGNAL)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return writeWait(ctx, fd, p)
		case err != nil:
			return &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", err)}
		}
		p = p[n:]
	}
	return nil
}

func writeWait(ctx context.Context, fd int, p []byte) error {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("wait to write the request: %w", err)
	}
	f := os.NewFile(uintptr(dup), "conn") // non-blocking: in the netpoller
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("wait to write the request: %w", err)
	}
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for len(p) > 0 {
			n, err := unix.SendmsgN(int(fd), p, nil, nil, unix.MSG_NOSIGNAL)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false
			case err != nil:
				werr = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", err)}
				return true
			}
			p = p[n:]
		}
		return true
	})
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil {
		return fmt.Errorf("wait to write the request: %w", err)
	}
	return werr
}

// loopStream is a worker's request on the loop: the loop goroutine fills it while the worker
// waits, both under mu.
type loopStream struct {
	mu   sync.Mutex
	w    *worker
	fd   int
	id   uint64 // the registration's; 0: none
	done chan struct{}
	last atomic.Int64 // unix ns of the last read (the worker's stall check)

	maxHead int
	hdr     []byte // the header block so far
	hdrLine int    // headEndFrom's place in hdr
	hdrScan int
	interim int // 1xx responses before this one
	head    respHead
	inBody  bool
	body    bodyReader
	errBody []byte // a non-200 answer's first 2 kB
	at      time.Time
	clock   func() time.Time
	got     bool // a byte of the answer arrived
	ended   bool
	// how it ended (with ended): err, a failure before the events (what == "") or of the stream;
	// redirect, a 3xx the worker leaves to net/http; reusable, the connection can carry the next
	// request; clean, the stream ended and w.out is done with w.finish
	err                       error
	what                      string
	redirect, reusable, clean bool
	started                   atomic.Bool // the headers arrived (the stall check's name for it)
}

// max1xxResponses is how many interim responses net/http's transport reads before the real one.
const max1xxResponses = 5

func (s *loopStream) reset(fd int, maxHead int) {
	s.fd, s.id, s.maxHead = fd, 0, maxHead
	s.hdr, s.errBody = s.hdr[:0], s.errBody[:0]
	if cap(s.hdr) > 64<<10 {
		s.hdr = nil // a header block of up to maxHead (10 MB) is not held for the worker's later requests
	}
	s.hdrLine, s.hdrScan, s.interim = 0, 0, 0
	s.head, s.inBody, s.body, s.at, s.got, s.ended = respHead{}, false, bodyReader{line: s.body.line[:0]}, time.Time{}, false, false
	s.err, s.what, s.redirect, s.reusable, s.clean = nil, "", false, false, false
	s.started.Store(false)
	s.last.Store(time.Now().UnixNano())
	select { // a signal of an abandoned request
	case <-s.done:
	default:
	}
}

// end records how the stream ended.
func (s *loopStream) end(err error, what string) { s.ended, s.err, s.what = true, err, what }

// broke handles the connection's end (err nil) or failure.
func (s *loopStream) broke(err error) {
	if !s.inBody {
		switch {
		case err != nil:
			s.end(err, "")
		case len(s.hdr) == 0:
			s.end(errors.New("server closed the connection before answering (EOF)"), "")
		default:
			s.end(errors.New("server closed the connection before answering (unexpected EOF)"), "")
		}
		return
	}
	s.body.eof, s.body.err = true, err
	s.feed(nil)
}

// feed parses bytes of the answer.
func (s *loopStream) feed(p []byte) {
	if !s.inBody {
		s.hdr = append(s.hdr, p...)
		for {
			n, line, scan := headEndFrom(s.hdr, s.hdrLine, s.hdrScan)
			s.hdrLine, s.hdrScan = line, scan
			if n < 0 {
				if len(s.hdr) > s.maxHead {
					s.end(fmt.Errorf("server response headers exceeded %d bytes; aborting", s.maxHead), "")
				}
				return
			}
			if n > s.maxHead {
				s.end(fmt.Errorf("server response headers exceeded %d bytes; aborting", s.maxHead), "")
				return
			}
			h, err := parseHead(s.hdr[:n])
			if err != nil {
				s.end(err, "")
				return
			}
			rest := s.hdr[n:]
			if h.status >= 100 && h.status < 200 && h.status != 101 {
				// an interim response: the real one follows (at most 5 of them, as net/http reads;
				// a server sending them without end would hold the stream until its timeout)
				if s.interim++; s.interim > max1xxResponses {
					s.end(errors.New("net/http: too many 1xx informational responses"), "")
					return
				}
				s.hdr = append(s.hdr[:0], rest...)
				s.hdrLine, s.hdrScan = 0, 0
				continue
			}
			if h.status >= 300 && h.status < 400 || h.status == 101 {
				s.redirect, s.ended = true, true
				return
			}
			s.head, s.inBody = h, true
			s.body.reset(h)
			s.started.Store(true)
			w := s.w
			if w.r.cfg.Activity != nil {
				w.r.cfg.Activity.Store(s.at.UnixNano())
			}
			w.sse.Reset(&s.body, s.clock, 0)
			p = rest // aliases hdr, which is not touched again for this answer
			break
		}
	}
	s.body.src = p
	w := s.w
	o := &w.out
	if s.head.status != http.StatusOK {
		var b [512]byte
		for len(s.errBody) < 2048 {
			n, err := s.body.Read(b[:min(len(b), 2048-len(s.errBody))])
			s.errBody = append(s.errBody, b[:n]...)
			if err == errWouldBlock {
				return
			}
			if err != nil {
				break
			}
		}
		o.end = s.at
		o.errMsg = "HTTP " + strconv.Itoa(s.head.status) + ": " + errorText(s.errBody)
		s.ended = true
		return
	}
	for {
		data, at, err := w.sse.Next()
		if err == errWouldBlock {
			return
		}
		if err != nil {
			if err == io.EOF || w.st.done {
				s.ended, s.clean = true, true
				s.reusable = s.body.done && len(s.body.src) == 0 && !s.head.close
				return
			}
			s.end(err, fmt.Sprintf("stream broke after %d chunks", o.chunks))
			return
		}
		if w.event(data, at) {
			s.ended = true
			return
		}
	}
}

// doLoop is do on the runner's event loop; ok is false when the request must be sent again with
// net/http (a redirect).
func (w *worker) doLoop(ctx context.Context, c *conversation) (o *outcome, ok bool) {
	r, l := w.r, w.r.loop
	o = &w.out
	w.begin(c)
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.AfterFunc(w.timeout, func() { cancel(errRequestTimeout) })
	defer deadline.Stop()

	if w.ls == nil {
		s := &loopStream{w: w, done: make(chan struct{}, 1)}
		s.clock = func() time.Time { return s.at } // the SSE reader's: the time of the read parsed
		w.ls = s
	}
	s := w.ls
	stall := r.cfg.StallTimeout
	o.start = time.Now()
	// a server that reads no request (its socket's buffer full) stalls it before any answer, as
	// net/http's request counts it; once sent, the wait below takes over
	headers := time.AfterFunc(stall, func() { cancel(errHeaderStall) })
	defer headers.Stop()
	for attempt := 0; ; attempt++ {
		fd, reused, err := l.conn(rctx)
		if err != nil {
			return w.fail(rctx, err, ""), true
		}
		s.mu.Lock()
		s.reset(fd, l.maxHead)
		s.mu.Unlock()
		if err := l.attach(s); err != nil {
			l.drop(fd)
			if reused && attempt == 0 {
				continue // the server closed the kept-alive connection: a new one
			}
			return w.fail(rctx, err, ""), true
		}
		if err := w.send(rctx, c, fd); err != nil {
			l.detach(s)
			l.drop(fd)
			if reused && attempt == 0 {
				continue // the server closed the kept-alive connection: a new one
			}
			return w.fail(rctx, err, ""), true
		}
		headers.Stop()
		if err := l.register(s); err != nil {
			l.drop(fd)
			return w.fail(rctx, err, ""), true
		}
		t := time.NewTimer(stall)
	wait:
		for {
			select {
			case <-s.done:
				break wait
			case <-rctx.Done():
				s.mu.Lock()
				if !s.ended {
					s.ended = true
					l.unregister(s)
					s.mu.Unlock()
					t.Stop()
					l.drop(fd)
					what := ""
					if s.started.Load() {
						what = fmt.Sprintf("stream broke after %d chunks", o.chunks)
					}
					return w.fail(rctx, rctx.Err(), what), true
				}
				s.mu.Unlock()
				<-s.done
				break wait
			case <-t.C:
				// a stall: no byte for StallTimeout (for the headers, since the request)
				if left := stall - time.Since(time.Unix(0, s.last.Load())); left > 0 {
					t.Reset(left)
					continue
				}
				if s.started.Load() {
					cancel(errStall)
				} else {
					cancel(errHeaderStall)
				}
			}
		}
		t.Stop()
		// the loop is done with s
		s.mu.Lock()
		redirect, err, what, got, reusable, clean := s.redirect, s.err, s.what, s.got, s.reusable, s.clean
		s.mu.Unlock()
		if reusable {
			l.keep(fd)
		} else {
			l.drop(fd)
		}
		switch {
		case redirect:
			return nil, false
		case err != nil && !got && reused && attempt == 0:
			continue // the server closed the kept-alive connection before this request
		case err != nil:
			return w.fail(rctx, err, what), true
		case clean:
			return w.finish(c), true
		}
		return o, true
	}
}

// headerValueOK says whether v may be sent as a header's value as it is: no control byte but tab
// (net/http refuses the same ones).
func headerValueOK(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
