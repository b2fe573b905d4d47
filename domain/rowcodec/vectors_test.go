package rowcodec_test

import (
	"bytes"
	"testing"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestSegmentVectors(t *testing.T) {
	for _, gen := range []string{"v3", "v2"} {
		t.Run(gen, func(t *testing.T) {
			m, ok := vectortest.Load(t, vectortest.Dir(t, gen), "segment")
			if !ok {
				t.Fatalf("no %s segment vectors", gen)
			}
			for _, c := range m.Cases {
				t.Run("segment/"+c.Name, func(t *testing.T) {
					bin := m.Read(t, c.Bin)
					seg, err := rowcodec.DecodeSegment(bin)
					if err != nil {
						t.Fatalf("decode: %v", err)
					}
					got := canonjson.Marshal(rowcodec.RenderSegment(seg), "  ")
					want := m.Read(t, c.JSON)
					if err := vectortest.EqualJSON(got, want); err != nil {
						t.Fatalf("render: %v\n%s", err, got)
					}
					if !bytes.Equal(append(got, '\n'), want) {
						t.Errorf("rendering is not byte-identical to %s", c.JSON)
					}
					re, err := rowcodec.EncodeSegment(seg)
					if err != nil {
						t.Fatalf("encode: %v", err)
					}
					if !bytes.Equal(re, bin) {
						t.Fatalf("re-encoded bytes differ")
					}
					if err := rowcodec.ValidateSegment(bin); err != nil {
						t.Fatalf("validate: %v", err)
					}
				})
			}
			for _, c := range m.Invalid {
				t.Run("segment/invalid/"+c.Name, func(t *testing.T) {
					bin := m.Read(t, c.Bin)
					_, err := rowcodec.DecodeSegment(bin)
					if got := syncerr.CodeOf(err); string(got) != c.Error {
						t.Fatalf("decode: got %v, want %s", err, c.Error)
					}
					if got := syncerr.CodeOf(rowcodec.ValidateSegment(bin)); string(got) != c.Error {
						t.Fatalf("validate: got %v, want %s", got, c.Error)
					}
				})
			}
		})
	}
}

// PushCodec builds the codec of a push manifest's column table.
func pushCodec(t *testing.T, m *vectortest.Manifest) *rowcodec.Codec {
	cols := make([]schema.Column, len(m.Columns))
	pk := -1
	for i, c := range m.Columns {
		typ, ok := schema.ParseColumnType(c.Type)
		if !ok {
			t.Fatalf("unknown column type %q", c.Type)
		}
		cols[i] = schema.Column{Name: c.Name, Type: typ, Nullable: c.Nullable}
		if c.Name == m.PrimaryKey {
			pk = i
		}
	}
	return rowcodec.NewColumns(cols, pk)
}

func TestPushVectors(t *testing.T) {
	m, ok := vectortest.Load(t, vectortest.Dir(t, "v3"), "push")
	if !ok {
		t.Fatal("no push vectors")
	}
	codec := pushCodec(t, m)
	for _, c := range m.Cases {
		t.Run("push/"+c.Name, func(t *testing.T) {
			bin := m.Read(t, c.Bin)
			vals, err := codec.DecodeSparse(bin, nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			got := canonjson.Marshal(rowcodec.RenderSparse(codec.Columns(), vals), "  ")
			want := m.Read(t, c.JSON)
			if err := vectortest.EqualJSON(got, want); err != nil {
				t.Fatalf("render: %v\n%s", err, got)
			}
			if !bytes.Equal(append(got, '\n'), want) {
				t.Errorf("rendering is not byte-identical to %s", c.JSON)
			}
			re, err := codec.AppendSparse(nil, vals)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(re, bin) {
				t.Fatalf("re-encoded bytes differ:\n got %x\nwant %x", re, bin)
			}
		})
	}
	for _, c := range m.Invalid {
		t.Run("push/invalid/"+c.Name, func(t *testing.T) {
			_, err := codec.DecodeSparse(m.Read(t, c.Bin), nil)
			if got := syncerr.CodeOf(err); string(got) != c.Error {
				t.Fatalf("got %v, want %s", err, c.Error)
			}
		})
	}
}
