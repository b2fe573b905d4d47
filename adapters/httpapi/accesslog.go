package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// RequestIDHeader carries the request id: taken from the request when it
// is a plausible id, generated otherwise, and echoed on the answer.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDBytes bounds a client's request id.
const maxRequestIDBytes = 128

// requestID returns the request's id when it is printable ASCII without
// spaces and short enough to log, or a new random one.
func requestID(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); id != "" && len(id) <= maxRequestIDBytes {
		ok := true
		for i := 0; i < len(id) && ok; i++ {
			ok = id[i] > ' ' && id[i] < 0x7f && id[i] != '"' && id[i] != '\\'
		}
		if ok {
			return id
		}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// requestInfo is what the access log line says about a request beyond its
// route and status; handlers fill it in through the request's context.
type requestInfo struct {
	actor, partition string
}

type requestInfoKey struct{}

func withRequestInfo(ctx context.Context, in *requestInfo) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, in)
}

// noteIdentity records the authenticated identity for the access log.
func noteIdentity(ctx context.Context, id ports.Identity) {
	if in, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		in.actor, in.partition = id.ActorID, id.Partition
	}
}

// noteCode records the catalog code answered, through any writer that
// unwraps to the router's.
func noteCode(w http.ResponseWriter, code syncerr.Code) {
	for w != nil {
		if sw, ok := w.(*statusWriter); ok {
			sw.errCode = code
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// countingBody counts the request body bytes read.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// accessFields are the fields of a request's access log line. Never the
// credentials: no headers, no query string (it may carry a token).
func accessFields(req *http.Request, route Route, sw *statusWriter, in *requestInfo, body *countingBody, id string) []zap.Field {
	fs := []zap.Field{
		zap.String("method", req.Method), zap.String("path", req.URL.Path), zap.String("route", string(route)),
		zap.Int("status", sw.status()), zap.Int64("bytes_out", sw.bytes), zap.String("request_id", id),
	}
	if body != nil {
		fs = append(fs, zap.Int64("bytes_in", body.n))
	}
	if sw.errCode != "" {
		fs = append(fs, zap.String("code", string(sw.errCode)))
	}
	if in.actor != "" {
		fs = append(fs, zap.String("actor", in.actor), zap.String("partition", in.partition))
	}
	return fs
}

// RequestIDField is the request id of ctx as a log field, for every log
// line written on behalf of a request.
func RequestIDField(ctx context.Context) zap.Field {
	return zap.String("request_id", ports.RequestID(ctx))
}
