package ports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// This file declares the host hooks of the push path (SPEC §5.10, §6.6–§6.9):
// row and whole-commit validators, the reaction planner, CRDT mergers and
// the blob existence check. A host that embeds the server supplies them;
// each is optional.

// RowValues is a decoded row keyed by column name. Values are nil (NULL),
// string (string, json and blob_ref columns; json and blob_ref as their raw
// JSON text), int64, float64, bool or []byte (bytes, crdt and encrypted
// columns). Hooks must not modify it.
type RowValues map[string]any

// CandidateRow is a row of the push transaction's candidate state: the
// committed state with every write of the open commit staged so far.
type CandidateRow struct {
	RowID   string
	Version int64
	Values  RowValues
}

// TxReader reads the candidate state of the open push transaction, on the
// transaction's own connection, bound to the commit's partition (SPEC §6.7
// "authority reads inside the transaction", §6.8 candidate-state reader).
// A hook must use it and never the storage-level readers: those cannot see
// the staged writes and may wait for the very transaction the hook runs in.
type TxReader interface {
	// GetRow returns the candidate row or nil when absent (or deleted by an
	// earlier operation of the commit).
	GetRow(ctx context.Context, table, rowID string) (*CandidateRow, error)
	// ScanRows returns candidate rows in ascending row id order; the scope
	// filter is mandatory and the limit must be 1..1000 (0 means 100).
	ScanRows(ctx context.Context, q RowScan) ([]CandidateRow, error)
	// Query is the transaction-bound authoritative query: the rows whose
	// materialized columns equal the given values.
	Query(ctx context.Context, q RowLookup) ([]CandidateRow, error)
	// QueryAuthoritative runs a registered query's read (conditions,
	// order, limit, an optional scope filter; see AuthoritativeQuery) on
	// the transaction's connection over the candidate state, staged
	// writes included (SPEC C.7 queryAuthoritative bound to the
	// transaction). RunningVersion is not used.
	QueryAuthoritative(ctx context.Context, q AuthoritativeQuery) ([]CandidateRow, error)
	// ScanRowsByIndex is the trusted exact lookup through one declared
	// index (SPEC §6.8 scanRowsByIndex), over the candidate state.
	ScanRowsByIndex(ctx context.Context, q IndexScan) ([]CandidateRow, error)
}

// IndexScan is a trusted exact lookup through one declared index of a
// materialized table (SPEC §6.8): the rows whose index columns equal
// Values, in ascending row id order after AfterRowID. It belongs to
// server code (validators, commands) and is never selectable by a
// client: it bypasses scopes within the partition. Failures are
// sync.storage.index_not_found (no such index),
// sync.storage.index_value_count_mismatch (Values is not exactly one
// value per index column, in the index's order: no prefix scans),
// sync.storage.invalid_limit (Limit outside 1..1000) and
// sync.storage.transaction_query_unsupported (a table that is not
// materialized).
type IndexScan struct {
	Table string
	Index string
	// Values are one per index column: nil (the column IS NULL) or a
	// value of the column's type (string, int64, int, float64 or bool, as
	// operations.ColumnValue types it). Only string, integer, float and
	// boolean columns that are not encrypted can be looked up.
	Values []any
	// AfterRowID is exclusive; "" starts at the beginning.
	AfterRowID string
	Limit      int
}

// TxQueries runs the host's registered queries inside a push
// transaction, by operation id or by a generated descriptor's name: the
// queryAuthoritative a validator calls (SPEC §6.7, §6.8). Rows are the
// candidate rows, staged writes included, within the commit's partition
// and without a caller's scopes. *operations.Registry implements it.
type TxQueries interface {
	QueryInTx(ctx context.Context, tx TxReader, id string, params map[string]any) ([]CandidateRow, error)
	// QueryTable names the table the query id (or descriptor name) reads;
	// ok is false for no such query. Rules check their query names with
	// it when they load; the validate callout renders a query's rows by
	// the table's column types (SPEC §11.1's row shape).
	QueryTable(id string) (table string, ok bool)
}

// RowValidation is what a row validator sees for one operation (SPEC §6.7).
type RowValidation struct {
	Op      commit.Op
	Table   string
	RowID   string
	OpIndex int
	// Row is the row that will persist (post-merge); nil for a delete.
	Row RowValues
	// Stored is the current row; nil for an insert.
	Stored    RowValues
	ActorID   string
	Partition string
	// Tx reads other rows inside the push transaction.
	Tx TxReader
}

// RowValidator is a per-table business rule (SPEC §6.7). It runs after
// payload decode and scope authorization, inside the push transaction,
// immediately before the row's write. It accepts by returning nil and
// rejects deliberately by returning a *ValidationRejection; any other
// error rejects the commit with sync.constraint_violation and the fixed
// message "write validator failed" (its text stays out of results and
// logs at info level).
type RowValidator interface {
	// Table names the table the validator checks.
	Table() string
	ValidateRow(ctx context.Context, v RowValidation) error
}

// ErrValidatorUnavailable is what a row or commit validator returns
// (wrapped with %w) when it cannot decide now: the service its rule asks
// timed out or is down, as opposed to rejecting. The commit is then
// neither applied nor rejected: its push fails request-level with the
// retryable sync.rate_limited, nothing of it is stored, and the client's
// retry runs the validator again.
var ErrValidatorUnavailable = errors.New("write validator unavailable")

