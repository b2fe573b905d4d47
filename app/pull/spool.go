package pull

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/ports"
)

// DefaultSpoolMemoryBytes is the part of a response a Spool keeps in memory
// before it spills to a temporary file.
const DefaultSpoolMemoryBytes = 4 << 20

// Spool holds encoded response frames until the response may be sent: in
// memory up to a threshold, then in an unlinked-on-Close temporary file.
// It is the bounded buffer of the buffered read-verify (SPEC §C.7): a pull
// response is built completely, the serve gate is read again, and only then
// is the spool copied to the client (or dropped without sending a byte).
//
// Memory per response is bounded by the threshold (plus one frame being
// appended); the file is bounded by the pull limits and the response
// budget of Options (see Service).
type Spool struct {
	threshold int
	dir       string
	buffers   *spoolBuffers // where mem comes from and returns to
	mem       []byte
	f         *os.File
	n         int64
	err       error
	// client is the record the pull prepared, for RecordClient.
	client *ports.ClientRecord
	// gate is a serve gate read after the pull's last read (nil: none).
	gate *checkpoint.ServeGate
	// served counts what the pull wrote, for its event.
	served Served
}

// Served summarizes the sections a pull wrote into the spool.
type Served struct {
	Incremental, Bootstrap, Reset, Revoked int
	// Commits counts the COMMIT frames of incremental sections.
	Commits int
}

// Served returns what the pull wrote (zero for a nil spool).
func (s *Spool) Served() Served {
	if s == nil {
		return Served{}
	}
	return s.served
}

// VerifiedGate returns the serve gate the pull read after all its other
// reads, when it did: the read-verify's re-read, already made.
func (s *Spool) VerifiedGate() (checkpoint.ServeGate, bool) {
	if s == nil || s.gate == nil {
		return checkpoint.ServeGate{}, false
	}
	return *s.gate, true
}

// NewSpool returns a spool keeping up to memBytes in memory (≤ 0 →
// DefaultSpoolMemoryBytes) and spilling past it to a file in dir ("" → the
// system temporary directory).
func NewSpool(memBytes int, dir string) *Spool {
	if memBytes <= 0 {
		memBytes = DefaultSpoolMemoryBytes
	}
	return &Spool{threshold: memBytes, dir: dir}
}

// Len is the number of bytes written.
func (s *Spool) Len() int64 { return s.n }

// Spilled reports whether the spool moved to a file.
func (s *Spool) Spilled() bool { return s.f != nil }

// Write appends p.
func (s *Spool) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.f == nil && len(s.mem)+len(p) > s.threshold {
		if err := s.spill(); err != nil {
			s.err = err
			return 0, err
		}
	}
	if s.f != nil {
		n, err := s.f.Write(p)
		s.n += int64(n)
		if err != nil {
			s.err = fmt.Errorf("spool: %w", err)
			return n, s.err
		}
		return n, nil
	}
	if s.mem == nil {
		s.mem = s.buffers.take()
	}
	s.mem = append(s.mem, p...)
	s.n += int64(len(p))
	return len(p), nil
}

// spoolBuffers recycles the in-memory buffers of closed spools: a
// catch-up page is hundreds of kilobytes, and growing a fresh buffer to
// that size for every response was a tenth of the server's CPU (copies,
// large allocations and the collections they cause). An io.Writer keeps
// nothing it was given, so a buffer is free again once its spool is
// closed. The zero value is a pool; a nil one recycles nothing.
type spoolBuffers struct{ p sync.Pool }

func (b *spoolBuffers) take() []byte {
	if b != nil {
		if got, ok := b.p.Get().(*[]byte); ok {
			return (*got)[:0]
		}
	}
	return nil
}

func (b *spoolBuffers) give(mem []byte) {
	if b != nil && cap(mem) > 0 {
		b.p.Put(&mem)
	}
}

func (s *Spool) spill() error {
	f, err := os.CreateTemp(s.dir, "syncd-response-*")
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	// Unlink at once where the platform allows it, so a crash leaks nothing.
	_ = os.Remove(f.Name())
	if _, err := f.Write(s.mem); err != nil {
		_ = f.Close()
		return fmt.Errorf("spool: %w", err)
	}
	s.f = f
	s.buffers.give(s.mem)
	s.mem = nil
	return nil
}

// WriteTo copies the spooled bytes to w.
func (s *Spool) WriteTo(w io.Writer) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.f == nil {
		n, err := w.Write(s.mem)
		return int64(n), err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	return io.Copy(w, io.LimitReader(s.f, s.n))
}

// Bytes returns the spooled bytes (read back from the file when spilled),
// valid until Close.
func (s *Spool) Bytes() ([]byte, error) {
	if s.f == nil {
		return s.mem, s.err
	}
	var b = make([]byte, 0, s.n)
	w := &appendWriter{b: b}
	if _, err := s.WriteTo(w); err != nil {
		return nil, err
	}
	return w.b, nil
}

type appendWriter struct{ b []byte }

func (a *appendWriter) Write(p []byte) (int, error) { a.b = append(a.b, p...); return len(p), nil }

// Close releases the memory and the file; the spool is unusable after.
func (s *Spool) Close() error {
	s.buffers.give(s.mem)
	s.mem = nil
	if s.err == nil {
		s.err = errors.New("spool: closed")
	}
	if s.f != nil {
		f := s.f
		s.f = nil
		name := f.Name()
		err := f.Close()
		_ = os.Remove(name)
		return err
	}
	return nil
}
