// Package sqliteimage is the SQLite-image segment format of SPEC §5.3 as
// pure data: the two tables an image holds (the data table, named as the
// target table, with the schema-IR columns in declaration order and a
// trailing _syncular_version, and the one-row _syncular_segment
// metadata table), their declared affinities and constraints, the cell
// encoding of every column type, the statements that write and read them,
// and the checks a receiver runs before applying an image.
//
// Building and opening image files needs a SQLite engine; that lives in
// an adapter (the server's builder) and in the client, both on these
// definitions so producer and consumer cannot drift apart.
package sqliteimage

import (
	"errors"
	"math"
	"strings"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Names and the format number of SPEC §5.3.
const (
	// Format is the image format this package writes and reads.
	Format = 1
	// MetadataTable holds the image's one descriptor row.
	MetadataTable = "_syncular_segment"
	// VersionColumn is the data table's trailing server-version column.
	VersionColumn = "_syncular_version"
)

// Quote renders an SQLite identifier.
func Quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Affinity is the declared type of a column of type t (§5.3: string, json
// and blob_ref TEXT; integer and boolean INTEGER; float REAL; bytes and
// crdt BLOB).
func Affinity(t schema.ColumnType) string {
	switch t {
	case schema.TypeInteger, schema.TypeBoolean:
		return "INTEGER"
	case schema.TypeFloat:
		return "REAL"
	case schema.TypeBytes, schema.TypeCRDT:
		return "BLOB"
	}
	return "TEXT"
}

// Eligible reports whether a table may be served as an image at all:
// tables with client-side encrypted columns never are (§4.7, §5.11).
func Eligible(t *schema.Table) bool { return !t.HasEncryptedColumn() }

// CreateDataTable is the DDL of t's data table: every IR column in
// declaration order with its affinity, NOT NULL unless nullable, the
// primary key declared, then the version column.
func CreateDataTable(t *schema.Table) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE ")
	b.WriteString(Quote(t.Name))
	b.WriteString(" (")
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Quote(c.Name))
		b.WriteByte(' ')
		b.WriteString(Affinity(c.Type))
		if !c.Nullable {
			b.WriteString(" NOT NULL")
		}
		if i == t.PKIndex {
			b.WriteString(" PRIMARY KEY")
		}
	}
	b.WriteString(", ")
	b.WriteString(Quote(VersionColumn))
	b.WriteString(" INTEGER NOT NULL)")
	return b.String()
}

// CreateMetadataTable is the DDL of the metadata table, exactly the
// columns §5.3 names.
const CreateMetadataTable = `CREATE TABLE "_syncular_segment" (format INTEGER NOT NULL, "table" TEXT NOT NULL, ` +
	`"schemaVersion" INTEGER NOT NULL, "asOfCommitSeq" INTEGER NOT NULL, "scopeDigest" TEXT NOT NULL, "rowCount" INTEGER NOT NULL)`

// InsertMetadata writes the descriptor row; its arguments are those of
// Metadata.Args.
const InsertMetadata = `INSERT INTO "_syncular_segment" (format, "table", "schemaVersion", "asOfCommitSeq", "scopeDigest", "rowCount") VALUES (?, ?, ?, ?, ?, ?)`

// SelectMetadata reads every descriptor row in Metadata.Args order.
const SelectMetadata = `SELECT format, "table", "schemaVersion", "asOfCommitSeq", "scopeDigest", "rowCount" FROM "_syncular_segment"`

// InsertRow is the statement writing one data row: the cells of every
// column (Cell) and then the server version.
func InsertRow(t *schema.Table) string {
	names := ColumnNames(t)
	for i := range names {
		names[i] = Quote(names[i])
	}
	return "INSERT INTO " + Quote(t.Name) + " (" + strings.Join(names, ", ") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + ")"
}

// SelectRows reads the data rows in primary-key order, the cells of every
// column and then the server version.
func SelectRows(t *schema.Table) string {
	names := ColumnNames(t)
	for i := range names {
		names[i] = Quote(names[i])
	}
	return "SELECT " + strings.Join(names, ", ") + " FROM " + Quote(t.Name) + " ORDER BY " + Quote(t.PrimaryKey)
}

