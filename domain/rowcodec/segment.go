package rowcodec

import (
	"bytes"
	"encoding/binary"
	"io"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/domain/wire"
)

// SSG2 constants (§5.2).
const (
	SegmentMagic         = "SSG2"
	SegmentFormatVersion = 1
	// DefaultBlockRows and DefaultBlockBytes are the §5.2 block targets.
	DefaultBlockRows  = 1000
	DefaultBlockBytes = 256 << 10
)

// SegmentHeader is the SSG2 header: table, schema version and the column
// table (name, type, nullability).
type SegmentHeader struct {
	Table         string
	SchemaVersion int32
	Columns       []schema.Column
}

// Row is one SSG2 row record.
type Row struct {
	ServerVersion int64
	Values        []Value
}

// Segment is a whole decoded rows segment.
type Segment struct {
	SegmentHeader
	Blocks [][]Row
}

// CheckTable compares the column table with a compiled table (order,
// names, types, nullability); a difference is sync.schema_mismatch (§5.2).
func (h *SegmentHeader) CheckTable(t *schema.Table) error {
	if len(h.Columns) != len(t.Columns) {
		return syncerr.Newf(syncerr.SchemaMismatch, "segment has %d columns, table %s has %d", len(h.Columns), t.Name, len(t.Columns))
	}
	for i, c := range h.Columns {
		tc := t.Columns[i]
		if c.Name != tc.Name || c.Type != tc.Type || c.Nullable != tc.Nullable {
			return syncerr.Newf(syncerr.SchemaMismatch, "segment column %d (%s %s nullable=%v) differs from %s.%s (%s nullable=%v)",
				i, c.Name, c.Type, c.Nullable, t.Name, tc.Name, tc.Type, tc.Nullable)
		}
	}
	return nil
}

// SegmentReader decodes an SSG2 segment held in memory block by block.
// Values alias the input.
type SegmentReader struct {
	h     SegmentHeader
	codec *Codec
	r     wire.Reader
	done  bool
	// Reuse makes NextBlock recycle the previous block's slices; the caller
	// must be finished with a block before asking for the next.
	Reuse bool
	rows  []Row
	vals  []Value
}

// NewSegmentReader parses the segment header.
func NewSegmentReader(b []byte) (*SegmentReader, error) {
	s := &SegmentReader{r: wire.NewReader(b)}
	if err := readSegmentHeader(&s.r, &s.h, true); err != nil {
		return nil, err
	}
	s.codec = NewColumns(s.h.Columns, -1)
	return s, nil
}

// Header returns the segment header.
func (s *SegmentReader) Header() *SegmentHeader { return &s.h }

func readSegmentHeader(r *wire.Reader, h *SegmentHeader, keep bool) error {
	magic, err := r.Raw(4)
	if err != nil {
		return err
	}
	if string(magic) != SegmentMagic {
		return wire.Errorf("bad rows segment magic %q", magic)
	}
	ver, err := r.U16()
	if err != nil {
		return err
	}
	if ver != SegmentFormatVersion {
		return wire.Errorf("unsupported rows segment format version %d", ver)
	}
	flags, err := r.U16()
	if err != nil {
		return err
	}
	if flags != 0 {
		return wire.Errorf("non-zero rows segment flags 0x%04x", flags)
	}
	var table []byte
	if table, err = r.StrBytes(); err != nil {
		return err
	}
	if h.SchemaVersion, err = r.I32(); err != nil {
		return err
	}
	n, err := r.U16()
	if err != nil {
		return err
	}
	// Each column record takes at least 6 bytes; check before allocating.
	if int(n)*6 > r.Remaining() {
		return wire.Errorf("segment declares %d columns but only %d bytes remain", n, r.Remaining())
	}
	if keep {
		h.Table = string(table)
		h.Columns = make([]schema.Column, n)
	}
	for i := range int(n) {
		name, err := r.StrBytes()
		if err != nil {
			return err
		}
		tag, err := r.U8()
		if err != nil {
			return err
		}
		if !schema.ColumnType(tag).Valid() {
			return wire.Errorf("unknown column type tag %d for column %s", tag, name)
		}
		cf, err := r.U8()
		if err != nil {
			return err
		}
		if cf&0xfe != 0 {
			return wire.Errorf("reserved column flag bits set for column %s", name)
		}
		if keep {
			h.Columns[i] = schema.Column{Name: string(name), Type: schema.ColumnType(tag), Nullable: cf == 1}
		} else {
			h.Columns = append(h.Columns, schema.Column{Type: schema.ColumnType(tag), Nullable: cf == 1})
		}
	}
	return nil
}

