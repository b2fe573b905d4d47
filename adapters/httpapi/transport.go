package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// ContentTypeSync is the content type of SSP2 request and response bodies
// (SPEC §1.1).
const ContentTypeSync = "application/vnd.syncular.sync.v2"

// Transport defaults.
const (
	DefaultMaxBodyBytes        = 16 << 20
	DefaultMaxDecodedBodyBytes = 64 << 20
	DefaultCompressMinBytes    = 1024
	DefaultBodyReadTimeout     = 30 * time.Second
)

// InitialBodyBufferBytes is the first buffer of a request body; it grows
// with what actually arrives, never to a declared Content-Length up
// front. It is small because a slow client holds it for as long as its
// body takes.
const InitialBodyBufferBytes = 512

// TransportOptions configure the body handling of the sync routes.
type TransportOptions struct {
	// MaxBodyBytes caps the request body as sent, before any
	// Content-Encoding is undone (default 16 MiB). Larger bodies are 413.
	MaxBodyBytes int64
	// MaxDecodedBodyBytes caps the request body after decompression
	// (default 64 MiB), so a small compressed body cannot expand without
	// bound. Larger bodies are 413.
	MaxDecodedBodyBytes int64
	// CompressMinBytes is the smallest response body worth compressing
	// (default 1024; negative compresses everything). Smaller bodies go
	// out as identity even when the client accepts an encoding.
	CompressMinBytes int
	// GzipLevel is the gzip level (default gzip.DefaultCompression).
	GzipLevel int
	// ZstdLevel is the zstd level (default zstd.SpeedDefault).
	ZstdLevel zstd.EncoderLevel
	// Limits bound the identity an authenticator returns (zero: defaults).
	Limits limits.Limits
	// BodyReadTimeout bounds how long SyncEndpoint waits for a request
	// body to arrive, from the handler's start (default 30 s; negative:
	// no bound). It is a read deadline on the connection, cleared once the
	// body is read, so a long response is never cut by it. A blob
	// transfer (upload body or download) must progress within it on every
	// read or write, and keep up with BlobMinRate after it (see pace).
	BodyReadTimeout time.Duration
	// BlobMinRate is the average rate, in bytes per second, a blob
	// transfer must keep after BodyReadTimeout of grace (default
	// DefaultBlobMinRate).
	BlobMinRate int64
	// Limiter, when set, bounds SyncEndpoint's in-flight requests and the
	// body memory they hold, and the buffer memory of blob transfers.
	Limiter *Limiter
	// Now is the clock of the body deadline (default time.Now).
	Now func() time.Time
	// SegmentCacheBytes bounds the compressed segment bodies kept for
	// later downloads (0 → DefaultSegmentCacheBytes; negative: none).
	SegmentCacheBytes int64
}

// Transport reads sync request bodies and writes encoded responses with
// the limits and encodings of SPEC §1.3. It is safe for concurrent use;
// it pools its compressors.
type Transport struct {
	maxBody    int64
	maxDecoded int64
	minBytes   int
	gzipLevel  int
	zstdLevel  zstd.EncoderLevel
	limits     limits.Limits
	gzipPool   sync.Pool
	zstdPool   sync.Pool

	bodyTimeout time.Duration
	blobRate    int64
	limiter     *Limiter
	now         func() time.Time
	segBodies   *segmentBodies
}

