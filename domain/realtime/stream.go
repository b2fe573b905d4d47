package realtime

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/wire"
)

// RequestScanner reassembles the request byte stream of a socket round
// (§8.7) from its 0x01 chunks: the envelope grammar is self-delimiting, so
// the request ends with its END frame, whatever the chunk boundaries. It
// checks only the framing (a valid request header, frame lengths, the
// size bound); the message itself is decoded by the sync handler.
type RequestScanner struct {
	// MaxBytes bounds the request (0: no bound).
	MaxBytes int64

	buf []byte
	off int // start of the next frame header not yet consumed
}

// Push appends one chunk. It returns the whole request once its END frame
// arrived, with excess the number of bytes past END in the chunks pushed
// so far (a pipelining violation when non-zero). An error is a framing
// violation that leaves the stream without a findable end: the socket is
// to be closed.
func (s *RequestScanner) Push(chunk []byte) (msg []byte, excess int, err error) {
	if s.MaxBytes > 0 && int64(len(s.buf)+len(chunk)) > s.MaxBytes {
		return nil, 0, s.tooLarge()
	}
	if need := len(s.buf) + len(chunk); need > cap(s.buf) {
		grown := make([]byte, len(s.buf), s.grownCap(need))
		copy(grown, s.buf)
		s.buf = grown
	}
	s.buf = append(s.buf, chunk...)
	if s.off == 0 {
		if len(s.buf) < ssp2.HeaderSize {
			return nil, 0, nil
		}
		h := s.buf[:ssp2.HeaderSize]
		if string(h[:4]) != ssp2.Magic || ssp2.Kind(h[6]) != ssp2.KindRequest || h[7] != 0 {
			return nil, 0, wire.Errorf("not an SSP2 request header")
		}
		s.off = ssp2.HeaderSize
	}
	for {
		if len(s.buf)-s.off < 5 {
			break
		}
		t := ssp2.FrameType(s.buf[s.off])
		n := int64(binary.LittleEndian.Uint32(s.buf[s.off+1:]))
		if t == ssp2.TypeEnd {
			if n != 0 {
				return nil, 0, wire.Errorf("END frame with length %d", n)
			}
			end := s.off + 5
			msg, excess = s.buf[:end:end], len(s.buf)-end
			s.buf, s.off = nil, 0
			return msg, excess, nil
		}
		if s.MaxBytes > 0 && int64(s.off)+5+n > s.MaxBytes {
			return nil, 0, s.tooLarge() // declared past the bound: refused before it arrives
		}
		if int64(len(s.buf)-s.off-5) < n {
			break
		}
		s.off += 5 + int(n)
	}
	return nil, 0, nil
}

// ErrRequestTooLarge is a socket round's request past MaxBytes.
var ErrRequestTooLarge = errors.New("socket round request too large")

func (s *RequestScanner) tooLarge() error {
	return fmt.Errorf("%w: more than %d bytes", ErrRequestTooLarge, s.MaxBytes)
}

// grownCap doubles the buffer, never past MaxBytes unless need is.
// Doubling copies least: a request's old buffers are garbage until the
// collector runs, and growing by less would make more of them.
func (s *RequestScanner) grownCap(need int) int {
	c := max(need, 2*cap(s.buf), 512)
	if s.MaxBytes > 0 && int64(c) > s.MaxBytes {
		c = max(need, int(s.MaxBytes))
	}
	return c
}

// Pending reports whether part of a request has been received.
func (s *RequestScanner) Pending() bool { return len(s.buf) > 0 }
