package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// registration is one subscription a session receives deltas for: the
// persisted subscription's id and table with its effective scopes.
type registration struct {
	id        string
	table     string
	effective scopes.Map
	digest    string
}

// storedSub is the part of a persisted subscription list entry the
// channel reads (the list app/pull writes).
type storedSub struct {
	ID     string              `json:"id"`
	Table  string              `json:"table"`
	Scopes map[string][]string `json:"scopes"`
}

// load reads the client record and derives the registrations (SPEC §8.1):
// every persisted subscription of a known table whose requested scopes
// are declared and whose effective scopes, re-resolved now, are not
// revoked. A resolver failure fails closed: no registration. An error is
// a failure to read the record.
func (h *Hub) load(ctx context.Context, id ports.Identity, clientID string) (*ports.ClientRecord, []registration, error) {
	rec, err := h.o.Store.GetClient(ctx, id.Partition, clientID)
	if err != nil {
		return nil, nil, fmt.Errorf("read client record: %w", err)
	}
	if rec == nil || len(rec.Subscriptions) == 0 {
		return rec, nil, nil
	}
	var subs []storedSub
	if err := json.Unmarshal(rec.Subscriptions, &subs); err != nil {
		return nil, nil, fmt.Errorf("decode stored subscriptions: %w", err)
	}
	res := scopes.Failed()
	allowed, err := h.o.Resolver.ResolveScopes(ctx, ports.ScopeRequest{Partition: id.Partition, ActorID: id.ActorID, ClientID: clientID})
	if err == nil {
		res = scopes.Granted(allowed)
	} else {
		h.log.Warn("scope resolver failed at realtime registration; the session is registered for nothing")
	}
	sch := h.o.Schema()
	var regs []registration
	for _, sub := range subs {
		t := sch.Table(sub.Table)
		if t == nil || scopes.ValidateRequested(t, sub.Scopes) != nil {
			continue
		}
		oc := scopes.Effective(sub.Scopes, res)
		if oc.Revoked() || len(oc.Effective) == 0 {
			continue
		}
		regs = append(regs, registration{id: sub.ID, table: sub.Table, effective: oc.Effective, digest: oc.Effective.Digest()})
	}
	return rec, regs, nil
}

// readCache shares commit-window reads between the sessions a notice
// wakes: sessions on the same table and scopes read the same window once.
// A window is immutable once committed (pruning only removes whole
// windows below the horizon), so entries never go stale.
type readCache struct {
	mu      sync.Mutex
	entries map[string]*readEntry
	order   []string
	next    int
}

type readEntry struct {
	done    chan struct{}
	commits []commit.Commit
	err     error
}

func newReadCache(n int) *readCache {
	return &readCache{entries: map[string]*readEntry{}, order: make([]string, n)}
}

func (c *readCache) read(ctx context.Context, st Store, partition string, r registration, after, through int64) ([]commit.Commit, error) {
	key := partition + "\x00" + r.table + "\x00" + r.digest + "\x00" + strconv.FormatInt(after, 10) + "\x00" + strconv.FormatInt(through, 10)
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		e = &readEntry{done: make(chan struct{})}
		if old := c.order[c.next]; old != "" {
			delete(c.entries, old)
		}
		c.order[c.next] = key
		c.next = (c.next + 1) % len(c.order)
		c.entries[key] = e
		c.mu.Unlock()
		e.commits, e.err = st.ReadCommitWindow(ctx, partition, ports.CommitWindow{
			Table: r.table, ScopeFilter: r.effective, AfterSeq: after, ThroughSeq: through, LimitChanges: deltaChangeCap,
		})
		if e.err != nil {
			c.mu.Lock()
			if c.entries[key] == e {
				delete(c.entries, key)
			}
			c.mu.Unlock()
		}
		close(e.done)
		return e.commits, e.err
	}
	c.mu.Unlock()
	select {
	case <-e.done:
		return e.commits, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
