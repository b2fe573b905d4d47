package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// SyncClient is what a virtual client drives: the project's SSP2 client
// over HTTP (client.Client) or over its realtime socket (wsClient): sync
// rounds over the socket take the same calls.
type SyncClient interface {
	AcquireEpoch(ctx context.Context) error
	Upsert(table, rowID string, cols map[string]rowcodec.Value, baseVersion int64) (ssp2.PushOperation, error)
	Queue(ops ...ssp2.PushOperation) string
	Push(ctx context.Context) (*client.Result, error)
	Pull(ctx context.Context) (*client.Result, error)
	Subscribe(id, table string, scopes map[string][]string) *client.Subscription
	Settled() bool
	Stats() client.Stats
	Rows(table string) map[string]client.Row
	ClientID() string
}

// Transport makes the virtual clients of one run.
type Transport interface {
	NewClient(clientID, baseURL string, header http.Header) (SyncClient, error)
	Close()
}

// httpTransport makes client.Client instances sharing one HTTP connection pool.
type httpTransport struct {
	o    *options
	fx   *fixture
	http *http.Client
	ws   *http.Client // upgrades: no Timeout, since a socket outlives it
}

func newHTTPTransport(o *options, fx *fixture) (*httpTransport, error) {
	for _, s := range o.urls {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--url %q: want http://host:port[/mount]", s)
		}
	}
	conns := 2 * o.vus
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // the client negotiates encodings itself
	}
	wsTr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		DisableCompression: true}
	return &httpTransport{o: o, fx: fx, http: &http.Client{Transport: tr, Timeout: o.timeout}, ws: &http.Client{Transport: wsTr}}, nil
}

func (t *httpTransport) Close() { t.http.CloseIdleConnections(); t.ws.CloseIdleConnections() }

func (t *httpTransport) NewClient(clientID, baseURL string, header http.Header) (SyncClient, error) {
	c, err := t.newClient(clientID, baseURL, header)
	if err != nil || t.o.transport != "ws" {
		return c, err
	}
	return &wsClient{Client: c, ro: client.RealtimeOptions{HTTP: t.ws}}, nil
}

func (t *httpTransport) newClient(clientID, baseURL string, header http.Header) (*client.Client, error) {
	return client.New(client.Options{
		BaseURL: strings.TrimRight(baseURL, "/"), Schema: t.fx.schema, ClientID: clientID, Header: header,
		HTTP: t.http, WireVersion: uint16(t.o.wire), AcceptEncoding: t.o.acceptEncoding, Accept: t.o.accept,
		LimitCommits: int32(t.o.limitCommits), LimitSnapshotRows: int32(t.o.limitRows), MaxSnapshotPages: int32(t.o.maxPages),
	})
}

// wsClient is a client whose sync rounds go over its realtime socket
// (--transport ws): it connects before its first round and again after
// the socket ended, so a lost socket costs one reconnect, not the run.
type wsClient struct {
	*client.Client
	ro       client.RealtimeOptions
	connects int
}

// ensure connects the socket when none is open.
func (w *wsClient) ensure(ctx context.Context) error {
	if w.Realtime() != nil {
		return nil
	}
	w.connects++
	_, err := w.Connect(ctx, w.ro)
	return err
}

func (w *wsClient) AcquireEpoch(ctx context.Context) error {
	if err := w.ensure(ctx); err != nil {
		return err
	}
	return w.Client.AcquireEpoch(ctx)
}

func (w *wsClient) Push(ctx context.Context) (*client.Result, error) {
	if err := w.ensure(ctx); err != nil {
		return nil, err
	}
	return w.Client.Push(ctx)
}

func (w *wsClient) Pull(ctx context.Context) (*client.Result, error) {
	if err := w.ensure(ctx); err != nil {
		return nil, err
	}
	return w.Client.Pull(ctx)
}

// Close closes the socket at the end of the run.
func (w *wsClient) Close() {
	if rt := w.Realtime(); rt != nil {
		rt.Close()
	}
}

// ProtocolError is an SSP2 failure the loader detected in an answer the
// client accepted: a rejected commit, a failed or revoked section, too few
// changes. Errors the client returns (HTTP refusals, ERROR frames,
// undecodable answers, segment verification failures) count as well.
type ProtocolError struct {
	Code   string
	Detail string
}

func (e *ProtocolError) Error() string {
	if e.Detail == "" {
		return e.Code
	}
	return e.Code + ": " + e.Detail
}

func protoErr(code, format string, args ...any) error {
	return &ProtocolError{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// errorCode classifies err for the error table.
func errorCode(err error) string {
	var pe *ProtocolError
	var he *client.HTTPError
	var se *client.SegmentError
	switch {
	case errors.As(err, &pe):
		return pe.Code
	case errors.As(err, &he):
		return fmt.Sprintf("%s (HTTP %d)", he.Code, he.Status)
	case client.CodeOf(err) != "":
		return client.CodeOf(err)
	case errors.As(err, &se):
		return "segment.download"
	case errors.Is(err, context.DeadlineExceeded):
		return "transport.timeout"
	default:
		return "transport.error"
	}
}

// checkPushes fails on a missing or rejected PUSH_RESULT.
func checkPushes(res *client.Result, want int) ([]int64, error) {
	if len(res.Pushes) != want {
		return nil, protoErr("loader.bad_response", "%d push results for %d commits", len(res.Pushes), want)
	}
	seqs := make([]int64, 0, want)
	for _, pr := range res.Pushes {
		if pr.Status == ssp2.PushRejected {
			code, msg := "sync.push_rejected", ""
			for _, r := range pr.Results {
				if r.Status != ssp2.OpApplied {
					code, msg = r.Code, r.Message
					break
				}
			}
			return nil, protoErr(code, "commit %s rejected: %s", pr.ClientCommitID, msg)
		}
		seqs = append(seqs, pr.CommitSeq)
	}
	return seqs, nil
}

// checkSections fails on a section the client could not apply, a revoked
// subscription, or (unless allowed) a reset.
func checkSections(res *client.Result, allowReset bool) (resets int, err error) {
	if res.Header.ResetRequired {
		return 0, protoErr("loader.unexpected_reset", "log epoch replaced by %q", res.Header.LogEpoch)
	}
	for id, s := range res.Sections {
		switch {
		case s.Err != nil:
			return resets, fmt.Errorf("subscription %s: %w", id, s.Err)
		case s.Status == ssp2.SubRevoked:
			return resets, protoErr(s.Reason, "subscription %s revoked", id)
		case s.Status == ssp2.SubReset && !allowReset:
			return resets, protoErr(s.Reason, "subscription %s reset", id)
		case s.Status == ssp2.SubReset:
			resets++
		}
	}
	return resets, nil
}
