package sqliteimage_test

import (
	"errors"
	"math"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/sqliteimage"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// §5.3: string/json → TEXT, integer → INTEGER, float → REAL, boolean →
// INTEGER, bytes → BLOB (blob_ref rides json's TEXT, crdt bytes' BLOB).
func TestAffinity(t *testing.T) {
	for typ, want := range map[schema.ColumnType]string{
		schema.TypeString: "TEXT", schema.TypeJSON: "TEXT", schema.TypeBlobRef: "TEXT",
		schema.TypeInteger: "INTEGER", schema.TypeBoolean: "INTEGER",
		schema.TypeFloat: "REAL", schema.TypeBytes: "BLOB", schema.TypeCRDT: "BLOB",
	} {
		if got := sqliteimage.Affinity(typ); got != want {
			t.Errorf("Affinity(%s) = %s, want %s", typ, got, want)
		}
	}
}

// The data table: IR columns in order, NOT NULL unless nullable, the
// primary key declared, _syncular_version INTEGER NOT NULL last.
func TestCreateDataTable(t *testing.T) {
	notes := ssptest.Schema(t).Table("notes")
	want := `CREATE TABLE "notes" ("id" TEXT NOT NULL PRIMARY KEY, "title" TEXT, "body" TEXT NOT NULL, "count" INTEGER, ` +
		`"score" REAL NOT NULL, "done" INTEGER NOT NULL, "meta" TEXT, "blob" BLOB, "doc" BLOB, "_syncular_version" INTEGER NOT NULL)`
	if got := sqliteimage.CreateDataTable(notes); got != want {
		t.Fatalf("CreateDataTable =\n%s\nwant\n%s", got, want)
	}
	if got := sqliteimage.InsertRow(notes); got != `INSERT INTO "notes" ("id", "title", "body", "count", "score", "done", "meta", "blob", "doc", "_syncular_version") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)` {
		t.Fatalf("InsertRow = %s", got)
	}
	if got := sqliteimage.Quote(`a"b`); got != `"a""b"` {
		t.Fatalf("Quote = %s", got)
	}
}

// Cell and Value are inverse for every column type; booleans are 0/1 and
// json is kept verbatim.
func TestCellRoundTrip(t *testing.T) {
	blobRef := `{"blobId":"sha256:` + string(make64('a')) + `","byteLength":3}`
	tests := []struct {
		typ  schema.ColumnType
		v    rowcodec.Value
		cell any
	}{
		{schema.TypeString, rowcodec.String("naïve 🚀"), "naïve 🚀"},
		{schema.TypeString, rowcodec.String(""), ""},
		{schema.TypeInteger, rowcodec.Int(-7), int64(-7)},
		{schema.TypeInteger, rowcodec.Int(1<<53 - 1), int64(1<<53 - 1)},
		{schema.TypeFloat, rowcodec.Float(2.5), 2.5},
		{schema.TypeFloat, rowcodec.Float(math.Inf(-1)), math.Inf(-1)},
		{schema.TypeBoolean, rowcodec.Bool(true), int64(1)},
		{schema.TypeBoolean, rowcodec.Bool(false), int64(0)},
		{schema.TypeJSON, rowcodec.JSON(`{ "a" : [1,2] }`), `{ "a" : [1,2] }`},
		{schema.TypeJSON, rowcodec.JSON(`null`), `null`},
		{schema.TypeBlobRef, rowcodec.BlobRef(blobRef), blobRef},
		{schema.TypeBytes, rowcodec.Bytes([]byte{0, 1, 2}), []byte{0, 1, 2}},
		{schema.TypeBytes, rowcodec.Bytes(nil), []byte{}},
		{schema.TypeCRDT, rowcodec.CRDT([]byte{9}), []byte{9}},
		{schema.TypeString, rowcodec.Null(), nil},
	}
	for _, tt := range tests {
		col := &schema.Column{Name: "c", Type: tt.typ, Nullable: true}
		cell, err := sqliteimage.Cell(tt.v)
		if err != nil {
			t.Fatalf("Cell(%v): %v", tt.v, err)
		}
		if !sameCell(cell, tt.cell) {
			t.Fatalf("Cell(%s %v) = %#v, want %#v", tt.typ, tt.v, cell, tt.cell)
		}
		back, err := sqliteimage.Value(col, cell)
		if err != nil {
			t.Fatalf("Value(%s, %#v): %v", tt.typ, cell, err)
		}
		if tt.v.Kind() == rowcodec.KindBytes && len(tt.v.Raw()) == 0 {
			if back.Kind() != rowcodec.KindBytes || len(back.Raw()) != 0 {
				t.Fatalf("empty bytes came back as %v", back)
			}
			continue
		}
		if !back.Equal(tt.v) {
			t.Fatalf("Value(%s, %#v) = %v, want %v", tt.typ, cell, back, tt.v)
		}
	}
}

func make64(c byte) []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return b
}

