package ssptest

import "encoding/binary"

// Bytes assembles SSP2 bytes by hand from the spec's field tables (the
// primitive encodings: little-endian fixed-width integers, u32-length
// strings and byte strings, a presence byte before an optional value),
// written without the codec so a test holds the codec to the spec, not
// to itself.
type Bytes struct{ B []byte }

// U8 appends a u8 (a bool, an enum, a presence byte).
func (w *Bytes) U8(v byte) *Bytes { w.B = append(w.B, v); return w }

// U16 appends a u16.
func (w *Bytes) U16(v uint16) *Bytes { w.B = binary.LittleEndian.AppendUint16(w.B, v); return w }

// U32 appends a u32 (a length, a count).
func (w *Bytes) U32(v uint32) *Bytes { w.B = binary.LittleEndian.AppendUint32(w.B, v); return w }

// I32 appends an i32.
func (w *Bytes) I32(v int32) *Bytes { return w.U32(uint32(v)) }

// I64 appends an i64.
func (w *Bytes) I64(v int64) *Bytes { w.B = binary.LittleEndian.AppendUint64(w.B, uint64(v)); return w }

// Str appends a str.
func (w *Bytes) Str(s string) *Bytes { w.U32(uint32(len(s))); w.B = append(w.B, s...); return w }

// Raw appends a bytes value.
func (w *Bytes) Raw(b []byte) *Bytes { w.U32(uint32(len(b))); w.B = append(w.B, b...); return w }

// Absent appends an opt() absent.
func (w *Bytes) Absent() *Bytes { return w.U8(0) }

// Present appends an opt() presence byte; the value follows.
func (w *Bytes) Present() *Bytes { return w.U8(1) }

// Frame appends a frame of type t with p's bytes as its payload.
func (w *Bytes) Frame(t byte, p *Bytes) *Bytes {
	w.U8(t).U32(uint32(len(p.B)))
	w.B = append(w.B, p.B...)
	return w
}

// End appends the END frame.
func (w *Bytes) End() *Bytes { return w.Frame(0x00, &Bytes{}) }

// Response starts a response envelope of wire version v (§1.2).
func Response(v uint16) *Bytes { return (&Bytes{B: []byte("SSP2")}).U16(v).U8(0x02).U8(0x00) }
