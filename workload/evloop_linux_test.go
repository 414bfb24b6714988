//go:build linux

package workload

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer is an HTTP/1.1 server over real loopback sockets written by hand, so that a test
// decides how each answer's bytes are cut into writes (chunks split across reads, pauses, a close
// mid-stream). answer writes the response of the n-th completion request (from 0) on c; it returns
// false to close the connection. Each request is read after readDelay (a slow reader).
func rawServer(t *testing.T, answer func(c net.Conn, n int) bool) (string, *atomic.Int64) {
	return slowServer(t, 0, answer)
}

func slowServer(t *testing.T, readDelay time.Duration, answer func(c net.Conn, n int) bool) (string, *atomic.Int64) {
	t.Helper()
	var reqs atomic.Int64
	return serveConns(t, func(c net.Conn, done <-chan struct{}) {
		c.(*net.TCPConn).SetNoDelay(true)
		br := bufio.NewReader(c)
		for {
			time.Sleep(readDelay)
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if !strings.HasSuffix(req.URL.Path, "/completions") {
				io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
				continue
			}
			if !answer(c, int(reqs.Add(1)-1)) {
				return
			}
		}
	})
}

// serveConns listens on a free loopback port and runs serve for each connection it accepts, the
// connection closed when serve returns or the test ends (done closes then); it returns the server's
// URL and the count of connections accepted.
func serveConns(t *testing.T, serve func(c net.Conn, done <-chan struct{})) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Go(func() {
				defer c.Close()
				go func() { <-done; c.Close() }()
				serve(c, done)
			})
		}
	})
	return "http://" + ln.Addr().String(), &conns
}

// chunked frames an event stream's bytes as one HTTP chunk.
func chunked(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }

const streamHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

func tokenEvent(i int) string {
	return fmt.Sprintf("data: {\"id\":\"r\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" w%d\"},\"finish_reason\":null}]}\n\n", i)
}

func lastEvents(tokens int) string {
	return fmt.Sprintf("data: {\"id\":\"r\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],"+
		"\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", tokens)
}

// writeCut writes s in pieces cut at random points, each flushed on its own with a short pause, so
// that the client reads a chunk's size line, its data and its end in separate reads.
func writeCut(c net.Conn, s string, rng *rand.Rand) bool {
	for len(s) > 0 {
		k := 1 + rng.IntN(min(len(s), 40))
		if _, err := io.WriteString(c, s[:k]); err != nil {
			return false
		}
		s = s[k:]
		time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
	}
	return true
}

func TestEvLoopTakesPlainHTTP(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		u, _ := url.Parse("http://127.0.0.1:1/v1/completions")
		l, err := newEvLoop(NewHTTPClient(4), u, "", 4)
		if err != nil || l == nil {
			t.Fatalf("newEvLoop(NewHTTPClient, http) = %v, %v; want a loop", l, err)
		}
		l.Close()
		for name, c := range map[string]*http.Client{
			"https":   NewHTTPClient(4),
			"default": http.DefaultClient, // a proxy from the environment
			"timeout": {Transport: &http.Transport{}, Timeout: time.Minute},
		} {
			v := *u
			if name == "https" {
				v.Scheme = "https"
			}
			if l, err := newEvLoop(c, &v, "", 4); l != nil || err != nil {
				l.Close()
				t.Errorf("%s: newEvLoop = %v, %v; want net/http", name, l, err)
			}
		}
	})
}

// An API key with a CR or LF would split the request's headers if written as it is: such a key
// keeps net/http, which refuses to send it.
func TestEvLoopRefusesAKeyThatSplitsHeaders(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		u, _ := url.Parse("http://127.0.0.1:1/v1/completions")
		for _, key := range []string{"k\r\nX-Injected: 1", "k\nX: 1", "k\x00"} {
			if l, err := newEvLoop(NewHTTPClient(4), u, key, 4); l != nil || err != nil {
				l.Close()
				t.Errorf("newEvLoop with key %q = %v, %v; want net/http", key, l, err)
			}
		}
		if l, err := newEvLoop(NewHTTPClient(4), u, "sk-abc\tdef", 4); l == nil || err != nil {
			t.Errorf("a key with a tab: newEvLoop = %v, %v; want a loop", l, err)
		} else {
			l.Close()
		}
	})
}

