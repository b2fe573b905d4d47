package memory

import (
	"context"
	"slices"

	"github.com/syncd-dev/syncd/domain/checkpoint"

	"github.com/syncd-dev/syncd/ports"
)

// TouchPartitionHead implements ports.RequestHeadStore: the touch and the
// reads after it, under one hold of the database mutex (one snapshot).
func (s *Store) TouchPartitionHead(ctx context.Context, q ports.HeadQuery) (ports.RequestHead, error) {
	if err := s.ready(ctx); err != nil {
		return ports.RequestHead{}, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.part(q.Partition)
	if !p.registered {
		p.registered, p.logEpoch = true, mintEpoch()
	}
	p.lastAuthMs = q.NowMs
	g := s.db.gate(q.Partition, q.Running, nil)
	h := ports.RequestHead{LogEpoch: p.logEpoch, EpochRequired: p.epochRequired, Gate: g, GateRead: true,
		Bounds: ports.LogBounds{MaxSeq: p.d.maxSeq, HorizonSeq: p.horizon}, BoundsRead: true,
		ClientRead: q.ClientID != "", PushRead: q.PushClientID != ""}
	if c := p.clients[q.ClientID]; h.ClientRead && c != nil {
		cc := *c
		cc.Subscriptions = slices.Clone(c.Subscriptions)
		h.Client = &cc
	}
	if h.PushRead {
		r, ok := p.d.results[resultKey{q.PushClientID, q.PushClientCommitID}]
		r.Result = slices.Clone(r.Result)
		h.Push, h.PushFound = r, ok
	}
	return h, nil
}

var _ ports.RequestHeadStore = (*Store)(nil)

// ReadBoundsAndGate implements ports.BoundsGateReader.
func (s *Store) ReadBoundsAndGate(ctx context.Context, name string, running int32) (ports.LogBounds, checkpoint.ServeGate, bool, error) {
	if err := s.ready(ctx); err != nil {
		return ports.LogBounds{}, checkpoint.ServeGate{}, false, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var b ports.LogBounds
	if p := s.db.peek(name); p != nil {
		b = ports.LogBounds{MaxSeq: p.d.maxSeq, HorizonSeq: p.horizon}
	}
	return b, s.db.gate(name, running, nil), true, nil
}

var _ ports.BoundsGateReader = (*Store)(nil)
