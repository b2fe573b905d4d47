package ssp2

import (
	"encoding/binary"
	"slices"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/domain/wire"
)

// Message is one SSP2 request or response.
type Message struct {
	WireVersion uint16
	Kind        Kind
	Frames      []Frame
}

// Default limits.
const (
	DefaultMaxFrameBytes   = 64 << 20
	DefaultMaxMessageBytes = 256 << 20
)

// DecodeOptions configures decoding. The zero value admits every known
// wire version and applies the default limits.
type DecodeOptions struct {
	// Versions lists the admitted wire versions (nil: KnownVersions).
	Versions []uint16
	// MaxFrameBytes caps one frame payload (0: DefaultMaxFrameBytes).
	MaxFrameBytes int
	// MaxMessageBytes caps the whole message (0: DefaultMaxMessageBytes).
	MaxMessageBytes int64
	// StopAtEnd makes a streaming Decoder stop reading at the END frame
	// instead of checking that the input ends there. Use it when the
	// transport carries more than one message (socket rounds, §8.7), where
	// bytes past END are the caller's pipelining concern.
	StopAtEnd bool
}

func (o *DecodeOptions) maxFrame() int {
	if o.MaxFrameBytes > 0 {
		return o.MaxFrameBytes
	}
	return DefaultMaxFrameBytes
}

func (o *DecodeOptions) maxMessage() int64 {
	if o.MaxMessageBytes > 0 {
		return o.MaxMessageBytes
	}
	return DefaultMaxMessageBytes
}

func (o *DecodeOptions) admits(v uint16) bool {
	if !slices.Contains(KnownVersions, v) {
		return false
	}
	return o.Versions == nil || slices.Contains(o.Versions, v)
}

