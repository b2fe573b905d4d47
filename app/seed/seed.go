// Package seed fills one scope value of a table with synthetic rows, fast,
// as ordinary server commits: every batch of rows is one commit in the
// partition's log (actor and client "syncd-seed"), with current rows, row
// versions, stored scopes and the scope index exactly as a push of those
// inserts leaves them. Load tests bootstrap from it (syncd seed, syncload
// bootstrap-storm).
package seed

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Identity of seed commits.
const (
	ActorID  = "syncd-seed"
	ClientID = "syncd-seed"
)

// DefaultBatch is the rows per commit.
const DefaultBatch = 5000

// Store is the storage seeding needs.
type Store interface {
	ports.PushStore
	TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error)
	GetRow(ctx context.Context, partition, table, rowID string) (*commit.Row, error)
}

// Batch describes one seed commit for a BulkWriter.
type Batch struct {
	WriterVersion  int32
	CreatedAtMs    int64
	ActorID        string
	ClientID       string
	ClientCommitID string
}

// BulkWriter is an engine's fast path: it writes rows (inserts of absent
// rows) and appends one commit whose changes are their upserts, in one
// transaction under the partition lock, and returns the commit seq. With
// none, Run writes through ports.PushStore row by row.
type BulkWriter func(ctx context.Context, partition, table string, rows []ports.RowWrite, b Batch) (int64, error)

// Options configure Run.
type Options struct {
	Schema *schema.Schema
	// Table is the table to fill; its first scope pattern's column gets Value.
	Table string
	Value string
	// Partition holds the rows ("default" when empty).
	Partition string
	// Rows is how many rows to write; Batch the rows per commit.
	Rows  int
	Batch int
	// Bulk is the optional engine fast path.
	Bulk BulkWriter
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Progress, when set, hears of every written commit.
	Progress func(rows int, seq int64)
}

// Result is what Run wrote.
type Result struct {
	Rows      int
	Commits   int
	FirstSeq  int64
	LastSeq   int64
	Partition string
	Elapsed   time.Duration
}

// ErrAlreadySeeded refuses to write over an earlier seed of the same value.
var ErrAlreadySeeded = errors.New("seed: rows of this scope value exist already (choose another value)")

// RowID is the primary key of seed row i.
func RowID(value string, i int) string {
	return value + "-" + fmt.Sprintf("%07d", i)
}

// Run writes the rows.
func Run(ctx context.Context, st Store, o Options) (Result, error) {
	if o.Schema == nil {
		return Result{}, errors.New("seed: no schema")
	}
	t := o.Schema.Table(o.Table)
	if t == nil {
		return Result{}, syncerr.Newf(syncerr.UnknownTable, "seed: unknown table %q", o.Table)
	}
	if len(t.Scopes) == 0 {
		return Result{}, fmt.Errorf("seed: table %q declares no scope", o.Table)
	}
	col := t.ColumnIndex(scopes.Column(t.Scopes[0]))
	if col < 0 || col == t.PKIndex || t.Columns[col].Type != schema.TypeString {
		return Result{}, fmt.Errorf("seed: table %q: the first scope must read a string column other than the primary key", o.Table)
	}
	if t.Columns[t.PKIndex].Type != schema.TypeString {
		return Result{}, fmt.Errorf("seed: table %q: the primary key must be a string column", o.Table)
	}
	if o.Value == "" || o.Rows < 1 {
		return Result{}, errors.New("seed: a scope value and a positive row count are required")
	}
	if o.Partition == "" {
		o.Partition = "default"
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	if _, err := st.TouchPartition(ctx, o.Partition, start.UnixMilli()); err != nil {
		return Result{}, fmt.Errorf("seed: %w", err)
	}
	if row, err := st.GetRow(ctx, o.Partition, t.Name, RowID(o.Value, 0)); err != nil {
		return Result{}, fmt.Errorf("seed: %w", err)
	} else if row != nil {
		return Result{}, ErrAlreadySeeded
	}
	g := newGen(t, col, o.Value)
	res := Result{Partition: o.Partition}
	for lo := 0; lo < o.Rows; lo += o.Batch {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n := min(o.Batch, o.Rows-lo)
		rows, err := g.rows(lo, n)
		if err != nil {
			return res, err
		}
		b := Batch{WriterVersion: o.Schema.Version, CreatedAtMs: now().UnixMilli(), ActorID: ActorID, ClientID: ClientID,
			ClientCommitID: "seed-" + o.Value + "-" + strconv.Itoa(lo)}
		var seq int64
		if o.Bulk != nil {
			seq, err = o.Bulk(ctx, o.Partition, t.Name, rows, b)
		} else {
			seq, err = pushRows(ctx, st, o.Partition, t.Name, rows, b)
		}
		if err != nil {
			return res, fmt.Errorf("seed: rows %d..%d: %w", lo, lo+n-1, err)
		}
		if res.FirstSeq == 0 {
			res.FirstSeq = seq
		}
		res.LastSeq = seq
		res.Rows += n
		res.Commits++
		if o.Progress != nil {
			o.Progress(res.Rows, seq)
		}
	}
	res.Elapsed = now().Sub(start)
	return res, nil
}

// pushRows is the portable path: one push transaction per batch.
func pushRows(ctx context.Context, st Store, partition, table string, rows []ports.RowWrite, b Batch) (int64, error) {
	var seq int64
	err := st.Push(ctx, partition, ports.PushOptions{WriterVersion: b.WriterVersion}, func(tx ports.PushTx) error {
		changes := make([]commit.Change, len(rows))
		for i, w := range rows {
			if err := tx.UpsertRow(ctx, table, w); err != nil {
				return err
			}
			changes[i] = commit.Change{Table: table, RowID: w.RowID, Op: commit.OpUpsert, RowVersion: w.Version, Scopes: w.Scopes, Row: w.Payload}
		}
		var err error
		seq, err = tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: b.CreatedAtMs, ActorID: b.ActorID, ClientID: b.ClientID,
			ClientCommitID: b.ClientCommitID, Changes: changes})
		return err
	})
	return seq, err
}