// OperationEvidence is one operation of a commit as the whole-commit
// validator and the reaction planner see it (SPEC §6.8).
type OperationEvidence struct {
	OpIndex int
	Op      commit.Op
	Table   string
	RowID   string
	// Row is the final row (nil for a delete); Stored the pre-operation
	// row (nil when absent).
	Row    RowValues
	Stored RowValues
	// StoredServerVersion and NextServerVersion are 0 when undefined.
	StoredServerVersion int64
	NextServerVersion   int64
}

// CommitValidation is the input of the whole-commit validator and the
// reaction planner.
type CommitValidation struct {
	ClientID       string
	ClientCommitID string
	ActorID        string
	Partition      string
	Operations     []OperationEvidence
	Tx             TxReader
}

// CommitValidator checks aggregate invariants once per commit, after every
// operation is staged and before the log append (SPEC §6.8). A
// *ValidationRejection attributes the rejection to its OpIndex (0, as
// NewValidationRejection leaves it, is the first operation); any other
// error, or an OpIndex outside the commit (negative included), is
// sync.constraint_violation with the message "whole-commit validator
// failed".
type CommitValidator interface {
	ValidateCommit(ctx context.Context, c CommitValidation) error
}

// PlannedReaction is one durable reaction record (SPEC §6.9).
type PlannedReaction struct {
	// Key is unique within the commit, non-empty, at most 256 bytes.
	Key string
	// Type is a code-like handler name, at most 128 bytes.
	Type string
	// Version is a positive handler version.
	Version int32
	// Payload is plain JSON, at most 64 KiB and 16 levels deep.
	Payload json.RawMessage
	// MaxAttempts is 1..100; 0 means 10.
	MaxAttempts int
}

// ReactionPlanner plans the durable reactions of an accepted commit, after
// validation and before the log append (SPEC §6.9). It must have no side
// effect outside the transaction. An error aborts the push as a server
// failure (nothing is persisted; a later delivery plans again).
type ReactionPlanner interface {
	PlanReactions(ctx context.Context, c CommitValidation) ([]PlannedReaction, error)
}

// CRDTMerger merges a crdt column's stored state with an incoming update
// (SPEC §5.10). Merge must be commutative, associative and idempotent;
// stored is nil for an insert. An error rejects the operation with
// sync.crdt_merge_failed ("CRDT merger failed").
type CRDTMerger interface {
	// Type is the IR crdtType the merger handles.
	Type() string
	Merge(stored, incoming []byte) ([]byte, error)
}

// BlobChecker answers the push-time blob existence check (SPEC §6.6). A
// server without one refuses every non-NULL blob_ref with blob.not_found:
// a referenced blob must be present.
type BlobChecker interface {
	BlobExists(ctx context.Context, partition, blobID string) (bool, error)
}

// CommitListener hears of every commit a push applied, after its
// transaction committed and before the response is sent (realtime fanout,
// operational events). It receives the durable commit entry itself and
// must not block; it cannot fail the push. Commits without changes (a
// delete of an absent row) are not announced.
type CommitListener interface {
	CommitApplied(ctx context.Context, partition string, c commit.Commit)
}

// ValidationRejection is a deliberate host rejection of a write (SPEC §6.7,
// §6.8). Build it with NewValidationRejection, which refuses reserved codes
// and malformed details at construction.
type ValidationRejection struct {
	// OpIndex attributes a whole-commit rejection to an operation; row
	// validators leave it 0 (the operation is known).
	OpIndex int
	Code    string
	Message string
	// Details is the bounded recovery metadata of SPEC §6.3.1, normalized.
	Details *ssp2.RejectionDetails
}

func (r *ValidationRejection) Error() string {
	return fmt.Sprintf("validation rejected: %s: %s", r.Code, r.Message)
}

// ReservedCodePrefixes start protocol error codes; host codes may not.
var ReservedCodePrefixes = []string{"sync.", "blob.", "operation.", "presence.", "client."}

// ErrReservedCode is returned for a host code in a protocol namespace.
var ErrReservedCode = errors.New("host rejection code uses a reserved protocol prefix")

// CheckHostCode validates a host rejection code: non-empty and outside
// every reserved protocol prefix.
func CheckHostCode(code string) error {
	if code == "" {
		return errors.New("host rejection code is empty")
	}
	for _, p := range ReservedCodePrefixes {
		if strings.HasPrefix(code, p) {
			return fmt.Errorf("%w: %q", ErrReservedCode, code)
		}
	}
	return nil
}

// NewValidationRejection builds a deliberate rejection. details may be nil;
// when given it is normalized per SPEC §6.3.1. A reserved code or invalid
// details is a host programming error, reported here rather than at push
// time.
func NewValidationRejection(code, message string, details *ssp2.RejectionDetails) (*ValidationRejection, error) {
	if err := CheckHostCode(code); err != nil {
		return nil, err
	}
	r := &ValidationRejection{Code: code, Message: message}
	if details != nil {
		d, err := details.Normalize()
		if err != nil {
			return nil, fmt.Errorf("rejection details: %w", err)
		}
		r.Details = &d
	}
	return r, nil
}

// RejectOp is NewValidationRejection attributed to an operation of the
// commit, for whole-commit validators.
func RejectOp(opIndex int, code, message string, details *ssp2.RejectionDetails) (*ValidationRejection, error) {
	r, err := NewValidationRejection(code, message, details)
	if err != nil {
		return nil, err
	}
	r.OpIndex = opIndex
	return r, nil
}
