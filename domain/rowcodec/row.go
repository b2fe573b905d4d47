package rowcodec

import (
	"unicode/utf8"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/wire"
)

// Codec encodes and decodes rows of one table at one schema version. Build
// it once per (table, schema version) and share it: it is immutable.
type Codec struct {
	cols      []schema.Column
	pk        int
	bitmapLen int
}

// New returns the codec of a compiled table.
func New(t *schema.Table) *Codec {
	return &Codec{cols: t.Columns, pk: t.PKIndex, bitmapLen: (len(t.Columns) + 7) / 8}
}

// NewColumns returns a codec over a bare column list; pk is the primary-key
// position, or -1 when unknown (sparse rows then cannot be coded).
func NewColumns(cols []schema.Column, pk int) *Codec {
	if pk >= len(cols) {
		pk = -1
	}
	return &Codec{cols: cols, pk: pk, bitmapLen: (len(cols) + 7) / 8}
}

// Columns returns the codec's columns in declaration order.
func (c *Codec) Columns() []schema.Column { return c.cols }

// PKIndex returns the primary-key position, or -1.
func (c *Codec) PKIndex() int { return c.pk }

func bit(bm []byte, i int) bool { return bm[i>>3]>>(i&7)&1 != 0 }

func checkPadding(bm []byte, used int) bool {
	for i := used; i < len(bm)*8; i++ {
		if bit(bm, i) {
			return false
		}
	}
	return true
}

func sized(dst []Value, n int) []Value {
	if cap(dst) < n {
		return make([]Value, n)
	}
	dst = dst[:n]
	clear(dst)
	return dst
}

// DecodeRow decodes one full row (null bitmap + positional values) that
// must span all of b. The values are written to dst (grown if needed) and
// alias b.
func (c *Codec) DecodeRow(b []byte, dst []Value) ([]Value, error) {
	r := wire.NewReader(b)
	dst, err := c.readRow(&r, dst, true)
	if err != nil {
		return dst, err
	}
	return dst, r.Done("row payload")
}

// ValidateRow checks one full row without materializing values.
func (c *Codec) ValidateRow(b []byte) error {
	r := wire.NewReader(b)
	if _, err := c.readRow(&r, nil, false); err != nil {
		return err
	}
	return r.Done("row payload")
}

func (c *Codec) readRow(r *wire.Reader, dst []Value, keep bool) ([]Value, error) {
	bm, err := r.Raw(c.bitmapLen)
	if err != nil {
		return dst, err
	}
	if !checkPadding(bm, len(c.cols)) {
		return dst, wire.Errorf("non-zero padding bit in row null bitmap")
	}
	if keep {
		dst = sized(dst, len(c.cols))
	}
	for i := range c.cols {
		col := &c.cols[i]
		if bit(bm, i) {
			if !col.Nullable {
				return dst, wire.Errorf("null bit set for non-nullable column %s", col.Name)
			}
			if keep {
				dst[i] = Value{kind: KindNull}
			}
			continue
		}
		v, err := readValue(r, col)
		if err != nil {
			return dst, err
		}
		if keep {
			dst[i] = v
		}
	}
	return dst, nil
}

// DecodeSparse decodes one sparse row (presence bitmap, null bitmap over
// present columns, non-null present values) that must span all of b.
// Absent columns decode as the zero Value. Checks run in the §2.4 order:
// presence padding, absent primary key, null-bitmap padding, null on a
// non-nullable column.
func (c *Codec) DecodeSparse(b []byte, dst []Value) ([]Value, error) {
	r := wire.NewReader(b)
	pres, err := r.Raw(c.bitmapLen)
	if err != nil {
		return dst, err
	}
	if !checkPadding(pres, len(c.cols)) {
		return dst, wire.Errorf("sparse row presence bitmap has a set padding bit")
	}
	if c.pk < 0 {
		return dst, wire.Errorf("sparse row decode needs a primary-key column")
	}
	if !bit(pres, c.pk) {
		return dst, wire.Errorf("sparse row is missing the primary-key column %s", c.cols[c.pk].Name)
	}
	present := 0
	for i := range c.cols {
		if bit(pres, i) {
			present++
		}
	}
	nulls, err := r.Raw((present + 7) / 8)
	if err != nil {
		return dst, err
	}
	if !checkPadding(nulls, present) {
		return dst, wire.Errorf("sparse row null bitmap sets a null bit for an absent column")
	}
	dst = sized(dst, len(c.cols))
	j := 0
	for i := range c.cols {
		if !bit(pres, i) {
			continue
		}
		col := &c.cols[i]
		isNull := bit(nulls, j)
		j++
		if isNull {
			if !col.Nullable {
				return dst, wire.Errorf("null bit set for non-nullable column %s", col.Name)
			}
			dst[i] = Value{kind: KindNull}
			continue
		}
		v, err := readValue(&r, col)
		if err != nil {
			return dst, err
		}
		dst[i] = v
	}
	return dst, r.Done("sparse row payload")
}

