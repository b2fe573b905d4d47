package ports

import (
	"context"
	"errors"
)

// CommitNotice says that a partition's commit log advanced to CommitSeq.
// It only wakes: whoever hears it reads the commits from storage, so a
// notice carries no row data and may be coalesced or lost.
type CommitNotice struct {
	Partition string
	CommitSeq int64
}

// FanoutEvent is a small, transient message for the realtime sessions of
// every node (presence): Topic names its kind, Key what it is about (a
// partition and scope key), Payload its encoded body. Events are not
// durable; a node that misses one learns the state again from the next.
type FanoutEvent struct {
	Topic   string
	Key     string
	Payload []byte
}

// FanoutHandler receives what the fanout delivers. Its methods must not
// block: they hand the work to the sessions and return.
type FanoutHandler interface {
	// Commit is called for every notice published by any node, this one
	// included.
	Commit(n CommitNotice)
	// Event is called for every event published by any other node and by
	// this one.
	Event(e FanoutEvent)
	// Resync is called when notices may have been lost (a listener
	// connection dropped and came back): every session must catch up from
	// storage.
	Resync()
}

// Fanout carries commit notices and realtime events between the syncd
// nodes that share one database: in process for one node, through the
// database or NATS for several.
type Fanout interface {
	// PublishCommit announces an applied commit. It never blocks on slow
	// receivers; an error means the notice may not reach other nodes.
	PublishCommit(ctx context.Context, n CommitNotice) error
	// PublishEvent announces an event; a payload larger than MaxEventBytes
	// is refused with ErrFanoutEventTooLarge.
	PublishEvent(ctx context.Context, e FanoutEvent) error
	// MaxEventBytes is the largest event payload this fanout carries.
	MaxEventBytes() int
	// Listen delivers to h until ctx ends or the returned stop is called.
	// Once stop returns, h is not called again; stop must not be called
	// from inside h's methods (it waits for the call in progress).
	Listen(ctx context.Context, h FanoutHandler) (stop func(), err error)
}

// Errors every Fanout returns, matched with errors.Is.
var (
	// ErrFanoutEventTooLarge refuses an event whose payload exceeds
	// MaxEventBytes (or whose topic or key exceeds the adapter's bound).
	ErrFanoutEventTooLarge = errors.New("fanout: event too large")
	// ErrFanoutClosed refuses publishing and listening on a closed fanout.
	ErrFanoutClosed = errors.New("fanout: closed")
)
