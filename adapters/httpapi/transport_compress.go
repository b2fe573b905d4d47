package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Encoding is a response content coding.
type Encoding string

// Response encodings, in server preference order (SPEC §1.3: zstd
// preferred, gzip required, identity as the fallback).
const (
	EncodingZstd     Encoding = "zstd"
	EncodingGzip     Encoding = "gzip"
	EncodingIdentity Encoding = "identity"
)

// NegotiateEncoding picks the response encoding for an Accept-Encoding
// header (RFC 9110 §12.5.3): the supported coding with the highest
// q-value, ties broken zstd, gzip, identity. q=0 refuses a coding; "*"
// stands for codings not listed. identity is acceptable unless refused
// and ranks below any coding the client lists with the same weight. An
// absent header, or one refusing everything, gets identity.
func NegotiateEncoding(header string) Encoding {
	if strings.TrimSpace(header) == "" {
		return EncodingIdentity
	}
	q := map[string]float64{}
	for entry := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(entry, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		weight, ok := qValue(params)
		if !ok {
			continue
		}
		if name == "x-gzip" {
			name = "gzip"
		}
		if prev, seen := q[name]; !seen || weight > prev {
			q[name] = weight
		}
	}
	weightOf := func(coding string) (float64, bool) {
		if w, ok := q[coding]; ok {
			return w, true
		}
		w, ok := q["*"]
		return w, ok
	}
	best, bestQ := EncodingIdentity, 0.0
	for _, enc := range []Encoding{EncodingZstd, EncodingGzip} {
		if w, ok := weightOf(string(enc)); ok && w > bestQ {
			best, bestQ = enc, w
		}
	}
	if w, ok := q["identity"]; ok && w > bestQ {
		return EncodingIdentity
	}
	return best
}

// qValue parses the parameters of one Accept-Encoding entry; ok is false
// for a malformed weight, which drops the entry.
func qValue(params string) (float64, bool) {
	for p := range strings.SplitSeq(params, ";") {
		k, v, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || w < 0 || w > 1 {
			return 0, false
		}
		return w, true
	}
	return 1, true
}

// EncodedResponse is a response body compressed per the request's
// Accept-Encoding. Status and headers are committed on the first write
// that reaches CompressMinBytes, on Flush, or on Close; until then the
// handler may still Discard the body and answer an error as JSON (the
// SPEC §1.1 rule: JSON before the first byte, an ERROR frame after).
type EncodedResponse struct {
	t         *Transport
	w         http.ResponseWriter
	status    int
	enc       Encoding
	buf       bytes.Buffer
	committed bool
	closed    bool
	cw        io.Writer // compressor or w once committed
	gz        *gzip.Writer
	zs        *zstd.Encoder
}

// Respond starts a response with status and content type whose body is
// encoded per r's Accept-Encoding. Always Close it.
func (t *Transport) Respond(w http.ResponseWriter, r *http.Request, status int, contentType string) *EncodedResponse {
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	return &EncodedResponse{t: t, w: w, status: status, enc: NegotiateEncoding(strings.Join(r.Header.Values("Accept-Encoding"), ","))}
}

// WriteEncoded writes a complete body with status and content type,
// compressed per r's Accept-Encoding.
func (t *Transport) WriteEncoded(w http.ResponseWriter, r *http.Request, status int, contentType string, body []byte) error {
	resp := t.Respond(w, r, status, contentType)
	if resp.enc == EncodingIdentity || len(body) < t.minBytes {
		resp.buf.Write(body)
		return resp.Close()
	}
	if _, err := resp.Write(body); err != nil {
		_ = resp.Close()
		return err
	}
	return resp.Close()
}

// Encoding returns the negotiated encoding; a body closed below
// CompressMinBytes still goes out as identity.
func (e *EncodedResponse) Encoding() Encoding { return e.enc }

// Committed reports whether status and headers were sent.
func (e *EncodedResponse) Committed() bool { return e.committed }

