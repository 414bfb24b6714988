package hostctl

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGPUSet(t *testing.T) {
	for _, c := range []struct {
		argv []string
		env  map[string]string
		want []int
	}{
		{[]string{"/x"}, nil, []int{0}},
		{[]string{"/x", "--tp-size", "4"}, nil, []int{0, 1, 2, 3}},
		{[]string{"/x", "--tensor-parallel-size=2"}, nil, []int{0, 1}},
		{[]string{"/x", "--tp", "2"}, nil, []int{0, 1}}, // argparse's abbreviation
		{[]string{"/x", "--tp-size", "4"}, map[string]string{"CUDA_VISIBLE_DEVICES": "4, 5,6,7"}, []int{4, 5, 6, 7}},
		{[]string{"/x"}, map[string]string{"CUDA_VISIBLE_DEVICES": "2,x,3"}, []int{2}},
		{[]string{"/x"}, map[string]string{"CUDA_VISIBLE_DEVICES": ""}, nil},
	} {
		if got := gpuSet(Launch{Argv: c.argv, Env: c.env}); !slices.Equal(got, c.want) {
			t.Errorf("%v %v: %v, want %v", c.argv, c.env, got, c.want)
		}
	}
}

const smiOut = `0, GPU-aaaa
1, GPU-bbbb
2, GPU-cccc
@@
4242, GPU-bbbb, 70000
4343, GPU-cccc, 1229
`

func TestBusyApps(t *testing.T) {
	busy, err := busyApps(smiOut, []int{0, 1})
	if err != nil || len(busy) != 1 || busy[0] != "pid 4242 holds 70000 MiB on GPU 1" {
		t.Errorf("GPUs 0,1: %q %v", busy, err)
	}
	if busy, _ := busyApps(smiOut, []int{0}); len(busy) != 0 {
		t.Errorf("GPU 0 is free: %q", busy)
	}
	if busy, _ := busyApps("0, GPU-aaaa\n@@\n77, GPU-zzzz, 5\n", []int{3}); len(busy) != 1 || !strings.Contains(busy[0], "GPU-zzzz") {
		t.Errorf("a process on an unlisted GPU counts: %q", busy)
	}
	if busy, err := busyApps("0, GPU-aaaa\n@@\nNo running processes found\n", []int{0}); err != nil || len(busy) != 0 {
		t.Errorf("no process: %q %v", busy, err)
	}
	for _, bad := range []string{"garbage", "x, GPU-a\n@@\n", "0, GPU-a\n@@\n12\n"} {
		if _, err := busyApps(bad, []int{0}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestWaitGPUs(t *testing.T) {
	calls := 0
	free := func(context.Context) (string, bool, error) {
		calls++
		if calls < 3 {
			return smiOut, false, nil
		}
		return "0, GPU-aaaa\n1, GPU-bbbb\n@@\n", false, nil
	}
	if err := waitGPUs(t.Context(), realClock{}, free, []int{1}, 10*time.Second, time.Millisecond); err != nil || calls != 3 {
		t.Errorf("freed after 3 polls: %v (%d polls)", err, calls)
	}
	err := waitGPUs(t.Context(), realClock{}, func(context.Context) (string, bool, error) { return smiOut, false, nil }, []int{2}, 10*time.Millisecond, time.Millisecond)
	if f, ok := AsFailure(err); !ok || f.Class != ClassGPUBusy || f.Detail != "GPU 2 still held after 10ms" || len(f.Evidence) != 1 {
		t.Errorf("held: %v", err)
	}
	if err := waitGPUs(t.Context(), realClock{}, func(context.Context) (string, bool, error) { return "", true, nil }, []int{0}, time.Second, time.Millisecond); err != nil {
		t.Errorf("no nvidia-smi: %v", err)
	}
	boom := errors.New("ssh down")
	if err := waitGPUs(t.Context(), realClock{}, func(context.Context) (string, bool, error) { return "", false, boom }, []int{0}, time.Second, time.Millisecond); !errors.Is(err, boom) {
		t.Errorf("query error: %v", err)
	}
}
