// Package sockets counts the long-lived sockets of one node against the
// node's caps (--realtime-max-sockets, --realtime-max-sockets-per-actor).
// Every socket kind takes its slot from the one Slots of the node: the §8
// realtime channel's and the remote operations' watch sockets (REMOTE.md
// §6), so an actor cannot pass the caps by mixing the kinds.
package sockets

import (
	"errors"
	"sync"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Slots holds the node's socket slots.
type Slots struct {
	max, perActor int

	mu      sync.Mutex
	total   int
	byActor map[string]int
}

// New bounds the node's sockets to max and one actor's to perActor (0:
// unbounded).
func New(max, perActor int) (*Slots, error) {
	if max < 0 || perActor < 0 {
		return nil, errors.New("sockets: negative limit")
	}
	return &Slots{max: max, perActor: perActor, byActor: map[string]int{}}, nil
}

// Take reserves a slot for a socket of id, or refuses it with
// sync.websocket_connection_limit (429, retryable): the refusal the
// upgrade answers before it happens. Every Take that succeeds needs one
// Release.
func (s *Slots) Take(id ports.Identity) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.total >= s.max {
		return syncerr.Newf(syncerr.WebsocketLimit, "this node holds its maximum of %d sockets (realtime and operation watches together)", s.max)
	}
	key := actorKey(id)
	if s.perActor > 0 && s.byActor[key] >= s.perActor {
		return syncerr.Newf(syncerr.WebsocketLimit, "this actor holds its maximum of %d sockets on this node (realtime and operation watches together)", s.perActor)
	}
	s.total++
	s.byActor[key]++
	return nil
}

// Release gives back a slot Take reserved for id.
func (s *Slots) Release(id ports.Identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := actorKey(id)
	s.total--
	if s.byActor[key]--; s.byActor[key] <= 0 {
		delete(s.byActor, key)
	}
}

// Open returns the number of slots taken.
func (s *Slots) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// actorKey names an actor within its partition: actor ids are the host's
// and may repeat across tenants.
func actorKey(id ports.Identity) string { return id.Partition + "\x00" + id.ActorID }