// Discard drops the buffered body of an uncommitted response, so the
// handler can answer an error instead. It reports false when bytes
// already went out.
func (e *EncodedResponse) Discard() bool {
	if e.committed {
		return false
	}
	e.buf.Reset()
	e.closed = true
	return true
}

var errResponseClosed = errors.New("httpapi: write to a closed response")

// Write buffers p until the body is large enough to compress, then
// streams through the encoder. A write that reaches CompressMinBytes
// commits and goes to the encoder as is, without a copy in the buffer.
func (e *EncodedResponse) Write(p []byte) (int, error) {
	if e.closed {
		return 0, errResponseClosed
	}
	if e.committed {
		return e.cw.Write(p)
	}
	if n := e.buf.Len() + len(p); n < e.t.minBytes || n == 0 {
		e.buf.Write(p)
		return len(p), nil
	}
	if err := e.commit(e.enc, false); err != nil {
		return 0, err
	}
	return e.cw.Write(p)
}

// Flush commits the response and pushes every byte written so far to
// the client.
func (e *EncodedResponse) Flush() error {
	if e.closed {
		return errResponseClosed
	}
	if !e.committed {
		if err := e.commit(e.enc, false); err != nil {
			return err
		}
	}
	var err error
	switch {
	case e.gz != nil:
		err = e.gz.Flush()
	case e.zs != nil:
		err = e.zs.Flush()
	}
	if f, ok := e.w.(http.Flusher); ok && err == nil {
		f.Flush()
	}
	return err
}

// Close finishes the body. A body that never reached CompressMinBytes is
// sent as identity with its Content-Length.
func (e *EncodedResponse) Close() error {
	if e.closed {
		return nil
	}
	if !e.committed {
		enc := e.enc
		if e.buf.Len() < e.t.minBytes {
			enc = EncodingIdentity
		}
		if err := e.commit(enc, true); err != nil {
			e.closed = true
			return err
		}
	}
	e.closed = true
	var err error
	switch {
	case e.gz != nil:
		err = e.gz.Close()
		e.gz.Reset(io.Discard)
		e.t.gzipPool.Put(e.gz)
		e.gz = nil
	case e.zs != nil:
		err = e.zs.Close()
		e.zs.Reset(nil)
		e.t.zstdPool.Put(e.zs)
		e.zs = nil
	}
	return err
}

// commit sends status and headers for enc and writes the buffer. final
// means the buffer is the whole body, so an identity body gets its length.
func (e *EncodedResponse) commit(enc Encoding, final bool) error {
	h := e.w.Header()
	h.Add("Vary", "Accept-Encoding")
	switch enc {
	case EncodingGzip:
		gz, err := e.t.gzipWriter(e.w)
		if err != nil {
			return err
		}
		e.gz, e.cw = gz, gz
	case EncodingZstd:
		zs, err := e.t.zstdWriter(e.w)
		if err != nil {
			return err
		}
		e.zs, e.cw = zs, zs
	default:
		e.cw = e.w
		if final {
			h.Set("Content-Length", strconv.Itoa(e.buf.Len()))
		}
	}
	e.enc = enc
	if enc != EncodingIdentity {
		h.Set("Content-Encoding", string(enc))
		h.Del("Content-Length")
	}
	e.w.WriteHeader(e.status)
	e.committed = true
	if e.buf.Len() > 0 {
		_, err := e.cw.Write(e.buf.Bytes())
		e.buf.Reset()
		return err
	}
	return nil
}

func (t *Transport) gzipWriter(w io.Writer) (*gzip.Writer, error) {
	if gz, ok := t.gzipPool.Get().(*gzip.Writer); ok {
		gz.Reset(w)
		return gz, nil
	}
	return gzip.NewWriterLevel(w, t.gzipLevel)
}

func (t *Transport) zstdWriter(w io.Writer) (*zstd.Encoder, error) {
	if zs, ok := t.zstdPool.Get().(*zstd.Encoder); ok {
		zs.Reset(w)
		return zs, nil
	}
	return zstd.NewWriter(w, zstd.WithEncoderLevel(t.zstdLevel), zstd.WithEncoderConcurrency(1))
}
