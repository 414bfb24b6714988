package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Logger writes SGLang-style log lines: "[YYYY-MM-DD HH:MM:SS TP0] msg".
// Every line is one Write, so lines of different goroutines never mix.
type Logger struct {
	// Quiet drops info lines (--log-level warning or error), as Python
	// logging does; warnings, errors and tracebacks still print.
	Quiet bool
	// Base is the TP rank of the process's first scheduler: TP/TPError lines carry it (a node of a
	// multi-node launch starts at node_rank * tp/nnodes).
	Base int
	mu   sync.Mutex
	out  io.Writer // SGLang's logging (Python logging: stderr)
	acc  io.Writer // uvicorn access log (stdout)
	buf  []byte
}

// NewLogger logs to out and writes uvicorn access lines to acc.
func NewLogger(out, acc io.Writer) *Logger { return &Logger{out: out, acc: acc} }

func (l *Logger) line(w io.Writer, tag string, format string, args ...any) {
	tag, important := strings.CutSuffix(tag, "!")
	if l.Quiet && !important && w == l.out {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf[:0]
	b = append(b, '[')
	b = time.Now().AppendFormat(b, "2006-01-02 15:04:05")
	b = append(b, tag...)
	b = append(b, "] "...)
	if len(args) == 0 {
		b = append(b, format...)
	} else {
		b = fmt.Appendf(b, format, args...)
	}
	b = append(b, '\n')
	_, _ = w.Write(b)
	l.buf = b
}

// Warn logs a warning or error from the launcher process (printed even at
// --log-level warning).
func (l *Logger) Warn(format string, args ...any) { l.line(l.out, "!", format, args...) }

// TPError logs an error from tensor-parallel rank 0.
func (l *Logger) TPError(format string, args ...any) {
	l.line(l.out, " TP"+strconv.Itoa(l.Base)+"!", format, args...)
}

// Main logs from the launcher process (no rank tag).
func (l *Logger) Main(format string, args ...any) { l.line(l.out, "", format, args...) }

// TP logs from tensor-parallel rank 0.
func (l *Logger) TP(format string, args ...any) {
	l.line(l.out, " TP"+strconv.Itoa(l.Base), format, args...)
}

// Stdout writes lines as they are (NCCL's debug output goes to stdout).
func (l *Logger) Stdout(lines []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.acc, strings.Join(lines, "\n")+"\n")
}

// Rank logs from tensor-parallel rank r.
func (l *Logger) Rank(r int, format string, args ...any) {
	l.line(l.out, " TP"+strconv.Itoa(r), format, args...)
}

// RankWarn logs a warning from tensor-parallel rank r.
func (l *Logger) RankWarn(r int, format string, args ...any) {
	l.line(l.out, " TP"+strconv.Itoa(r)+"!", format, args...)
}

// Access logs a uvicorn access line.
func (l *Logger) Access(format string, args ...any) { l.line(l.acc, "", format, args...) }

// Raw writes text as is (tracebacks).
func (l *Logger) Raw(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.out, s)
}

// Truth appends ground-truth JSON lines to SGLANGSIM_TRUTH.
type Truth struct {
	mu sync.Mutex
	f  *os.File
}