// Many streams at once, each cut into pieces at random points with pauses (a chunk's size, data
// and end split across reads), on kept-alive connections: every request completes with its tokens.
func TestEvLoopManyCutStreams(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		const tokens = 12
		base, conns := rawServer(t, func(c net.Conn, n int) bool {
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			s := streamHead
			for i := range tokens {
				s += chunked(tokenEvent(i))
			}
			s += chunked(lastEvents(tokens)) + "0\r\n\r\n"
			return writeCut(c, s, rng)
		})
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 24, Requests: 120, InputTokens: 8,
			OutputTokens: tokens, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 120 || res.Failed != 0 || res.TotalOutputTokens != 120*tokens {
			t.Fatalf("completed %d failed %d output %d errors %+v; want 120 completed, %d tokens", res.Completed,
				res.Failed, res.TotalOutputTokens, res.Errors, 120*tokens)
		}
		if n := conns.Load(); n > 24+2 {
			t.Errorf("%d connections for 24 streams: not kept alive", n)
		}
	})
}

// Pauses between events show in the timestamps: the ITLs are the server's pauses, not the time the
// loop takes to come round. The median is checked, not the least ITL: a read the scheduler delays
// by d (3-6 ms with two cores busy) shortens the gap before the next event by d, and two events
// read together are rightly one instant apart, so no single ITL has a lower bound. The TTFT has
// one: the server sleeps a gap before the first event.
func TestEvLoopTimestamps(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		const gap = 20 * time.Millisecond
		base, _ := rawServer(t, func(c net.Conn, n int) bool {
			if _, err := io.WriteString(c, streamHead); err != nil {
				return false
			}
			for i := range 5 {
				time.Sleep(gap)
				if _, err := io.WriteString(c, chunked(tokenEvent(i))); err != nil {
					return false
				}
			}
			_, err := io.WriteString(c, chunked(lastEvents(5))+"0\r\n\r\n")
			return err == nil
		})
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 4, Requests: 8, InputTokens: 8,
			OutputTokens: 5, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ms := float64(gap) / float64(time.Millisecond)
		if res.Completed != 8 || res.ITL.Count != 8*4 || res.ITL.Median < ms*0.9 || res.ITL.Median > ms*3 || res.TTFT.Min < ms*0.99 {
			t.Fatalf("completed %d, ITL %+v, TTFT %+v; want ITLs and TTFT of about %v", res.Completed, res.ITL, res.TTFT, gap)
		}
	})
}

// A connection closed in the middle of a stream fails that request with what happened, and the
// others go on.
func TestEvLoopClosedMidStream(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		base, _ := rawServer(t, func(c net.Conn, n int) bool {
			s := streamHead + chunked(tokenEvent(0)) + chunked(tokenEvent(1))
			if n%3 == 1 {
				io.WriteString(c, s+"1a\r\ndata: {\"choi") // and close, inside a chunk
				return false
			}
			_, err := io.WriteString(c, s+chunked(lastEvents(2))+"0\r\n\r\n")
			return err == nil
		})
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 3, Requests: 9, InputTokens: 8,
			OutputTokens: 2, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute, MaxConsecutiveFailures: -1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 6 || res.Failed != 3 || len(res.Errors) != 1 ||
			res.Errors[0].Message != "stream broke after 2 chunks: unexpected EOF" {
			t.Fatalf("completed %d failed %d errors %+v; want 6 and 3 broken after 2 chunks", res.Completed, res.Failed, res.Errors)
		}
	})
}

// A server faster than the client (an answer of hundreds of events in one write, more than the
// loop's read buffer) beside a slow one (a byte at a time): both read whole, the first in several
// reads of one wake-up (edge-triggered sockets are read until a short read).
func TestEvLoopBurstAndTrickle(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		const tokens = 2000
		base, _ := rawServer(t, func(c net.Conn, n int) bool {
			var b strings.Builder
			b.WriteString(streamHead)
			k := tokens
			if n%2 == 1 {
				k = 10
			}
			for i := range k {
				b.WriteString(chunked(tokenEvent(i)))
			}
			b.WriteString(chunked(lastEvents(k)) + "0\r\n\r\n")
			if n%2 == 0 {
				_, err := io.WriteString(c, b.String())
				return err == nil
			}
			s := b.String()
			for i := range len(s) {
				if _, err := io.WriteString(c, s[i:i+1]); err != nil {
					return false
				}
				if i%64 == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
			return true
		})
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 2, Requests: 6, InputTokens: 8,
			OutputTokens: tokens, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 6 || res.TotalOutputTokens != 3*tokens+3*10 {
			t.Fatalf("completed %d output %d errors %+v; want 6 and %d", res.Completed, res.TotalOutputTokens, res.Errors, 3*tokens+30)
		}
	})
}

// A server that closes each kept-alive connection after its answer without saying so: the next
// request on it is sent again on a new connection, not failed.
func TestEvLoopKeptAliveConnectionClosed(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		base, conns := rawServer(t, func(c net.Conn, n int) bool {
			_, err := io.WriteString(c, streamHead+chunked(tokenEvent(0))+chunked(lastEvents(1))+"0\r\n\r\n")
			time.Sleep(20 * time.Millisecond) // the answer's end reaches the client first
			return err != nil
		})
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 1, Requests: 5, InputTokens: 8,
			OutputTokens: 1, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 5 || conns.Load() < 5 {
			t.Fatalf("completed %d on %d connections, errors %+v; want 5 on 5", res.Completed, conns.Load(), res.Errors)
		}
	})
}