// ColumnInfo lists the names of the data table's columns in order.
func ColumnInfo(t *schema.Table) string {
	return "SELECT name FROM pragma_table_info(" + quoteString(t.Name) + ") ORDER BY cid"
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ColumnNames are the data table's column names in order: the IR columns,
// then the version column.
func ColumnNames(t *schema.Table) []string {
	out := make([]string, 0, len(t.Columns)+1)
	for _, c := range t.Columns {
		out = append(out, c.Name)
	}
	return append(out, VersionColumn)
}

// CheckColumns is the receiver's column check (§5.3 rule 3): the data
// table's names and order must be the generated schema's plus the version
// column, else sync.schema_mismatch.
func CheckColumns(t *schema.Table, got []string) error {
	want := ColumnNames(t)
	if len(got) != len(want) {
		return syncerr.Newf(syncerr.SchemaMismatch, "sqlite image table %q has columns %v, want %v", t.Name, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			return syncerr.Newf(syncerr.SchemaMismatch, "sqlite image table %q has columns %v, want %v", t.Name, got, want)
		}
	}
	return nil
}

// Metadata is the image's descriptor row.
type Metadata struct {
	Format        int64
	Table         string
	SchemaVersion int64
	AsOfCommitSeq int64
	ScopeDigest   string
	RowCount      int64
}

// Args are the metadata's cells in InsertMetadata order.
func (m Metadata) Args() []any {
	return []any{m.Format, m.Table, m.SchemaVersion, m.AsOfCommitSeq, m.ScopeDigest, m.RowCount}
}

// Check compares an image's metadata with what the receiver expects
// (§5.3 rule 2: the format, and the descriptor's table, pin, digest and
// row count, and the receiver's schema version); a difference is
// sync.invalid_request.
func (m Metadata) Check(want Metadata) error {
	type field struct {
		name      string
		got, want any
	}
	for _, f := range []field{
		{"format", m.Format, want.Format},
		{"table", m.Table, want.Table},
		{"schemaVersion", m.SchemaVersion, want.SchemaVersion},
		{"asOfCommitSeq", m.AsOfCommitSeq, want.AsOfCommitSeq},
		{"scopeDigest", m.ScopeDigest, want.ScopeDigest},
		{"rowCount", m.RowCount, want.RowCount},
	} {
		if f.got != f.want {
			return syncerr.Newf(syncerr.InvalidRequest, "sqlite image metadata %s is %v, want %v", f.name, f.got, f.want)
		}
	}
	return nil
}

// ErrUnrepresentable is returned by Cell for a value an SQLite cell
// cannot hold exactly: a NaN (SQLite stores NULL) or a negative zero
// (REAL affinity stores integral values as integers, dropping the sign).
// A table holding one is served on the rows lane instead.
var ErrUnrepresentable = errors.New("value has no exact sqlite image cell")

// Cell is the SQLite cell of a decoded value (§5.3 cell encodings): nil
// for NULL, booleans as 0 or 1, text kinds (string, json kept verbatim,
// blob_ref) as strings, integers, floats, and bytes and crdt as blobs.
func Cell(v rowcodec.Value) (any, error) {
	switch v.Kind() {
	case rowcodec.KindString, rowcodec.KindJSON, rowcodec.KindBlobRef:
		return v.Text(), nil
	case rowcodec.KindInteger:
		return v.Int(), nil
	case rowcodec.KindFloat:
		f := v.Float()
		if math.IsNaN(f) || (f == 0 && math.Signbit(f)) {
			return nil, ErrUnrepresentable
		}
		return f, nil
	case rowcodec.KindBoolean:
		if v.Bool() {
			return int64(1), nil
		}
		return int64(0), nil
	case rowcodec.KindBytes, rowcodec.KindCRDT:
		if v.Raw() == nil {
			return []byte{}, nil // an empty blob, not NULL
		}
		return v.Raw(), nil
	}
	return nil, nil
}

// Value decodes the SQLite cell of a column of col's type back into a
// value, the inverse of Cell. A cell whose storage class the column's
// affinity cannot have produced is sync.invalid_request. The value may
// alias cell's bytes.
func Value(col *schema.Column, cell any) (rowcodec.Value, error) {
	if cell == nil {
		return rowcodec.Null(), nil
	}
	bad := func() (rowcodec.Value, error) {
		return rowcodec.Value{}, syncerr.Newf(syncerr.InvalidRequest, "sqlite image column %s (%s) holds a %T cell", col.Name, col.Type, cell)
	}
	switch col.Type {
	case schema.TypeString, schema.TypeJSON, schema.TypeBlobRef:
		var b []byte
		switch c := cell.(type) {
		case string:
			b = []byte(c)
		case []byte:
			b = c
		default:
			return bad()
		}
		switch col.Type {
		case schema.TypeJSON:
			return rowcodec.JSONBytes(b), nil
		case schema.TypeBlobRef:
			return rowcodec.BlobRef(string(b)), nil
		}
		return rowcodec.StringBytes(b), nil
	case schema.TypeInteger:
		if c, ok := cell.(int64); ok {
			return rowcodec.Int(c), nil
		}
	case schema.TypeBoolean:
		if c, ok := cell.(int64); ok && (c == 0 || c == 1) {
			return rowcodec.Bool(c == 1), nil
		}
	case schema.TypeFloat:
		switch c := cell.(type) {
		case float64:
			return rowcodec.Float(c), nil
		case int64:
			// REAL affinity keeps floats as REAL, but a reader may hand an
			// integral value back as an integer.
			return rowcodec.Float(float64(c)), nil
		}
	case schema.TypeBytes, schema.TypeCRDT:
		if c, ok := cell.([]byte); ok {
			if col.Type == schema.TypeCRDT {
				return rowcodec.CRDT(c), nil
			}
			return rowcodec.Bytes(c), nil
		}
	}
	return bad()
}
