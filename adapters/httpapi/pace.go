package httpapi

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// DefaultBlobMinRate is the average rate, in bytes per second, a blob
// transfer must keep once its grace (the body read timeout) is spent:
// a 64 MiB blob at 32 KiB/s takes 34 minutes, a slow mobile uplink's
// pace, while a stalled transfer is cut after the grace.
const DefaultBlobMinRate = 32 << 10

// pacedWriteBytes is the most one deadline covers on the download path: a
// write blocks until all of it is sent, so a large write is split and
// every piece gets its own deadline.
const pacedWriteBytes = 64 << 10

// pace bounds one blob transfer in time, in both directions: every read
// or write must make progress within timeout, and the bytes moved must
// keep up with rate bytes per second from the first of them, after
// timeout of grace. A stalled transfer is thus cut after timeout, a
// trickle once it falls behind the rate, while a slow but steady one of
// any size finishes. Deadlines are read on the transport's clock.
type pace struct {
	now     func() time.Time
	timeout time.Duration
	rate    int64
	start   time.Time
	moved   int64
}

// newPace returns the pace of one transfer; nil (no bound) when timeout
// is not positive.
func (t *Transport) newPace() *pace {
	if t.bodyTimeout <= 0 {
		return nil
	}
	return &pace{now: t.now, timeout: t.bodyTimeout, rate: t.blobRate}
}

// deadline is when the next n bytes must have moved.
func (p *pace) deadline(n int64) time.Time {
	now := p.now()
	if p.start.IsZero() {
		p.start = now
	}
	total := p.moved + n
	// total/rate seconds without overflowing for any int64 total.
	allowance := time.Duration(total/p.rate)*time.Second + time.Duration(total%p.rate)*time.Second/time.Duration(p.rate)
	due := p.start.Add(p.timeout + allowance)
	if idle := now.Add(p.timeout); idle.Before(due) {
		return idle
	}
	return due
}

// pacedBody is a request body read under a pace: each read sets the
// connection's read deadline, cleared once the body ended. It records
// the first read failure, so the endpoint answers the body's failure
// (a 408 when it did not arrive in time) whatever the store made of it.
type pacedBody struct {
	r   io.Reader
	rc  *http.ResponseController
	p   *pace
	err error
}

func (b *pacedBody) Read(buf []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.p != nil {
		_ = b.rc.SetReadDeadline(b.p.deadline(0))
	}
	n, err := b.r.Read(buf)
	if b.p != nil {
		b.p.moved += int64(n)
	}
	switch {
	case err == io.EOF:
		if b.p != nil {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	case err != nil:
		b.err = err
	}
	return n, err
}

// failed is the body's read failure as the transport answers it (nil when
// the body did not fail).
func (b *pacedBody) failed() error {
	if b.err == nil {
		return nil
	}
	var se *StatusError
	if errors.As(b.err, &se) {
		return se
	}
	return errBodyRead(b.err)
}

// pacedWriter writes a response body under a pace: each piece of at most
// pacedWriteBytes sets the connection's write deadline. Done flushes what
// the server buffered under the last deadline and clears it, so a
// keep-alive connection carries no deadline into its next request; after
// a failed write the deadline stays (the connection is done for).
type pacedWriter struct {
	w  io.Writer
	rc *http.ResponseController
	p  *pace
}

func (w *pacedWriter) Write(b []byte) (int, error) {
	if w.p == nil {
		return w.w.Write(b)
	}
	written := 0
	for len(b) > 0 {
		piece := b[:min(len(b), pacedWriteBytes)]
		_ = w.rc.SetWriteDeadline(w.p.deadline(int64(len(piece))))
		n, err := w.w.Write(piece)
		written += n
		w.p.moved += int64(n)
		if err != nil {
			return written, err
		}
		b = b[len(piece):]
	}
	return written, nil
}

// done ends a transfer that wrote everything.
func (w *pacedWriter) done() error {
	if w.p == nil {
		return nil
	}
	_ = w.rc.SetWriteDeadline(w.p.deadline(0))
	err := w.rc.Flush()
	if err == nil || errors.Is(err, http.ErrNotSupported) {
		_ = w.rc.SetWriteDeadline(time.Time{})
		return nil
	}
	return err
}
