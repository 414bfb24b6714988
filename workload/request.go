package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// worker sends one request at a time and keeps its buffers between requests.
type worker struct {
	r     *runner
	sse   *SSEReader
	chunk Chunk
	st    streamState
	out   outcome
	// ls is the worker's stream on the runner's event loop (nil until it first uses one), req its
	// request's bytes.
	ls  *loopStream
	req []byte
	// conv is the conversation the worker sends in a closed loop; answer the text streamed by
	// the last request whose conversation goes on.
	conv    conversation
	answer  []byte
	timeout time.Duration // the request's (for its error message)
}

// outcome is what one request gave. itls aliases the worker's buffer.
type outcome struct {
	ok                 bool
	errMsg             string
	levelAborted       bool // failed because the level was being cut short
	start, end         time.Time
	ttft, e2e          time.Duration
	prompt, completion int64
	usage              bool
	chunks             int
	itls               []time.Duration
	id                 string
	turn, turns        int // the request's turn (from 0) of its conversation's
}

var (
	errRequestTimeout = errors.New("request timeout")
	errHeaderStall    = errors.New("no response headers (stall timeout)")
	errStall          = errors.New("stream stalled (stall timeout)")
)

// maxITLPerRequest bounds the inter-token samples a request keeps (a misbehaving server could send
// any number of chunks); beyond it, samples are dropped.
const maxITLPerRequest = 1 << 16

// do sends c's current request and reads the whole stream, keeping the answer's text in w.answer
// when a turn follows: on the runner's event loop when it has one (a plain-HTTP server on Linux),
// else, or for a response the loop does not take (a redirect), with net/http.
func (w *worker) do(ctx context.Context, c *conversation) *outcome {
	if w.r.loop != nil {
		if o, ok := w.doLoop(ctx, c); ok {
			return o
		}
	}
	return w.doHTTP(ctx, c)
}

// begin resets w for c's current request.
func (w *worker) begin(c *conversation) {
	r := w.r
	o := &w.out
	*o = outcome{itls: o.itls[:0], turn: c.turn, turns: c.turns}
	w.timeout = r.cfg.RequestTimeout
	if w.timeout == 0 {
		w.timeout = DefaultTimeoutBase + time.Duration(c.maxTokens)*DefaultTimeoutPerToken
	}
	w.st = streamState{maxTokens: c.maxTokens}
	if c.follows() {
		w.answer = w.answer[:0]
		w.st.answer = &w.answer
	}
}

// doHTTP is do with net/http.
func (w *worker) doHTTP(ctx context.Context, c *conversation) *outcome {
	r := w.r
	o := &w.out
	w.begin(c)
	body, size := r.body(c)
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.AfterFunc(w.timeout, func() { cancel(errRequestTimeout) })
	defer deadline.Stop()
	headers := time.AfterFunc(r.cfg.StallTimeout, func() { cancel(errHeaderStall) })
	defer headers.Stop()

	req, err := http.NewRequestWithContext(rctx, http.MethodPost, r.base+r.path, body)
	if err != nil {
		return w.fail(rctx, err, "build request")
	}
	req.ContentLength = size
	req.GetBody = func() (io.ReadCloser, error) { // a redirect sends the body again
		b, _ := r.body(c)
		return io.NopCloser(b), nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if r.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
	}
	o.start = time.Now()
	resp, err := r.client.Do(req)
	headers.Stop()
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("server closed the connection before answering (%v)", err)
		}
		return w.fail(rctx, err, "")
	}
	defer resp.Body.Close()
	if r.cfg.Activity != nil {
		r.cfg.Activity.Store(time.Now().UnixNano())
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		o.end = time.Now()
		o.errMsg = "HTTP " + strconv.Itoa(resp.StatusCode) + ": " + errorText(b)
		return o
	}
	sb := &stallBody{rc: resp.Body, d: r.cfg.StallTimeout, cancel: cancel}
	defer sb.stop()
	w.sse.Reset(sb, nil, 0)
	st := &w.st
	for {
		data, at, err := w.sse.Next()
		if err != nil {
			if err == io.EOF || st.done {
				break // after [DONE] what follows does not matter
			}
			return w.fail(rctx, err, fmt.Sprintf("stream broke after %d chunks", o.chunks))
		}
		if w.event(data, at) {
			return o
		}
	}
	return w.finish(c)
}

// streamState is what reading one response's events needs between two of them.
type streamState struct {
	answer             *[]byte // where the answer's text goes when a turn follows; nil: nowhere
	maxTokens          int
	first, done, final bool
	last               time.Time
}

