package workload

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// How a level sends a prompt set's conversations (docs/bench.md, "Prompt set files"): each turn is
// one request, counted in Config.Requests and measured alone (its TTFT, ITL, TPOT and latency); a
// turn after the first is sent once the answer before it has ended, with the conversation so far
// (user turn, the answer streamed, the next user turn), as MT-Bench and Spec-Bench do. A failed
// turn ends its conversation; so does the end of the level.

// conversation is what a worker sends next: conversation i of a stream (for a Dataset without
// turns, prompt i), at one of its turns, with the answers to the turns before it.
type conversation struct {
	stream    uint64
	i         int
	turn      int // from 0
	turns     int // 0: none begun
	maxTokens int // the requests' max_tokens
	// answers are the answers to turns 0..turn-1, as raw JSON string contents (escapes kept).
	answers [][]byte
}

// begin starts request index i's conversation of stream: for a set of conversations the next
// one not yet begun (next counts them), else prompt i, as before sets had turns.
func (r *runner) begin(c *conversation, stream uint64, i int, next *atomic.Int64) {
	clear(c.answers)
	*c = conversation{stream: stream, i: i, turns: 1, maxTokens: r.cfg.OutputTokens, answers: c.answers[:0]}
	if r.set == nil {
		return
	}
	if r.set.multi > 0 {
		c.i = int(next.Add(1) - 1)
	}
	it := r.set.Item(stream, c.i)
	c.turns = len(it.Turns)
	if it.MaxTokens > 0 {
		c.maxTokens = it.MaxTokens
	}
}

// advance moves c to its next turn after a request that gave o and answer; false when the
// conversation is over (its last turn sent, or this one failed: there is no answer to carry).
func (c *conversation) advance(o *outcome, answer []byte) bool {
	if !o.ok || c.turn+1 >= c.turns {
		c.turns = 0
		return false
	}
	c.answers = append(c.answers, bytes.Clone(answer))
	c.turn++
	return true
}

// follows reports whether a turn comes after the current one (its answer is kept).
func (c *conversation) follows() bool { return c.turn+1 < c.turns }

// answerLimit bounds the answer kept for a later turn: 64 bytes per token asked for (a token is a
// few bytes of text; an escape is at most 6 per character), plus room for a few chunks. A server
// that streams more than max_tokens allows fails the request rather than grow the conversation.
func answerLimit(maxTokens int) int { return 64*maxTokens + 16<<10 }

// body returns the body of c's current request and its length in bytes: the conversation so far
// (chat) and the request's max_tokens.
func (r *runner) body(c *conversation) (*promptBody, int64) {
	if r.set == nil {
		return newPromptBody(&r.parts, r.cfg.Prompts, c.stream, c.i)
	}
	pieces := make([]bodyPiece, 0, 3+4*c.turn)
	pieces = append(pieces, bodyPiece{raw: r.parts.head})
	for t := range c.turn {
		pieces = append(pieces, bodyPiece{cur: r.set.turnCursor(c.stream, c.i, t)}, bodyPiece{raw: userToAnswer},
			bodyPiece{raw: c.answers[t]}, bodyPiece{raw: answerToUser})
	}
	pieces = append(pieces, bodyPiece{cur: r.set.turnCursor(c.stream, c.i, c.turn)})
	tail := r.parts.tail
	if c.maxTokens != r.parts.maxTokens {
		tail = r.parts.appendTail(nil, c.maxTokens)
	}
	return newBody(append(pieces, bodyPiece{raw: tail}))
}

// promptWords is what a request without usage is counted as sending: the whitespace-separated
// words of its messages (an answer's counted in its raw text: an estimate).
func (r *runner) promptWords(c *conversation) int64 {
	if r.set == nil {
		return int64(promptWordCount(r.cfg.Prompts, c.stream, c.i))
	}
	n := 0
	for t := 0; t <= c.turn; t++ {
		n += r.set.turnWords(c.stream, c.i, t)
	}
	for _, a := range c.answers {
		n += countWords(string(a))
	}
	return int64(n)
}

// followUps holds the open loop's conversations whose next turn is ready, oldest first.
type followUps struct {
	mu sync.Mutex
	q  []*conversation
}

func (f *followUps) push(c *conversation) {
	f.mu.Lock()
	f.q = append(f.q, c)
	f.mu.Unlock()
}

// pop returns the oldest ready conversation, or nil.
func (f *followUps) pop() *conversation {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.q) == 0 {
		return nil
	}
	c := f.q[0]
	f.q[0] = nil
	f.q = f.q[1:]
	return c
}