// NextBlock decodes the next row block. After the end marker it returns
// io.EOF, having checked that nothing follows the marker.
func (s *SegmentReader) NextBlock() ([]Row, error) {
	if s.done {
		return nil, io.EOF
	}
	rows, vals, err := readBlock(&s.r, s.codec, s.rowsBuf(), s.valsBuf(), true)
	if err == io.EOF {
		s.done = true
		return nil, io.EOF
	}
	if err != nil {
		return nil, err
	}
	if s.Reuse {
		s.rows, s.vals = rows[:0], vals[:0]
	}
	return rows, nil
}

func (s *SegmentReader) rowsBuf() []Row {
	if s.Reuse {
		return s.rows
	}
	return nil
}

func (s *SegmentReader) valsBuf() []Value {
	if s.Reuse {
		return s.vals
	}
	return nil
}

// readBlock reads one block; io.EOF means the end marker was read and
// nothing follows it.
func readBlock(r *wire.Reader, c *Codec, rows []Row, vals []Value, keep bool) ([]Row, []Value, error) {
	if r.Remaining() < 4 {
		return nil, nil, wire.Errorf("rows segment truncated: missing end marker")
	}
	count, _ := r.U32()
	if count == 0 {
		if err := r.Done("rows segment end marker"); err != nil {
			return nil, nil, err
		}
		return nil, nil, io.EOF
	}
	blen, err := r.U32()
	if err != nil {
		return nil, nil, err
	}
	data, err := r.Raw(int(blen))
	if err != nil {
		return nil, nil, err
	}
	return decodeBlockBody(count, data, c, rows, vals, keep)
}

// decodeBlockBody decodes the rows of one block (count rows in data).
func decodeBlockBody(count uint32, data []byte, c *Codec, rows []Row, vals []Value, keep bool) ([]Row, []Value, error) {
	minRow := 8 + c.bitmapLen
	if uint64(count)*uint64(minRow) > uint64(len(data)) {
		return nil, nil, wire.Errorf("block of %d rows cannot fit in %d bytes", count, len(data))
	}
	br := wire.NewReader(data)
	ncol := len(c.cols)
	if keep {
		rows = rows[:0]
		if need := int(count) * ncol; cap(vals) < need {
			vals = make([]Value, need)
		} else {
			vals = vals[:need]
		}
		if cap(rows) < int(count) {
			rows = make([]Row, 0, count)
		}
	}
	for i := range int(count) {
		sv, err := br.I64()
		if err != nil {
			return nil, nil, err
		}
		if sv < 1 {
			return nil, nil, wire.Errorf("rows segment row serverVersion must be >= 1, got %d", sv)
		}
		if keep {
			rv := vals[i*ncol : (i+1)*ncol : (i+1)*ncol]
			if _, err := c.readRow(&br, rv, true); err != nil {
				return nil, nil, err
			}
			rows = append(rows, Row{ServerVersion: sv, Values: rv})
		} else if _, err := c.readRow(&br, nil, false); err != nil {
			return nil, nil, err
		}
	}
	if err := br.Done("rows block"); err != nil {
		return nil, nil, err
	}
	return rows, vals, nil
}

// DecodeSegment decodes a whole SSG2 segment without a schema: the column
// table describes the columns (§5.2).
func DecodeSegment(b []byte) (*Segment, error) {
	sr, err := NewSegmentReader(b)
	if err != nil {
		return nil, err
	}
	seg := &Segment{SegmentHeader: sr.h}
	for {
		rows, err := sr.NextBlock()
		if err == io.EOF {
			return seg, nil
		}
		if err != nil {
			return nil, err
		}
		seg.Blocks = append(seg.Blocks, rows)
	}
}