func sameCell(a, b any) bool {
	ab, aok := a.([]byte)
	bb, bok := b.([]byte)
	if aok || bok {
		return aok && bok && string(ab) == string(bb)
	}
	return a == b
}

// A NaN (stored as NULL) and a negative zero (stored as the integer 0)
// have no exact cell: such a table is served on the rows lane.
func TestCellUnrepresentable(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Copysign(0, -1)} {
		if _, err := sqliteimage.Cell(rowcodec.Float(f)); !errors.Is(err, sqliteimage.ErrUnrepresentable) {
			t.Fatalf("Cell(%v) error = %v, want ErrUnrepresentable", f, err)
		}
	}
}

// A cell of a storage class the column's affinity cannot have produced is
// sync.invalid_request; integral REAL values read back as integers pass.
func TestValueRejectsForeignCells(t *testing.T) {
	tests := []struct {
		typ  schema.ColumnType
		cell any
		ok   bool
	}{
		{schema.TypeInteger, 2.5, false},
		{schema.TypeInteger, "7", false},
		{schema.TypeBoolean, int64(2), false},
		{schema.TypeBoolean, "true", false},
		{schema.TypeFloat, "1.5", false},
		{schema.TypeFloat, int64(3), true},
		{schema.TypeBytes, "x", false},
		{schema.TypeString, int64(1), false},
		{schema.TypeString, []byte("text as blob"), true},
	}
	for _, tt := range tests {
		_, err := sqliteimage.Value(&schema.Column{Name: "c", Type: tt.typ}, tt.cell)
		if tt.ok != (err == nil) {
			t.Fatalf("Value(%s, %#v) error = %v, want ok=%v", tt.typ, tt.cell, err, tt.ok)
		}
		if err != nil && syncerr.CodeOf(err) != syncerr.InvalidRequest {
			t.Fatalf("Value(%s, %#v) code = %s", tt.typ, tt.cell, syncerr.CodeOf(err))
		}
	}
}

// §5.3 rule 2: every metadata field must equal the descriptor's (and the
// receiver's schema version), else sync.invalid_request.
func TestMetadataCheck(t *testing.T) {
	want := sqliteimage.Metadata{Format: 1, Table: "tasks", SchemaVersion: 2, AsOfCommitSeq: 9, ScopeDigest: "d", RowCount: 5}
	if err := want.Check(want); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*sqliteimage.Metadata){
		"format":        func(m *sqliteimage.Metadata) { m.Format = 2 },
		"table":         func(m *sqliteimage.Metadata) { m.Table = "notes" },
		"schemaVersion": func(m *sqliteimage.Metadata) { m.SchemaVersion = 1 },
		"asOfCommitSeq": func(m *sqliteimage.Metadata) { m.AsOfCommitSeq = 8 },
		"scopeDigest":   func(m *sqliteimage.Metadata) { m.ScopeDigest = "e" },
		"rowCount":      func(m *sqliteimage.Metadata) { m.RowCount = 4 },
	} {
		got := want
		mut(&got)
		if err := got.Check(want); syncerr.CodeOf(err) != syncerr.InvalidRequest {
			t.Fatalf("%s mismatch: error %v, want sync.invalid_request", name, err)
		}
	}
}

// §5.3 rule 3: column names and order, version column last, else
// sync.schema_mismatch.
func TestCheckColumns(t *testing.T) {
	tasks := ssptest.Schema(t).Table("tasks")
	good := []string{"id", "project_id", "title", "done", "estimate", "attachment", "_syncular_version"}
	if err := sqliteimage.CheckColumns(tasks, good); err != nil {
		t.Fatal(err)
	}
	for name, cols := range map[string][]string{
		"reordered":        {"project_id", "id", "title", "done", "estimate", "attachment", "_syncular_version"},
		"no version":       good[:6],
		"version not last": {"_syncular_version", "id", "project_id", "title", "done", "estimate", "attachment"},
		"extra column":     append(append([]string(nil), good...), "x"),
	} {
		if err := sqliteimage.CheckColumns(tasks, cols); syncerr.CodeOf(err) != syncerr.SchemaMismatch {
			t.Fatalf("%s: error %v, want sync.schema_mismatch", name, err)
		}
	}
}
