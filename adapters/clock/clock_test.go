package clock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/ports"
)

var (
	_ ports.Clock = clock.Wall{}
	_ ports.Clock = (*clock.Virtual)(nil)
)

func TestVirtualMovesOnlyByAdvance(t *testing.T) {
	c := clock.NewVirtual(1_000)
	steps := []struct {
		advance int64
		want    int64
		err     error
	}{
		{0, 1_000, nil},
		{250, 1_250, nil},
		{-1, 1_250, clock.ErrBackwards},
		{86_400_000, 86_401_250, nil},
	}
	for _, s := range steps {
		_, err := c.Advance(s.advance)
		if !errors.Is(err, s.err) {
			t.Fatalf("Advance(%d) error %v, want %v", s.advance, err, s.err)
		}
		if got := c.NowMs(); got != s.want {
			t.Fatalf("after Advance(%d): NowMs %d, want %d", s.advance, got, s.want)
		}
		if got := c.Now(); !got.Equal(time.UnixMilli(s.want)) {
			t.Fatalf("after Advance(%d): Now %v, want %v", s.advance, got, time.UnixMilli(s.want))
		}
	}
}