// ValidateSegment checks the structure of an SSG2 segment without
// materializing rows: the SEGMENT_INLINE decode check of §5.7.
func ValidateSegment(b []byte) error {
	r := wire.NewReader(b)
	var h SegmentHeader
	var stack [32]schema.Column
	h.Columns = stack[:0]
	if err := readSegmentHeader(&r, &h, false); err != nil {
		return err
	}
	c := Codec{cols: h.Columns, pk: -1, bitmapLen: (len(h.Columns) + 7) / 8}
	for {
		_, _, err := readBlock(&r, &c, nil, nil, false)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// AppendSegmentHeader appends the SSG2 magic, version, flags and header.
func AppendSegmentHeader(dst []byte, h *SegmentHeader) ([]byte, error) {
	if len(h.Columns) > 0xffff {
		return dst, wire.Errorf("segment has %d columns; at most 65535 fit", len(h.Columns))
	}
	if err := wire.CheckStr(h.Table, "segment table"); err != nil {
		return dst, err
	}
	w := wire.Writer{B: dst}
	w.Raw([]byte(SegmentMagic))
	w.U16(SegmentFormatVersion)
	w.U16(0)
	w.Str(h.Table)
	w.I32(h.SchemaVersion)
	w.U16(uint16(len(h.Columns)))
	for _, c := range h.Columns {
		if err := wire.CheckStr(c.Name, "segment column name"); err != nil {
			return dst, err
		}
		if !c.Type.Valid() {
			return dst, wire.Errorf("column %s has unknown type tag %d", c.Name, c.Type)
		}
		w.Str(c.Name)
		w.U8(uint8(c.Type))
		w.Bool(c.Nullable)
	}
	return w.B, nil
}

// EncodeSegment encodes a whole segment with exactly its blocks.
func EncodeSegment(s *Segment) ([]byte, error) {
	out, err := AppendSegmentHeader(nil, &s.SegmentHeader)
	if err != nil {
		return nil, err
	}
	c := NewColumns(s.Columns, -1)
	var block []byte
	for _, rows := range s.Blocks {
		if len(rows) == 0 {
			return nil, wire.Errorf("a rows-segment block must contain at least one row")
		}
		block = block[:0]
		for _, row := range rows {
			if row.ServerVersion < 1 || !wire.SafeInt(row.ServerVersion) {
				return nil, wire.Errorf("row serverVersion %d must be >= 1 and safe", row.ServerVersion)
			}
			block = binary.LittleEndian.AppendUint64(block, uint64(row.ServerVersion))
			if block, err = c.AppendRow(block, row.Values); err != nil {
				return nil, err
			}
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(rows)))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
	}
	return binary.LittleEndian.AppendUint32(out, 0), nil
}

// SegmentWriter streams an SSG2 segment to an io.Writer block by block,
// cutting a block at BlockRows rows or once it reaches BlockBytes,
// whichever comes first. Only the current block is held in memory.
type SegmentWriter struct {
	w          io.Writer
	h          SegmentHeader
	codec      *Codec
	BlockRows  int
	BlockBytes int
	buf        []byte // header prefix (before the first flush), then block header + rows
	hdrLen     int
	rows       int
	closed     bool
	err        error
	written    int64
	rowCount   int64
}

// NewSegmentWriter returns a writer for a segment with header h.
func NewSegmentWriter(w io.Writer, h SegmentHeader) (*SegmentWriter, error) {
	hdr, err := AppendSegmentHeader(make([]byte, 0, 4096), &h)
	if err != nil {
		return nil, err
	}
	return &SegmentWriter{w: w, h: h, codec: NewColumns(h.Columns, -1), BlockRows: DefaultBlockRows, BlockBytes: DefaultBlockBytes, buf: hdr, hdrLen: len(hdr)}, nil
}

func (s *SegmentWriter) beginRow() int {
	if s.rows == 0 {
		s.buf = append(s.buf, 0, 0, 0, 0, 0, 0, 0, 0) // rowCount, byteLength placeholders
	}
	return len(s.buf)
}

// WriteRow encodes one row record.
func (s *SegmentWriter) WriteRow(serverVersion int64, vals []Value) error {
	if s.err != nil {
		return s.err
	}
	if serverVersion < 1 || !wire.SafeInt(serverVersion) {
		return wire.Errorf("row serverVersion %d must be >= 1 and safe", serverVersion)
	}
	mark := s.beginRow()
	s.buf = binary.LittleEndian.AppendUint64(s.buf, uint64(serverVersion))
	var err error
	if s.buf, err = s.codec.AppendRow(s.buf, vals); err != nil {
		s.buf = s.buf[:mark]
		if s.rows == 0 {
			s.buf = s.buf[:mark-8]
		}
		return err
	}
	return s.rowDone()
}

// WriteEncodedRow appends a row already in full-row encoding (the verbatim
// stored payload) after validating it against the column table.
func (s *SegmentWriter) WriteEncodedRow(serverVersion int64, row []byte) error {
	if s.err != nil {
		return s.err
	}
	if serverVersion < 1 || !wire.SafeInt(serverVersion) {
		return wire.Errorf("row serverVersion %d must be >= 1 and safe", serverVersion)
	}
	if err := s.codec.ValidateRow(row); err != nil {
		return err
	}
	s.beginRow()
	s.buf = binary.LittleEndian.AppendUint64(s.buf, uint64(serverVersion))
	s.buf = append(s.buf, row...)
	return s.rowDone()
}

func (s *SegmentWriter) rowDone() error {
	s.rows++
	s.rowCount++
	if s.rows >= s.BlockRows || s.blockLen() >= s.BlockBytes {
		return s.flush()
	}
	return nil
}

func (s *SegmentWriter) blockLen() int {
	// The block starts 8 bytes after the last flush point; before the first
	// flush the header sits in front of it.
	return len(s.buf) - s.blockStart()
}

func (s *SegmentWriter) blockStart() int {
	if s.written == 0 {
		return s.hdrLen + 8
	}
	return 8
}

func (s *SegmentWriter) flush() error {
	start := s.blockStart()
	binary.LittleEndian.PutUint32(s.buf[start-8:], uint32(s.rows))
	binary.LittleEndian.PutUint32(s.buf[start-4:], uint32(len(s.buf)-start))
	n, err := s.w.Write(s.buf)
	s.written += int64(n)
	if err != nil {
		s.err = err
		return err
	}
	s.buf = s.buf[:0]
	s.rows = 0
	return nil
}

// Close flushes the last block and writes the end marker.
func (s *SegmentWriter) Close() error {
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return nil
	}
	s.closed = true
	if s.rows > 0 {
		if err := s.flush(); err != nil {
			return err
		}
	}
	s.buf = binary.LittleEndian.AppendUint32(s.buf, 0)
	n, err := s.w.Write(s.buf)
	s.written += int64(n)
	s.buf = s.buf[:0]
	if err != nil {
		s.err = err
	}
	return err
}

