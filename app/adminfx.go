package app

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/admin"
	"github.com/syncd-dev/syncd/ports"
)

// newAdminAPI assembles the read-only admin API (app/admin) over the
// graph's storage and segment store; reads the storage or the store
// cannot serve answer 501 or say unavailable.
func newAdminAPI(r *Readiness, log *zap.Logger, a adminParams) http.Handler {
	o := admin.Options{
		Readiness: func() any { return r.Status() },
		Now:       a.Clock.Now,
		Log:       log.Named("adminapi"),
	}
	o.Reader = a.Reader
	if a.Storage != nil {
		o.Logs, o.Clients = a.Storage, a.Storage
		if rl, ok := a.Storage.(ports.ReactionLister); ok {
			o.Reactions = rl
		}
		if ar, ok := a.Storage.(ports.AdminReader); ok && o.Reader == nil {
			o.Reader = ar
		}
	}
	if sr, ok := a.Segments.(ports.SegmentStatsReader); ok {
		o.Segments = sr
	}
	return admin.New(o)
}