// gen builds synthetic rows of one table.
type gen struct {
	t     *schema.Table
	codec *rowcodec.Codec
	col   int
	value string
	vals  []rowcodec.Value
}

func newGen(t *schema.Table, col int, value string) *gen {
	return &gen{t: t, codec: rowcodec.New(t), col: col, value: value, vals: make([]rowcodec.Value, len(t.Columns))}
}

// rows returns rows lo..lo+n-1 as version-1 inserts.
func (g *gen) rows(lo, n int) ([]ports.RowWrite, error) {
	out := make([]ports.RowWrite, n)
	var buf []byte
	for k := range out {
		i := lo + k
		id := RowID(g.value, i)
		for c, column := range g.t.Columns {
			switch c {
			case g.t.PKIndex:
				g.vals[c] = rowcodec.String(id)
			case g.col:
				g.vals[c] = rowcodec.String(g.value)
			default:
				g.vals[c] = Cell(column, int64(i))
			}
		}
		start := len(buf)
		var err error
		buf, err = g.codec.AppendRow(buf, g.vals)
		if err != nil {
			return nil, fmt.Errorf("seed: encode row %s: %w", id, err)
		}
		vals := g.vals
		stored, err := scopes.ExtractStored(g.t, func(column string) (string, bool) {
			j := g.t.ColumnIndex(column)
			if j < 0 {
				return "", false
			}
			return rowcodec.ScopeString(vals[j])
		})
		if err != nil {
			return nil, err
		}
		cells := make([]any, len(g.vals))
		for c, v := range g.vals {
			cells[c] = v.Plain()
		}
		out[k] = ports.RowWrite{RowID: id, Version: 1, Scopes: stored, Payload: buf[start:len(buf):len(buf)], Values: cells, OpIndex: k}
	}
	return out, nil
}

// Cell is the synthetic value of column c in row n: short text, integers
// that look like what the column holds (a millisecond timestamp for a
// column named like one, a varied count otherwise), alternating booleans;
// NULL for nullable columns of types it does not fill.
func Cell(c schema.Column, n int64) rowcodec.Value {
	switch c.Type {
	case schema.TypeString:
		return rowcodec.String(c.Name + " " + strconv.FormatInt(n, 10) + " lorem ipsum dolor sit amet")
	case schema.TypeInteger:
		if timeLike(c.Name) {
			return rowcodec.Int(1_700_000_000_000 + n)
		}
		// A column-dependent spread over 0..9,999: columns differ from each
		// other and from the row number.
		h := fnv.New32a()
		_, _ = h.Write([]byte(c.Name))
		return rowcodec.Int((n*2_654_435_761 + int64(h.Sum32())) % 10_000)
	case schema.TypeFloat:
		return rowcodec.Float(float64(n) / 8)
	case schema.TypeBoolean:
		return rowcodec.Bool(n%2 == 0)
	case schema.TypeJSON:
		return rowcodec.JSON(`{"n":` + strconv.FormatInt(n, 10) + `}`)
	case schema.TypeBytes:
		return rowcodec.Bytes([]byte(strconv.FormatInt(n, 10)))
	}
	if c.Nullable {
		return rowcodec.Null()
	}
	return rowcodec.String(strconv.FormatInt(n, 10))
}

// timeLike says whether a column name reads as a timestamp.
func timeLike(name string) bool {
	n := strings.ToLower(name)
	for _, suf := range []string{"_ms", "_at", "at_ms", "_time", "_ts", "timestamp"} {
		if strings.HasSuffix(n, suf) {
			return true
		}
	}
	return false
}

// DefaultTable is the table a bare seed or load fills: the first whose
// first scope reads a string column ("" when none does).
func DefaultTable(s *schema.Schema) string {
	for _, t := range s.Tables {
		if len(t.Scopes) == 0 {
			continue
		}
		if c := t.ColumnIndex(t.Scopes[0].Column); c >= 0 && t.Columns[c].Type == schema.TypeString {
			return t.Name
		}
	}
	return ""
}
