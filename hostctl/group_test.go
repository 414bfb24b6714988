package hostctl

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRank is one rank's instance: ready after its delay, or failing with fail; it records stops
// and fails the test on a call it does not expect.
type fakeRank struct {
	t       *testing.T
	id      string
	delay   time.Duration
	fail    *Failure
	checkF  *Failure
	mu      sync.Mutex
	stopped int
	lines   []string
}

func (f *fakeRank) ID() string { return f.id }
func (f *fakeRank) WaitReady(ctx context.Context) (Ready, error) {
	select {
	case <-ctx.Done():
		return Ready{}, ctx.Err()
	case <-time.After(f.delay):
	}
	if f.fail != nil {
		return Ready{}, f.fail
	}
	return Ready{ServerInfo: []byte(`{"rank":"` + f.id + `"}`)}, nil
}
func (f *fakeRank) Check(context.Context) (*Failure, error)          { return f.checkF, nil }
func (f *fakeRank) State(context.Context) (State, error)             { return State{ActiveState: "active"}, nil }
func (f *fakeRank) Logs(context.Context) ([]string, error)           { return f.lines, nil }
func (f *fakeRank) LogMark(context.Context) (int, error)             { return len(f.lines), nil }
func (f *fakeRank) HostLost(context.Context) error                   { return nil }
func (f *fakeRank) HTTPClient() *http.Client                         { return http.DefaultClient }
func (f *fakeRank) BaseURL() string                                  { return "http://" + f.id }
func (f *fakeRank) Address() string                                  { return f.id + ":30000" }
func (f *fakeRank) LogsSince(context.Context, int) ([]string, error) { return f.lines, nil }
func (f *fakeRank) Stop(ctx context.Context, progress func(State)) (StopResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped++
	if f.stopped > 1 {
		f.t.Errorf("rank %s stopped %d times", f.id, f.stopped)
	}
	return StopResult{Clean: true}, nil
}

