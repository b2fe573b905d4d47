package rowcodec

import (
	"encoding/base64"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/schema"
)

// RenderValue renders one cell per §11.1: NULL as null, bytes and crdt as
// standard base64, json and blob_ref embedded parsed, non-finite floats as
// null, integers as numbers.
func RenderValue(v Value) canonjson.Value {
	switch v.kind {
	case KindNull, KindAbsent:
		return nil
	case KindString:
		return string(v.b)
	case KindInteger:
		return v.Int()
	case KindFloat:
		return v.Float()
	case KindBoolean:
		return v.Bool()
	case KindJSON, KindBlobRef:
		parsed, err := canonjson.Parse(v.b)
		if err != nil {
			return string(v.b)
		}
		return parsed
	case KindBytes, KindCRDT:
		return base64.StdEncoding.EncodeToString(v.b)
	}
	return nil
}

// RenderColumns renders a column table as [{name, type, nullable}].
func RenderColumns(cols []schema.Column) []canonjson.Value {
	out := make([]canonjson.Value, len(cols))
	for i, c := range cols {
		out[i] = canonjson.NewObject(3).Set("name", c.Name).Set("type", c.Type.String()).Set("nullable", c.Nullable)
	}
	return out
}

// RenderRowValues renders a row as {column name: value}; absent values of
// a sparse row are left out.
func RenderRowValues(cols []schema.Column, vals []Value) *canonjson.Object {
	o := canonjson.NewObject(len(cols))
	for i, c := range cols {
		if i >= len(vals) || vals[i].kind == KindAbsent {
			continue
		}
		o.Set(c.Name, RenderValue(vals[i]))
	}
	return o
}

// RenderSegment renders a rows segment per §11.1 rule 8.
func RenderSegment(s *Segment) canonjson.Value {
	blocks := make([]canonjson.Value, len(s.Blocks))
	for i, rows := range s.Blocks {
		rs := make([]canonjson.Value, len(rows))
		for j, row := range rows {
			rs[j] = canonjson.NewObject(2).Set("serverVersion", row.ServerVersion).Set("values", RenderRowValues(s.Columns, row.Values))
		}
		blocks[i] = rs
	}
	return canonjson.NewObject(7).
		Set("magic", SegmentMagic).
		Set("formatVersion", int64(SegmentFormatVersion)).
		Set("table", s.Table).
		Set("schemaVersion", s.SchemaVersion).
		Set("columns", RenderColumns(s.Columns)).
		Set("blocks", blocks)
}

// RenderSparse renders a sparse row per §11.1 rule 11: {columns, values}
// with keys only for present columns.
func RenderSparse(cols []schema.Column, vals []Value) canonjson.Value {
	return canonjson.NewObject(2).Set("columns", RenderColumns(cols)).Set("values", RenderRowValues(cols, vals))
}
