package ssp2

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/syncd-dev/syncd/domain/wire"
)

// Encoder writes one message frame by frame to an io.Writer (§1.4: no
// whole-response buffering). Each WriteFrame encodes one frame, checks it
// against the grammar and writes it; Close writes END.
type Encoder struct {
	w       io.Writer
	version uint16
	kind    Kind
	g       grammar
	buf     []byte
	started bool
	closed  bool
	err     error
	n       int64
}

// NewEncoder returns an encoder for a message of kind at version.
func NewEncoder(w io.Writer, kind Kind, version uint16) *Encoder {
	return &Encoder{w: w, version: version, kind: kind, g: newGrammar(kind)}
}

// Reset makes e encode a new message to w, keeping its frame buffer so a
// reused Encoder does not allocate again for frames of a similar size.
func (e *Encoder) Reset(w io.Writer, kind Kind, version uint16) {
	*e = Encoder{w: w, version: version, kind: kind, g: newGrammar(kind), buf: e.buf[:0]}
}

// WriteFrame encodes and writes one frame. A frame that violates its
// layout or the grammar is refused and nothing is written for it.
func (e *Encoder) WriteFrame(f Frame) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return wire.Errorf("frame written after END")
	}
	e.buf = e.buf[:0]
	if !e.started {
		if e.kind != KindRequest && e.kind != KindResponse {
			return wire.Errorf("unknown message kind %d", e.kind)
		}
		if !(&DecodeOptions{}).admits(e.version) {
			return wire.Errorf("unsupported wireVersion %d", e.version)
		}
		e.buf = AppendHeader(e.buf, e.version, e.kind)
	}
	buf, err := appendFrame(e.buf, e.kind, e.version, f)
	if err != nil {
		return err
	}
	if err := e.g.next(f); err != nil {
		e.g.frames--
		return err
	}
	e.buf = buf
	e.started = true
	return e.flush()
}

func (e *Encoder) flush() error {
	n, err := e.w.Write(e.buf)
	e.n += int64(n)
	if err != nil {
		e.err = err
	}
	return err
}

// Close checks the grammar at END and writes the END frame.
func (e *Encoder) Close() error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return nil
	}
	if err := e.g.end(); err != nil {
		return err
	}
	e.closed = true
	e.buf = append(e.buf[:0], uint8(TypeEnd), 0, 0, 0, 0)
	return e.flush()
}

// BytesWritten returns the bytes written so far.
func (e *Encoder) BytesWritten() int64 { return e.n }

// Decoder reads one message frame by frame from an io.Reader. Every length
// prefix is checked against the frame and message limits before anything
// of that size is allocated, and large payloads are read in growing chunks
// so a lying prefix cannot force a large allocation.
type Decoder struct {
	r       io.Reader
	opts    DecodeOptions
	version uint16
	kind    Kind
	g       grammar
	read    int64
	hdr     bool
	done    bool
	err     error
	fh      [5]byte
	arena   frameArena
}

// NewDecoder returns a decoder reading from r.
func NewDecoder(r io.Reader, opts DecodeOptions) *Decoder {
	return &Decoder{r: r, opts: opts}
}

// Header reads and validates the envelope header (if not yet read) and
// returns the wire version and message kind.
func (d *Decoder) Header() (uint16, Kind, error) {
	if d.hdr || d.err != nil {
		return d.version, d.kind, d.err
	}
	var h [HeaderSize]byte
	n, err := io.ReadFull(d.r, h[:])
	d.read += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, d.fail(wire.Errorf("truncated envelope header: %d bytes", n))
		}
		return 0, 0, d.fail(err)
	}
	v, k, err := ParseHeader(h[:], d.opts)
	if err != nil {
		return 0, 0, d.fail(err)
	}
	d.version, d.kind, d.hdr = v, k, true
	d.g = newGrammar(k)
	return v, k, nil
}

func (d *Decoder) fail(err error) error {
	d.err = err
	return err
}

// Next returns the next frame. After the END frame (and a check that no
// byte follows it) it returns io.EOF. Frames own their memory: nothing is
// reused between calls (COMMIT frames are carved from the decoder's
// chunks, which are never written twice).
func (d *Decoder) Next() (Frame, error) {
	if d.err != nil {
		return nil, d.err
	}
	if d.done {
		return nil, io.EOF
	}
	if _, _, err := d.Header(); err != nil {
		return nil, err
	}
	n, err := io.ReadFull(d.r, d.fh[:])
	d.read += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) && n == 0 {
			return nil, d.fail(wire.Errorf("truncated message: missing END frame"))
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, d.fail(wire.Errorf("truncated frame header"))
		}
		return nil, d.fail(err)
	}
	ft := FrameType(d.fh[0])
	size := binary.LittleEndian.Uint32(d.fh[1:])
	if uint64(size) > uint64(d.opts.maxFrame()) {
		return nil, d.fail(wire.Errorf("frame length %d exceeds the %d byte frame limit", size, d.opts.maxFrame()))
	}
	if d.read+int64(size) > d.opts.maxMessage() {
		return nil, d.fail(wire.Errorf("message exceeds the %d byte limit", d.opts.maxMessage()))
	}
	if ft == TypeEnd {
		if size != 0 {
			return nil, d.fail(wire.Errorf("END frame must have zero length, got %d", size))
		}
		if !d.opts.StopAtEnd {
			var one [1]byte
			if m, _ := io.ReadFull(d.r, one[:]); m != 0 {
				return nil, d.fail(wire.Errorf("bytes after the END frame"))
			}
		}
		if err := d.g.end(); err != nil {
			return nil, d.fail(err)
		}
		d.done = true
		return nil, io.EOF
	}
	payload, err := d.readPayload(int(size))
	if err != nil {
		return nil, d.fail(err)
	}
	f, err := decodeFrame(d.kind, d.version, ft, payload, &d.arena)
	if err != nil {
		return nil, d.fail(err)
	}
	if err := d.g.next(f); err != nil {
		return nil, d.fail(err)
	}
	return f, nil
}

// readPayload reads exactly n bytes, growing the buffer (doubling from
// 64 KiB) only as data actually arrives.
func (d *Decoder) readPayload(n int) ([]byte, error) {
	const chunk = 64 << 10
	buf := make([]byte, min(n, chunk))
	off := 0
	for {
		m, err := io.ReadFull(d.r, buf[off:])
		off += m
		d.read += int64(m)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, wire.Errorf("frame length %d exceeds the %d bytes that followed", n, off)
			}
			return nil, err
		}
		if off == n {
			return buf, nil
		}
		buf = append(buf, make([]byte, min(n, 2*len(buf))-len(buf))...)
	}
}

// ReadMessage decodes a whole message from a Decoder.
func (d *Decoder) ReadMessage() (*Message, error) {
	v, k, err := d.Header()
	if err != nil {
		return nil, err
	}
	m := &Message{WireVersion: v, Kind: k}
	for {
		f, err := d.Next()
		if err == io.EOF {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		m.Frames = append(m.Frames, f)
	}
}