// TestGroupWaitReadyFailsAtTheFirstRank: a rank that fails ends the wait at once (not at the slow
// rank's readiness) with its failure, its class kept, naming the rank and its node.
func TestGroupWaitReadyFailsAtTheFirstRank(t *testing.T) {
	r0 := &fakeRank{t: t, id: "r0", delay: time.Hour}
	r1 := &fakeRank{t: t, id: "r1", delay: 10 * time.Millisecond,
		fail: &Failure{Class: ClassCrashDuringStart, Detail: "exited with status 1", Evidence: []string{"NCCL error"}}}
	gi := &groupInstance{ranks: []Instance{r0, r1}, names: []string{"gpu-a", "gpu-b"}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := gi.WaitReady(ctx)
	f, ok := AsFailure(err)
	if !ok || f.Class != ClassCrashDuringStart || f.Detail != "rank 1 on gpu-b: exited with status 1" || f.Evidence[0] != "NCCL error" {
		t.Fatalf("WaitReady = %v, want rank 1's crash_during_start naming gpu-b", err)
	}
	if r1.fail.Detail != "exited with status 1" {
		t.Error("the rank's own failure was changed")
	}
}

// TestGroupReadyIsRankZeros: ready once every rank is; the server info is rank 0's.
func TestGroupReadyIsRankZeros(t *testing.T) {
	r0 := &fakeRank{t: t, id: "r0"}
	r1 := &fakeRank{t: t, id: "r1", delay: 20 * time.Millisecond}
	gi := &groupInstance{ranks: []Instance{r0, r1}, names: []string{"a", "b"}, dist: "10.231.250.1:29500"}
	ready, err := gi.WaitReady(t.Context())
	if err != nil || string(ready.ServerInfo) != `{"rank":"r0"}` {
		t.Fatalf("WaitReady = %+v, %v", ready, err)
	}
	if gi.ID() != "r0+r1" || gi.BaseURL() != "http://r0" {
		t.Errorf("ID %q BaseURL %q: want both ranks' ids and rank 0's URL", gi.ID(), gi.BaseURL())
	}
}

// TestGroupCheckAndStop: a rank's failure during the load names it; Stop stops every rank once.
func TestGroupCheckAndStop(t *testing.T) {
	r0 := &fakeRank{t: t, id: "r0"}
	r1 := &fakeRank{t: t, id: "r1", checkF: &Failure{Class: ClassCrashDuringLoad, Detail: "exited"}}
	gi := &groupInstance{ranks: []Instance{r0, r1}, names: []string{"a", "b"}}
	f, err := gi.Check(t.Context())
	if err != nil || f == nil || f.Class != ClassCrashDuringLoad || !strings.HasPrefix(f.Detail, "rank 1 on b: ") {
		t.Fatalf("Check = %v, %v", f, err)
	}
	if _, err := gi.Stop(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if r0.stopped != 1 || r1.stopped != 1 {
		t.Errorf("stops: rank 0 %d, rank 1 %d; want 1 each", r0.stopped, r1.stopped)
	}
}

func TestListeningPorts(t *testing.T) {
	text := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:733C 0100007F:7530 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   0: 00000000000000000000000000000000:735C 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
`
	got := listeningPorts(text)
	if !got[30000] || !got[29532] || got[29500] || len(got) != 2 {
		t.Errorf("listening = %v, want 30000 and 29532 (0x735C) only", got)
	}
	lines := []string{"x", "gpu-a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.231.250.1<0>"}
	if got := NCCLTransport(lines); got != "IB: [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.231.250.1<0>" {
		t.Errorf("NCCLTransport = %q", got)
	}
	if got := NCCLTransport([]string{"NCCL INFO NET/Socket : Using [0]eth0:10.231.250.2<0>"}); got != "Socket: [0]eth0:10.231.250.2<0>" {
		t.Errorf("NCCLTransport = %q", got)
	}
}

// TestGroupRankThatNeverJoins: once a rank began torch's rendezvous, a rank that does not begin it
// within JoinTimeout fails the point, named; when all began and none ended, the ones that did not
// end are named.
func TestGroupRankThatNeverJoins(t *testing.T) {
	begin := "[2026-12-06 08:00:00 TP0] Init torch distributed begin."
	end := "[2026-12-06 08:00:01 TP0] Init torch distributed ends. elapsed=1.00 s, mem usage=0.10 GB"
	for _, c := range []struct {
		name   string
		r0, r1 []string
		want   string
	}{
		{"never began", []string{begin}, []string{"[2026-12-06 08:00:00] server_args=..."}, "rank 1 on b did not begin torch's rendezvous at 10.231.250.1:29500"},
		{"never ended", []string{begin, end}, []string{begin}, "rank 1 on b did not complete torch's rendezvous"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r0 := &fakeRank{t: t, id: "r0", delay: time.Hour, lines: c.r0}
			r1 := &fakeRank{t: t, id: "r1", delay: time.Hour, lines: c.r1}
			gi := &groupInstance{ranks: []Instance{r0, r1}, names: []string{"a", "b"}, dist: "10.231.250.1:29500",
				clock: realClock{}, join: 100 * time.Millisecond}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err := gi.WaitReady(ctx)
			f, ok := AsFailure(err)
			if !ok || f.Class != ClassCrashDuringStart || !strings.HasPrefix(f.Detail, c.want) || len(f.Evidence) == 0 || !strings.HasPrefix(f.Evidence[0], "[b] ") {
				t.Fatalf("WaitReady = %v (%q), want crash_during_start: %q...", err, f, c.want)
			}
		})
	}
	// Every rank ended: no failure however long the load takes.
	r0 := &fakeRank{t: t, id: "r0", delay: 300 * time.Millisecond, lines: []string{begin, end}}
	r1 := &fakeRank{t: t, id: "r1", delay: 300 * time.Millisecond, lines: []string{begin, end}}
	gi := &groupInstance{ranks: []Instance{r0, r1}, names: []string{"a", "b"}, clock: realClock{}, join: 10 * time.Millisecond}
	if _, err := gi.WaitReady(t.Context()); err != nil {
		t.Errorf("joined ranks: %v", err)
	}
}
