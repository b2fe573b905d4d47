// Package blobio holds what every blob store shares (SPEC §5.9): the checks
// of an upload before and while its body streams, the blob.* catalog
// errors, range arithmetic, the encoding of partition names into paths and
// object keys, and the names of staged uploads.
package blobio

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// NotFound is blob.not_found.
func NotFound() error { return syncerr.New(syncerr.BlobNotFound) }

// HashMismatch is blob.hash_mismatch with an internal reason.
func HashMismatch(format string, args ...any) error {
	return syncerr.Newf(syncerr.BlobHashMismatch, format, args...)
}

// TooLarge is blob.too_large with an internal reason.
func TooLarge(format string, args ...any) error {
	return syncerr.Newf(syncerr.BlobTooLarge, format, args...)
}

// Internal wraps an engine or I/O failure: its text stays in the cause,
// the client sees sync.internal_error.
func Internal(store, op string, err error) error {
	return syncerr.Wrap(syncerr.InternalError, fmt.Errorf("%s: %s: %w", store, op, err))
}

// Check refuses an upload before any byte is read: an id that is not a
// content address can name no body (blob.hash_mismatch), and a declared
// length over the cap is blob.too_large (SPEC §5.9.3: the declared
// Content-Length is judged up front).
func Check(u ports.BlobUpload) error {
	if !contentaddr.Valid(u.BlobID) {
		return HashMismatch("blob id %q is not a content address", u.BlobID)
	}
	if u.MaxBytes > 0 && u.ByteLength > u.MaxBytes {
		return TooLarge("declared %d bytes, cap %d", u.ByteLength, u.MaxBytes)
	}
	return nil
}

// Verifier streams an upload's body through the SHA-256 and the byte
// count. Its Read fails with blob.too_large as soon as the count passes
// MaxBytes and with blob.hash_mismatch as soon as it passes a declared
// length, so no store ever buffers an oversized body; it never reads more
// than one byte past either bound from the source. Finish judges the
// whole body. A Read after ctx ended fails with ctx's error, so a
// cancelled request stops streaming.
type Verifier struct {
	ctx context.Context
	u   ports.BlobUpload
	src io.Reader
	h   *contentaddr.Hasher
	n   int64
	eof bool
	err error
}

// NewVerifier wraps r for the upload u (already passed by Check).
func NewVerifier(ctx context.Context, r io.Reader, u ports.BlobUpload) *Verifier {
	bound := int64(-1)
	if u.MaxBytes > 0 {
		bound = u.MaxBytes
	}
	if u.ByteLength >= 0 && (bound < 0 || u.ByteLength < bound) {
		bound = u.ByteLength
	}
	if bound >= 0 {
		r = io.LimitReader(r, bound+1)
	}
	return &Verifier{ctx: ctx, u: u, src: r, h: contentaddr.NewHasher()}
}

// Read implements io.Reader.
func (v *Verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if err := v.ctx.Err(); err != nil {
		v.err = err
		return 0, err
	}
	n, err := v.src.Read(p)
	v.n += int64(n)
	_, _ = v.h.Write(p[:n])
	if v.u.MaxBytes > 0 && v.n > v.u.MaxBytes {
		v.err = TooLarge("body passed the cap of %d bytes", v.u.MaxBytes)
		return 0, v.err
	}
	if v.u.ByteLength >= 0 && v.n > v.u.ByteLength {
		v.err = HashMismatch("body longer than the declared %d bytes", v.u.ByteLength)
		return 0, v.err
	}
	if err == io.EOF {
		v.eof = true
	} else if err != nil {
		v.err = err
	}
	return n, err
}

// Count is the number of body bytes read so far.
func (v *Verifier) Count() int64 { return v.n }

// Ended reports whether Read reached the end of the body.
func (v *Verifier) Ended() bool { return v.eof }

// Err is the failure Read reported (a blob.* error, or the source's own),
// or nil.
func (v *Verifier) Err() error { return v.err }

// Finish judges the body once the store has read what it wanted: the body
// must end here (one byte more is read to see it does), its length must
// equal a declared length and its content address must be the blob id.
func (v *Verifier) Finish() error {
	if v.err != nil {
		return v.err
	}
	if !v.eof {
		var one [1]byte
		for !v.eof && v.err == nil {
			n, _ := v.Read(one[:])
			if n > 0 && v.err == nil {
				v.err = HashMismatch("body continues past the %d bytes stored", v.n-1)
			}
		}
		if v.err != nil {
			return v.err
		}
	}
	if v.u.ByteLength >= 0 && v.n != v.u.ByteLength {
		v.err = HashMismatch("body of %d bytes, declared %d", v.n, v.u.ByteLength)
		return v.err
	}
	if sum := v.h.Sum(); sum != v.u.BlobID {
		v.err = HashMismatch("body hashes to %s", sum)
		return v.err
	}
	return nil
}

// Range resolves an Open range against a blob of size bytes: length -1,
// or one past the end, reads to the end. A negative offset or one past the
// end is the caller's bug (the port lets it refuse those first).
func Range(size, offset, length int64) (int64, int64, error) {
	if offset < 0 || offset > size {
		return 0, 0, syncerr.Newf(syncerr.InternalError, "blob range offset %d outside %d bytes", offset, size)
	}
	if length < 0 || length > size-offset {
		length = size - offset
	}
	return offset, length, nil
}

// partitionEncoding is lowercase base32 without padding: only [a-z2-7],
// so a partition name is one path segment or key segment on every file
// system, case-insensitive ones included.
var partitionEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// maxEncodedPartition keeps an encoded name well under the 255-byte file
// name limit.
const maxEncodedPartition = 200

// PartitionKey is the path or key segment of a partition: "p-" and the
// base32 of the name, or for a name too long for that, "h-" and the hex
// SHA-256 of the name (stores record the name itself with each blob and
// compare it on read).
func PartitionKey(partition string) string {
	if partitionEncoding.EncodedLen(len(partition)) <= maxEncodedPartition {
		return "p-" + partitionEncoding.EncodeToString([]byte(partition))
	}
	sum := sha256.Sum256([]byte(partition))
	return "h-" + hex.EncodeToString(sum[:])
}

// IDHex is the hex part of a content address.
func IDHex(blobID string) string { return strings.TrimPrefix(blobID, contentaddr.Prefix) }

// StagingName names a staged upload: the upload's time on the app clock
// (so a later sweep can tell abandoned uploads without reading another
// clock) and a random suffix.
func StagingName(startedAtMs int64) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return strconv.FormatInt(startedAtMs, 10) + "-" + hex.EncodeToString(b[:]), nil
}

// StagingStarted returns the start time a StagingName carries.
func StagingStarted(name string) (int64, bool) {
	ms, _, ok := strings.Cut(name, "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(ms, 10, 64)
	return v, err == nil
}

// SweepGate spaces out the sweeps of abandoned staged uploads, judged on
// the app-clock times uploads carry: Due reports true at most once per
// interval.
type SweepGate struct{ last atomic.Int64 }

// Due reports whether a sweep should run at nowMs, claiming it if so.
func (g *SweepGate) Due(nowMs, intervalMs int64) bool {
	last := g.last.Load()
	if last != 0 && nowMs-last < intervalMs && nowMs >= last {
		return false
	}
	return g.last.CompareAndSwap(last, nowMs)
}

// ErrStagingLost is the cause of a Put whose staged upload was swept as
// abandoned while it was still running (an app clock that jumped ahead).
var ErrStagingLost = errors.New("the staged upload was removed before it was published")
