package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// DirectReader runs a read-only statement and hands each row to each,
// with column values borrowed from the engine (valid only during the
// call): where a driver's per-value cost dominates (SQLite: modernc's
// database/sql path takes the connection mutex on every column call and
// boxes every value), the store's hottest reads go through one: the
// commit window's range reads and the request head. Args are int64, int,
// int32 or string. Not for reads that must share a transaction with
// anything else.
type DirectReader interface {
	ReadDirect(ctx context.Context, query string, args []any, each func(DirectRow) error) error
}

// DirectRow is one row of a DirectReader's statement.
type DirectRow interface {
	// Int64 is column col as an integer; ok is false for NULL.
	Int64(col int) (v int64, ok bool)
	// Bytes is column col's text or blob, nil for NULL; it is valid only
	// until the callback returns.
	Bytes(col int) []byte
}

// readRowDirect is QueryRowContext(...).Scan(dest...) through the direct
// reader, for the destination types the store's one-row reads use: the
// first row is scanned (text copied out of the engine's memory), and no
// row is sql.ErrNoRows, as Scan reports it.
func readRowDirect(ctx context.Context, d DirectReader, query string, args []any, dest ...any) error {
	found := false
	err := d.ReadDirect(ctx, query, args, func(row DirectRow) error {
		if found {
			return nil
		}
		found = true
		return scanDirect(row, dest)
	})
	if err == nil && !found {
		err = sql.ErrNoRows
	}
	return err
}

// scanDirect fills dest from row by position.
func scanDirect(row DirectRow, dest []any) error {
	for i, d := range dest {
		switch d := d.(type) {
		case *sql.NullInt64:
			d.Int64, d.Valid = row.Int64(i)
		case *sql.NullString:
			b := row.Bytes(i)
			d.String, d.Valid = string(b), b != nil
		case *int:
			v, ok := row.Int64(i)
			if !ok {
				return errDirectNull(i)
			}
			*d = int(v)
		case *int64:
			v, ok := row.Int64(i)
			if !ok {
				return errDirectNull(i)
			}
			*d = v
		default:
			return fmt.Errorf("sqlstore: direct scan: column %d into %T", i, d)
		}
	}
	return nil
}

// errDirectNull is a NULL scanned into a plain integer, which Scan refuses
// as well.
func errDirectNull(col int) error {
	return fmt.Errorf("sqlstore: direct scan: NULL in column %d into an integer", col)
}
