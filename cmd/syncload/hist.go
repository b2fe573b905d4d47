package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram is a lock-free log-linear latency histogram in the style of
// HdrHistogram: values (nanoseconds) below 2^subBits are exact, larger ones
// land in one of 2^(subBits-1) linear sub-buckets of their power of two, so
// every recorded value is known to within 1/2^(subBits-1) (0.8 %). It holds
// any number of samples in constant memory, which a long soak needs.
type Histogram struct {
	counts [buckets]atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Uint64
	max    atomic.Int64
	min    atomic.Int64
}

const (
	subBits = 8
	half    = 1 << (subBits - 1)
	buckets = (64-subBits+1)*half + half
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	h := &Histogram{}
	h.min.Store(math.MaxInt64)
	return h
}

func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(v) - subBits // ≥ 1
	return (e+1)*half + int(v>>uint(e)) - half
}

// bucketHigh returns the highest value that lands in bucket i.
func bucketHigh(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	e := i/half - 1
	sub := uint64(i%half + half)
	return (sub+1)<<uint(e) - 1
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(uint64(v))].Add(1)
	h.total.Add(1)
	h.sum.Add(uint64(v))
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
	for {
		m := h.min.Load()
		if v >= m || h.min.CompareAndSwap(m, v) {
			break
		}
	}
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.total.Load() }

// Max returns the largest sample.
func (h *Histogram) Max() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.max.Load())
}

// Mean returns the average sample.
func (h *Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Quantile returns the q-quantile (0 < q ≤ 1): the upper edge of the bucket
// holding the ceil(q·n)-th smallest sample, capped at the maximum.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(time.Duration(bucketHigh(i)), h.Max())
		}
	}
	return h.Max()
}
