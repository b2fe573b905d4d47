package sim

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
)

// netFault is what the simulated network does to one request.
type netFault int

const (
	netOK netFault = iota
	// netLoseRequest: the request never reaches the server.
	netLoseRequest
	// netLoseResponse: the server handles the request, the client never
	// hears the answer (it applied, the client does not know).
	netLoseResponse
)

var errLost = errors.New("sim: connection lost")

// transport is one simulated client's network: every request is served by
// the server's handler in the calling goroutine, so the seed alone orders
// everything the server does.
type transport struct {
	r  *runner
	sc *simClient
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	fault := t.r.netF
	t.r.netF = netOK
	if fault == netLoseRequest {
		t.r.event("net: request lost")
		return nil, errLost
	}
	in := req.Clone(req.Context())
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	in.RemoteAddr = "127.0.0.1:1"
	in.RequestURI = req.URL.RequestURI()
	rec := httptest.NewRecorder()
	t.r.srv.handler.ServeHTTP(rec, in)
	res := rec.Result()
	if req.URL.Path == "/sync" && res.StatusCode == http.StatusOK {
		t.r.served(t.sc, body, rec.Body.Bytes())
	}
	if t.r.crashed {
		t.r.event("net: the server crashed, no response")
		return nil, errLost
	}
	if fault == netLoseResponse {
		t.r.event("net: response lost (status %d)", res.StatusCode)
		return nil, errLost
	}
	res.Request = req
	return res, nil
}
