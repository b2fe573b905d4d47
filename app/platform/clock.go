package platform

import (
	"context"
	"time"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/ports"
)

// Clock is the server's one time source: every use case, the storage
// stamps, token checks, readiness, body deadlines and the lame-duck delay
// read it (as ports.Clock, which the graph provides from it), so tests
// drive time without waiting. Replace it with fx.Decorate.
type Clock interface {
	ports.Clock
	// Sleep waits d, or until ctx ends (returning its error).
	Sleep(ctx context.Context, d time.Duration) error
}

// NewClock returns the wall clock.
func NewClock() Clock { return clock.Wall{} }

// PortsClock hands the app clock to the ports consumers, so a decorated
// Clock reaches them too.
func PortsClock(c Clock) ports.Clock { return c }