// BytesWritten returns the number of bytes written to the underlying writer.
func (s *SegmentWriter) BytesWritten() int64 { return s.written }

// RowCount returns the number of rows written.
func (s *SegmentWriter) RowCount() int64 { return s.rowCount }

// IsSegment reports whether b starts with the SSG2 magic.
func IsSegment(b []byte) bool { return bytes.HasPrefix(b, []byte(SegmentMagic)) }

// SegmentStreamReader decodes an SSG2 segment from an io.Reader one block
// at a time, holding only the current block in memory (§5.2). A block
// larger than MaxBlockBytes is refused before it is read.
type SegmentStreamReader struct {
	r        io.Reader
	h        SegmentHeader
	codec    *Codec
	maxBlock int
	done     bool
	err      error
	data     []byte
	rows     []Row
	vals     []Value
	// Reuse recycles block buffers between NextBlock calls; the caller
	// must be finished with a block before asking for the next.
	Reuse bool
}

// DefaultMaxBlockBytes bounds one block for SegmentStreamReader.
const DefaultMaxBlockBytes = 64 << 20

// NewSegmentStreamReader reads and validates the segment header from r.
// maxBlockBytes 0 means DefaultMaxBlockBytes.
func NewSegmentStreamReader(r io.Reader, maxBlockBytes int) (*SegmentStreamReader, error) {
	if maxBlockBytes <= 0 {
		maxBlockBytes = DefaultMaxBlockBytes
	}
	s := &SegmentStreamReader{r: r, maxBlock: maxBlockBytes}
	// The header is small but variable: read its fixed prefix, then each
	// length-prefixed piece, checking sizes before reading.
	hdr := make([]byte, 0, 256)
	var err error
	if hdr, err = s.readN(hdr, 8+4); err != nil { // magic, version, flags, table length
		return nil, err
	}
	tl := int(binary.LittleEndian.Uint32(hdr[8:]))
	if tl > s.maxBlock {
		return nil, wire.Errorf("segment table name of %d bytes exceeds the limit", tl)
	}
	if hdr, err = s.readN(hdr, tl+4+2); err != nil { // table, schemaVersion, column count
		return nil, err
	}
	n := int(binary.LittleEndian.Uint16(hdr[len(hdr)-2:]))
	for range n {
		if hdr, err = s.readN(hdr, 4); err != nil {
			return nil, err
		}
		nl := int(binary.LittleEndian.Uint32(hdr[len(hdr)-4:]))
		if nl > s.maxBlock || len(hdr)+nl > s.maxBlock {
			return nil, wire.Errorf("segment header exceeds the %d byte limit", s.maxBlock)
		}
		if hdr, err = s.readN(hdr, nl+2); err != nil {
			return nil, err
		}
	}
	hr := wire.NewReader(hdr)
	if err := readSegmentHeader(&hr, &s.h, true); err != nil {
		return nil, err
	}
	s.codec = NewColumns(s.h.Columns, -1)
	return s, nil
}