// NewTransport validates opts and builds a Transport.
func NewTransport(opts TransportOptions) (*Transport, error) {
	t := &Transport{
		maxBody:    opts.MaxBodyBytes,
		maxDecoded: opts.MaxDecodedBodyBytes,
		minBytes:   opts.CompressMinBytes,
		gzipLevel:  opts.GzipLevel,
		zstdLevel:  opts.ZstdLevel,
		limits:     opts.Limits.WithDefaults(),

		bodyTimeout: opts.BodyReadTimeout,
		blobRate:    opts.BlobMinRate,
		limiter:     opts.Limiter,
		now:         opts.Now,
	}
	switch {
	case t.bodyTimeout == 0:
		t.bodyTimeout = DefaultBodyReadTimeout
	case t.bodyTimeout < 0:
		t.bodyTimeout = 0
	}
	if t.now == nil {
		t.now = time.Now
	}
	switch {
	case t.blobRate == 0:
		t.blobRate = DefaultBlobMinRate
	case t.blobRate < 0:
		return nil, errors.New("httpapi: the blob transfer rate must be positive")
	}
	switch {
	case opts.SegmentCacheBytes == 0:
		t.segBodies = newSegmentBodies(DefaultSegmentCacheBytes)
	case opts.SegmentCacheBytes > 0:
		t.segBodies = newSegmentBodies(opts.SegmentCacheBytes)
	}
	if t.maxBody == 0 {
		t.maxBody = DefaultMaxBodyBytes
	}
	if t.maxDecoded == 0 {
		t.maxDecoded = DefaultMaxDecodedBodyBytes
	}
	if t.maxBody < 0 || t.maxDecoded < 0 {
		return nil, errors.New("httpapi: body limits must be positive")
	}
	switch {
	case t.minBytes == 0:
		t.minBytes = DefaultCompressMinBytes
	case t.minBytes < 0:
		t.minBytes = 0
	}
	if t.gzipLevel == 0 {
		t.gzipLevel = gzip.DefaultCompression
	}
	if t.gzipLevel < gzip.HuffmanOnly || t.gzipLevel > gzip.BestCompression {
		return nil, fmt.Errorf("httpapi: gzip level %d out of range", t.gzipLevel)
	}
	if t.zstdLevel == 0 {
		t.zstdLevel = zstd.SpeedDefault
	}
	if t.zstdLevel < zstd.SpeedFastest || t.zstdLevel > zstd.SpeedBestCompression {
		return nil, fmt.Errorf("httpapi: zstd level %d out of range", t.zstdLevel)
	}
	return t, nil
}

// StatusError is a catalog error answered with an HTTP status other than
// its catalog status: the transport's 413 and 415 refusals, which the spec
// requires as statuses but whose catalog code (sync.invalid_request) maps
// to 400.
type StatusError struct {
	Status int
	Err    *syncerr.Error
}

func (e *StatusError) Error() string { return e.Err.Error() }

// Unwrap returns the catalog error.
func (e *StatusError) Unwrap() error { return e.Err }

// WriteTransportError answers err as §10.1 JSON like WriteError, honouring
// the status of a *StatusError in its chain.
func WriteTransportError(w http.ResponseWriter, err error) *syncerr.Error {
	var se *StatusError
	if !errors.As(err, &se) || se.Err == nil {
		return WriteError(w, err)
	}
	return WriteError(&statusOverride{ResponseWriter: w, status: se.Status}, se.Err)
}

// statusOverride replaces the status WriteError sends.
type statusOverride struct {
	http.ResponseWriter
	status int
}

func (s *statusOverride) WriteHeader(int) { s.ResponseWriter.WriteHeader(s.status) }

// errUnsupportedMediaType is the 415 of SPEC §1.1. The catalog code is
// sync.invalid_request ("bad content type", SPEC §10.2).
func errUnsupportedMediaType(reason string) *StatusError {
	return &StatusError{Status: http.StatusUnsupportedMediaType, Err: syncerr.Newf(syncerr.InvalidRequest, "%s", reason).
		WithMessage("unsupported content type; send " + ContentTypeSync)}
}

func errUnsupportedEncoding(coding string) *StatusError {
	return &StatusError{Status: http.StatusUnsupportedMediaType, Err: syncerr.Newf(syncerr.InvalidRequest,
		"unsupported Content-Encoding %q", coding).WithMessage("unsupported content encoding; send gzip, zstd or identity")}
}

// errTooLarge is the 413 for a body past one of the limits.
func errTooLarge(what string, limit int64) *StatusError {
	return &StatusError{Status: http.StatusRequestEntityTooLarge, Err: syncerr.Newf(syncerr.InvalidRequest,
		"%s exceeds %d bytes", what, limit).WithMessage("request body too large").
		WithDetails(map[string]any{"maxBytes": limit})}
}

