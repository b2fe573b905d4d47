package rowcodec

import (
	"encoding/binary"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/wire"
)

// Project appends to dst the full row an older schema version's codec
// carries for a stored row of the current table (SPEC §9): the version's
// columns are the current table's leading ones, so its row is the
// stored null bitmap cut to those columns followed by the prefix of the
// stored values that belongs to them. Values are skipped by their
// encoded length, not decoded: the stored row was validated when it was
// written. An identity projection appends row unchanged.
func Project(dst, row []byte, p *schema.Projection) ([]byte, error) {
	if p.Identity() {
		return append(dst, row...), nil
	}
	cols := p.Current().Columns
	keep := p.Columns()
	nb := (len(cols) + 7) / 8
	if len(row) < nb {
		return dst, wire.Errorf("row shorter than its null bitmap")
	}
	bm := row[:nb]
	off := nb
	for i := range keep {
		if bit(bm, i) {
			continue
		}
		n, err := encodedLen(row[off:], cols[i].Type)
		if err != nil {
			return dst, err
		}
		off += n
	}
	dst = CutBitmap(dst, bm, keep)
	return append(dst, row[nb:off]...), nil
}

// CutBitmap appends the first n bits of a row bitmap (null, presence or
// conflict columns, LSB first) as a bitmap of n columns: ceil(n/8) bytes
// with the padding bits clear.
func CutBitmap(dst, bm []byte, n int) []byte {
	nb := (n + 7) / 8
	start := len(dst)
	dst = append(dst, bm[:min(nb, len(bm))]...)
	for len(dst)-start < nb {
		dst = append(dst, 0)
	}
	if r := n % 8; r != 0 {
		dst[start+nb-1] &= byte(1)<<r - 1
	}
	return dst
}

// encodedLen is the length of the value of a column of type t at the
// start of b.
func encodedLen(b []byte, t schema.ColumnType) (int, error) {
	switch t {
	case schema.TypeInteger, schema.TypeFloat:
		if len(b) < 8 {
			return 0, wire.Errorf("truncated row value")
		}
		return 8, nil
	case schema.TypeBoolean:
		if len(b) < 1 {
			return 0, wire.Errorf("truncated row value")
		}
		return 1, nil
	case schema.TypeString, schema.TypeJSON, schema.TypeBlobRef, schema.TypeBytes, schema.TypeCRDT:
		if len(b) < 4 {
			return 0, wire.Errorf("truncated row value")
		}
		n := uint64(binary.LittleEndian.Uint32(b))
		if n > uint64(len(b)-4) {
			return 0, wire.Errorf("row value length %d exceeds the %d remaining bytes", n, len(b)-4)
		}
		return 4 + int(n), nil
	}
	return 0, wire.Errorf("unknown column type tag %d", t)
}

// AppendNullColumns appends to dst a full-row payload of oldN columns
// re-encoded as one of newN columns whose appended columns are NULL: the
// null bitmap grows (the appended bits set), the values stay.
func AppendNullColumns(dst, payload []byte, oldN, newN int) ([]byte, error) {
	ob, nb := (oldN+7)/8, (newN+7)/8
	if len(payload) < ob {
		return dst, wire.Errorf("payload shorter than its null bitmap")
	}
	start := len(dst)
	dst = append(dst, payload[:ob]...)
	for range nb - ob {
		dst = append(dst, 0)
	}
	for i := oldN; i < newN; i++ {
		dst[start+i/8] |= 1 << (i % 8)
	}
	return append(dst, payload[ob:]...), nil
}
