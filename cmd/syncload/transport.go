package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// contentTypeSync is the media type of SSP2 bodies (SPEC §1.1).
const contentTypeSync = "application/vnd.syncular.sync.v2"

// Transport carries SSP2 exchanges to one server. HTTP is the only one
// today; the realtime socket (sync rounds over the same handler, §8.7)
// plugs in behind the same interface once the server has it.
type Transport interface {
	// Sync sends one request envelope and returns the response envelope.
	// A non-200 answer is a *StatusError carrying the §10.1 JSON body.
	Sync(ctx context.Context, id Identity, body []byte) ([]byte, error)
	// Segment downloads one segment; scopes is the canonical JSON of the
	// subscription's requested scopes (X-Syncular-Scopes).
	Segment(ctx context.Context, id Identity, ref string, scopes string) ([]byte, error)
	Close()
}

// Identity is who a virtual client is: the extra request headers it
// sends (development identity headers or a bearer token).
type Identity struct {
	Headers http.Header
}

// StatusError is a non-200 HTTP answer.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Status, strings.TrimSpace(e.Body))
}

// httpTransport is POST /sync and GET /segments/{id} over HTTP/1.1.
type httpTransport struct {
	base           string // scheme://host[:port][mount]
	client         *http.Client
	acceptEncoding string
}

func newHTTPTransport(base string, conns int, timeout time.Duration, acceptEncoding string) (*httpTransport, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http://host:port[/mount]", base)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		// The loader decodes itself so it sees the wire as a client does.
		DisableCompression: true,
	}
	return &httpTransport{
		base:           strings.TrimRight(base, "/"),
		client:         &http.Client{Transport: tr, Timeout: timeout},
		acceptEncoding: acceptEncoding,
	}, nil
}

func (t *httpTransport) Close() { t.client.CloseIdleConnections() }

func (t *httpTransport) do(req *http.Request, id Identity) ([]byte, error) {
	for k, vs := range id.Headers {
		req.Header[k] = vs
	}
	req.Header.Set("Accept-Encoding", t.acceptEncoding)
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := readBody(resp)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Status: resp.StatusCode, Body: string(body)}
	}
	return body, nil
}

func (t *httpTransport) Sync(ctx context.Context, id Identity, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/sync", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentTypeSync)
	return t.do(req, id)
}

func (t *httpTransport) Segment(ctx context.Context, id Identity, ref, scopes string) ([]byte, error) {
	target := ref
	if !strings.Contains(ref, "://") {
		target = t.base + "/segments/" + url.PathEscape(ref)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	if scopes != "" {
		req.Header.Set("X-Syncular-Scopes", scopes)
	}
	return t.do(req, id)
}

// readBody reads a response body, undoing gzip or zstd.
func readBody(resp *http.Response) ([]byte, error) {
	var r io.Reader = resp.Body
	dec, err := decompressor(resp.Header.Get("Content-Encoding"), r)
	if err != nil {
		return nil, err
	}
	if dec != nil {
		defer func() { _ = dec.Close() }()
		r = dec
	}
	return io.ReadAll(r)
}
