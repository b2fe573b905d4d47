package ports

import (
	"context"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// Backfiller is a host's derivation behind a backfill checkpoint: what
// to write, batch by batch, so that the projection a schema version
// needs exists before the checkpoint activates. app/checkpoint runs it:
// every batch becomes one ordinary server commit that advances the
// checkpoint in the same transaction.
//
// A derivation must be a function of the current rows: writing a batch
// twice (after a crash, or when a catch-up revisits a row) must do no
// harm.
type Backfiller interface {
	// Sources names the tables the derivation reads: a change to one of
	// them above the watermark makes the activation stale.
	Sources() []string
	// Scan returns the next batch of the full pass over the current rows,
	// continuing after in.Cursor ("" begins the pass).
	Scan(ctx context.Context, in BackfillScan) (BackfillBatch, error)
	// CatchUp returns the writes that reflect source changes made since
	// the watermark (in.Changes, oldest first, the backfill's own commits
	// left out). Its batch's Cursor and Done are ignored.
	CatchUp(ctx context.Context, in BackfillCatchUp) (BackfillBatch, error)
}

// BackfillScan asks for one batch of a backfill's full pass.
type BackfillScan struct {
	Partition string
	// Cursor is where the previous batch ended ("" at the start). It is
	// stored with the checkpoint, so a restarted run resumes here.
	Cursor string
	// Limit is the most source rows a batch should examine.
	Limit int
	// Rows reads current rows without a scope filter.
	Rows TableScanner
}

// BackfillCatchUp hands a Backfiller the source changes since the
// watermark.
type BackfillCatchUp struct {
	Partition string
	Changes   []commit.Change
	Rows      TableScanner
	// Row reads one current row (nil when absent).
	Row func(ctx context.Context, table, rowID string) (*commit.Row, error)
}

// BackfillBatch is one batch of writes.
type BackfillBatch struct {
	// Operations are upserts and deletes with wire-3 (sparse) payloads;
	// none is fine (the batch only moves the cursor).
	Operations []ssp2.PushOperation
	// Examined counts the source rows the batch looked at (the
	// checkpoint's observed rows).
	Examined int64
	// Cursor is where the next batch continues.
	Cursor string
	// Done ends the full pass (this batch is its last).
	Done bool
}
