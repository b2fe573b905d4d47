package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Blob response headers (SPEC §5.9.5).
const (
	// ContentTypeBlob is the content type of a blob stored without one.
	ContentTypeBlob = "application/octet-stream"
	blobCacheCtl    = "private, max-age=0"
	blobVary        = "Authorization, Accept-Encoding"
	// maxGrantBodyBytes bounds an upload-grant request's JSON body.
	maxGrantBodyBytes = 16 << 10
	// BlobZstdMaxWindow bounds the window of a zstd-encoded blob upload
	// (the size RFC 8878 asks every decoder to support): the decoder
	// allocates the frame's window up front, so a larger one is refused
	// (413) rather than allocated.
	BlobZstdMaxWindow = 8 << 20
	// gzipDecoderBytes and zstdDecoderBytes are what a blob upload's
	// decoder holds: flate's window and tables; the zstd window, its
	// block ring and tables.
	gzipDecoderBytes = 64 << 10
	zstdDecoderBytes = BlobZstdMaxWindow + 512<<10
	// blobCopyBytes is the copy buffer of a download.
	blobCopyBytes = 32 << 10
)

// BlobUploadEndpoint serves PUT <mount>/blobs/{blobId} (SPEC §5.9.3): host
// authentication, then the body streamed to the store with its
// Content-Encoding undone; the store verifies the content address and the
// size cap as it reads (nothing buffers the whole body here). 200 with an
// empty body on success, a new blob or one already stored. The upload is
// bounded like a /sync body: its buffers are reserved on the in-flight
// body budget (429 sync.rate_limited when it is full) and its body must
// arrive at the transfer pace (408, nothing stored, when it does not).
func (t *Transport) BlobUploadEndpoint(auth ports.Authenticator, svc ports.BlobService, log *zap.Logger) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ident, err := Authenticate(r, auth, t.limits)
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		u := ports.BlobUploadRequest{BlobID: r.PathValue(PathBlobID), MediaType: mediaType(r)}
		err = t.receiveBlob(w, r, svc, u, func(body io.Reader, length int64) error {
			u.ByteLength = length
			return svc.Upload(r.Context(), ident, u, body)
		})
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	})
}

// receiveBlob runs one upload's body: the store's buffers and the
// decoder's are reserved on the in-flight body budget until it ends, the
// body is read under the transfer pace with its Content-Encoding undone,
// and store consumes it. A body that failed (not in time, cut off) is
// answered as such whatever the store made of the failure; the store
// keeps nothing of it.
func (t *Transport) receiveBlob(w http.ResponseWriter, r *http.Request, svc ports.BlobService, u ports.BlobUploadRequest, store func(body io.Reader, length int64) error) error {
	coding, err := requestCoding(r.Header.Values("Content-Encoding"))
	if err != nil {
		return err
	}
	u.ByteLength = -1
	if coding == "identity" && r.ContentLength >= 0 {
		u.ByteLength = r.ContentLength
	}
	lease := t.limiter.Lease()
	defer lease.Release()
	if err := lease.reserve(svc.UploadBufferBytes(u) + decoderBytes(coding)); err != nil {
		return err
	}
	wire := &pacedBody{r: http.NoBody, rc: http.NewResponseController(w), p: t.newPace()}
	if r.Body != nil {
		wire.r = r.Body
	}
	body, err := openBlobBody(r, coding, wire)
	if err == nil {
		defer func() { _ = body.Close() }()
		err = store(body, u.ByteLength)
	}
	if ferr := wire.failed(); ferr != nil {
		// The connection's read side is spent (a deadline passed or
		// the client went): answer, then close.
		w.Header().Set("Connection", "close")
		return ferr
	}
	return err
}

// decoderBytes is what the decoder of a blob body in coding holds.
func decoderBytes(coding string) int64 {
	switch coding {
	case "gzip":
		return gzipDecoderBytes
	case "zstd":
		return zstdDecoderBytes
	}
	return 0
}

