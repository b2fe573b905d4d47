package wiring

import (
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/segments/imagebuilder"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/ports"
)

// PullModule provides the pull half of POST /sync (app/pull).
var PullModule = fx.Module("syncd.pull",
	fx.Provide(NewPullMetrics, NewPullService),
)

// NewPullMetrics registers the pull counters on the server registry.
func NewPullMetrics(m *platform.Metrics) (*pull.Metrics, error) {
	return pull.NewMetrics(m.Registry)
}

// PullServiceParams are the inputs of the pull service.
type PullServiceParams struct {
	fx.In
	Config   config.Config
	Log      *zap.Logger
	Clock    ports.Clock
	Metrics  *pull.Metrics
	Store    ports.Storage          `optional:"true"`
	Segments ports.SegmentStore     `optional:"true"`
	Signer   ports.SegmentURLSigner `optional:"true"`
}

// NewPullService builds the pull use case; nil without storage.
func NewPullService(p PullServiceParams) (*pull.Service, error) {
	if p.Store == nil {
		return nil, nil
	}
	o := pull.Options{
		Store:               p.Store,
		Signer:              p.Signer,
		SegmentTTL:          p.Config.Segments.TTL,
		SpoolMemoryBytes:    p.Config.Pull.SpoolMemoryBytes,
		ResponseBudgetBytes: p.Config.Pull.ResponseBudgetBytes,
		ClientRefresh:       p.Config.Pull.ClientRecordRefresh,
		CatchUpChanges:      p.Config.Pull.CatchUpChanges,
		Metrics:             p.Metrics,
		Log:                 p.Log.Named("pull"),
		Now:                 p.Clock.Now,
	}
	if o.ClientRefresh == 0 {
		o.ClientRefresh = -1 // --client-record-refresh 0: every pull writes
	}
	if p.Segments != nil {
		o.Segments = p.Segments
	}
	if p.Config.Segments.Images {
		b, err := imagebuilder.New(imagebuilder.Options{Dir: p.Config.Segments.ImageDir})
		if err != nil {
			return nil, fmt.Errorf("--image-dir: %w", err)
		}
		o.Images = b
	}
	return pull.New(o)
}
