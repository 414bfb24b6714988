package workload_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/workload"
)

// allocated returns the bytes this process allocated while f ran (runtime.MemStats.TotalAlloc:
// a count of allocations, not a measure of time).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A level's memory follows its requests in flight, not the length of its prompts: against the real
// simulator, the same level with 250000-token prompts allocates (nearly) no more than with
// 1000-token ones. Building each prompt whole (about 1.6 MB of text here) and copying it into the
// request body cost tens of megabytes for these 8 requests.
func TestLevelMemoryIndependentOfPromptLength(t *testing.T) {
	sim := startSim(t, simOpts{scale: "0.002"})
	const requests = 8
	level := func(in int) uint64 {
		return allocated(func() {
			res, err := workload.Run(t.Context(), workload.Config{URL: sim.URL, API: "completions", Concurrency: 4,
				Requests: requests, InputTokens: in, OutputTokens: 4, Seed: 11,
				StallTimeout: 30 * time.Second, RequestTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.Completed != requests || res.TotalInputTokens != int64(requests*in) {
				t.Fatalf("%d-token prompts: completed %d of %d, %d input tokens; errors %+v", in, res.Completed,
					requests, res.TotalInputTokens, res.Errors)
			}
		})
	}
	const long = 250_000
	level(1000) // the first level pays for what is set up once (the HTTP stack's pools)
	// The least of two runs each: a garbage collection empties sync.Pools, which then allocate anew.
	small, large := min(level(1000), level(1000)), min(level(long), level(long))
	// The prompts' text alone is 8 x ~1.6 MB; allow half a byte per prompt token.
	if limit := small + requests*long/2; large > limit {
		t.Errorf("a level of %d requests allocated %d bytes with %d-token prompts, %d with 1000-token ones: "+
			"more than %d, so prompts are held whole", requests, large, long, small, limit)
	}
	t.Logf("allocated: %d bytes (1000-token prompts), %d bytes (%d-token prompts)", small, large, long)
}

// streamServer answers /v1/models (and 404 to the other probes) and streams what send writes for every completion request.
func streamServer(t *testing.T, send func(w http.ResponseWriter)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		case "/v1/chat/completions", "/v1/completions":
		default: // no metrics, no server info
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		send(w)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A server that sends one endless line (here 64 MiB without a newline) fails the request with an
// error naming the limit, and the client holds no more than the limit for it.
func TestHugeStreamLineFailsTheRequest(t *testing.T) {
	url := streamServer(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: ")
		chunk := strings.Repeat("x", 1<<20)
		for range 64 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return // the client gave up
			}
		}
	})
	var res *workload.Result
	alloc := allocated(func() {
		var err error
		res, err = workload.Run(t.Context(), workload.Config{URL: url, Concurrency: 1, Requests: 1, InputTokens: 8,
			OutputTokens: 8, StallTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
	})
	want := fmt.Sprintf("stream broke after 0 chunks: server-sent event too large: a line or event of more than %d bytes (the limit)",
		workload.DefaultMaxEvent)
	if res.Failed != 1 || len(res.Errors) != 1 || res.Errors[0].Message != want {
		t.Fatalf("failed %d errors %+v; want one failure %q", res.Failed, res.Errors, want)
	}
	// The line's buffer grows to the limit by doubling (under 2x), beside the level's fixed costs
	// (histograms, the HTTP client): far under the 64 MiB the server sent.
	t.Logf("allocated %d bytes", alloc)
	if limit := uint64(8 << 20); alloc > limit {
		t.Errorf("the level allocated %d bytes for a line cut at %d (want under %d)", alloc, workload.DefaultMaxEvent, limit)
	}
}

// Response headers beyond the client's bound fail the request instead of being held.
func TestHugeResponseHeadersFailTheRequest(t *testing.T) {
	url := streamServer(t, func(w http.ResponseWriter) {
		w.Header().Set("X-Padding", strings.Repeat("p", 1<<20))
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
	})
	res, err := workload.Run(t.Context(), workload.Config{URL: url, Concurrency: 1, Requests: 1, InputTokens: 8,
		OutputTokens: 1, StallTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, "server response headers exceeded 65536 bytes") {
		t.Fatalf("completed %d failed %d errors %+v; want a failure naming the header limit", res.Completed, res.Failed, res.Errors)
	}
}
