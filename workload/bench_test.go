package workload

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// sseStream builds n chat chunks of k words each, as sglangsim and SGLang send them, plus the
// finish, usage and [DONE] events.
func sseStream(n, k int) []byte {
	var b bytes.Buffer
	words := bytes.Repeat([]byte(" tok"), k)
	for i := range n {
		role := ""
		if i == 0 {
			role = `"role":"assistant",`
		}
		fmt.Fprintf(&b, `data: {"id":"00000000000000011f3a5c7e9b2d4f60","object":"chat.completion.chunk","created":1764560000,"model":"/models/Qwen3.5-122B-A10B","choices":[{"index":0,"delta":{%s"content":"%s"},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`+"\n\n", role, words)
	}
	b.WriteString(`data: {"id":"00000000000000011f3a5c7e9b2d4f60","object":"chat.completion.chunk","created":1764560000,"model":"/models/Qwen3.5-122B-A10B","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}` + "\n\n")
	fmt.Fprintf(&b, `data: {"id":"00000000000000011f3a5c7e9b2d4f60","object":"chat.completion.chunk","created":1764560000,"model":"/models/Qwen3.5-122B-A10B","choices":[],"usage":{"prompt_tokens":1024,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":null}}`+"\n\n", 1024+n*k, n*k)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// smallReads hands out at most size bytes per Read, like a socket under streaming load.
type smallReads struct {
	b    []byte
	size int
}

func (s *smallReads) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.size)], s.b)
	s.b = s.b[n:]
	return n, nil
}

// BenchmarkSSEChunks reads and parses a 512-chunk stream per iteration, with reads of one chunk
// (the worst case: a timestamp per event) or of 4 KB; k tokens per chunk.
func BenchmarkSSEChunks(b *testing.B) {
	for _, tc := range []struct {
		name       string
		k, readLen int
	}{{"1tok/read=chunk", 1, 300}, {"4tok/read=chunk", 4, 300}, {"1tok/read=4KB", 1, 4096}} {
		stream := sseStream(512, tc.k)
		b.Run(tc.name, func(b *testing.B) {
			s := NewSSEReader(nil, nil, 0)
			var c Chunk
			src := &smallReads{}
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			events := 0
			for b.Loop() {
				src.b, src.size = stream, tc.readLen
				s.Reset(src, nil, 0)
				for {
					d, _, err := s.Next()
					if err != nil {
						break
					}
					if ParseChunk(d, &c) != nil {
						b.Fatal("parse")
					}
					events++
				}
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(events)
			b.ReportMetric(per, "ns/chunk")
			b.ReportMetric(1e9/per*float64(tc.k), "tokens/s")
		})
	}
}

// BenchmarkPromptBody produces one request's body for a 32768-token random prompt: streamed (the
// length pass, then the bytes as the transport reads them, 32 KiB at a time) and, for comparison,
// built whole as before (Prompt, then json.Marshal into the body).
func BenchmarkPromptBody(b *testing.B) {
	const tokens = 32768
	d := &RandomDataset{Tokens: tokens, Seed: 1}
	model := jsonString("m")
	parts := newBodyParts(APIChat, model, 128, 0)
	b.Run("streamed", func(b *testing.B) {
		buf := make([]byte, 32<<10)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			body, size := newPromptBody(&parts, d, 1, i)
			n := 0
			for {
				k, err := body.Read(buf)
				n += k
				if err != nil {
					break
				}
			}
			if int64(n) != size {
				b.Fatal("size")
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i)/tokens, "ns/token")
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = oldBody(APIChat, model, 128, 0, d.Prompt(1, i))
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i)/tokens, "ns/token")
	})
}
