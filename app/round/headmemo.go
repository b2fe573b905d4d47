package round

import (
	"sync"
	"time"
)

// A push-only request usually needs nothing of its request head that its
// push transaction does not read again under the partition lock: the
// serve gate (with the log epoch) and the idempotency record. What the
// head adds is the partition's touch (first use, last-seen refresh) and
// the epoch a request is admitted at before any work (§2.1). So a
// push-only request to a partition whose head this process read less
// than Options.HeadReuse ago, with the epoch the client names, skips the
// head: it is admitted at that remembered epoch, the first commit's
// transaction checks it against the epoch it reads under the lock before
// anything else, and a request that finds it stale (rotated meanwhile,
// perhaps by another node: the pipeline fails its commit with
// push.ErrStaleEpoch before anything of it committed) is served again
// from the start, head included. The read-verify checks the response's
// epoch once more. A skipped head does not renew what is remembered, so a
// partition in use reads a head (and its touch) at least once per
// HeadReuse: last-seen stays within twice the touch interval.

// maxHeadMemo bounds the partitions remembered; past it the memo starts
// over (partitions in use are remembered again by their next head).
const maxHeadMemo = 1 << 16

type headMemo struct {
	mu    sync.Mutex
	heads map[string]headSeen
}

type headSeen struct {
	epoch string
	at    time.Time
}

func (m *headMemo) note(partition, epoch string, at time.Time) {
	if epoch == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.heads == nil || len(m.heads) >= maxHeadMemo {
		m.heads = map[string]headSeen{}
	}
	if prev, ok := m.heads[partition]; !ok || !at.Before(prev.at) {
		m.heads[partition] = headSeen{epoch: epoch, at: at}
	}
}

// recent returns the epoch of partition's head read within window before now.
func (m *headMemo) recent(partition string, now time.Time, window time.Duration) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[partition]
	if !ok || now.Before(h.at) || now.Sub(h.at) >= window {
		return "", false
	}
	return h.epoch, true
}

// headless reports whether rq may skip its request head, and the epoch
// it is then admitted at: a push-only request of a served schema
// version, naming the remembered epoch of a head read within
// Options.HeadReuse.
func (s *Service) headless(rq *request, pull bool) (string, bool) {
	if s.o.HeadReuse <= 0 || pull || rq.pullHdr != nil || len(rq.commits) == 0 ||
		rq.view == nil || !rq.hdr.LogEpoch.Present {
		return "", false
	}
	epoch, ok := s.heads.recent(rq.id.Partition, rq.now, s.o.HeadReuse)
	if !ok || epoch != rq.hdr.LogEpoch.Value {
		return "", false
	}
	return epoch, true
}
