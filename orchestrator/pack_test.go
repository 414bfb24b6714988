package orchestrator

import (
	"slices"
	"testing"
)

func TestGPUPoolPlacement(t *testing.T) {
	p := newGPUPool(8)
	take := func(tp int, id string) []int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.takeLocked(tp, id)
	}
	if g := take(1, "a"); !slices.Equal(g, []int{0}) {
		t.Errorf("tp 1: %v", g)
	}
	// A tp 4 group goes on an aligned island, 4-7, not 1-4.
	if g := take(4, "b"); !slices.Equal(g, []int{4, 5, 6, 7}) {
		t.Errorf("tp 4: %v", g)
	}
	// tp 2: aligned 2-3 rather than 1-2.
	if g := take(2, "c"); !slices.Equal(g, []int{2, 3}) {
		t.Errorf("tp 2: %v", g)
	}
	if g := take(2, "d"); g != nil {
		t.Errorf("tp 2 with one GPU free: %v", g)
	}
	if b := p.beside("a"); !slices.Equal(b, []string{"b", "c"}) {
		t.Errorf("beside a: %v", b)
	}
	p.give([]int{0})
	p.give([]int{4, 5, 6, 7})
	// Free: 0, 1, 4-7. tp 2 aligned: 0-1.
	if g := take(2, "e"); !slices.Equal(g, []int{0, 1}) {
		t.Errorf("tp 2 after releases: %v", g)
	}
	// Non-adjacent fallback: free 4-7 only... take 3 adjacent from 4.
	if g := take(3, "f"); !slices.Equal(g, []int{4, 5, 6}) {
		t.Errorf("tp 3: %v", g)
	}
	p.give([]int{2, 3}) // free: 2, 3, 7
	if g := take(3, "g"); !slices.Equal(g, []int{2, 3, 7}) {
		t.Errorf("tp 3 on scattered GPUs: %v", g)
	}
	if p.busy() != true {
		t.Error("pool not busy")
	}
	// a ran beside b and c; f beside c (until its release), e and g.
	if got := p.companions("a"); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("a ran beside %v", got)
	}
	if got := p.companions("f"); !slices.Equal(got, []string{"c", "e", "g"}) {
		t.Errorf("f ran beside %v", got)
	}
}

func TestSlotLaunch(t *testing.T) {
	s := &slot{pool: newGPUPool(8), k: 3, gpus: []int{2, 3}}
	argv, env, port := s.launchOn([]string{"/sim", "--port", "30000", "--tp-size", "2"}, map[string]string{"A": "1"}, 30000)
	if port != 30003 || env["CUDA_VISIBLE_DEVICES"] != "2,3" || env["A"] != "1" || !slices.Equal(argv, []string{"/sim", "--port", "30003", "--tp-size", "2"}) {
		t.Errorf("launch %v %v %d", argv, env, port)
	}
	// A parallel host's slot (no pool: Slurm places the GPUs) gets its port only.
	free := &slot{k: 2}
	argv, env, port = free.launchOn([]string{"/sim", "--port", "30000"}, map[string]string{"A": "1"}, 30000)
	if _, set := env["CUDA_VISIBLE_DEVICES"]; port != 30002 || set || !slices.Equal(argv, []string{"/sim", "--port", "30002"}) {
		t.Errorf("a pool-less slot's launch %v %v %d", argv, env, port)
	}
}