func errMalformedBody(cause error) *StatusError {
	return &StatusError{Status: http.StatusBadRequest, Err: syncerr.Wrap(syncerr.InvalidRequest, cause).
		WithMessage("malformed request body encoding")}
}

func errBodyRead(cause error) error {
	if errors.Is(cause, os.ErrDeadlineExceeded) {
		return &StatusError{Status: http.StatusRequestTimeout, Err: syncerr.Wrap(syncerr.InvalidRequest, cause).
			WithMessage("request body not received in time")}
	}
	return &StatusError{Status: http.StatusBadRequest, Err: syncerr.Wrap(syncerr.InvalidRequest, cause).
		WithMessage("request body could not be read")}
}

// CheckSyncContentType refuses a request whose Content-Type is not
// ContentTypeSync (parameters ignored) with HTTP 415 (SPEC §1.1).
func CheckSyncContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return errUnsupportedMediaType("no Content-Type")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return errUnsupportedMediaType(fmt.Sprintf("malformed Content-Type %q", ct))
	}
	if mt != ContentTypeSync {
		return errUnsupportedMediaType(fmt.Sprintf("Content-Type %q", mt))
	}
	return nil
}

// ReadSyncRequest is the whole request-body step of POST /sync: it checks
// the content type, then reads the decoded body within the limits. Every
// failure is a *StatusError for WriteTransportError.
func (t *Transport) ReadSyncRequest(r *http.Request) ([]byte, error) {
	return t.readSyncRequest(r, nil)
}

func (t *Transport) readSyncRequest(r *http.Request, lease *Lease) ([]byte, error) {
	if err := CheckSyncContentType(r); err != nil {
		return nil, err
	}
	return t.readBody(r, lease)
}

// ReadBody reads r's body with its Content-Encoding undone, refusing a
// body past MaxBodyBytes as sent or past MaxDecodedBodyBytes decoded. Its
// buffer starts small and grows with the bytes that arrive: a declared
// Content-Length only caps the growth.
func (t *Transport) ReadBody(r *http.Request) ([]byte, error) { return t.readBody(r, nil) }

// readBody is ReadBody charging every buffer to lease (nil: no bound).
func (t *Transport) readBody(r *http.Request, lease *Lease) ([]byte, error) {
	body, err := t.OpenBody(r)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	ceiling := t.maxDecoded
	if len(r.Header.Values("Content-Encoding")) == 0 {
		ceiling = min(t.maxBody, t.maxDecoded)
		if r.ContentLength > 0 {
			ceiling = min(ceiling, r.ContentLength)
		}
	}
	return readGrowing(body, ceiling, lease)
}

