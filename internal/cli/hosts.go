package cli

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/sweep"
)

// hostOptions are the command-line choices that shape how hosts are reached.
type hostOptions struct {
	acceptNewHostKeys bool
	logDir            string // local driver: server logs go to LOGDIR/HOST.log when set
	event             func(host, kind, detail string)
}

// specHost adapts one spec host to the orchestrator: the SSH connection is made on first use, so an
// unreachable host is host trouble of its points (retried, then host_unreachable), not a refusal to
// run the whole sweep; and a local command given by a relative path is resolved once.
type specHost struct {
	h    sweep.Host
	opts hostOptions

	mu   sync.Mutex
	impl hostctl.Host
}

func newHosts(spec *sweep.Spec, opts hostOptions) []*specHost {
	out := make([]*specHost, 0, len(spec.Hosts))
	for _, h := range spec.Hosts {
		out = append(out, &specHost{h: h, opts: opts})
	}
	return out
}

func (s *specHost) Name() string { return s.h.Name }

func (s *specHost) get(ctx context.Context) (hostctl.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.impl != nil {
		return s.impl, nil
	}
	if s.h.Driver == sweep.DriverLocal {
		o := hostctl.LocalOptions{Name: s.h.Name}
		if s.opts.logDir != "" {
			o.LogFile = filepath.Join(s.opts.logDir, s.h.Name+".log")
		}
		s.impl = hostctl.NewLocal(o)
		return s.impl, nil
	}
	r, err := hostctl.DialRemote(ctx, hostctl.RemoteOptions{
		Name: s.h.Name, Unit: s.h.Unit, CreateUnit: s.h.CreateUnit,
		SSH: hostctl.SSHOptions{Address: s.h.Address, User: s.h.User, IdentityFile: s.h.IdentityFile,
			KnownHosts: s.h.KnownHosts, AcceptNewHostKeys: s.opts.acceptNewHostKeys},
		Event: func(kind, detail string) {
			if s.opts.event != nil {
				s.opts.event(s.h.Name, kind, detail)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	s.impl = r
	return r, nil
}

func (s *specHost) Start(ctx context.Context, l hostctl.Launch) (hostctl.Instance, error) {
	impl, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	if s.h.Driver == sweep.DriverLocal && len(l.Argv) > 0 && !filepath.IsAbs(l.Argv[0]) {
		argv := append([]string(nil), l.Argv...)
		if argv[0], err = resolveCommand(argv[0]); err != nil {
			return nil, &hostctl.Failure{Class: hostctl.ClassBadArgs, Detail: err.Error()}
		}
		l.Argv = argv
	}
	return impl.Start(ctx, l)
}

func (s *specHost) Restore(ctx context.Context) error {
	s.mu.Lock()
	impl := s.impl
	s.mu.Unlock()
	if impl == nil {
		// Never reached in this run. A unit left changed by an earlier crash is still restored:
		// connect now and let the driver's marker say what to undo.
		if s.h.Driver == sweep.DriverLocal {
			return nil
		}
		var err error
		if impl, err = s.get(ctx); err != nil {
			return fmt.Errorf("restore %s: %w", s.h.Name, err)
		}
	}
	return impl.Restore(ctx)
}

func (s *specHost) Provenance(ctx context.Context) (hostctl.Provenance, error) {
	impl, err := s.get(ctx)
	if err != nil {
		return hostctl.Provenance{}, err
	}
	return impl.Provenance(ctx)
}

func (s *specHost) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.impl == nil {
		return nil
	}
	return s.impl.Close()
}

// resolveCommand makes a local driver's relative command absolute: a path with a slash is taken
// from the working directory, a bare name from $PATH (as a shell would).
func resolveCommand(cmd string) (string, error) {
	if strings.Contains(cmd, "/") {
		abs, err := filepath.Abs(cmd)
		if err != nil {
			return "", fmt.Errorf("command %q: %w", cmd, err)
		}
		return abs, nil
	}
	p, err := exec.LookPath(cmd)
	if err != nil {
		return "", fmt.Errorf("command %q not found in PATH: %w", cmd, err)
	}
	return filepath.Abs(p)
}
