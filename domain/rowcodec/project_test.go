package rowcodec_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
)

// projectColumns is a current table of ten columns, across the first
// byte of the null bitmap, every type after the key nullable.
var projectColumns = []struct{ name, typ string }{
	{"id", "string"}, {"n", "integer"}, {"f", "float"}, {"b", "boolean"}, {"j", "json"},
	{"raw", "bytes"}, {"ref", "blob_ref"}, {"doc", "crdt"}, {"s", "string"}, {"m", "integer"},
}

// projectWindow compiles the current table and an older version keeping
// its first keep columns, and returns the older version's projection.
func projectWindow(t testing.TB, keep int) *schema.Projection {
	t.Helper()
	irOf := func(version int32, n int) *schema.Schema {
		ir := &schema.IR{IRVersion: 1, SchemaVersion: version, SchemaVersions: []schema.IRSchemaVersion{{Version: version}}}
		tbl := schema.IRTable{Name: "t", PrimaryKey: "id", Scopes: []schema.IRScope{{Pattern: "k:{id}"}}}
		for i, c := range projectColumns[:n] {
			nullable := i > 0
			col := schema.IRColumn{Name: c.name, Type: c.typ, Nullable: &nullable}
			if c.typ == "crdt" {
				col.CRDTType = "yjs"
			}
			tbl.Columns = append(tbl.Columns, col)
		}
		ir.Tables = []schema.IRTable{tbl}
		s, err := schema.Compile(ir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cur := irOf(2, len(projectColumns))
	if keep == len(projectColumns) {
		return schema.SingleWindow(cur).CurrentView().Table("t")
	}
	w, err := schema.NewWindow(cur, irOf(1, keep))
	if err != nil {
		t.Fatal(err)
	}
	return w.View(1).Table("t")
}

func projectRows() [][]rowcodec.Value {
	full := []rowcodec.Value{
		rowcodec.String("r-1"), rowcodec.Int(-42), rowcodec.Float(1.5), rowcodec.Bool(true), rowcodec.JSON(`{"a":[1]}`),
		rowcodec.Bytes([]byte{0, 1, 2}), rowcodec.BlobRef(`{"blobId":"` + blobID + `","byteLength":12,"mediaType":"image/png"}`),
		rowcodec.CRDT([]byte{9, 9}), rowcodec.String("tail"), rowcodec.Int(7),
	}
	allNull := make([]rowcodec.Value, len(full))
	allNull[0] = rowcodec.String("r-2")
	for i := 1; i < len(allNull); i++ {
		allNull[i] = rowcodec.Null()
	}
	alternate := append([]rowcodec.Value(nil), full...)
	for i := 1; i < len(alternate); i += 2 {
		alternate[i] = rowcodec.Null()
	}
	return [][]rowcodec.Value{full, allNull, alternate}
}

// Project gives, for every cut of the table and every null pattern, the
// bytes the older version's codec encodes its leading values as.
func TestProjectMatchesTheOlderCodec(t *testing.T) {
	for keep := 1; keep <= len(projectColumns); keep++ {
		p := projectWindow(t, keep)
		cur, old := rowcodec.New(p.Current()), rowcodec.New(p.Table())
		for ri, vals := range projectRows() {
			t.Run(fmt.Sprintf("keep %d row %d", keep, ri), func(t *testing.T) {
				stored, err := cur.AppendRow(nil, vals)
				if err != nil {
					t.Fatal(err)
				}
				want, err := old.AppendRow(nil, vals[:keep])
				if err != nil {
					t.Fatal(err)
				}
				got, err := rowcodec.Project([]byte("prefix"), stored, p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, append([]byte("prefix"), want...)) {
					t.Fatalf("projected %x, want %x", got[6:], want)
				}
				if _, err := old.DecodeRow(got[6:], nil); err != nil {
					t.Fatalf("the older codec refuses the projection: %v", err)
				}
			})
		}
	}
}

func TestProjectRefusesTruncatedRows(t *testing.T) {
	p := projectWindow(t, 5)
	stored, err := rowcodec.New(p.Current()).AppendRow(nil, projectRows()[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 2, 5, 10, 20} {
		if _, err := rowcodec.Project(nil, stored[:n], p); err == nil {
			t.Fatalf("a row cut at %d bytes projected", n)
		}
	}
}

func TestCutBitmap(t *testing.T) {
	tests := []struct {
		bm   []byte
		n    int
		want []byte
	}{
		{[]byte{0xff, 0xff}, 16, []byte{0xff, 0xff}},
		{[]byte{0xff, 0xff}, 9, []byte{0xff, 0x01}},
		{[]byte{0xff, 0xff}, 8, []byte{0xff}},
		{[]byte{0xff, 0xff}, 3, []byte{0x07}},
		{[]byte{0x05}, 12, []byte{0x05, 0x00}},
		{nil, 0, nil},
	}
	for _, tt := range tests {
		if got := rowcodec.CutBitmap(nil, tt.bm, tt.n); !bytes.Equal(got, tt.want) {
			t.Errorf("CutBitmap(%x, %d) = %x, want %x", tt.bm, tt.n, got, tt.want)
		}
	}
}

func BenchmarkProject(b *testing.B) {
	p := projectWindow(b, 5)
	stored, _ := rowcodec.New(p.Current()).AppendRow(nil, projectRows()[0])
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = rowcodec.Project(buf[:0], stored, p); err != nil {
			b.Fatal(err)
		}
	}
}
