package workload

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// FuzzSSE feeds arbitrary bytes through the SSE reader (whole and one byte at a time) and every
// event through ParseChunk: no panic, the same events either way, and ParseChunk agrees with
// encoding/json on what is a valid object.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\" the\"},\"finish_reason\":null}],\"usage\":null}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\r\n\r\n: ping\r\r"))
	f.Add([]byte("data: {\"error\":{\"message\":\"x\"}}\ndata: more\n\ndata"))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := events(t, bytes.NewReader(in))
		bytewise := events(t, &oneByteReader{b: in})
		if len(whole) != len(bytewise) {
			t.Fatalf("%d events whole, %d byte by byte", len(whole), len(bytewise))
		}
		for i := range whole {
			if !bytes.Equal(whole[i], bytewise[i]) {
				t.Fatalf("event %d: %q vs %q", i, whole[i], bytewise[i])
			}
		}
		for _, d := range append(whole, in) {
			var c Chunk
			err := ParseChunk(d, &c)
			t := bytes.TrimSpace(d)
			valid := json.Valid(d) && len(t) > 0 && t[0] == '{'
			if err == nil && !c.Done && !valid {
				panic("ParseChunk accepted invalid JSON: " + string(d))
			}
			if err != nil && valid && len(d) < 400 {
				panic("ParseChunk rejected valid JSON " + string(d) + ": " + err.Error())
			}
			if c.Content < 0 || c.Content > len(d) {
				panic("content length out of range")
			}
		}
	})
}

func events(t *testing.T, r io.Reader) [][]byte {
	s := NewSSEReader(r, nil, 1<<16)
	var out [][]byte
	for {
		d, _, err := s.Next()
		if err != nil {
			return out
		}
		out = append(out, append([]byte(nil), d...))
	}
}

type oneByteReader struct{ b []byte }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(o.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = o.b[0]
	o.b = o.b[1:]
	return 1, nil
}

// FuzzJSONText: the streamed prompt's escaping is encoding/json's, whatever the text and wherever a
// piece ends.
func FuzzJSONText(f *testing.F) {
	f.Add("say \"hi\" <b>\n\xff\u2028")
	f.Fuzz(func(t *testing.T, s string) { checkJSONText(t, s) })
}
