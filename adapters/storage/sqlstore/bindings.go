package sqlstore

import (
	"context"
	"errors"
	"strings"
	"sync"
)

// Client-id bindings (SPEC §1.5) live in sync_client_bindings, one row per
// (partition, client id), apart from the client records: a push-only
// client has a binding but no cursor, so retention's floor and the cursor
// reads never see it. A binding row is only ever inserted, never updated
// or deleted (RotateLogEpoch keeps it, like the push results it guards),
// which is what makes the per-process cache below safe: an entry, once
// read from committed state, stays true for every process on the database.

// bindingCacheMax bounds the cache; when full it is emptied and refilled
// (past that many active clients per process, a miss costs one read).
const bindingCacheMax = 1 << 15

// bindingKeyMax is the longest partition + client id (and actor) the cache
// keeps, so its memory stays bounded (a few MiB) whatever ids clients send.
const bindingKeyMax = 256

// bindingCache remembers committed bindings, so a known client's pushes
// and pulls check their binding without a round trip. It holds only
// bindings seen committed (read outside a transaction, or written by a
// transaction that committed); absence is always asked of the database.
type bindingCache struct {
	mu sync.RWMutex
	m  map[bindingKey]string
}

type bindingKey struct{ partition, clientID string }

func cacheKey(partition, clientID string) (bindingKey, bool) {
	return bindingKey{partition, clientID}, len(partition)+len(clientID) <= bindingKeyMax
}

func (c *bindingCache) get(partition, clientID string) (string, bool) {
	k, ok := cacheKey(partition, clientID)
	if !ok {
		return "", false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	a, ok := c.m[k]
	return a, ok
}

func (c *bindingCache) put(partition, clientID, actorID string) {
	k, ok := cacheKey(partition, clientID)
	if !ok || len(actorID) > bindingKeyMax {
		return
	}
	// Copies, so an entry never pins the request buffer its ids came from.
	k = bindingKey{strings.Clone(k.partition), strings.Clone(k.clientID)}
	actorID = strings.Clone(actorID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= bindingCacheMax {
		c.m = make(map[bindingKey]string)
	}
	c.m[k] = actorID
}

// binding is one binding a push transaction saw or made, cached once the
// transaction commits.
type binding struct{ partition, clientID, actorID string }

const (
	bindInsert = `INSERT INTO sync_client_bindings(partition, client_id, actor_id) VALUES (?, ?, ?)
ON CONFLICT (partition, client_id) DO NOTHING RETURNING actor_id`
	bindSelect = "SELECT actor_id FROM sync_client_bindings WHERE partition=? AND client_id=?"
)

// bind inserts the binding unless one exists and returns the bound actor:
// one round trip when this call binds, two when another binding exists.
// The read after a conflict sees the winner: the insert waited for it to
// commit (PostgreSQL, READ COMMITTED: the next statement's snapshot
// includes it), or it is the same connection's (SQLite's one writer).
func (s *Store) bind(ctx context.Context, q Querier, partition, clientID, actorID string) (string, error) {
	var bound string
	ok, err := scanOne(q.QueryRowContext(ctx, s.q(bindInsert), partition, clientID, actorID), &bound)
	if err != nil || ok {
		return bound, err
	}
	ok, err = scanOne(q.QueryRowContext(ctx, s.q(bindSelect), partition, clientID), &bound)
	if err == nil && !ok {
		err = errBindingVanished
	}
	return bound, err
}

var errBindingVanished = errors.New("client binding conflicted but cannot be read")

// BindClient implements ports.ClientStore.
func (s *Store) BindClient(ctx context.Context, partition, clientID, actorID string) (string, error) {
	if a, ok := s.binds.get(partition, clientID); ok {
		return a, nil
	}
	var bound string
	err := s.writeOne(ctx, "bind client", func(q Querier) error {
		var err error
		bound, err = s.bind(ctx, q, partition, clientID, actorID)
		return err
	})
	if err != nil {
		return "", err
	}
	s.binds.put(partition, clientID, bound)
	return bound, nil
}

// ClientBinding implements ports.ClientStore.
func (s *Store) ClientBinding(ctx context.Context, partition, clientID string) (string, bool, error) {
	if a, ok := s.binds.get(partition, clientID); ok {
		return a, true, nil
	}
	var actor string
	ok, err := scanOne(s.rd.QueryRowContext(ctx, s.q(bindSelect), partition, clientID), &actor)
	if err != nil {
		return "", false, internal("read client binding", err)
	}
	if ok {
		s.binds.put(partition, clientID, actor)
	}
	return actor, ok, nil
}

// BindClient implements ports.PushTx.
func (t *pushTx) BindClient(ctx context.Context, clientID string) (string, error) {
	if a, ok := t.s.binds.get(t.partition, clientID); ok {
		return a, nil
	}
	bound, err := t.s.bind(ctx, t.tx, t.partition, clientID, t.actorID)
	if err != nil {
		return "", internal("bind client", err)
	}
	t.bound = append(t.bound, binding{t.partition, clientID, bound})
	if (t.savepoint || t.discardTo != "") && bound == t.actorID {
		// Bound after the savepoint DiscardWrites returns to: it must
		// redo the binding.
		t.rebind = append(t.rebind, clientID)
	}
	return bound, nil
}

// noteBindings caches what a committed push transaction bound or read.
func (s *Store) noteBindings(bs []binding) {
	for _, b := range bs {
		s.binds.put(b.partition, b.clientID, b.actorID)
	}
}
