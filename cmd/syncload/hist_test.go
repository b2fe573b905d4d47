package main

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	h := NewHistogram()
	rnd := rand.New(rand.NewPCG(1, 2))
	var all []time.Duration
	for range 100_000 {
		d := time.Duration(rnd.ExpFloat64() * float64(3*time.Millisecond))
		all = append(all, d)
		h.Record(d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.95, 0.99, 1} {
		want := all[int(q*float64(len(all)))-1]
		got := h.Quantile(q)
		if diff := float64(got-want) / float64(want); diff < -0.01 || diff > 0.01 {
			t.Errorf("q%.2f = %v, exact %v", q, got, want)
		}
	}
	if h.Max() != all[len(all)-1] || h.Count() != uint64(len(all)) {
		t.Errorf("max %v count %d", h.Max(), h.Count())
	}
}

func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 255, 256, 257, 511, 512, 1 << 40, 1<<63 - 1, 1<<64 - 1} {
		b := bucketOf(v)
		if b <= prev && v != 256 && v != 257 {
			t.Errorf("bucket(%d) = %d not above %d", v, b, prev)
		}
		if b >= buckets || bucketHigh(b) < v {
			t.Errorf("bucket(%d) = %d, high %d", v, b, bucketHigh(b))
		}
		prev = b
	}
	if NewHistogram().Quantile(0.5) != 0 {
		t.Error("empty histogram")
	}
}

func TestParseRSS(t *testing.T) {
	page := "# HELP process_resident_memory_bytes x\nprocess_resident_memory_bytes 2.4576e+07\n"
	if v, err := parseRSS(strings.NewReader(page)); err != nil || v != 24576000 {
		t.Fatalf("%d %v", v, err)
	}
	if _, err := parseRSS(strings.NewReader("nothing 1\n")); err == nil {
		t.Fatal("want an error")
	}
}

func TestProcCPU(t *testing.T) {
	if !fileExists("/proc/self/stat") {
		t.Skip("no /proc")
	}
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := procStatus(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}
