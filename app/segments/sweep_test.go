package segments

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/ports"
)

type failingSweep struct{}

func (failingSweep) Sweep(context.Context, int64) (ports.SegmentSweep, error) {
	return ports.SegmentSweep{}, errors.New("store down")
}

// TestSweepPass: one pass forgets what expired by the clock it is given
// (not the wall's), counts the deleted segments, and returns a store
// failure for the scheduler to log.
func TestSweepPass(t *testing.T) {
	at := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		now         time.Time
		wantGone    bool
		wantRemoved float64
	}{
		{name: "before the expiry the segment stays", now: at.Add(-time.Hour)},
		{name: "past the expiry it goes and is counted", now: at.Add(time.Hour), wantGone: true, wantRemoved: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memseg.New()
			b := []byte("one segment")
			if _, err := store.Put(context.Background(), b, ports.SegmentPublication{SegmentKey: ports.SegmentKey{Partition: "p"},
				SegmentID: contentaddr.Of(b), ExpiresAtMs: at.UnixMilli()}); err != nil {
				t.Fatal(err)
			}
			m, err := NewSweepMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			sw, err := NewSweeper(store, func() time.Time { return tt.now }, m, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := sw.Pass(context.Background()); err != nil {
				t.Fatal(err)
			}
			pubs, _ := store.Publications(context.Background(), contentaddr.Of(b))
			if gone := len(pubs) == 0; gone != tt.wantGone {
				t.Fatalf("gone = %v, want %v", gone, tt.wantGone)
			}
			var c dto.Metric
			if err := m.removed.Write(&c); err != nil {
				t.Fatal(err)
			}
			if got := c.GetCounter().GetValue(); got != tt.wantRemoved {
				t.Fatalf("counted %v swept segments, want %v", got, tt.wantRemoved)
			}
		})
	}
	sw, err := NewSweeper(failingSweep{}, time.Now, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Pass(context.Background()); err == nil {
		t.Fatal("a failed sweep passed")
	}
	if _, err := NewSweeper(nil, time.Now, nil, nil); err == nil {
		t.Fatal("a sweeper without a store was built")
	}
}
