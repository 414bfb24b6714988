package sim

import (
	"testing"
	"time"
)

// TestBatchStartNeverPrecedesAnArrival: catching up a late batch must not start it before a request
// it admitted arrived (that request's first token came before it did; TestEndpoints saw it under load).
func TestBatchStartNeverPrecedesAnArrival(t *testing.T) {
	prev := time.Unix(1000, 0)
	for _, c := range []struct {
		name         string
		now, arrived time.Time
		want         time.Time
	}{
		{"on time, decode", prev.Add(5 * time.Millisecond), time.Time{}, prev},
		{"late, request came before prev", prev.Add(5 * time.Millisecond), prev.Add(-time.Millisecond), prev},
		{"late, request came after prev", prev.Add(10 * time.Millisecond), prev.Add(4 * time.Millisecond), prev.Add(4 * time.Millisecond)},
		{"very late", prev.Add(time.Second), prev.Add(4 * time.Millisecond), prev.Add(time.Second)},
		{"early", prev.Add(-time.Millisecond), time.Time{}, prev.Add(-time.Millisecond)},
	} {
		got := batchStart(c.now, prev, c.arrived)
		if !got.Equal(c.want) {
			t.Errorf("%s: start %v, want %v", c.name, got.Sub(prev), c.want.Sub(prev))
		}
		if !c.arrived.IsZero() && got.Before(c.arrived) {
			t.Errorf("%s: the batch starts before its request arrived", c.name)
		}
	}
	if got := batchStart(prev, time.Time{}, time.Time{}); !got.Equal(prev) {
		t.Errorf("idle before: start %v, want now", got)
	}
}
