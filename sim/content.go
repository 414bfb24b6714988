package sim

import (
	"math"
	"strconv"
)

// What a request is about changes how much of a draft the target accepts:
// repetitive, low-entropy text (code, structured output) more, free prose
// less. The simulator reads the prompt's text once at arrival, scores it
// (ContentScore) and gives the request one content class; the class scales
// the odds of acceptance of every draft position (Profile.ContentFactor).
// The prompt's length scales them too, past a knee (Profile.ContextFactor).
// docs/sglangsim.md ("Content and context") gives the rule and its sources.

// ContentClass is the kind of text a request is: neutral (the zero value),
// code-like or prose-like.
type ContentClass int8

const (
	// ContentNeutral is the class of text the simulator cannot tell apart:
	// lowercase words only (the random dataset's prompts), short prompts,
	// token ids, and text whose score is near 0. Its acceptance is the
	// profile's as calibrated.
	ContentNeutral ContentClass = iota
	// ContentCode is code-like text: code punctuation and indentation.
	ContentCode
	// ContentProse is prose-like text: sentences with capitals and stops.
	ContentProse
)

// String is the class's name in the truth file: "neutral", "code" or "prose".
func (c ContentClass) String() string {
	switch c {
	case ContentCode:
		return "code"
	case ContentProse:
		return "prose"
	}
	return "neutral"
}

// Content is what ContentScore makes of a text.
type Content struct {
	Class ContentClass
	// Score is how code-like (up to 1) or prose-like (down to -1) the text
	// is: Code - Prose.
	Score float64
	// Code and Prose are the two signals, each in [0, 1].
	Code, Prose float64
	// Words is the text's token count (CountTokens).
	Words int
	// Scored is how many of those words the score read: the words of lines that are not filler
	// (lowercase words only). The class needs MinContentWords of them.
	Scored int
}

// The scoring rule's constants (docs/sglangsim.md lists them).
const (
	// MinContentWords is the shortest text that gets a class other than
	// neutral: a short prompt says too little about the reply it gets.
	MinContentWords = 32
	// ContentThreshold is how far from 0 a score must be for the code
	// (>= it) or prose (<= -it) class.
	ContentThreshold = 0.4
	// codeSymbolShare is the share of code punctuation (isCodeSymbol) among
	// the non-space bytes that counts as fully code-like; code has 8-25%,
	// prose well under 1%.
	codeSymbolShare = 0.06
	// proseSentenceRate is the rate of sentences per word that counts as
	// fully prose-like: English prose has one sentence in 15-25 words.
	proseSentenceRate = 0.04
)

// isCodeSymbol reports whether c is code punctuation: a byte code uses and
// prose hardly does, {}[]()<>=;_*/\|&#$%^~+@ and the backtick. The quotes,
// commas, stops, colons and hyphens both use are left out.
func isCodeSymbol(c byte) bool {
	switch c {
	case '{', '}', '[', ']', '(', ')', '<', '>', '=', ';', '_', '*', '/', '\\', '|', '&', '#', '$', '%', '^', '~', '+', '@', '`':
		return true
	}
	return false
}

// ContentScore scores text: a request's prompt (a chat's messages joined by
// newlines). It reads each byte once and allocates nothing.
func ContentScore(text string) Content {
	var s contentScorer
	s.add(text)
	return s.result()
}

// contentScorer accumulates the counts of ContentScore over the pieces of a
// prompt (a chat's messages, a list of text parts) without joining them: a
// piece boundary counts as a line break.
type contentScorer struct {
	// The counts of the lines that say something (committed by endLine): a line of lowercase words
	// only is filler (a random prompt, or the shared document specsweep pads prompts with before a
	// blank line), so padding a code or prose prompt to a long context leaves its class as it was.
	words, nonSpace, symbols int
	lines, indented          int
	sentences                int // a stop, whitespace, then a capitalised word (or the end)
	allWords                 int // every word, filler too: the text's token count
	// The current line's counts, and whether it has a byte other than a lowercase ASCII letter or
	// whitespace (other: the text has such a line).
	lw, lnonSpace, lsymbols, lsentences int
	lindented, lother, other            bool
	inWord, lineStarted                 bool // inside a word; the current line has a non-space byte
	lineIndent                          int  // leading spaces of the current line (a tab counts 2)
	stop                                bool // the last byte was '.', '!' or '?'
	afterStop                           bool // a stop and whitespace: a capitalised word next starts a sentence
	started                             bool // some piece was added (the next piece starts a line)
}

