package client

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/syncd-dev/syncd/domain/ssp2"
)

// ContentType is the SSP2 content type of /sync bodies.
const ContentType = "application/vnd.syncular.sync.v2"

// HTTPError is a request refused before any response byte: the §10.1 JSON
// body and the HTTP status.
type HTTPError struct {
	Status    int
	Code      string
	Message   string
	Retryable bool
	Details   json.RawMessage
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// FrameError is an in-band ERROR frame of a response.
type FrameError struct {
	Code      string
	Message   string
	Retryable bool
	Details   string
}

func (e *FrameError) Error() string { return "ERROR frame " + e.Code + ": " + e.Message }

// CodeOf returns the protocol error code of err ("" when none).
func CodeOf(err error) string {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	var fe *FrameError
	if errors.As(err, &fe) {
		return fe.Code
	}
	var oe *OperationError
	if errors.As(err, &oe) {
		return oe.Code
	}
	return ""
}

// request builds the request envelope.
func (c *Client) request(pull bool) ([]byte, map[string]reqSub, error) {
	m := &ssp2.Message{WireVersion: c.o.WireVersion, Kind: ssp2.KindRequest}
	h := &ssp2.ReqHeader{ClientID: c.o.ClientID, SchemaVersion: c.o.Schema.Version}
	if c.epoch != "" {
		h.LogEpoch = ssp2.Some(c.epoch)
	}
	m.Frames = append(m.Frames, h)
	for _, p := range c.pending {
		m.Frames = append(m.Frames, p)
	}
	sent := map[string]reqSub{}
	if pull {
		m.Frames = append(m.Frames, &ssp2.PullHeader{
			LimitCommits: c.o.LimitCommits, LimitSnapshotRows: c.o.LimitSnapshotRows,
			MaxSnapshotPages: c.o.MaxSnapshotPages, Accept: c.o.Accept,
		})
		for _, id := range c.order {
			s := c.subs[id]
			f := &ssp2.Subscription{ID: s.ID, Table: s.Table, Scopes: ssp2.ScopeListsFromMap(s.Scopes), Cursor: s.Cursor}
			if s.Params != "" {
				f.Params = ssp2.Some(s.Params)
			}
			if s.BootstrapState != "" {
				f.BootstrapState = ssp2.Some(s.BootstrapState)
			}
			sent[id] = reqSub{cursor: s.Cursor, resumed: s.BootstrapState != ""}
			m.Frames = append(m.Frames, f)
		}
	}
	b, err := ssp2.Encode(m)
	return b, sent, err
}

type reqSub struct {
	cursor  int64
	resumed bool
}

// AcquireEpoch asks for the partition's log epoch (SPEC §2.1): a request
// without one and without commits, answered by a reset header. Push, Pull
// and Sync call it first when the client holds no epoch.
func (c *Client) AcquireEpoch(ctx context.Context) error {
	m := &ssp2.Message{WireVersion: c.o.WireVersion, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{
		&ssp2.ReqHeader{ClientID: c.o.ClientID, SchemaVersion: c.o.Schema.Version},
		&ssp2.PullHeader{Accept: c.o.Accept},
	}}
	body, err := ssp2.Encode(m)
	if err != nil {
		return fmt.Errorf("client: encode request: %w", err)
	}
	raw, err := c.send(ctx, body)
	if err != nil {
		return err
	}
	msg, err := ssp2.DecodeWith(raw, ssp2.DecodeOptions{MaxMessageBytes: c.o.MaxResponseBytes})
	if err != nil {
		return fmt.Errorf("client: decode response: %w", err)
	}
	if _, err := c.apply(ctx, msg, nil); err != nil {
		return err
	}
	if c.epoch == "" {
		return errors.New("client: the server sent no log epoch")
	}
	return nil
}

func (c *Client) exchange(ctx context.Context, pull bool) (*Result, error) {
	if c.epoch == "" {
		if err := c.AcquireEpoch(ctx); err != nil {
			return nil, err
		}
	}
	body, sent, err := c.request(pull)
	if err != nil {
		return nil, fmt.Errorf("client: encode request: %w", err)
	}
	rt := c.Realtime()
	raw, err := c.send(ctx, body)
	if err != nil {
		c.noteLeaseError(err)
		return nil, err
	}
	msg, err := ssp2.DecodeWith(raw, ssp2.DecodeOptions{MaxMessageBytes: c.o.MaxResponseBytes})
	if err != nil {
		return nil, fmt.Errorf("client: decode response: %w", err)
	}
	if msg.Kind != ssp2.KindResponse {
		return nil, fmt.Errorf("client: response message has kind %v", msg.Kind)
	}
	res, err := c.apply(ctx, msg, sent)
	c.noteLeaseError(err)
	if err == nil && pull && rt != nil && c.rt == rt {
		err = rt.afterRound(ctx)
	}
	return res, err
}

// send runs one request: a socket round while the realtime connection is
// open (a failed round detaches it), else POST /sync.
func (c *Client) send(ctx context.Context, body []byte) ([]byte, error) {
	rt := c.Realtime()
	if rt == nil {
		return c.post(ctx, body)
	}
	c.stats.Requests++
	c.stats.Rounds++
	b, err := rt.round(ctx, body)
	if err != nil {
		rt.Close()
		return nil, err
	}
	c.stats.ResponseBodyBytes += int64(len(b))
	return b, nil
}

func (c *Client) post(ctx context.Context, body []byte) ([]byte, error) {
	enc := c.o.RequestEncoding
	if enc != "" {
		var err error
		if body, err = compress(enc, body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.o.BaseURL+"/sync", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	for k, vs := range c.o.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set("Accept-Encoding", c.o.AcceptEncoding)
	if enc != "" {
		req.Header.Set("Content-Encoding", enc)
	}
	c.stats.Requests++
	b, err := c.do(req, "POST /sync")
	if err != nil {
		return nil, err
	}
	c.stats.ResponseBodyBytes += int64(len(b))
	return b, nil
}

// do sends req and returns the decoded body of a 200 response; any other
// status is an *HTTPError, a failed round trip is wrapped with what.
func (c *Client) do(req *http.Request, what string) ([]byte, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", what, err)
	}
	defer resp.Body.Close()
	b, err := readBody(resp, c.o.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, httpError(resp.StatusCode, b)
	}
	return b, nil
}

func httpError(status int, body []byte) error {
	e := &HTTPError{Status: status}
	var j struct {
		Code      string          `json:"code"`
		Message   string          `json:"message"`
		Retryable bool            `json:"retryable"`
		Details   json.RawMessage `json:"details"`
	}
	if json.Unmarshal(body, &j) == nil {
		e.Code, e.Message, e.Retryable, e.Details = j.Code, j.Message, j.Retryable, j.Details
	} else {
		e.Message = strings.TrimSpace(string(body))
	}
	return e
}

// readBody reads a response body, undoing its Content-Encoding.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	var r io.Reader = resp.Body
	switch ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); ce {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("client: gzip body: %w", err)
		}
		defer zr.Close()
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(resp.Body, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("client: zstd body: %w", err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("client: unsupported Content-Encoding %q", ce)
	}
	if r == resp.Body && resp.ContentLength >= 0 && resp.ContentLength <= limit {
		// A declared length is read into one buffer of that size, not
		// grown by doubling; a body that ends early is an error, and
		// bytes past it are for net/http to refuse.
		b := make([]byte, resp.ContentLength)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("client: read body: %w", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("client: read body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("client: body larger than %d bytes", limit)
	}
	return b, nil
}

func compress(enc string, b []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch enc {
	case "gzip":
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(b); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			return nil, err
		}
		if _, err := zw.Write(b); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}