// readN appends exactly n more bytes from the stream to b.
func (s *SegmentStreamReader) readN(b []byte, n int) ([]byte, error) {
	start := len(b)
	b = append(b, make([]byte, n)...)
	if _, err := io.ReadFull(s.r, b[start:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, wire.Errorf("rows segment truncated")
		}
		return nil, err
	}
	return b, nil
}

// Header returns the segment header.
func (s *SegmentStreamReader) Header() *SegmentHeader { return &s.h }

// NextBlock reads and decodes the next block; io.EOF after the end marker
// (and a check that nothing follows it).
func (s *SegmentStreamReader) NextBlock() ([]Row, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.done {
		return nil, io.EOF
	}
	var hdr [8]byte
	if _, err := io.ReadFull(s.r, hdr[:4]); err != nil {
		return nil, s.fail(wire.Errorf("rows segment truncated: missing end marker"))
	}
	count := binary.LittleEndian.Uint32(hdr[:4])
	if count == 0 {
		var one [1]byte
		if m, _ := io.ReadFull(s.r, one[:]); m != 0 {
			return nil, s.fail(wire.Errorf("trailing bytes after rows segment end marker"))
		}
		s.done = true
		return nil, io.EOF
	}
	if _, err := io.ReadFull(s.r, hdr[4:]); err != nil {
		return nil, s.fail(wire.Errorf("rows segment truncated in a block header"))
	}
	blen := binary.LittleEndian.Uint32(hdr[4:])
	if uint64(blen) > uint64(s.maxBlock) {
		return nil, s.fail(wire.Errorf("block of %d bytes exceeds the %d byte limit", blen, s.maxBlock))
	}
	data := s.data[:0]
	if !s.Reuse {
		data = nil
	}
	var err error
	if data, err = s.readN(data, int(blen)); err != nil {
		return nil, s.fail(err)
	}
	var rows []Row
	var vals []Value
	if s.Reuse {
		rows, vals = s.rows, s.vals
	}
	rows, vals, err = decodeBlockBody(count, data, s.codec, rows, vals, true)
	if err != nil {
		return nil, s.fail(err)
	}
	if s.Reuse {
		s.data, s.rows, s.vals = data, rows[:0], vals[:0]
	}
	return rows, nil
}

func (s *SegmentStreamReader) fail(err error) error {
	s.err = err
	return err
}
