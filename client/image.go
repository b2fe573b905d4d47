package client

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver: images are opened with a real engine

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// deserializer is the engine connection's sqlite3_deserialize: it loads
// database bytes into the connection's main schema, in memory.
type deserializer interface {
	Deserialize(buf []byte) error
}

// stageImage applies a §5.3 sqlite image: it opens the verified bytes with
// the SQLite engine, checks the metadata against the descriptor and the
// client's schema and the data table's columns against the generated
// schema, then stages every row (the fresh-bootstrap clear first: an image
// is always the first page) with its _syncular_version as the row's
// server version, and requires the row count the descriptor names.
func (c *Client) stageImage(ctx context.Context, cur *section, f *ssp2.SegmentRef, b []byte) error {
	t := c.o.Schema.Table(f.Table)
	if t == nil || t.Name != cur.sub.Table {
		return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment for table %q in a %q section", f.Table, cur.sub.Table)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return fmt.Errorf("client: open image: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("client: open image: %w", err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		d, ok := dc.(deserializer)
		if !ok {
			return errors.New("the sqlite driver cannot load database bytes")
		}
		return d.Deserialize(b)
	})
	if err != nil {
		return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment does not open as a SQLite database: %v", err)
	}
	if err := checkImage(ctx, conn, t, f, c.o.Schema.Version); err != nil {
		return err
	}
	if cur.fresh && !cur.cleared {
		cur.cleared = true
		for id, r := range c.rows[t.Name] {
			if c.matches(t, r.Payload, cur.effectiv) {
				cur.stageDelete(t.Name, id)
			}
		}
	}
	cur.reserve(t.Name, int(min(max(f.RowCount, 0), 1<<16))) // a hint from the server, bounded
	n, err := c.stageImageRows(ctx, conn, cur, t)
	if err != nil {
		return err
	}
	if n != f.RowCount {
		return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment holds %d rows, its descriptor %d", n, f.RowCount)
	}
	c.stats.Images++
	return nil
}

// checkImage runs the §5.3 checks before any row is read: exactly one
// metadata row equal to the descriptor (and the client's schema version),
// and the data table's columns in the generated order.
func checkImage(ctx context.Context, conn *sql.Conn, t *schema.Table, f *ssp2.SegmentRef, version int32) error {
	rows, err := conn.QueryContext(ctx, sqliteimage.SelectMetadata)
	if err != nil {
		return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment has no %s table", sqliteimage.MetadataTable)
	}
	var metas []sqliteimage.Metadata
	for rows.Next() {
		var m sqliteimage.Metadata
		if err := rows.Scan(&m.Format, &m.Table, &m.SchemaVersion, &m.AsOfCommitSeq, &m.ScopeDigest, &m.RowCount); err != nil {
			_ = rows.Close()
			return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment metadata: %v", err)
		}
		metas = append(metas, m)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment metadata: %v", err)
	}
	if len(metas) != 1 {
		return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment has %d metadata rows, want exactly one", len(metas))
	}
	want := sqliteimage.Metadata{Format: sqliteimage.Format, Table: f.Table, SchemaVersion: int64(version),
		AsOfCommitSeq: f.AsOfCommitSeq, ScopeDigest: f.ScopeDigest, RowCount: f.RowCount}
	if err := metas[0].Check(want); err != nil {
		return err
	}
	cols, err := conn.QueryContext(ctx, sqliteimage.ColumnInfo(t))
	if err != nil {
		return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment columns: %v", err)
	}
	var names []string
	for cols.Next() {
		var n string
		if err := cols.Scan(&n); err != nil {
			_ = cols.Close()
			return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment columns: %v", err)
		}
		names = append(names, n)
	}
	if err := errors.Join(cols.Err(), cols.Close()); err != nil {
		return syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment columns: %v", err)
	}
	return sqliteimage.CheckColumns(t, names)
}

// stageImageRows reads the data table in primary-key order, decodes each
// cell for its column, re-encodes the row with the row codec (which
// validates json and blob_ref values) and stages it.
func (c *Client) stageImageRows(ctx context.Context, conn *sql.Conn, cur *section, t *schema.Table) (int64, error) {
	rows, err := conn.QueryContext(ctx, sqliteimage.SelectRows(t))
	if err != nil {
		return 0, syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment rows: %v", err)
	}
	defer rows.Close()
	codec := c.codecs[t.Name]
	cells := make([]any, len(t.Columns)+1)
	ptrs := make([]any, len(cells))
	for i := range cells {
		ptrs[i] = &cells[i]
	}
	vals := make([]rowcodec.Value, len(t.Columns))
	var n int64
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment row: %v", err)
		}
		for i := range t.Columns {
			if vals[i], err = sqliteimage.Value(&t.Columns[i], cells[i]); err != nil {
				return n, err
			}
		}
		version, ok := cells[len(t.Columns)].(int64)
		if !ok || version < 1 {
			return n, syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment row has %s %v", sqliteimage.VersionColumn, cells[len(t.Columns)])
		}
		id, ok := rowcodec.ScopeString(vals[t.PKIndex])
		if !ok {
			return n, syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment row without a primary key")
		}
		p, err := codec.AppendRow(nil, vals)
		if err != nil {
			return n, syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment row %s: %v", id, err)
		}
		cur.stage(t.Name, id, Row{Version: version, Payload: p})
		c.stats.BootstrapRows++
		n++
	}
	if err := rows.Err(); err != nil {
		return n, syncerr.Newf(syncerr.InvalidRequest, "client: sqlite segment rows: %v", err)
	}
	return n, nil
}
