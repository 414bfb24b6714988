//go:build !linux

package workload

import (
	"context"
	"net/http"
	"net/url"
)

// evLoop is Linux's (evloop_linux.go): elsewhere net/http reads every stream.
type evLoop struct{}

type loopStream struct{}

func newEvLoop(*http.Client, *url.URL, string, int) (*evLoop, error) { return nil, nil }

func (*evLoop) Close() {}

func (*evLoop) warm(context.Context, int) {}

func (w *worker) doLoop(context.Context, *conversation) (*outcome, bool) { return nil, false }