// BlobUploadGrantEndpoint serves POST <mount>/blobs/{blobId}/upload-grant
// (SPEC §5.9.3): {"byteLength":n,"mediaType"?} in, and out
// {"url","urlExpiresAtMs"}, {"present":true}, or {} without presigned
// uploads (the client then PUTs through the server).
func (t *Transport) BlobUploadGrantEndpoint(auth ports.Authenticator, svc ports.BlobService, log *zap.Logger) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ident, err := Authenticate(r, auth, t.limits)
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		req, err := readGrantRequest(r)
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		g, err := svc.UploadGrant(r.Context(), ident, r.PathValue(PathBlobID), req)
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		var out any = struct{}{}
		switch {
		case g.URL != "":
			out = urlAnswer{URL: g.URL, ExpiresAtMs: g.ExpiresAtMs}
		case g.Present:
			out = struct {
				Present bool `json:"present"`
			}{true}
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, out)
	})
}

type urlAnswer struct {
	URL         string `json:"url"`
	ExpiresAtMs int64  `json:"urlExpiresAtMs"`
}

// readGrantRequest parses the grant body: byteLength is required and must
// be an integer (negative or fractional lengths are over any cap, as the
// reference answers them: blob.too_large); mediaType is an optional string.
func readGrantRequest(r *http.Request) (ports.BlobGrantRequest, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxGrantBodyBytes+1))
	if err != nil {
		return ports.BlobGrantRequest{}, errBodyRead(err)
	}
	if len(raw) > maxGrantBodyBytes {
		return ports.BlobGrantRequest{}, errTooLarge("upload-grant body", maxGrantBodyBytes)
	}
	var body struct {
		ByteLength json.RawMessage `json:"byteLength"`
		MediaType  *string         `json:"mediaType"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil || dec.More() {
		return ports.BlobGrantRequest{}, syncerr.New(syncerr.InvalidRequest).WithMessage(`upload-grant body must be {"byteLength": <int>, "mediaType"?: <string>}`)
	}
	num := json.Number(body.ByteLength)
	if len(body.ByteLength) == 0 || (body.ByteLength[0] != '-' && (body.ByteLength[0] < '0' || body.ByteLength[0] > '9')) {
		return ports.BlobGrantRequest{}, syncerr.New(syncerr.InvalidRequest).WithMessage("upload-grant body needs byteLength, a number")
	}
	n, err := num.Int64()
	if err != nil {
		// 1e3 is an integer too; a fraction, or a length past int64, is
		// over every cap.
		f, ferr := num.Float64()
		if n = math.MaxInt64; ferr == nil && f == math.Trunc(f) && f >= 0 && f < math.MaxInt64 {
			n = int64(f)
		}
	}
	if n < 0 {
		n = math.MaxInt64
	}
	g := ports.BlobGrantRequest{ByteLength: n}
	if body.MediaType != nil {
		g.MediaType = *body.MediaType
	}
	return g, nil
}

// BlobDownloadEndpoint serves GET <mount>/blobs/{blobId} (SPEC §5.9.5):
// host authentication and re-authorization against the referencing rows,
// then either {"url","urlExpiresAtMs"} (presign configured: the bytes are
// not streamed) or the bytes with the stored media type, ETag
// "<blobId>", 304 on a matching If-None-Match, and single byte ranges
// (206, or 416 past the end).
func (t *Transport) BlobDownloadEndpoint(auth ports.Authenticator, svc ports.BlobService, log *zap.Logger) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ident, err := Authenticate(r, auth, t.limits)
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		d, err := svc.Download(r.Context(), ident, r.PathValue(PathBlobID))
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		if d.URL != "" {
			h := w.Header()
			h.Set("ETag", `"`+d.Info.BlobID+`"`)
			h.Set("Cache-Control", blobCacheCtl)
			h.Set("Vary", blobVary)
			writeJSON(w, urlAnswer{URL: d.URL, ExpiresAtMs: d.ExpiresAtMs})
			return
		}
		t.serveBlob(w, r, svc, d.Info, log)
	})
}

// BlobObjectGetEndpoint serves GET <mount>/blob-objects/{blobId}, the
// native presigned download URL: its query is the whole grant (no host
// authentication, SPEC §5.4 applied to §5.9.5).
func (t *Transport) BlobObjectGetEndpoint(svc ports.BlobService, log *zap.Logger) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, err := svc.GetSigned(r.Context(), r.PathValue(PathBlobID), r.URL.Query())
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		t.serveBlob(w, r, svc, info, log)
	})
}

// BlobObjectPutEndpoint serves PUT <mount>/blob-objects/{blobId}, the
// native presigned upload URL of an upload grant: its query is the whole
// grant and binds the one length it accepts; the body is verified against
// the content address as it is stored, like a direct upload.
func (t *Transport) BlobObjectPutEndpoint(svc ports.BlobService, log *zap.Logger) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		blobID := r.PathValue(PathBlobID)
		u := ports.BlobUploadRequest{BlobID: blobID, MediaType: mediaType(r)}
		err := t.receiveBlob(w, r, svc, u, func(body io.Reader, length int64) error {
			return svc.PutSigned(r.Context(), blobID, r.URL.Query(), length, body)
		})
		if err != nil {
			refuseBlob(w, log, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	})
}

// serveBlob streams an authorized blob: the whole of it, or one byte
// range of it, with the store's buffers reserved on the in-flight body
// budget (429 sync.rate_limited when it is full) and the bytes written at
// the transfer pace (a reader that stops reading is cut off).
func (t *Transport) serveBlob(w http.ResponseWriter, r *http.Request, svc ports.BlobService, info ports.BlobInfo, log *zap.Logger) {
	h := w.Header()
	etag := `"` + info.BlobID + `"`
	h.Set("ETag", etag)
	h.Set("Cache-Control", blobCacheCtl)
	h.Set("Vary", blobVary)
	h.Set("Accept-Ranges", "bytes")
	if etagMatches(r.Header.Values("If-None-Match"), info.BlobID) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	size := info.ByteLength
	offset, length, status := int64(0), size, http.StatusOK
	if rng := r.Header.Get("Range"); rng != "" && ifRangeHolds(r, etag) {
		start, end, ok, satisfiable := parseRange(rng, size)
		switch {
		case ok && !satisfiable:
			for _, k := range []string{"ETag", "Cache-Control", "Vary", "Accept-Ranges"} {
				h.Del(k)
			}
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
			WriteTransportError(w, &StatusError{Status: http.StatusRequestedRangeNotSatisfiable,
				Err: syncerr.New(syncerr.InvalidRequest).WithMessage("requested range not satisfiable")})
			return
		case ok:
			offset, length, status = start, end-start+1, http.StatusPartialContent
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, size))
		}
	}
	lease := t.limiter.Lease()
	defer lease.Release()
	err := lease.reserve(svc.DownloadBufferBytes(info, length) + blobCopyBytes)
	var rc io.ReadCloser
	if err == nil {
		rc, err = svc.Open(r.Context(), info, offset, length)
	}
	if err != nil {
		for _, k := range []string{"ETag", "Cache-Control", "Vary", "Accept-Ranges", "Content-Range"} {
			h.Del(k)
		}
		refuseBlob(w, log, err)
		return
	}
	defer func() { _ = rc.Close() }()
	ct := info.MediaType
	if ct == "" {
		ct = ContentTypeBlob
	}
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	out := &pacedWriter{w: w, rc: http.NewResponseController(w), p: t.newPace()}
	sw := &statusStart{w: w, out: out, status: status}
	if _, err := io.Copy(sw, rc); err != nil {
		if !sw.started {
			for _, k := range []string{"ETag", "Cache-Control", "Vary", "Accept-Ranges", "Content-Range", "Content-Length", "X-Content-Type-Options"} {
				h.Del(k)
			}
			log.Error("blob read failed", zap.String("blob", info.BlobID), zap.Error(err))
			WriteError(w, syncerr.Wrap(syncerr.InternalError, err))
			return
		}
		log.Debug("blob download interrupted", zap.String("blob", info.BlobID), zap.Error(err))
		return
	}
	if !sw.started {
		w.WriteHeader(status) // an empty blob or range
	}
	if err := out.done(); err != nil {
		log.Debug("blob download interrupted", zap.String("blob", info.BlobID), zap.Error(err))
	}
}

// statusStart sends status with the first byte written to out, so a read
// that fails before any byte can still be answered as an error.
type statusStart struct {
	w       http.ResponseWriter
	out     io.Writer
	status  int
	started bool
}

func (s *statusStart) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !s.started {
		s.started = true
		s.w.WriteHeader(s.status)
	}
	return s.out.Write(p)
}

// ifRangeHolds applies If-Range (RFC 9110 §13.1.5): a range is served only
// when the validator is the blob's strong ETag; dates never match (a blob
// has no modification time to compare).
func ifRangeHolds(r *http.Request, etag string) bool {
	v := r.Header.Get("If-Range")
	return v == "" || v == etag
}

// parseRange reads a Range header of one byte range (RFC 9110 §14.1.2)
// against a body of size bytes. ok is false for anything else (several
// ranges, other units, a malformed value): the header is then ignored and
// the whole body served, as the RFC allows. A well-formed range outside
// the body is unsatisfiable.
func parseRange(v string, size int64) (start, end int64, ok, satisfiable bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(v), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false, false
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false, false
	}
	switch {
	case first == "": // suffix: the last n bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, false, false
		}
		if n == 0 || size == 0 {
			return 0, 0, true, false
		}
		return max(size-n, 0), size - 1, true, true
	default:
		s, err := strconv.ParseInt(first, 10, 64)
		if err != nil || s < 0 {
			return 0, 0, false, false
		}
		e := size - 1
		if last != "" {
			if e, err = strconv.ParseInt(last, 10, 64); err != nil || e < s {
				return 0, 0, false, false
			}
			e = min(e, size-1)
		}
		if s >= size {
			return 0, 0, true, false
		}
		return s, e, true, true
	}
}

// openBlobBody returns the request body, read through src (the paced
// r.Body), with its Content-Encoding (coding) undone. Read failures
// become the transport's 400 (corrupt encoding) and 408/400 (the client
// stopped sending); the size cap is the blob store's, on decoded bytes.
func openBlobBody(r *http.Request, coding string, src io.Reader) (io.ReadCloser, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	wire := &cappedReader{r: src, remaining: math.MaxInt64 - 1, wrapErr: errBodyRead}
	switch coding {
	case "identity":
		return &body{Reader: wire, closers: []io.Closer{r.Body}}, nil
	case "gzip":
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return nil, decodeErr(err)
		}
		return &body{Reader: &cappedReader{r: zr, remaining: math.MaxInt64 - 1, wrapErr: decodeErr}, closers: []io.Closer{zr, r.Body}}, nil
	default: // zstd
		zr, err := zstd.NewReader(wire, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(BlobZstdMaxWindow))
		if err != nil {
			return nil, decodeErr(err)
		}
		return &body{Reader: &cappedReader{r: zr, remaining: math.MaxInt64 - 1, wrapErr: decodeErr}, closers: []io.Closer{zstdCloser{zr}, r.Body}}, nil
	}
}

// mediaType is the upload's Content-Type, "" when absent.
func mediaType(r *http.Request) string { return strings.TrimSpace(r.Header.Get("Content-Type")) }

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", ContentTypeJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// refuseBlob answers err (a *StatusError keeps its status) and logs what
// is not a plain refusal.
func refuseBlob(w http.ResponseWriter, log *zap.Logger, err error) {
	setRetryAfter(w, err)
	pub := WriteTransportError(w, err)
	if pub != nil && pub.Code != syncerr.InternalError {
		log.Debug("blob request refused", zap.String("code", string(pub.Code)))
		return
	}
	log.Error("blob request failed", zap.Error(err))
}

func orNop(log *zap.Logger) *zap.Logger {
	if log == nil {
		return zap.NewNop()
	}
	return log
}
