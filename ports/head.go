package ports

import (
	"context"

	"github.com/syncd-dev/syncd/domain/checkpoint"
)

// HeadQuery names what a request reads before its work.
type HeadQuery struct {
	Partition string
	// ClientID selects the client record to read; "" reads none.
	ClientID string
	// Running is the running schema version the serve gate is read at.
	Running int32
	NowMs   int64
	// PushClientID and PushClientCommitID select an idempotency record to
	// read ahead (the optimistic lookup of a request's first commit); ""
	// reads none.
	PushClientID, PushClientCommitID string
}

// RequestHead is what TouchPartitionHead read, in one snapshot.
type RequestHead struct {
	// LogEpoch is what TouchPartition would have returned.
	LogEpoch string
	// EpochRequired reports that the partition's epoch was rotated (the
	// registry's epoch_required): from then on only clients that validate
	// epochs may sync there, so a wire-1 request is refused.
	EpochRequired bool
	// Gate is the serve gate when GateRead; false when it must be read
	// apart (a checkpoint is pending at the running version, or the touch
	// wrote after the snapshot the rest was read in).
	Gate     checkpoint.ServeGate
	GateRead bool
	// Client is the client record (nil: none) when ClientRead.
	Client     *ClientRecord
	ClientRead bool
	// Bounds are the partition's log bounds when BoundsRead.
	Bounds     LogBounds
	BoundsRead bool
	// Push is the idempotency record HeadQuery named, when PushRead.
	Push      PushRecord
	PushFound bool
	PushRead  bool
}

// RequestHeadStore is implemented by stores that read a request's first
// reads together: TouchPartition, the serve gate, the client record, the
// log bounds and an idempotency record, one round trip instead of five.
// Reading them in one snapshot is a serialization the separate reads
// allow too (nothing of the request writes in between).
type RequestHeadStore interface {
	TouchPartitionHead(ctx context.Context, q HeadQuery) (RequestHead, error)
}

// BoundsGateReader is implemented by stores that read the log bounds and
// the serve gate in one statement: a pull's horizon recheck after its
// window reads and the read-verify's gate re-read, when nothing is read
// between them, pay one round trip.
type BoundsGateReader interface {
	// ReadBoundsAndGate returns both from one snapshot; complete is false
	// when the gate must be read apart (a checkpoint is pending at the
	// running version).
	ReadBoundsAndGate(ctx context.Context, partition string, running int32) (b LogBounds, g checkpoint.ServeGate, complete bool, err error)
}

// GatedPushStore is implemented by stores that read the serve gate right
// after a push's commit, in the commit's own round trip: the read-verify
// of a request whose last work was that push.
type GatedPushStore interface {
	// PushThenReadGate is Push followed, once the push is durable, by
	// ReadServeGate(partition, opts.WriterVersion); ok is false when the
	// gate was not read (the caller reads it).
	PushThenReadGate(ctx context.Context, partition string, opts PushOptions, fn func(tx PushTx) error) (g checkpoint.ServeGate, ok bool, err error)
}
