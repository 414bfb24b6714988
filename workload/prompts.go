package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Dataset yields the prompts of a load test. Prompt must be safe for concurrent use and
// reproducible: the same (stream, i) gives the same prompt.
type Dataset interface {
	// Prompt returns the i-th prompt of a stream (streams keep levels and warmups apart).
	Prompt(stream uint64, i int) string
	// String names the dataset as the --dataset flag does.
	String() string
}

// ParseDataset resolves a --dataset value: "random" (inputTokens words drawn from seed) or
// "sharegpt:PATH" (the first human turns of a ShareGPT JSON file, shuffled by seed).
func ParseDataset(spec string, inputTokens int, seed uint64) (Dataset, error) {
	switch {
	case spec == "" || spec == "random":
		if inputTokens < 1 {
			return nil, fmt.Errorf("random dataset: input tokens must be positive, got %d", inputTokens)
		}
		return &RandomDataset{Tokens: inputTokens, Seed: seed}, nil
	case strings.HasPrefix(spec, "sharegpt:"):
		path := strings.TrimPrefix(spec, "sharegpt:")
		if path == "" {
			return nil, errors.New(`dataset "sharegpt:" needs a file path, e.g. sharegpt:ShareGPT_V3_unfiltered_cleaned_split.json`)
		}
		return LoadShareGPT(path, seed)
	}
	return nil, fmt.Errorf("unknown dataset %q (want random or sharegpt:PATH)", spec)
}

// RandomDataset makes prompts of Tokens words drawn from a fixed vocabulary. SGLang's tokenizers
// count about one token per common English word; sglangsim counts exactly one token per
// whitespace-separated word, so a prompt of N words is N prompt tokens there. The server's reported
// prompt_tokens is what the figures use.
type RandomDataset struct {
	Tokens int
	Seed   uint64
}

func (d *RandomDataset) String() string { return "random" }

// Prompt draws prompt i of stream from (Seed, stream, i): different requests share no prefix, so
// a prefix cache does not shorten their prefill.
func (d *RandomDataset) Prompt(stream uint64, i int) string {
	rng := d.rng(stream, i)
	var b strings.Builder
	b.Grow(d.Tokens * 6)
	for w := range d.Tokens {
		if w > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(promptWords[rng.IntN(len(promptWords))])
	}
	return b.String()
}

var promptWords = strings.Fields(`time year people way day man thing woman life child world school state family
student group country problem hand part place case week company system program question work government
number night point home water room mother area money story fact month lot right study book eye job word
business issue side kind head house service friend father power hour game line end member law car city
community name president team minute idea kid body information back parent face others level office door
health person art war history party result change morning reason research girl guy moment air teacher force
education foot boy age policy music market sense nation plan college interest death experience effect use
class control care field development role effort rate heart drug show leader light voice wife police mind
price report decision son view relationship town road arm difference value building action model season
society tax director position player record paper space ground form event official matter center couple
site project activity star table need court oil situation cost industry figure street image phone data
picture practice piece land product doctor wall patient worker news test movie north love support technology
step baby computer type attention film tree source organization hair window evidence population site science
draft verify speed batch cache token graph server queue accept length tensor kernel memory layer weight`)

// ShareGPTDataset holds the first human turn of each conversation of a ShareGPT file, in an order
// shuffled by the seed.
type ShareGPTDataset struct {
	Path    string
	Prompts []string
}

func (d *ShareGPTDataset) String() string { return "sharegpt:" + d.Path }

// Prompt cycles through the shuffled prompts; streams start at different offsets.
func (d *ShareGPTDataset) Prompt(stream uint64, i int) string {
	n := uint64(len(d.Prompts))
	return d.Prompts[(stream*0x9e3779b97f4a7c15%n+uint64(i))%n]
}

// LoadShareGPT reads a ShareGPT JSON file (ReadPromptSet, FormatShareGPT, DefaultSetLimits): an
// array of {"conversations": [{"from", "value"}, ...]}. Each conversation gives its first turn from
// "human" (or "user"). A file that is not such an array, or has no usable conversation, is an error
// naming the file and the line.
func LoadShareGPT(path string, seed uint64) (*ShareGPTDataset, error) {
	set, err := ReadPromptSet(context.Background(), path, path, FormatShareGPT, SetLimits{})
	if err != nil {
		return nil, fmt.Errorf("sharegpt dataset: %w", err)
	}
	prompts := make([]string, len(set.Items))
	for i, it := range set.Items {
		prompts[i] = it.Turns[0]
	}
	rng := rand.New(rand.NewPCG(seed, 0x73686172656770))
	rng.Shuffle(len(prompts), func(i, j int) { prompts[i], prompts[j] = prompts[j], prompts[i] })
	return &ShareGPTDataset{Path: path, Prompts: prompts}, nil
}
