package ports

import (
	"context"

	"github.com/syncd-dev/syncd/domain/lease"
)

// LeaseStore keeps auth leases (SPEC §7.3), one per (partition, clientId),
// and the ids revoked in each partition. The sync use case reads a lease
// on every outage round and writes one on every live-resolved round of a
// server with leases on; the store never decides: the id, the window and
// the seal come from domain/lease, and PutLease only refuses to overwrite
// what changed since it was read.
//
// Implementations: adapters/leases/memlease (in process), sqllease (the
// sync database, SQLite or PostgreSQL). test/contract RunLeases is the
// contract.
type LeaseStore interface {
	// GetLease returns the stored lease of (partition, clientID), nil
	// when there is none. Revoked is true when the record was revoked or
	// its id is on the partition's revocation list.
	GetLease(ctx context.Context, partition, clientID string) (*lease.Stored, error)
	// PutLease stores next as the lease of (next.Partition,
	// next.ClientID) if the stored lease is still prev (nil: none was
	// stored), compared by id, seal and revocation; next is stored
	// unrevoked. It returns false, storing nothing, when the stored lease
	// changed since prev was read (a concurrent refresh or a revocation)
	// or when next.LeaseID is on the partition's revocation list: a
	// revoked id is never stored again.
	PutLease(ctx context.Context, prev *lease.Stored, next lease.Stored) (bool, error)
	// RevokeLease puts leaseID on the partition's revocation list and
	// marks the stored lease carrying it revoked, durably and at once
	// (§7.3.4). It is idempotent; found reports whether a stored lease
	// carried the id.
	RevokeLease(ctx context.Context, partition, leaseID string) (found bool, err error)
	// PruneLeases deletes, in every partition, up to q.Limit leases that
	// expired before q.ExpiredBeforeMs (revoked or not) and up to q.Limit
	// revocation-list entries made before q.RevokedBeforeMs whose id no
	// stored lease carries any more. A revoked id thus stays refused as
	// long as a lease record of it exists and at least until
	// RevokedBeforeMs passes its revocation; the server mints a fresh id
	// after a revocation, so an older entry guards nothing.
	PruneLeases(ctx context.Context, q LeasePrune) (LeasePruneCounts, error)
}

// LeasePrune bounds one lease retention pass.
type LeasePrune struct {
	ExpiredBeforeMs int64
	RevokedBeforeMs int64
	// Limit ≤ 0 deletes nothing.
	Limit int
}

// LeasePruneCounts reports one lease retention pass.
type LeasePruneCounts struct {
	Leases, Revocations int
	// MayHaveMore is true when either kind hit the limit.
	MayHaveMore bool
}