// A stream that stops sending fails on the stall timeout, not the request's.
func TestEvLoopStall(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		base, _ := rawServer(t, func(c net.Conn, n int) bool {
			io.WriteString(c, streamHead+chunked(tokenEvent(0)))
			time.Sleep(3 * time.Second)
			return false
		})
		start := time.Now()
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 1, Requests: 1, InputTokens: 8,
			OutputTokens: 4, StallTimeout: 300 * time.Millisecond, RequestTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed != 1 || len(res.Errors) != 1 || res.Errors[0].Message != "stream broke after 1 chunks: no data for 300ms (stall timeout)" ||
			time.Since(start) > 2*time.Second {
			t.Fatalf("failed %d errors %+v after %v; want a stall after 1 chunk", res.Failed, res.Errors, time.Since(start))
		}
	})
}

// A server slow to read a long request (its socket's buffer fills): the rest of the request waits
// for it, and the answer is read as usual.
func TestEvLoopSlowReader(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		base, _ := slowServer(t, 300*time.Millisecond, func(c net.Conn, n int) bool {
			_, err := io.WriteString(c, streamHead+chunked(tokenEvent(0))+chunked(lastEvents(1))+"0\r\n\r\n")
			return err == nil
		})
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 2, Requests: 4, InputTokens: 1 << 20,
			OutputTokens: 1, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 4 {
			t.Fatalf("completed %d, errors %+v; want 4", res.Completed, res.Errors)
		}
	})
}

// A server that refuses connections fails the requests with the dialler's words, as net/http did.
func TestEvLoopRefused(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		res, err := Run(t.Context(), Config{URL: "http://" + addr, Model: "m", Concurrency: 1, Requests: 2, InputTokens: 8,
			OutputTokens: 1, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		want := "dial tcp " + addr + ": connect: connection refused"
		if res.Completed != 0 || len(res.Errors) == 0 || res.Errors[0].Message != want {
			t.Fatalf("completed %d errors %+v; want %q", res.Completed, res.Errors, want)
		}
	})
}

// A header block trickling in a byte per read up to the bound is scanned once, not once per read:
// the loop's goroutine reads every stream of the level.
func TestLoopStreamHeaderTrickle(t *testing.T) {
	const maxHead = 256 << 10
	s := &loopStream{}
	s.reset(-1, maxHead)
	block := []byte("HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", maxHead/6+2))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range block {
			if s.feed(block[i : i+1]); s.ended {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a header block read a byte at a time took over 5s")
	}
	if !s.ended || s.err == nil || !strings.Contains(s.err.Error(), "headers exceeded") {
		t.Fatalf("ended %v err %v; want headers exceeded", s.ended, s.err)
	}
	if s.reset(-1, maxHead); cap(s.hdr) > 64<<10 {
		t.Fatalf("the next request holds the %d bytes of the last one's header block", cap(s.hdr))
	}
}

// A server sending interim (1xx) responses without end fails the request as net/http does, after
// 5 of them, instead of holding it until its timeout.
func TestEvLoopTooMany1xx(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		base, _ := rawServer(t, func(c net.Conn, n int) bool {
			for range 1000 {
				if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
					return false
				}
				time.Sleep(time.Millisecond)
			}
			return false
		})
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 1, Requests: 1, InputTokens: 8,
			OutputTokens: 1, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute, MaxConsecutiveFailures: -1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed != 1 || len(res.Errors) != 1 || res.Errors[0].Message != "net/http: too many 1xx informational responses" {
			t.Fatalf("failed %d errors %+v; want too many 1xx", res.Failed, res.Errors)
		}
	})
}

// A server that reads no request fails it on the stall timeout, as net/http's request did, not
// after the request's timeout (the request waits for the socket's buffer).
func TestEvLoopSendStall(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		url, _ := serveConns(t, func(c net.Conn, done <-chan struct{}) {
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if strings.HasSuffix(req.URL.Path, "/completions") {
					<-done // reads no more: the request's rest fills the socket's buffers
					return
				}
				io.Copy(io.Discard, req.Body)
				io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
			}
		})
		start := time.Now()
		res, err := Run(t.Context(), Config{URL: url, Model: "m", Concurrency: 1, Requests: 1,
			InputTokens: 1 << 20, OutputTokens: 1, StallTimeout: 300 * time.Millisecond, RequestTimeout: time.Minute,
			MaxConsecutiveFailures: -1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed != 1 || len(res.Errors) != 1 || res.Errors[0].Message != "no response headers within 300ms (stall timeout)" ||
			time.Since(start) > 5*time.Second {
			t.Fatalf("failed %d errors %+v after %v; want a header stall within 300ms", res.Failed, res.Errors, time.Since(start))
		}
	})
}