// readGrowing reads r to EOF into a buffer that doubles as it fills, up
// to ceiling (the body limit, or the declared length of an identity
// body, so an exact-length body is never copied into a buffer twice its
// size). Each buffer's capacity is reserved on lease before it is
// allocated; the one it replaces is released, so a body holds at most
// its ceiling of the bound.
func readGrowing(r io.Reader, ceiling int64, lease bodyBudget) ([]byte, error) {
	size := min(int64(InitialBodyBufferBytes), max(ceiling, 1))
	if err := lease.reserve(size); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			var probe []byte
			if int64(cap(buf)) >= ceiling {
				// Full at the ceiling: only EOF should follow. Past a
				// limit the capped reader fails the probe itself.
				var one [1]byte
				n, err := readSome(r, one[:])
				if n == 0 {
					if err == io.EOF {
						return buf, nil
					}
					return nil, err
				}
				probe, ceiling = one[:n], math.MaxInt64
			}
			next := min(2*int64(cap(buf)), max(ceiling, int64(cap(buf)+len(probe))))
			lease.unreserve(int64(cap(buf)))
			if err := lease.reserve(next); err != nil {
				return nil, err
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = append(grown, probe...)
			continue
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// bodyBudget is what a body buffer's growth is reserved on: a request's
// *Lease.
type bodyBudget interface {
	reserve(n int64) error
	unreserve(n int64)
}

// readSome reads until at least one byte or an error arrives.
func readSome(r io.Reader, p []byte) (int, error) {
	for {
		n, err := r.Read(p)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// OpenBody returns r's body as a stream with its Content-Encoding (gzip,
// zstd or identity) undone. Reads fail with a *StatusError once a limit is
// passed or the encoding is corrupt. A declared Content-Length past the
// limit fails at once.
func (t *Transport) OpenBody(r *http.Request) (io.ReadCloser, error) {
	coding, err := requestCoding(r.Header.Values("Content-Encoding"))
	if err != nil {
		return nil, err
	}
	if r.ContentLength > t.maxBody {
		return nil, errTooLarge("request body", t.maxBody)
	}
	if r.Body == nil || r.Body == http.NoBody {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	wire := &cappedReader{r: r.Body, what: "request body", limit: t.maxBody, remaining: t.maxBody, wrapErr: errBodyRead}
	switch coding {
	case "identity":
		wire.limit = min(t.maxBody, t.maxDecoded)
		wire.remaining = wire.limit
		return &body{Reader: wire, closers: []io.Closer{r.Body}}, nil
	case "gzip":
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return nil, decodeErr(err)
		}
		return &body{
			Reader:  &cappedReader{r: zr, what: "decoded request body", limit: t.maxDecoded, remaining: t.maxDecoded, wrapErr: decodeErr},
			closers: []io.Closer{zr, r.Body},
		}, nil
	default: // zstd
		zr, err := zstd.NewReader(wire,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(t.maxDecoded)))
		if err != nil {
			return nil, decodeErr(err)
		}
		return &body{
			Reader:  &cappedReader{r: zr, what: "decoded request body", limit: t.maxDecoded, remaining: t.maxDecoded, wrapErr: decodeErr},
			closers: []io.Closer{zstdCloser{zr}, r.Body},
		}, nil
	}
}

// decodeErr classifies an error from a decompressor: limit errors keep
// their 413, zstd's own size refusals become 413, the rest is a 400.
func decodeErr(err error) error {
	var se *StatusError
	if errors.As(err, &se) {
		return se
	}
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return &StatusError{Status: http.StatusRequestEntityTooLarge, Err: syncerr.Wrap(syncerr.InvalidRequest, err).
			WithMessage("request body too large")}
	}
	return errMalformedBody(err)
}

// requestCoding returns the single content coding of a request body.
// Stacked codings are refused rather than undone in turn: no client
// sends them, and each layer would need its own bound.
func requestCoding(values []string) (string, error) {
	var codings []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" {
				codings = append(codings, c)
			}
		}
	}
	switch len(codings) {
	case 0:
		return "identity", nil
	case 1:
	default:
		return "", errUnsupportedEncoding(strings.Join(codings, ", "))
	}
	switch codings[0] {
	case "identity":
		return "identity", nil
	case "gzip", "x-gzip":
		return "gzip", nil
	case "zstd":
		return "zstd", nil
	}
	return "", errUnsupportedEncoding(codings[0])
}

// cappedReader fails with a 413 once more than remaining bytes were
// read, and passes other read errors through wrapErr.
type cappedReader struct {
	r io.Reader
	// what and limit name the 413 a read past limit fails with, built
	// only then (every request opens a body).
	what      string
	limit     int64
	remaining int64
	wrapErr   func(error) error
	err       error
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if int64(len(p)) > c.remaining+1 {
		p = p[:c.remaining+1]
	}
	n, err := c.r.Read(p)
	if int64(n) > c.remaining {
		c.err = errTooLarge(c.what, c.limit)
		return 0, c.err
	}
	c.remaining -= int64(n)
	if err != nil && err != io.EOF {
		c.err = c.wrapErr(err)
		return n, c.err
	}
	return n, err
}

// body closes its decoder and the request body.
type body struct {
	io.Reader
	closers []io.Closer
}

func (b *body) Close() error {
	var errs []error
	for _, c := range b.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type zstdCloser struct{ d *zstd.Decoder }

func (z zstdCloser) Close() error { z.d.Close(); return nil }

// Unwrap lets noteCode reach the router's writer.
func (s *statusOverride) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Inflight is the transport's in-flight bounds as a port: socket rounds
// and socket messages share them with the /sync bodies.
func (t *Transport) Inflight() ports.Inflight { return t.limiter }