// event takes one event of w's stream (data arrived at at) into w.out; it returns true when the
// request ended on it (w.out says why). After [DONE] events are only drained, so that the
// connection is reused.
func (w *worker) event(data []byte, at time.Time) bool {
	r, o, st, ch := w.r, &w.out, &w.st, &w.chunk
	if r.cfg.Activity != nil {
		r.cfg.Activity.Store(at.UnixNano())
	}
	if st.done {
		return false
	}
	if err := parseChunk(data, ch, st.answer); err != nil {
		o.end = at
		o.errMsg = "malformed stream data: " + err.Error()
		return true
	}
	if st.answer != nil && len(*st.answer) > answerLimit(st.maxTokens) {
		o.end = at
		o.errMsg = fmt.Sprintf("an answer of more than %d bytes for max_tokens %d (the limit for an answer "+
			"a later turn carries)", answerLimit(st.maxTokens), st.maxTokens)
		return true
	}
	if ch.Done {
		st.done, o.e2e = true, at.Sub(o.start)
		return false
	}
	if ch.Error {
		o.end = at
		o.errMsg = "error in stream: " + errorText(ch.ErrorMsg)
		return true
	}
	if o.id == "" && len(ch.ID) > 0 && r.save != nil {
		o.id = string(ch.ID)
	}
	if ch.Content > 0 {
		if !st.first {
			st.first, o.ttft = true, at.Sub(o.start)
		} else if len(o.itls) < maxITLPerRequest {
			o.itls = append(o.itls, at.Sub(st.last))
		}
		st.last = at
		o.chunks++
	}
	if ch.Usage {
		o.usage, o.prompt, o.completion = true, ch.PromptTokens, ch.CompletionTokens
	}
	if ch.Finish {
		st.final = true
	}
	o.e2e = at.Sub(o.start)
	return false
}

// finish completes w.out once the stream ended cleanly.
func (w *worker) finish(c *conversation) *outcome {
	o, st := &w.out, &w.st
	o.end = o.start.Add(o.e2e)
	switch {
	case !st.done && !st.final:
		o.errMsg = fmt.Sprintf("stream ended after %d chunks without [DONE] or a finish_reason", o.chunks)
		return o
	case !st.first:
		o.errMsg = "stream carried no token"
		return o
	}
	if !o.usage {
		o.completion = int64(o.chunks)
		o.prompt = w.r.promptWords(c)
	}
	o.ok = true
	return o
}

// fail fills the outcome of a request that broke, naming the real cause (a timeout, a stall, the
// level ending, the caller cancelling) rather than "context canceled".
func (w *worker) fail(rctx context.Context, err error, what string) *outcome {
	o := &w.out
	o.end = time.Now()
	if cause := context.Cause(rctx); cause != nil {
		switch {
		case errors.Is(cause, errRequestTimeout):
			err = fmt.Errorf("timed out after %v (request timeout)", w.timeout)
		case errors.Is(cause, errHeaderStall):
			err = fmt.Errorf("no response headers within %v (stall timeout)", w.r.cfg.StallTimeout)
		case errors.Is(cause, errStall):
			err = fmt.Errorf("no data for %v (stall timeout)", w.r.cfg.StallTimeout)
		case errors.Is(cause, errLevelAborted):
			err, o.levelAborted = errLevelAborted, true
		default:
			err = cause
		}
	}
	msg := err.Error()
	if what != "" {
		msg = what + ": " + msg
	}
	o.errMsg = msg
	return o
}

// stallBody cancels the request when no bytes arrive for d once the stream has started.
type stallBody struct {
	rc     io.Reader
	d      time.Duration
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	t      *time.Timer
}

func (s *stallBody) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	if n > 0 {
		s.mu.Lock()
		if s.t == nil {
			s.t = time.AfterFunc(s.d, func() { s.cancel(errStall) })
		} else {
			s.t.Reset(s.d)
		}
		s.mu.Unlock()
	}
	return n, err
}

func (s *stallBody) stop() {
	s.mu.Lock()
	if s.t != nil {
		s.t.Stop()
	}
	s.mu.Unlock()
}

// errorText extracts a readable message from an error body (OpenAI {"message"} or {"error":
// {"message"}}, FastAPI {"detail"}), else an excerpt.
func errorText(b []byte) string {
	var c Chunk
	if ParseChunk(b, &c) == nil && len(c.ErrorMsg) > 0 {
		b = c.ErrorMsg
	}
	s := strings.TrimSpace(string(b))
	if uq, err := strconv.Unquote(`"` + s + `"`); err == nil {
		s = uq
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}