func readValue(r *wire.Reader, col *schema.Column) (Value, error) {
	switch col.Type {
	case schema.TypeString:
		b, err := r.StrBytes()
		return Value{kind: KindString, b: b}, err
	case schema.TypeInteger:
		v, err := r.I64()
		return Value{kind: KindInteger, n: uint64(v)}, err
	case schema.TypeFloat:
		v, err := r.F64()
		return Float(v), err
	case schema.TypeBoolean:
		v, err := r.Bool()
		return Bool(v), err
	case schema.TypeJSON:
		b, err := r.StrBytes()
		if err != nil {
			return Value{}, err
		}
		if !canonjson.Valid(b) {
			return Value{}, wire.Errorf("json column %s does not parse as a JSON document", col.Name)
		}
		return Value{kind: KindJSON, b: b}, nil
	case schema.TypeBlobRef:
		b, err := r.StrBytes()
		if err != nil {
			return Value{}, err
		}
		if err := CheckBlobRef(b); err != nil {
			return Value{}, wire.Errorf("blob_ref column %s: %s", col.Name, reasonOf(err))
		}
		return Value{kind: KindBlobRef, b: b}, nil
	case schema.TypeBytes:
		b, err := r.Bytes()
		return Value{kind: KindBytes, b: b}, err
	case schema.TypeCRDT:
		b, err := r.Bytes()
		return Value{kind: KindCRDT, b: b}, err
	}
	return Value{}, wire.Errorf("column %s has unknown type tag %d", col.Name, col.Type)
}

// AppendRow appends the full-row encoding of vals (one per column) to dst.
func (c *Codec) AppendRow(dst []byte, vals []Value) ([]byte, error) {
	if len(vals) != len(c.cols) {
		return dst, wire.Errorf("row has %d values for %d columns", len(vals), len(c.cols))
	}
	start := len(dst)
	for range c.bitmapLen {
		dst = append(dst, 0)
	}
	for i := range c.cols {
		if vals[i].kind == KindNull {
			if !c.cols[i].Nullable {
				return dst[:start], wire.Errorf("column %s is not nullable", c.cols[i].Name)
			}
			dst[start+i>>3] |= 1 << (i & 7)
		}
	}
	w := wire.Writer{B: dst}
	for i := range c.cols {
		if vals[i].kind == KindNull {
			continue
		}
		if err := writeValue(&w, &c.cols[i], vals[i]); err != nil {
			return dst[:start], err
		}
	}
	return w.B, nil
}

// AppendSparse appends the sparse-row encoding of vals to dst; absent
// values are left out. The primary key must be present.
func (c *Codec) AppendSparse(dst []byte, vals []Value) ([]byte, error) {
	if len(vals) != len(c.cols) {
		return dst, wire.Errorf("row has %d values for %d columns", len(vals), len(c.cols))
	}
	if c.pk < 0 || vals[c.pk].kind == KindAbsent {
		return dst, wire.Errorf("sparse row is missing its primary-key column")
	}
	start := len(dst)
	present := 0
	for range c.bitmapLen {
		dst = append(dst, 0)
	}
	for i := range c.cols {
		if vals[i].kind != KindAbsent {
			dst[start+i>>3] |= 1 << (i & 7)
			present++
		}
	}
	nstart := len(dst)
	for range (present + 7) / 8 {
		dst = append(dst, 0)
	}
	j := 0
	for i := range c.cols {
		switch vals[i].kind {
		case KindAbsent:
			continue
		case KindNull:
			if !c.cols[i].Nullable {
				return dst[:start], wire.Errorf("column %s is not nullable", c.cols[i].Name)
			}
			dst[nstart+j>>3] |= 1 << (j & 7)
		}
		j++
	}
	w := wire.Writer{B: dst}
	for i := range c.cols {
		if k := vals[i].kind; k == KindAbsent || k == KindNull {
			continue
		}
		if err := writeValue(&w, &c.cols[i], vals[i]); err != nil {
			return dst[:start], err
		}
	}
	return w.B, nil
}

func writeValue(w *wire.Writer, col *schema.Column, v Value) error {
	if want := KindOf(col.Type); v.kind != want {
		return wire.Errorf("column %s (%s) cannot hold a %s value", col.Name, col.Type, v.kind)
	}
	switch v.kind {
	case KindString:
		if !utf8.Valid(v.b) {
			return wire.Errorf("column %s value is not well-formed UTF-8", col.Name)
		}
		w.Bytes(v.b)
	case KindJSON:
		if !canonjson.Valid(v.b) || !utf8.Valid(v.b) {
			return wire.Errorf("column %s value is not a JSON document", col.Name)
		}
		w.Bytes(v.b)
	case KindBlobRef:
		if err := CheckBlobRef(v.b); err != nil {
			return err
		}
		w.Bytes(v.b)
	case KindInteger:
		if !wire.SafeInt(int64(v.n)) {
			return wire.Errorf("column %s value %d is outside the ±(2^53−1) contract", col.Name, int64(v.n))
		}
		w.I64(int64(v.n))
	case KindFloat:
		w.U32(uint32(v.n))
		w.U32(uint32(v.n >> 32))
	case KindBoolean:
		w.Bool(v.n != 0)
	case KindBytes, KindCRDT:
		w.Bytes(v.b)
	}
	return nil
}