// forEachLoop runs f against each of the event loop's readers, as a contract both must keep:
// epoll, and io_uring where the kernel has it (skipped where it has not).
func forEachLoop(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, mode := range []string{"epoll", "io_uring"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(evLoopEnv, mode)
			if mode == "io_uring" {
				if r, err := newUring(); err != nil {
					t.Skipf("no io_uring reader here: %v", err)
				} else {
					r.file.Close()
					r.unmap()
				}
			}
			f(t)
		})
	}
}

// The environment variable picks the reader: epoll by default, io_uring where it works when asked.
func TestEvLoopReaderChoice(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1/v1/completions")
	r, uerr := newUring()
	if uerr == nil {
		r.file.Close()
		r.unmap()
	}
	for _, mode := range []string{"", "epoll", "io_uring"} {
		t.Setenv(evLoopEnv, mode)
		l, err := newEvLoop(NewHTTPClient(4), u, "", 4)
		if err != nil {
			t.Fatalf("%s=%q: %v", evLoopEnv, mode, err)
		}
		wantRing := mode == "io_uring" && uerr == nil // else epoll, the fallback
		if (l.ring != nil) != wantRing {
			t.Errorf("%s=%q: io_uring %v; want %v", evLoopEnv, mode, l.ring != nil, wantRing)
		}
		l.Close()
	}
	t.Setenv(evLoopEnv, "kqueue")
	if l, err := newEvLoop(NewHTTPClient(4), u, "", 4); err == nil {
		l.Close()
		t.Errorf("%s=kqueue: no error", evLoopEnv)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// A level leaves no goroutine and no descriptor behind: not its connections (kept alive, closed
// mid-stream, cancelled), not the loop's own (the epoll set, the ring). The counts are taken
// before the test's server starts and after it stops.
func TestEvLoopNoLeaks(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		fds, gs := openFDs(t), runtime.NumGoroutine()
		t.Run("levels", func(t *testing.T) {
			base, _ := rawServer(t, func(c net.Conn, n int) bool {
				s := streamHead + chunked(tokenEvent(0))
				switch n % 3 {
				case 1:
					io.WriteString(c, s) // and close, mid-stream
					return false
				case 2:
					io.WriteString(c, s)
					time.Sleep(time.Second) // cancelled by the request's timeout
					return false
				}
				_, err := io.WriteString(c, s+chunked(lastEvents(1))+"0\r\n\r\n")
				return err == nil
			})
			cfg := Config{URL: base, Model: "m", Concurrency: 4, Requests: 12, InputTokens: 8, OutputTokens: 1,
				StallTimeout: 10 * time.Second, RequestTimeout: 200 * time.Millisecond, MaxConsecutiveFailures: -1}
			for range 2 {
				res, err := Run(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.Completed == 0 || res.Failed == 0 {
					t.Fatalf("completed %d failed %d; want both", res.Completed, res.Failed)
				}
			}
		})
		deadline := time.Now().Add(5 * time.Second)
		for openFDs(t) > fds || runtime.NumGoroutine() > gs {
			if time.Now().After(deadline) {
				t.Fatalf("%d descriptors and %d goroutines after two levels; %d and %d before", openFDs(t),
					runtime.NumGoroutine(), fds, gs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// An answer of more bytes than all the ring's buffers hold, in one write: the recv runs out of
// buffers (ENOBUFS), is armed again once the loop has given them back, and the stream is read whole.
func TestEvLoopBurstBeyondBuffers(t *testing.T) {
	forEachLoop(t, func(t *testing.T) {
		const tokens = 60000 // about 6 MB of events, more than uringBufs*uringBufSize
		base, _ := rawServer(t, func(c net.Conn, n int) bool {
			var b strings.Builder
			b.WriteString(streamHead)
			for i := range tokens {
				b.WriteString(chunked(tokenEvent(i)))
			}
			b.WriteString(chunked(lastEvents(tokens)) + "0\r\n\r\n")
			_, err := io.WriteString(c, b.String())
			return err == nil
		})
		res, err := Run(t.Context(), Config{URL: base, Model: "m", Concurrency: 2, Requests: 2, InputTokens: 8,
			OutputTokens: tokens, StallTimeout: 10 * time.Second, RequestTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 2 || res.TotalOutputTokens != 2*tokens {
			t.Fatalf("completed %d output %d errors %+v; want 2 and %d", res.Completed, res.TotalOutputTokens, res.Errors, 2*tokens)
		}
	})
}
