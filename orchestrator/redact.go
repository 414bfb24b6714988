package orchestrator

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// Redacted stands for a secret's value in stored text, as in the redacted server arguments.
const Redacted = sweep.Redacted

// redactor replaces the values of a sweep's secrets (every value of its env, the server's and each
// method's, and literal values of credential flags in its args) in text bound for the store or a
// live update: failure evidence is the server's log verbatim, and a server that prints an env
// value (a token in a traceback, a key in a debug line) would otherwise put it into the API, the
// reports and the event log.
type redactor struct{ r *strings.Replacer }

// newRedactor collects the secrets of spec (nil spec or none: a redactor that changes nothing).
func newRedactor(spec *sweep.Spec) *redactor {
	if spec == nil {
		return &redactor{}
	}
	var secrets []string
	add := func(v string) {
		if sweep.IsSecret(v) {
			secrets = append(secrets, strings.TrimSpace(v))
		}
	}
	addArgs := func(argv []string) {
		for _, name := range sweep.CredentialFlags {
			rest := argv
			for {
				at, v, ok := argparse.LastAt(rest, name)
				if at < 0 {
					break
				}
				if ok {
					add(v)
				}
				rest = rest[:at]
			}
		}
	}
	for _, v := range spec.Server.Env {
		add(v)
	}
	addArgs(spec.Server.Args)
	for _, m := range spec.Methods {
		for _, v := range m.Env {
			add(v)
		}
		addArgs(m.Args)
	}
	if len(secrets) == 0 {
		return &redactor{}
	}
	// Longest first, so a secret that contains another is replaced whole; the quoted forms too
	// (a JSON or Go-quoted log line escapes quotes and backslashes).
	var forms []string
	for _, s := range secrets {
		forms = append(forms, s)
		if q := strconv.Quote(s); q[1:len(q)-1] != s {
			forms = append(forms, q[1:len(q)-1])
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	return &redactor{r: strings.NewReplacer(pairs...)}
}

// text is s with every secret replaced.
func (x *redactor) text(s string) string {
	if x == nil || x.r == nil || s == "" {
		return s
	}
	return x.r.Replace(s)
}

// redactingStore is the Store a Runner writes through: every free text it stores (event details,
// failure details, release reasons, sweep state details, run errors) passes the sweep's redactor.
type redactingStore struct {
	Store
	x *redactor
}

// withRedaction wraps st for spec's secrets (st as it is when the spec has none).
func withRedaction(st Store, spec *sweep.Spec) Store {
	if rs, ok := st.(*redactingStore); ok {
		st = rs.Store
	}
	x := newRedactor(spec)
	if x.r == nil {
		return st
	}
	return &redactingStore{Store: st, x: x}
}

// unwrapStore is the store under any redaction (for the optional interfaces a store may have).
func unwrapStore(st Store) Store {
	if rs, ok := st.(*redactingStore); ok {
		return rs.Store
	}
	return st
}

func (s *redactingStore) SetSweepState(ctx context.Context, id int64, to store.SweepState, detail string) error {
	return s.Store.SetSweepState(ctx, id, to, s.x.text(detail))
}

func (s *redactingStore) FinishPoint(ctx context.Context, sweepID int64, pointID string, attempt int, f store.PointFinish) error {
	f.FailureDetail = s.x.text(f.FailureDetail)
	return s.Store.FinishPoint(ctx, sweepID, pointID, attempt, f)
}

func (s *redactingStore) ReleasePoint(ctx context.Context, sweepID int64, pointID string, attempt int, reason string) error {
	return s.Store.ReleasePoint(ctx, sweepID, pointID, attempt, s.x.text(reason))
}

func (s *redactingStore) CancelPoints(ctx context.Context, sweepID int64, reason string) (int, error) {
	return s.Store.CancelPoints(ctx, sweepID, s.x.text(reason))
}

func (s *redactingStore) RecordRunAndFinish(ctx context.Context, run store.Run, finish *store.PointFinish) error {
	run.Error = s.x.text(run.Error)
	if finish != nil {
		f := *finish
		f.FailureDetail = s.x.text(f.FailureDetail)
		finish = &f
	}
	return s.Store.RecordRunAndFinish(ctx, run, finish)
}

func (s *redactingStore) AddEvent(ctx context.Context, e store.Event) error {
	e.Detail = s.x.text(e.Detail)
	return s.Store.AddEvent(ctx, e)
}
