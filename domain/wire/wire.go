// Package wire holds the SSP2 primitive encodings (SPEC Conventions): fixed
// width little-endian integers, i64 within ±(2^53−1), f64, strict bools,
// length-prefixed UTF-8 strings and byte strings, option presence bytes,
// and canonical map-key order by UTF-16 code units.
//
// Reader works over a byte slice and never copies: Bytes and StrBytes
// return sub-slices of the input, and Str allocates only when no backing
// string was supplied with SetString. Every length prefix is checked
// against the bytes that remain before anything is sliced, so no
// allocation is ever sized by an unchecked prefix.
package wire

import (
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// MaxSafeInt is 2^53−1, the largest magnitude an i64 may carry on the wire.
const MaxSafeInt = 1<<53 - 1

// Errorf builds a decode error: catalog code sync.invalid_request with a
// precise internal reason.
func Errorf(format string, args ...any) error {
	return syncerr.Newf(syncerr.InvalidRequest, format, args...)
}

// SafeInt reports whether v is within the ±(2^53−1) i64 contract.
func SafeInt(v int64) bool { return v >= -MaxSafeInt && v <= MaxSafeInt }

// Reader decodes primitives from a byte slice.
type Reader struct {
	buf []byte
	str string // optional: the same bytes as buf, as one string
	off int
}

// NewReader returns a reader over b.
func NewReader(b []byte) Reader { return Reader{buf: b} }

// Reset points the reader at b.
func (r *Reader) Reset(b []byte) { r.buf, r.str, r.off = b, "", 0 }

// SetString supplies s, which must hold exactly the reader's bytes. Str then
// returns sub-strings of s instead of allocating one string per field.
func (r *Reader) SetString(s string) {
	if len(s) == len(r.buf) {
		r.str = s
	}
}

// Remaining returns the number of unread bytes.
func (r *Reader) Remaining() int { return len(r.buf) - r.off }

// Offset returns the number of bytes read so far.
func (r *Reader) Offset() int { return r.off }

func (r *Reader) need(n int, what string) error {
	if n < 0 || len(r.buf)-r.off < n {
		return Errorf("truncated input reading %s: need %d bytes, have %d", what, n, len(r.buf)-r.off)
	}
	return nil
}

// U8 reads one byte.
func (r *Reader) U8() (uint8, error) {
	if r.off >= len(r.buf) {
		return 0, Errorf("truncated input reading u8 at offset %d", r.off)
	}
	v := r.buf[r.off]
	r.off++
	return v, nil
}

// U16 reads a little-endian u16.
func (r *Reader) U16() (uint16, error) {
	if err := r.need(2, "u16"); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint16(r.buf[r.off:])
	r.off += 2
	return v, nil
}

// U32 reads a little-endian u32.
func (r *Reader) U32() (uint32, error) {
	if err := r.need(4, "u32"); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(r.buf[r.off:])
	r.off += 4
	return v, nil
}

// I32 reads a little-endian two's-complement i32.
func (r *Reader) I32() (int32, error) {
	v, err := r.U32()
	return int32(v), err
}

// I64 reads a little-endian i64 and rejects values outside ±(2^53−1).
func (r *Reader) I64() (int64, error) {
	if err := r.need(8, "i64"); err != nil {
		return 0, err
	}
	v := int64(binary.LittleEndian.Uint64(r.buf[r.off:]))
	if !SafeInt(v) {
		return 0, Errorf("i64 %d at offset %d is outside the ±(2^53−1) contract", v, r.off)
	}
	r.off += 8
	return v, nil
}

// F64 reads an IEEE-754 binary64 (any bit pattern).
func (r *Reader) F64() (float64, error) {
	if err := r.need(8, "f64"); err != nil {
		return 0, err
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.buf[r.off:]))
	r.off += 8
	return v, nil
}

// Bool reads a bool byte; anything but 0x00 and 0x01 is an error.
func (r *Reader) Bool() (bool, error) {
	b, err := r.U8()
	if err != nil {
		return false, err
	}
	if b > 1 {
		return false, Errorf("invalid bool byte 0x%02x at offset %d", b, r.off-1)
	}
	return b == 1, nil
}

// Opt reads an option presence byte: false for 0x00, true for 0x01.
func (r *Reader) Opt() (bool, error) {
	b, err := r.U8()
	if err != nil {
		return false, err
	}
	if b > 1 {
		return false, Errorf("invalid option presence byte 0x%02x at offset %d", b, r.off-1)
	}
	return b == 1, nil
}

// Raw returns the next n bytes as a sub-slice (no copy).
func (r *Reader) Raw(n int) ([]byte, error) {
	if err := r.need(n, "raw bytes"); err != nil {
		return nil, err
	}
	v := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return v, nil
}

// Bytes reads a u32 length prefix and returns that many bytes (no copy).
func (r *Reader) Bytes() ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(r.buf)-r.off) {
		return nil, Errorf("length prefix %d at offset %d exceeds the %d remaining bytes", n, r.off-4, len(r.buf)-r.off)
	}
	return r.Raw(int(n))
}

