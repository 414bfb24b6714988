package workload

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// checkServer answers greedy requests with a text that depends only on the prompt, and records
// the order, the auth header and the bodies.
func checkServer(t *testing.T, key string) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var order []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":{"message":"Invalid API Key"}}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/v1/models" {
			w.Write([]byte(`{"data":[{"id":"m"}]}`))
			return
		}
		var body struct {
			Model       string  `json:"model"`
			Prompt      string  `json:"prompt"`
			Temperature float64 `json:"temperature"`
			Stream      bool    `json:"stream"`
			MaxTokens   int     `json:"max_tokens"`
			Messages    []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Stream || body.Temperature != 0 || body.Model != "m" || body.MaxTokens != 16 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		p := body.Prompt
		if len(body.Messages) > 0 {
			p = body.Messages[0].Content
		}
		mu.Lock()
		order = append(order, p)
		mu.Unlock()
		text := "answer to " + p
		if r.URL.Path == "/v1/chat/completions" {
			json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": text}}}})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"text": text}}})
	}))
	t.Cleanup(srv.Close)
	return srv, &order
}

func TestAnswerInPromptOrder(t *testing.T) {
	prompts := CheckPrompts(5, 1)
	for _, api := range []string{APIChat, APICompletions} {
		srv, order := checkServer(t, "k")
		got, err := Answer(context.Background(), CheckConfig{URL: srv.URL, API: api, APIKey: "k", Prompts: prompts,
			MaxTokens: 16, Concurrency: 1, Reverse: true})
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		for i, p := range prompts {
			if got[i] != "answer to "+p {
				t.Errorf("%s: answer %d = %q", api, i, got[i])
			}
			if (*order)[len(prompts)-1-i] != p {
				t.Errorf("%s: sent %v, want the prompts last first", api, *order)
			}
		}
	}
	srv, _ := checkServer(t, "k")
	if _, err := Answer(context.Background(), CheckConfig{URL: srv.URL, API: APIChat, APIKey: "wrong", Prompts: prompts, MaxTokens: 16}); err == nil ||
		!strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("wrong key: %v", err)
	}
}

func TestCheckPromptsAreFixed(t *testing.T) {
	a, b := CheckPrompts(8, 3), CheckPrompts(8, 3)
	if strings.Join(a, "|") != strings.Join(b, "|") {
		t.Error("same seed, different prompts")
	}
	seen := map[string]bool{}
	for _, p := range a {
		if seen[p] {
			t.Errorf("prompt %q twice", p)
		}
		seen[p] = true
	}
	if strings.Join(CheckPrompts(8, 4), "|") == strings.Join(a, "|") {
		t.Error("another seed gives the same prompts")
	}
}

func TestCompare(t *testing.T) {
	ref := []string{"a b c d", "e f g h", "i j"}
	same, err := Compare(ref, ref)
	if err != nil || same.Agreement != 1 || same.Diverged {
		t.Fatalf("same: %+v %v", same, err)
	}
	c, _ := Compare(ref, []string{"a b c d", "e f x y", "i"})
	if want := (1 + 0.5 + 0.5) / 3; c.Agreement < want-1e-9 || c.Agreement > want+1e-9 {
		t.Errorf("agreement %v, want %v", c.Agreement, want)
	}
	if !c.Diverged || c.Prompt != 2 || c.Word != 1 || c.Reference != "i j" || c.Got != "i" {
		t.Errorf("first divergence %+v, want prompt 3 at word 2 (the earliest)", c)
	}
	if _, err := Compare(ref, ref[:2]); err == nil {
		t.Error("different prompt sets compared")
	}
	if longer, _ := Compare([]string{"a"}, []string{"a b"}); !longer.Diverged || longer.Agreement != 1 {
		t.Errorf("a longer answer: %+v", longer)
	}
}

func TestMismatchThreshold(t *testing.T) {
	for _, c := range []struct {
		agreement, self float64
		want            bool
	}{
		{1, 1, false}, {0.95, 1, false}, {0.89, 1, true}, {0.3, 1, true},
		{0.75, 0.9, false}, {0.69, 0.9, true}, // twice the reference's disagreement
		{0.05, 0.4, false}, // a reference that disagrees with itself a lot flags only the worst
	} {
		if got := Mismatch(c.agreement, c.self); got != c.want {
			t.Errorf("Mismatch(%v, %v) = %v (threshold %v)", c.agreement, c.self, got, MismatchThreshold(c.self))
		}
	}
}

// An answer larger than the bound fails its prompt saying so (it was cut and read as broken JSON).
func TestAnswerBeyondTheLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"choices":[{"text":"`))
		w.Write([]byte(strings.Repeat("x", 4<<20)))
		w.Write([]byte(`"}]}`))
	}))
	t.Cleanup(srv.Close)
	_, err := Answer(context.Background(), CheckConfig{URL: srv.URL, API: APICompletions, Model: "m",
		Prompts: CheckPrompts(1, 1), MaxTokens: 16})
	if err == nil || !strings.Contains(err.Error(), "prompt 1: POST /v1/completions: the answer is larger than 4194304 bytes (the limit)") {
		t.Fatalf("err = %v", err)
	}
}
