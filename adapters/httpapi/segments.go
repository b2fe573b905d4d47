package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Segment download headers and parameters (SPEC §5.4, §5.5).
const (
	HeaderScopes     = "X-Syncular-Scopes"
	ParamSignedToken = "st"
	// ContentTypeSegment is the content type of segment bytes.
	ContentTypeSegment = "application/octet-stream"
	segmentCacheCtl    = "private, max-age=0"
	segmentVary        = "Authorization, X-Syncular-Scopes, Accept-Encoding"
)

// SegmentEndpoint serves GET <mount>/segments/{segmentId} (SPEC §5.5):
//
//   - with a signed-URL token (?st=), the token is the whole grant: no host
//     authentication runs and the bytes go out uncompressed (§5.4, §5.8);
//   - otherwise the request is authenticated and re-authorized against
//     its X-Syncular-Scopes header, and the bytes are compressed per
//     Accept-Encoding (zstd, gzip, identity); a compressed body is kept
//     for the segment's next download (SegmentCacheBytes).
//
// Both answer ETag "<segmentId>", 304 on a matching If-None-Match, and
// refusals as §10.1 JSON with their catalog status.
func (t *Transport) SegmentEndpoint(auth ports.Authenticator, svc ports.SegmentService, log *zap.Logger) http.Handler {
	if log == nil {
		log = zap.NewNop()
	}
	obs, _ := svc.(ports.SegmentDownloadObserver)
	if obs != nil && !obs.ObservingDownloads() {
		obs = nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue(PathSegmentID)
		var (
			pub    ports.SegmentPublication
			err    error
			signed bool
			ident  ports.Identity
		)
		began := t.now()
		if q := r.URL.Query(); q.Has(ParamSignedToken) {
			signed = true
			pub, err = svc.AuthorizeSigned(r.Context(), id, q.Get(ParamSignedToken))
		} else {
			r, ident, err = Authenticate(r, auth, t.limits)
			if err == nil {
				pub, err = svc.AuthorizeDirect(r.Context(), ident, id, []byte(strings.Join(r.Header.Values(HeaderScopes), ",")))
			}
		}
		if err != nil {
			logSegmentRefusal(log, err)
			WriteError(w, err)
			return
		}
		if obs != nil {
			dl := &ports.SegmentDownload{Publication: pub, Identity: ident, Signed: signed}
			w = &countingWriter{ResponseWriter: w, dl: dl}
			defer func() {
				dl.NotModified = dl.Status == http.StatusNotModified
				dl.Elapsed = t.now().Sub(began)
				obs.SegmentDownloaded(r.Context(), *dl)
			}()
		}
		h := w.Header()
		etag := `"` + pub.SegmentID + `"`
		h.Set("ETag", etag)
		h.Set("Cache-Control", segmentCacheCtl)
		if etagMatches(r.Header.Values("If-None-Match"), pub.SegmentID) {
			h.Set("Vary", segmentVary)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		enc := NegotiateEncoding(strings.Join(r.Header.Values("Accept-Encoding"), ","))
		if !signed && enc != EncodingIdentity {
			if body, ok := t.segBodies.get(pub.SegmentID, enc); ok {
				writeEncodedSegment(w, enc, body)
				return
			}
		}
		rc, size, err := svc.Open(r.Context(), pub)
		if err != nil {
			logSegmentRefusal(log, err)
			h.Del("ETag")
			h.Del("Cache-Control")
			WriteError(w, err)
			return
		}
		defer rc.Close()
		if signed || size < int64(t.minBytes) || enc == EncodingIdentity {
			// Identity: straight to the client with the stored length,
			// nothing buffered (a signed URL is never compressed, and a
			// body below CompressMinBytes goes out as identity).
			streamIdentity(w, pub.SegmentID, rc, size, log)
			return
		}
		if t.segBodies.fits(size) {
			// Compressed whole, kept for the next download of the segment.
			body, err := t.encodeAll(enc, rc)
			if err != nil {
				h.Del("ETag")
				h.Del("Cache-Control")
				log.Error("segment read failed", zap.String("segment", pub.SegmentID), zap.Error(err))
				WriteError(w, syncerr.Wrap(syncerr.InternalError, err))
				return
			}
			t.segBodies.put(pub.SegmentID, enc, body)
			writeEncodedSegment(w, enc, body)
			return
		}
		// Compressed: streamed through the encoder; only a first write
		// below CompressMinBytes is buffered.
		vw := &varyWriter{ResponseWriter: w}
		out := t.Respond(vw, r, http.StatusOK, ContentTypeSegment)
		if _, err := io.Copy(out, rc); err != nil {
			if out.Discard() {
				h.Del("ETag")
				h.Del("Cache-Control")
				log.Error("segment read failed", zap.String("segment", pub.SegmentID), zap.Error(err))
				WriteError(w, syncerr.Wrap(syncerr.InternalError, err))
				return
			}
			log.Debug("segment download interrupted", zap.String("segment", pub.SegmentID), zap.Error(err))
		}
		if err := out.Close(); err != nil {
			log.Debug("segment download interrupted", zap.String("segment", pub.SegmentID), zap.Error(err))
		}
	})
}

