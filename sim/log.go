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
	mu    sync.Mutex
	out   io.Writer // SGLang's logging (Python logging: stderr)
	acc   io.Writer // uvicorn access log (stdout)
	buf   []byte
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
func (l *Logger) TPError(format string, args ...any) { l.line(l.out, " TP0!", format, args...) }

// Main logs from the launcher process (no rank tag).
func (l *Logger) Main(format string, args ...any) { l.line(l.out, "", format, args...) }

// TP logs from tensor-parallel rank 0.
func (l *Logger) TP(format string, args ...any) { l.line(l.out, " TP0", format, args...) }

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

// Request records one finished generation request.
func (t *Truth) Request(rid string, arrival, first, finish time.Time, tokens, verify int) {
	if t == nil || t.f == nil {
		return
	}
	firstS := "null"
	if !first.IsZero() {
		firstS = msStr(first)
	}
	t.write(`{"event":"request","rid":` + strconv.Quote(rid) + `,"arrival_unix_ms":` + msStr(arrival) +
		`,"first_token_unix_ms":` + firstS + `,"finish_unix_ms":` + msStr(finish) +
		`,"completion_tokens":` + strconv.Itoa(tokens) + `,"verify_steps":` + strconv.Itoa(verify) + `}`)
}
