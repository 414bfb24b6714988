package workload

import (
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histograms record microseconds from 1 us to 1 hour with 3 significant digits (0.1%
// resolution); means and maxima are kept exactly beside them.
const (
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histSigFigs   = 3
)

// Dist summarises one latency distribution, in milliseconds. Count is the number of samples; the
// other fields are 0 without samples.
type Dist struct {
	Count                            int64
	Mean, Median, P90, P99, Max, Min float64
}

// dist accumulates samples: a histogram plus exact sum, min and max.
type dist struct {
	h        *hdrhistogram.Histogram
	sum      float64 // microseconds
	min, max float64
	n        int64
}

func newDist() *dist {
	return &dist{h: hdrhistogram.New(1, histMaxMicros, histSigFigs), min: math.Inf(1)}
}

func (d *dist) record(v time.Duration) {
	us := float64(v) / float64(time.Microsecond)
	if us < 0 {
		us = 0
	}
	iv := int64(math.Round(us))
	if iv > histMaxMicros {
		iv = histMaxMicros
	}
	_ = d.h.RecordValue(iv)
	d.sum += us
	d.n++
	d.min = math.Min(d.min, us)
	d.max = math.Max(d.max, us)
}

func (d *dist) merge(o *dist) {
	if o.n == 0 {
		return
	}
	d.h.Merge(o.h)
	d.sum += o.sum
	d.n += o.n
	d.min = math.Min(d.min, o.min)
	d.max = math.Max(d.max, o.max)
}

func (d *dist) summary() Dist {
	if d.n == 0 {
		return Dist{}
	}
	// hdrhistogram answers a bucket's highest equivalent value: keep it inside the exact range.
	q := func(p float64) float64 {
		return math.Min(math.Max(float64(d.h.ValueAtQuantile(p)), d.min), d.max) / 1000
	}
	return Dist{
		Count:  d.n,
		Mean:   d.sum / float64(d.n) / 1000,
		Median: q(50),
		P90:    q(90),
		P99:    q(99),
		Max:    d.max / 1000,
		Min:    d.min / 1000,
	}
}