// writeEncodedSegment writes a compressed segment body with its length.
func writeEncodedSegment(w http.ResponseWriter, enc Encoding, body []byte) {
	h := w.Header()
	h.Set("Vary", segmentVary)
	h.Set("Content-Type", ContentTypeSegment)
	h.Set("Content-Encoding", string(enc))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// streamIdentity writes a segment's bytes unencoded with Content-Length
// size. A read that fails before the first byte is answered as JSON.
func streamIdentity(w http.ResponseWriter, id string, rc io.Reader, size int64, log *zap.Logger) {
	h := w.Header()
	h.Set("Vary", segmentVary)
	h.Set("Content-Type", ContentTypeSegment)
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	sw := &startWriter{w: w}
	if _, err := io.Copy(sw, rc); err != nil {
		if !sw.started {
			for _, k := range []string{"ETag", "Cache-Control", "Vary", "Content-Length"} {
				h.Del(k)
			}
			log.Error("segment read failed", zap.String("segment", id), zap.Error(err))
			WriteError(w, syncerr.Wrap(syncerr.InternalError, err))
			return
		}
		log.Debug("segment download interrupted", zap.String("segment", id), zap.Error(err))
		return
	}
	if !sw.started {
		w.WriteHeader(http.StatusOK) // an empty segment
	}
}

// startWriter records whether any byte (and so the header) went out.
type startWriter struct {
	w       io.Writer
	started bool
}

func (s *startWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.started = true
	return s.w.Write(p)
}

func logSegmentRefusal(log *zap.Logger, err error) {
	var se *syncerr.Error
	if errors.As(err, &se) && syncerr.Lookup(se.Code).Code == se.Code && se.Code != syncerr.InternalError {
		log.Debug("segment download refused", zap.String("code", string(se.Code)), zap.String("reason", se.Reason))
		return
	}
	log.Error("segment download failed", zap.Error(err))
}

// etagMatches applies If-None-Match (RFC 9110 §13.1.2, weak comparison).
func etagMatches(values []string, id string) bool {
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" {
				return true
			}
			tag = strings.TrimPrefix(tag, "W/")
			if tag == `"`+id+`"` {
				return true
			}
		}
	}
	return false
}

// varyWriter sends the segment Vary list as one header line: the encoded
// response adds Accept-Encoding itself when it commits.
// countingWriter records a download's status, content coding and body
// length for its observer.
type countingWriter struct {
	http.ResponseWriter
	dl *ports.SegmentDownload
}

func (c *countingWriter) WriteHeader(status int) {
	if c.dl.Status == 0 {
		c.dl.Status = status
		c.dl.Encoding = c.Header().Get("Content-Encoding")
		if c.dl.Encoding == "" {
			c.dl.Encoding = string(EncodingIdentity)
		}
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.dl.Status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	n, err := c.ResponseWriter.Write(p)
	c.dl.Bytes += int64(n)
	return n, err
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

type varyWriter struct {
	http.ResponseWriter
}

func (v *varyWriter) WriteHeader(status int) {
	v.Header().Set("Vary", segmentVary)
	v.ResponseWriter.WriteHeader(status)
}

func (v *varyWriter) Write(p []byte) (int, error) { return v.ResponseWriter.Write(p) }

// Unwrap exposes the underlying writer to http.ResponseController.
func (v *varyWriter) Unwrap() http.ResponseWriter { return v.ResponseWriter }
