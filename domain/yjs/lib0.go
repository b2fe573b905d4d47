package yjs

import (
	"encoding/binary"
	"errors"
	"math"
	"unicode/utf8"
)

// The byte-level primitives of the Yjs v1 update format (the lib0
// encoding): variable-length unsigned and signed integers, length-prefixed
// UTF-8 strings and byte arrays, and big-endian floats. The decoder reads
// numbers the way lib0 does (as doubles, so a -0 survives), refuses what
// lib0 refuses (a truncated buffer, invalid UTF-8), and refuses integers
// beyond 2^53 that lib0 would only read imprecisely.

const maxSafeInteger = 1<<53 - 1

var (
	errEOF      = errors.New("yjs: unexpected end of update")
	errRange    = errors.New("yjs: integer out of range")
	errUTF8     = errors.New("yjs: string is not valid UTF-8")
	errTooDeep  = errors.New("yjs: value nested too deeply")
	errTooLarge = errors.New("yjs: update exceeds a size bound")
)

type decoder struct {
	buf []byte
	pos int
}

func (d *decoder) remaining() int { return len(d.buf) - d.pos }

func (d *decoder) byte() (byte, error) {
	if d.pos >= len(d.buf) {
		return 0, errEOF
	}
	b := d.buf[d.pos]
	d.pos++
	return b, nil
}

// varUintFloat reads a lib0 varuint as lib0 accumulates it, in a double.
func (d *decoder) varUintFloat() (float64, error) {
	num, mult := 0.0, 1.0
	for d.pos < len(d.buf) {
		r := d.buf[d.pos]
		d.pos++
		num += float64(r&0x7F) * mult
		mult *= 128
		if r < 0x80 {
			return num, nil
		}
		if num > maxSafeInteger {
			return 0, errRange
		}
	}
	return 0, errEOF
}

// varUint reads a varuint that must be an exact integer.
func (d *decoder) varUint() (uint64, error) {
	f, err := d.varUintFloat()
	if err != nil {
		return 0, err
	}
	if f > maxSafeInteger {
		return 0, errRange
	}
	return uint64(f), nil
}

// varInt reads a lib0 varint (sign bit in the first byte, so -0 exists).
func (d *decoder) varInt() (float64, error) {
	r, err := d.byte()
	if err != nil {
		return 0, err
	}
	num := float64(r & 0x3F)
	mult := 64.0
	sign := 1.0
	if r&0x40 != 0 {
		sign = -1
	}
	if r&0x80 == 0 {
		return sign * num, nil
	}
	for d.pos < len(d.buf) {
		r = d.buf[d.pos]
		d.pos++
		num += float64(r&0x7F) * mult
		mult *= 128
		if r < 0x80 {
			return sign * num, nil
		}
		if num > maxSafeInteger {
			return 0, errRange
		}
	}
	return 0, errEOF
}

func (d *decoder) bytes(n uint64) ([]byte, error) {
	if n > uint64(d.remaining()) {
		return nil, errEOF
	}
	b := d.buf[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

func (d *decoder) varBytes() ([]byte, error) {
	n, err := d.varUint()
	if err != nil {
		return nil, err
	}
	return d.bytes(n)
}

// varString reads a string; lib0 decodes with a fatal UTF-8 decoder, so
// malformed UTF-8 (surrogate code points included) is an error.
func (d *decoder) varString() (string, error) {
	b, err := d.varBytes()
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", errUTF8
	}
	return string(b), nil
}

// varUTF16 reads a string as UTF-16 (text content is indexed in UTF-16
// code units, as in JavaScript).
func (d *decoder) varUTF16() ([]uint16, error) {
	b, err := d.varBytes()
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, errUTF8
	}
	n := 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		i += size
		n++
		if r >= 0x10000 {
			n++
		}
	}
	out := make([]uint16, 0, n)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
		} else {
			out = append(out, uint16(r))
		}
	}
	return out, nil
}

func (d *decoder) float32() (float64, error) {
	b, err := d.bytes(4)
	if err != nil {
		return 0, err
	}
	return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
}

func (d *decoder) float64() (float64, error) {
	b, err := d.bytes(8)
	if err != nil {
		return 0, err
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

func (d *decoder) bigInt64() (int64, error) {
	b, err := d.bytes(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

type encoder struct {
	buf []byte
}

func (e *encoder) byte(b byte) { e.buf = append(e.buf, b) }

func (e *encoder) varUint(n uint64) {
	for n > 0x7F {
		e.buf = append(e.buf, 0x80|byte(n&0x7F))
		n >>= 7
	}
	e.buf = append(e.buf, byte(n))
}

// varInt writes an integral double in lib0's signed form (|f| < 2^53).
func (e *encoder) varInt(f float64) {
	neg := f < 0 || (f == 0 && math.Signbit(f))
	n := uint64(math.Abs(f))
	first := byte(n & 0x3F)
	if neg {
		first |= 0x40
	}
	if n > 0x3F {
		first |= 0x80
	}
	e.buf = append(e.buf, first)
	n >>= 6
	for n > 0 {
		b := byte(n & 0x7F)
		if n > 0x7F {
			b |= 0x80
		}
		e.buf = append(e.buf, b)
		n >>= 7
	}
}

func (e *encoder) varBytes(b []byte) {
	e.varUint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

// varString writes s (generalized UTF-8) as lib0 does through TextEncoder:
// a lone surrogate becomes U+FFFD.
func (e *encoder) varString(s string) {
	if !hasSurrogate(s) {
		e.varUint(uint64(len(s)))
		e.buf = append(e.buf, s...)
		return
	}
	e.varBytes(replaceSurrogates(s))
}

func (e *encoder) float32(f float32) {
	e.buf = binary.BigEndian.AppendUint32(e.buf, math.Float32bits(f))
}

func (e *encoder) float64(f float64) {
	e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(f))
}

func (e *encoder) bigInt64(v int64) {
	e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v))
}

// hasSurrogate reports whether generalized-UTF-8 s holds an encoded
// surrogate (ED A0..BF xx), which only a JSON \u escape can produce.
func hasSurrogate(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF {
			return true
		}
	}
	return false
}

func replaceSurrogates(s string) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		if i+2 < len(s) && s[i] == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF {
			out = append(out, 0xEF, 0xBF, 0xBD)
			i += 3
			continue
		}
		out = append(out, s[i])
		i++
	}
	return out
}

// wellFormed returns s with lone surrogates replaced by U+FFFD, the string
// a UTF-8 round trip through lib0 yields.
func wellFormed(s string) string {
	if !hasSurrogate(s) {
		return s
	}
	return string(replaceSurrogates(s))
}