func (s *contentScorer) add(text string) {
	if s.started {
		s.newline()
	}
	s.started = true
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch c {
		case ' ', '\t', '\r', '\v', '\f', '\n':
			s.afterStop = s.afterStop || s.stop
			s.stop, s.inWord = false, false
			switch {
			case c == '\n':
				s.newline()
			case !s.lineStarted && c == '\t':
				s.lineIndent += 2
			case !s.lineStarted && c == ' ':
				s.lineIndent++
			}
			continue
		}
		s.lnonSpace++
		if !s.lineStarted {
			s.lineStarted = true
			s.lindented = s.lineIndent >= 2
		}
		if !s.inWord {
			s.inWord = true
			s.lw++
			s.allWords++
			if s.afterStop && c >= 'A' && c <= 'Z' {
				s.lsentences++
			}
			s.afterStop = false
		}
		if c < 'a' || c > 'z' {
			s.lother = true
		}
		if isCodeSymbol(c) {
			s.lsymbols++
		}
		s.stop = c == '.' || c == '!' || c == '?'
	}
}

// newline ends the current line (and a word).
func (s *contentScorer) newline() {
	s.afterStop = s.afterStop || s.stop
	s.stop, s.inWord, s.lineStarted, s.lineIndent = false, false, false, 0
	s.endLine()
}

// endLine commits the current line's counts unless it is filler (lowercase words only).
func (s *contentScorer) endLine() {
	if s.lother {
		s.other = true
		s.words += s.lw
		s.nonSpace += s.lnonSpace
		s.symbols += s.lsymbols
		s.sentences += s.lsentences
		s.lines++
		if s.lindented {
			s.indented++
		}
	}
	s.lw, s.lnonSpace, s.lsymbols, s.lsentences, s.lindented, s.lother = 0, 0, 0, 0, false, false
}

func (s *contentScorer) result() Content {
	s.endLine()
	c := Content{Words: s.allWords, Scored: s.words}
	sentences := s.sentences
	if s.stop || s.afterStop { // a stop at the very end ends a sentence
		sentences++
	}
	if !s.other || s.nonSpace == 0 {
		return c // lowercase words (and whitespace) only: neutral, score 0
	}
	c.Code = math.Min(1, float64(s.symbols)/float64(s.nonSpace)/codeSymbolShare)
	if s.lines > 0 {
		c.Code = math.Min(1, c.Code+0.5*float64(s.indented)/float64(s.lines))
	}
	if s.words > 0 {
		c.Prose = math.Min(1, float64(sentences)/float64(s.words)/proseSentenceRate)
	}
	c.Score = c.Code - c.Prose
	c.Class = contentClassOf(c.Score, s.words)
	return c
}

// contentClassOf is the class of a text of words tokens scoring score.
func contentClassOf(score float64, words int) ContentClass {
	switch {
	case words < MinContentWords:
		return ContentNeutral
	case score >= ContentThreshold:
		return ContentCode
	case score <= -ContentThreshold:
		return ContentProse
	}
	return ContentNeutral
}

// scoreContent adds a decoded JSON prompt or message content to s: a string,
// a list of strings, a list of text parts; token ids and anything else add
// nothing (no text to read).
func scoreContent(s *contentScorer, v any) {
	switch x := v.(type) {
	case string:
		s.add(x)
	case []any:
		for _, e := range x {
			switch y := e.(type) {
			case string:
				s.add(y)
			case map[string]any:
				if t, ok := y["text"].(string); ok {
					s.add(t)
				}
			}
		}
	}
}

// oddsScale multiplies the odds p/(1-p) of each probability of accept by f:
// f > 1 accepts more, f < 1 less; 0 and 1 stay where they are. f == 1
// returns accept itself, so a neutral request draws exactly what it drew
// before content and context were modelled.
func oddsScale(accept []float64, f float64) []float64 {
	if f == 1 || len(accept) == 0 {
		return accept
	}
	out := make([]float64, len(accept))
	for i, p := range accept {
		out[i] = f * p / (1 - p + f*p)
	}
	return out
}

// appendFloat appends f in the shortest form that reads back as f.
func appendFloat(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'g', -1, 64) }
