package ports

import (
	"context"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/operations"
)

// AuthoritativeQuery is a registered query (REMOTE.md §2) as storage runs
// it: one materialized table of the partition, filtered, ordered and
// capped. It is built by the server from a registered plan and bound
// parameters; nothing in it comes from request text except the bound
// values, which are always placeholders.
type AuthoritativeQuery struct {
	Table string
	// Where are the conditions, all of which a row must meet. Values are
	// typed for their columns (string, int64, float64, bool); a row whose
	// column is NULL meets no condition on it, except an equality with a
	// nil value, which only such rows meet (an index scan's NULL; bound
	// parameters are never nil).
	Where []operations.Condition
	// ScopeFilter restricts the rows to those the caller could pull: for
	// every key the row's stored value must be one of the values (RowScan's
	// rule; an empty list matches nothing). nil means no restriction (a
	// privileged query the host authorized itself).
	ScopeFilter map[string][]string
	// OrderBy sorts the rows; strings in byte order. The row id breaks
	// ties, so the answer is deterministic.
	OrderBy []operations.Order
	// AfterRowID, when set, keeps the rows whose row id is greater in
	// byte order (an exclusive keyset cursor; an index scan pages with it
	// and orders by the row id alone).
	AfterRowID string
	// Limit is at least 1 (else sync.storage.invalid_limit). The server
	// passes its row cap plus one, so it can tell a larger result apart.
	Limit int
	// RunningVersion is the running schema version the serve gate is read
	// against.
	RunningVersion int32
}

// AuthoritativeResult is what one query read returns, all from one
// database snapshot.
type AuthoritativeResult struct {
	// Rows are the current rows (payload, scopes, version) in order.
	Rows []commit.Row
	// MaxCommitSeq is the partition's highest commit seq (0 for an empty
	// or unregistered partition).
	MaxCommitSeq int64
	// Gate is the serve gate read in the same snapshot, for the request's
	// read-verify (SPEC C.7: registered queries refuse while the gate is
	// closed).
	Gate checkpoint.ServeGate
}

// AuthoritativeQuerier runs registered queries (storage's
// queryAuthoritative): the rows, the partition's max commit seq and the
// serve gate in one snapshot, bound to the partition. A table that is not
// materialized is sync.storage.transaction_query_unsupported.
type AuthoritativeQuerier interface {
	QueryAuthoritative(ctx context.Context, partition string, q AuthoritativeQuery) (AuthoritativeResult, error)
}