// StrBytes reads a str and returns its UTF-8 bytes (no copy) after
// validating them.
func (r *Reader) StrBytes() ([]byte, error) {
	start := r.off
	b, err := r.Bytes()
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, Errorf("string at offset %d is not well-formed UTF-8", start)
	}
	return b, nil
}

// Str reads a str. It allocates only when no backing string was set.
func (r *Reader) Str() (string, error) {
	b, err := r.StrBytes()
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		return "", nil
	}
	if r.str != "" {
		return r.str[r.off-len(b) : r.off], nil
	}
	return string(b), nil
}

// Count reads a u32 list or map element count and checks that count
// elements of at least minSize bytes each fit in what remains, so a caller
// may allocate count elements safely.
func (r *Reader) Count(minSize int, what string) (int, error) {
	n, err := r.U32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(max(minSize, 1)) > uint64(r.Remaining()) {
		return 0, Errorf("%s count %d cannot fit in the %d remaining bytes", what, n, r.Remaining())
	}
	return int(n), nil
}

// Done reports an error unless every byte was consumed.
func (r *Reader) Done(what string) error {
	if r.off != len(r.buf) {
		return Errorf("%d trailing bytes after %s", len(r.buf)-r.off, what)
	}
	return nil
}

// Writer appends primitives to a byte slice. It never fails; encoders check
// value ranges (SafeInt, UTF-8) before writing.
type Writer struct {
	B []byte
}

// U8 appends one byte.
func (w *Writer) U8(v uint8) { w.B = append(w.B, v) }

// U16 appends a little-endian u16.
func (w *Writer) U16(v uint16) { w.B = binary.LittleEndian.AppendUint16(w.B, v) }

// U32 appends a little-endian u32.
func (w *Writer) U32(v uint32) { w.B = binary.LittleEndian.AppendUint32(w.B, v) }

// I32 appends a little-endian i32.
func (w *Writer) I32(v int32) { w.U32(uint32(v)) }

// I64 appends a little-endian i64.
func (w *Writer) I64(v int64) { w.B = binary.LittleEndian.AppendUint64(w.B, uint64(v)) }

// F64 appends an IEEE-754 binary64.
func (w *Writer) F64(v float64) { w.B = binary.LittleEndian.AppendUint64(w.B, math.Float64bits(v)) }

// Bool appends 0x01 or 0x00.
func (w *Writer) Bool(v bool) {
	if v {
		w.U8(1)
	} else {
		w.U8(0)
	}
}

// Opt appends a presence byte.
func (w *Writer) Opt(present bool) { w.Bool(present) }

// Str appends a length-prefixed string.
func (w *Writer) Str(s string) {
	w.U32(uint32(len(s)))
	w.B = append(w.B, s...)
}

// Bytes appends a length-prefixed byte string.
func (w *Writer) Bytes(b []byte) {
	w.U32(uint32(len(b)))
	w.B = append(w.B, b...)
}

// Raw appends b verbatim.
func (w *Writer) Raw(b []byte) { w.B = append(w.B, b...) }

// CheckStr reports an encoder error for a string that cannot be encoded.
func CheckStr(s, what string) error {
	if !utf8.ValidString(s) {
		return Errorf("%s is not well-formed UTF-8", what)
	}
	if uint64(len(s)) > math.MaxUint32 {
		return Errorf("%s is longer than a u32 length prefix allows", what)
	}
	return nil
}

// CheckI64 reports an encoder error for an i64 outside ±(2^53−1).
func CheckI64(v int64, what string) error {
	if !SafeInt(v) {
		return Errorf("%s %d is outside the ±(2^53−1) contract", what, v)
	}
	return nil
}

// CompareUTF16 compares a and b by UTF-16 code units, the canonical map-key
// order (SPEC Conventions): it differs from byte order exactly when one
// string has a character in U+E000–U+FFFF where the other has a
// supplementary-plane character. Invalid UTF-8 compares bytewise.
func CompareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		switch {
		case len(a) < len(b):
			return -1
		case len(a) > len(b):
			return 1
		}
		return 0
	}
	// Back up to the start of the rune holding the first differing byte.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	ua, ub := firstUnit(ra), firstUnit(rb)
	if ra == utf8.RuneError || rb == utf8.RuneError || ua == ub {
		// Same leading unit (both supplementary in one block) or invalid
		// input: byte order agrees with code point order here.
		if a[i:] < b[i:] {
			return -1
		}
		return 1
	}
	if ua < ub {
		return -1
	}
	return 1
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

// KeyAfter checks that key sorts strictly after prev in UTF-16 code-unit
// order (map keys must be unique and ascending).
func KeyAfter(prev, key string, first bool) error {
	if first {
		return nil
	}
	if CompareUTF16(prev, key) >= 0 {
		if prev == key {
			return Errorf("duplicate map key %q", key)
		}
		return Errorf("map key %q is out of canonical order after %q", key, prev)
	}
	return nil
}
