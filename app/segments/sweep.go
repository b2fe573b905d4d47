package segments

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/ports"
)

// Sweeper forgets expired segments: publications past their expiry and
// the stored segments no publication is left for.
type Sweeper struct {
	store   ports.SegmentSweeper
	now     func() time.Time
	log     *zap.Logger
	metrics *SweepMetrics
}

// NewSweeper builds the segment sweep; metrics and log are optional.
func NewSweeper(store ports.SegmentSweeper, now func() time.Time, metrics *SweepMetrics, log *zap.Logger) (*Sweeper, error) {
	if store == nil || now == nil {
		return nil, errors.New("segments: the sweeper needs a store and a clock")
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Sweeper{store: store, now: now, log: log, metrics: metrics}, nil
}

// Pass runs one sweep as of the clock's now (the scheduler logs a
// failure).
func (s *Sweeper) Pass(ctx context.Context) error {
	res, err := s.store.Sweep(ctx, s.now().UnixMilli())
	if err != nil {
		return err
	}
	if s.metrics != nil {
		s.metrics.removed.Add(float64(res.Segments))
	}
	if res.Publications > 0 {
		s.log.Debug("segments swept", zap.Int64("publications", res.Publications), zap.Int64("segments", res.Segments))
	}
	return nil
}
