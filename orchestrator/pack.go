package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/store"
)

// Packing (docs/spec.md, hosts[].pack): a host runs floor(free GPUs / tp) points at once, each
// server on its own GPUs (CUDA_VISIBLE_DEVICES) and port (the spec's port plus its slot), through a
// handle of its own (Host.Slot; a host says it packs by Slots().GPUs). One slot worker per GPU
// claims what fits the GPUs free at the moment.

// gpuPool hands out the GPUs of one packing host to its running points.
type gpuPool struct {
	mu      sync.Mutex
	held    []string // per GPU index: the id of the point holding it, "" when free
	changed chan struct{}
	// together records, per running point, every point that ran beside it at some moment.
	together map[string]map[string]bool
}

func newGPUPool(n int) *gpuPool {
	return &gpuPool{held: make([]string, n), changed: make(chan struct{}), together: map[string]map[string]bool{}}
}

// freeLocked counts the free GPUs (p.mu held).
func (p *gpuPool) freeLocked() int {
	n := 0
	for _, h := range p.held {
		if h == "" {
			n++
		}
	}
	return n
}

// takeLocked gives point id tp free GPUs (p.mu held): an aligned run of adjacent indices first (a
// TP group on GPUs 0-3 or 4-7 shares its NVLink island on the usual 8-GPU boards), then any run of
// adjacent ones, then the lowest free ones; nil when fewer than tp are free.
func (p *gpuPool) takeLocked(tp int, id string) []int {
	if tp < 1 || p.freeLocked() < tp {
		return nil
	}
	runFrom := func(s int) bool {
		if s+tp > len(p.held) {
			return false
		}
		for i := s; i < s+tp; i++ {
			if p.held[i] != "" {
				return false
			}
		}
		return true
	}
	start := -1
	for s := 0; s+tp <= len(p.held) && start < 0; s += tp {
		if runFrom(s) {
			start = s
		}
	}
	for s := 0; s+tp <= len(p.held) && start < 0; s++ {
		if runFrom(s) {
			start = s
		}
	}
	var got []int
	if start >= 0 {
		for i := start; i < start+tp; i++ {
			got = append(got, i)
		}
	} else {
		for i, h := range p.held {
			if h == "" && len(got) < tp {
				got = append(got, i)
			}
		}
	}
	for _, i := range got {
		p.held[i] = id
	}
	if p.together[id] == nil {
		p.together[id] = map[string]bool{}
	}
	for _, h := range p.held {
		if h != "" && h != id {
			p.together[id][h] = true
			if p.together[h] == nil {
				p.together[h] = map[string]bool{}
			}
			p.together[h][id] = true
		}
	}
	return got
}

// companions returns (and forgets) every point that ran beside id while it held GPUs.
func (p *gpuPool) companions(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for o := range p.together[id] {
		out = append(out, o)
	}
	delete(p.together, id)
	slices.Sort(out)
	return out
}

// give frees GPUs and wakes the slots waiting for some.
func (p *gpuPool) give(gpus []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range gpus {
		p.held[i] = ""
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait returns a channel closed at the next release.
func (p *gpuPool) wait() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// busy reports whether some point holds GPUs.
func (p *gpuPool) busy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.freeLocked() < len(p.held)
}

// beside lists the other points holding GPUs now.
func (p *gpuPool) beside(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, h := range p.held {
		if h != "" && h != id && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// slot is a packing host's slot a worker runs: its GPU pool, its number and the GPUs its current
// point holds; a parallel host's slot has no pool (its GPUs are the host's to place).
type slot struct {
	pool *gpuPool
	k    int
	gpus []int
}

// claim claims the next pending point that fits the GPUs free now and gives it GPUs, in one step
// under the pool's lock (two slots never count the same free GPUs). ok false: no GPU is free.
func (s *slot) claim(ctx context.Context, st Store, sweepID int64, host string) (store.Point, bool, error) {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	free := s.pool.freeLocked()
	if free == 0 {
		return store.Point{}, false, nil
	}
	p, err := st.ClaimNextPointUpTo(ctx, sweepID, host, free)
	if err != nil {
		return p, true, err
	}
	s.gpus = s.pool.takeLocked(p.TP, p.ID)
	return p, true, nil
}

// tag marks an update as the slot's, with the GPUs its point holds (a nil slot: as it is).
func (s *slot) tag(u Update) Update {
	if s == nil {
		return u
	}
	u.Slot, u.GPUs = s.k+1, slices.Clone(s.gpus)
	return u
}

// launchOn rewrites a point's launch for its slot: its GPUs in CUDA_VISIBLE_DEVICES and its port,
// the spec's plus the slot number, in the argv (argparse reads the last --port) and the probe.
func (s *slot) launchOn(argv []string, env map[string]string, port int) ([]string, map[string]string, int) {
	port += s.k
	if s.pool == nil {
		return argparse.Set(argv, strconv.Itoa(port), argparse.Port), env, port
	}
	out := make(map[string]string, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	ids := make([]string, len(s.gpus))
	for i, g := range s.gpus {
		ids[i] = strconv.Itoa(g)
	}
	out["CUDA_VISIBLE_DEVICES"] = strings.Join(ids, ",")
	return argparse.Set(argv, strconv.Itoa(port), argparse.Port), out, port
}

// words says where a packed point runs, for its events: "GPUs 2,3, port 30001".
func (s *slot) words(port int) string {
	ids := make([]string, len(s.gpus))
	for i, g := range s.gpus {
		ids[i] = strconv.Itoa(g)
	}
	return fmt.Sprintf("GPUs %s, port %d", strings.Join(ids, ","), port)
}

// idList spells point ids after a colon, or nothing.
func idList(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ": " + strings.Join(ids, ", ")
}
