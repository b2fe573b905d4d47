package realtime

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// Relay announces applied commits (a ports.CommitListener of the push
// pipeline): through the fanout when there is one, so every node hears
// them, or straight to this node's handler otherwise.
type Relay struct {
	Fanout ports.Fanout // nil: this node only
	Log    *zap.Logger
	// Metrics, when set, counts the notices published (Metrics.Notice).
	Metrics Metrics

	mu sync.RWMutex
	h  ports.FanoutHandler
}

// SetHandler sets where notices go without a fanout.
func (r *Relay) SetHandler(h ports.FanoutHandler) {
	r.mu.Lock()
	r.h = h
	r.mu.Unlock()
}

// CommitApplied implements ports.CommitListener.
func (r *Relay) CommitApplied(ctx context.Context, partition string, c commit.Commit) {
	n := ports.CommitNotice{Partition: partition, CommitSeq: c.Seq}
	if r.Fanout != nil {
		err := r.Fanout.PublishCommit(ctx, n)
		if err != nil && r.Log != nil {
			r.Log.Warn("commit notice not published; other nodes catch up later", zap.String("partition", partition), zap.Error(err))
		}
		if r.Metrics != nil {
			if err != nil {
				r.Metrics.Notice(NoticePublishFailed)
			} else {
				r.Metrics.Notice(NoticePublished)
			}
		}
		return
	}
	if r.Metrics != nil {
		r.Metrics.Notice(NoticePublished)
	}
	r.mu.RLock()
	h := r.h
	r.mu.RUnlock()
	if h != nil {
		h.Commit(n)
	}
}