// OpenTruth opens path for appending; an empty path gives a no-op Truth.
func OpenTruth(path string) (*Truth, error) {
	if path == "" {
		return &Truth{}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &Truth{f: f}, nil
}

// UnixMs is t in unix milliseconds with a sub-millisecond fraction.
func UnixMs(t time.Time) float64 { return float64(t.UnixNano()) / 1e6 }

func msStr(t time.Time) string { return strconv.FormatFloat(UnixMs(t), 'f', 3, 64) }

func (t *Truth) write(s string) {
	if t == nil || t.f == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.f.WriteString(s + "\n")
}

// ReadyInfo is what the ready line says about the server: its pid and
// port, its CUDA_VISIBLE_DEVICES, the GPUs it sees and those its TP ranks hold.
type ReadyInfo struct {
	PID, Port int
	// CUDAVisibleDevices is the variable as given; nil when unset.
	CUDAVisibleDevices *string
	VisibleGPUs, GPUs  []int // physical indices
}

// Ready records the moment /health first answers 200.
func (t *Truth) Ready(at time.Time, info ReadyInfo) {
	cvd := "null"
	if info.CUDAVisibleDevices != nil {
		b, _ := json.Marshal(*info.CUDAVisibleDevices)
		cvd = string(b)
	}
	t.write(`{"event":"ready","unix_ms":` + msStr(at) + `,"pid":` + strconv.Itoa(info.PID) + `,"port":` + strconv.Itoa(info.Port) +
		`,"cuda_visible_devices":` + cvd + `,"visible_gpus":` + intsJSON(info.VisibleGPUs) + `,"gpus":` + intsJSON(info.GPUs) + `}`)
}

func intsJSON(v []int) string {
	b := []byte{'['}
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(append(b, ']'))
}

// Exit records the end of the process (its pid, so several servers can share one truth file) and why.
func (t *Truth) Exit(at time.Time, reason string) {
	t.write(`{"event":"exit","unix_ms":` + msStr(at) + `,"pid":` + strconv.Itoa(os.Getpid()) + `,"reason":` + strconv.Quote(reason) + `}`)
}

// RequestTruth is what the truth file records of one finished generation
// request.
type RequestTruth struct {
	RID                    string
	Arrival, First, Finish time.Time // First is zero when no token was sent
	PromptTokens           int
	// CompletionTokens counts every token sent, the first (from prefill)
	// included; VerifySteps the decode steps that produced the others.
	CompletionTokens, VerifySteps int
	Content                       Content
	// ContentFactor and ContextFactor are the factors the request's
	// acceptance odds were multiplied by (Profile.ContentFactor, ContextFactor).
	ContentFactor, ContextFactor float64
}

// Request records one finished generation request: its times, its tokens,
// what its verify steps accepted (accepted_tokens = completion_tokens - 1,
// the first token coming from prefill; accept_length = accepted_tokens /
// verify_steps, 0 without a verify step) and the content and context that
// set its acceptance. A group's accept length is the sum of its
// accepted_tokens over the sum of its verify_steps.
func (t *Truth) Request(r RequestTruth) {
	if t == nil || t.f == nil {
		return
	}
	firstS := "null"
	if !r.First.IsZero() {
		firstS = msStr(r.First)
	}
	accepted := max(0, r.CompletionTokens-1)
	al := 0.0
	if r.VerifySteps > 0 {
		al = float64(accepted) / float64(r.VerifySteps)
	}
	b := make([]byte, 0, 400)
	b = append(b, `{"event":"request","rid":`...)
	b = strconv.AppendQuote(b, r.RID)
	b = append(b, `,"arrival_unix_ms":`...)
	b = append(b, msStr(r.Arrival)...)
	b = append(b, `,"first_token_unix_ms":`...)
	b = append(b, firstS...)
	b = append(b, `,"finish_unix_ms":`...)
	b = append(b, msStr(r.Finish)...)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(r.CompletionTokens), 10)
	b = append(b, `,"verify_steps":`...)
	b = strconv.AppendInt(b, int64(r.VerifySteps), 10)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(r.PromptTokens), 10)
	b = append(b, `,"accepted_tokens":`...)
	b = strconv.AppendInt(b, int64(accepted), 10)
	b = append(b, `,"accept_length":`...)
	b = appendFloat(b, al)
	b = append(b, `,"content_class":"`...)
	b = append(b, r.Content.Class.String()...)
	b = append(b, `","content_score":`...)
	b = strconv.AppendFloat(b, r.Content.Score, 'f', 4, 64)
	b = append(b, `,"content_factor":`...)
	b = appendFloat(b, r.ContentFactor)
	b = append(b, `,"context_factor":`...)
	b = appendFloat(b, r.ContextFactor)
	b = append(b, '}')
	t.write(string(b))
}