// admitted lists the versions admits accepts, ascending.
func (o *DecodeOptions) admitted() []uint16 {
	var out []uint16
	for _, v := range KnownVersions {
		if o.admits(v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// VersionError is an envelope whose wire version the decoder does not
// admit (§1.2). It is a sync.invalid_request decode error (errors.As finds
// the *syncerr.Error) that also names the request's version and the
// admitted ones, so a server can tell the client and its operator why.
type VersionError struct {
	// Version is the envelope's wire version.
	Version uint16
	// Admitted are the versions the decoder would have accepted, ascending.
	Admitted []uint16
	err      *syncerr.Error
}

func newVersionError(v uint16, admitted []uint16) *VersionError {
	return &VersionError{Version: v, Admitted: admitted,
		err: syncerr.Newf(syncerr.InvalidRequest, "unsupported wireVersion %d (admitted %v)", v, admitted)}
}

func (e *VersionError) Error() string { return e.err.Error() }

// Unwrap returns the catalog error.
func (e *VersionError) Unwrap() error { return e.err }

// ParseHeader validates the 8-byte envelope header (§1.2) and returns the
// wire version and message kind.
func ParseHeader(h []byte, o DecodeOptions) (uint16, Kind, error) {
	if len(h) < HeaderSize {
		return 0, 0, wire.Errorf("truncated envelope header: %d bytes", len(h))
	}
	if string(h[:4]) != Magic {
		return 0, 0, wire.Errorf("bad envelope magic %q", h[:4])
	}
	v := binary.LittleEndian.Uint16(h[4:])
	if !o.admits(v) {
		return 0, 0, newVersionError(v, o.admitted())
	}
	k := Kind(h[6])
	if k != KindRequest && k != KindResponse {
		return 0, 0, wire.Errorf("unknown msgKind byte 0x%02x", h[6])
	}
	if h[7] != 0 {
		return 0, 0, wire.Errorf("non-zero envelope flags 0x%02x", h[7])
	}
	return v, k, nil
}

// AppendHeader appends an envelope header.
func AppendHeader(dst []byte, version uint16, kind Kind) []byte {
	dst = append(dst, Magic...)
	dst = binary.LittleEndian.AppendUint16(dst, version)
	return append(dst, uint8(kind), 0)
}

// Decode decodes a whole message held in memory with default options.
// Byte fields of the returned frames alias b.
func Decode(b []byte) (*Message, error) { return DecodeWith(b, DecodeOptions{}) }

// DecodeWith decodes a whole message held in memory. As in the reference
// codec, a frame decode error anywhere in the message takes precedence over
// a grammar violation found earlier (a grammar error is reported once all
// frames decoded).
func DecodeWith(b []byte, o DecodeOptions) (*Message, error) {
	if int64(len(b)) > o.maxMessage() {
		return nil, wire.Errorf("message of %d bytes exceeds the %d byte limit", len(b), o.maxMessage())
	}
	v, k, err := ParseHeader(b, o)
	if err != nil {
		return nil, err
	}
	m := &Message{WireVersion: v, Kind: k}
	g := newGrammar(k)
	var grammarErr error
	var arena frameArena
	off := HeaderSize
	for {
		if off == len(b) {
			return nil, wire.Errorf("truncated message: missing END frame")
		}
		if len(b)-off < 5 {
			return nil, wire.Errorf("truncated frame header at offset %d", off)
		}
		ft := FrameType(b[off])
		n := binary.LittleEndian.Uint32(b[off+1:])
		off += 5
		if uint64(n) > uint64(len(b)-off) {
			return nil, wire.Errorf("frame length %d exceeds the %d remaining bytes", n, len(b)-off)
		}
		if uint64(n) > uint64(o.maxFrame()) {
			return nil, wire.Errorf("frame length %d exceeds the %d byte frame limit", n, o.maxFrame())
		}
		payload := b[off : off+int(n) : off+int(n)]
		off += int(n)
		if ft == TypeEnd {
			if n != 0 {
				return nil, wire.Errorf("END frame must have zero length, got %d", n)
			}
			if off != len(b) {
				return nil, wire.Errorf("%d bytes after the END frame", len(b)-off)
			}
			break
		}
		f, err := decodeFrame(k, v, ft, payload, &arena)
		if err != nil {
			return nil, err
		}
		if grammarErr == nil {
			grammarErr = g.next(f)
		}
		m.Frames = append(m.Frames, f)
	}
	if grammarErr != nil {
		return nil, grammarErr
	}
	if err := g.end(); err != nil {
		return nil, err
	}
	return m, nil
}

// Encode encodes a whole message.
func Encode(m *Message) ([]byte, error) { return AppendEncode(nil, m) }

// AppendEncode appends the encoding of m to dst. The frame sequence is
// checked against the grammar and every frame against its layout; an
// error leaves dst unchanged.
func AppendEncode(dst []byte, m *Message) ([]byte, error) {
	if m == nil {
		return dst, wire.Errorf("nil message")
	}
	if !slices.Contains(KnownVersions, m.WireVersion) {
		return dst, wire.Errorf("unsupported wireVersion %d", m.WireVersion)
	}
	if m.Kind != KindRequest && m.Kind != KindResponse {
		return dst, wire.Errorf("unknown message kind %d", m.Kind)
	}
	start := len(dst)
	out := AppendHeader(dst, m.WireVersion, m.Kind)
	g := newGrammar(m.Kind)
	var err error
	for _, f := range m.Frames {
		if out, err = appendFrame(out, m.Kind, m.WireVersion, f); err != nil {
			return dst[:start], err
		}
		if err := g.next(f); err != nil {
			return dst[:start], err
		}
	}
	if err := g.end(); err != nil {
		return dst[:start], err
	}
	return append(out, uint8(TypeEnd), 0, 0, 0, 0), nil
}

// IsMessage reports whether b starts with the SSP2 magic.
func IsMessage(b []byte) bool { return len(b) >= 4 && string(b[:4]) == Magic }

// CodeOf is syncerr.CodeOf, re-exported for callers that only import ssp2.
func CodeOf(err error) syncerr.Code { return syncerr.CodeOf(err) }
