package memory

import (
	"context"
	"slices"
	"sort"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

var _ ports.AdminReader = (*Store)(nil)

func adminReady(ctx context.Context, s *Store, limit int) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if limit < 1 {
		return syncerr.Newf(syncerr.StorageInvalidLimit, "admin list limit %d", limit)
	}
	return nil
}

// AdminPartitions implements ports.AdminReader: registered partitions and
// those with a log, as the SQL engines list them.
func (s *Store) AdminPartitions(ctx context.Context, q ports.AdminPage) ([]ports.AdminPartition, error) {
	if err := adminReady(ctx, s, q.Limit); err != nil {
		return nil, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var out []ports.AdminPartition
	for name, p := range s.db.parts {
		if name <= q.After || (!p.registered && p.d.maxSeq == 0) {
			continue
		}
		ap := ports.AdminPartition{Partition: name, MaxCommitSeq: p.d.maxSeq, HorizonSeq: p.horizon, ClientCount: int64(len(p.clients))}
		if p.registered {
			ap.Registered, ap.LogEpoch, ap.EpochRequired, ap.LastAuthenticatedAtMs = true, p.logEpoch, p.epochRequired, p.lastAuthMs
		}
		out = append(out, ap)
	}
	return firstPage(out, func(p ports.AdminPartition) string { return p.Partition }, q.Limit), nil
}

// AdminClients implements ports.AdminReader.
func (s *Store) AdminClients(ctx context.Context, name string, q ports.AdminPage) ([]ports.ClientRecord, error) {
	if err := adminReady(ctx, s, q.Limit); err != nil {
		return nil, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return nil, nil
	}
	var out []ports.ClientRecord
	for id, c := range p.clients {
		if id <= q.After {
			continue
		}
		r := *c
		r.Subscriptions = slices.Clone(r.Subscriptions)
		if len(r.Subscriptions) == 0 {
			r.Subscriptions = []byte("[]") // as the SQL engines store it
		}
		out = append(out, r)
	}
	return firstPage(out, func(r ports.ClientRecord) string { return r.ClientID }, q.Limit), nil
}

// AdminCommits implements ports.AdminReader.
func (s *Store) AdminCommits(ctx context.Context, name string, q ports.AdminCommitRange) ([]ports.AdminCommit, error) {
	if err := adminReady(ctx, s, q.Limit); err != nil {
		return nil, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	p := s.db.peek(name)
	if p == nil {
		return nil, nil
	}
	var out []ports.AdminCommit
	for _, rec := range p.d.commits {
		c := rec.c
		if c.Seq <= q.AfterSeq || (q.ThroughSeq > 0 && c.Seq > q.ThroughSeq) {
			continue
		}
		if len(out) == q.Limit {
			break
		}
		ac := ports.AdminCommit{Seq: c.Seq, CreatedAtMs: c.CreatedAtMs, ActorID: c.ActorID, ClientID: c.ClientID,
			ClientCommitID: c.ClientCommitID, ChangeCount: int64(len(c.Changes))}
		for _, ch := range c.Changes {
			if !slices.Contains(ac.Tables, ch.Table) {
				ac.Tables = append(ac.Tables, ch.Table)
			}
		}
		sort.Strings(ac.Tables)
		out = append(out, ac)
	}
	return out, nil
}

// AdminReactionCounts implements ports.AdminReader.
func (s *Store) AdminReactionCounts(ctx context.Context, name string) (map[ports.ReactionStatus]int64, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	out := map[ports.ReactionStatus]int64{}
	for pn, p := range s.db.parts {
		if name != "" && pn != name {
			continue
		}
		for _, r := range p.d.reactions {
			out[r.Status]++
		}
	}
	return out, nil
}

// firstPage is the keyset page: out in byte order of key, at most limit.
func firstPage[T any](out []T, key func(T) string, limit int) []T {
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
