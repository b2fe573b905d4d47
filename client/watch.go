package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/domain/operations"
)

// WatchOptions configure a live watch socket.
type WatchOptions struct {
	// HTTP is the client of the upgrade request (default: a fresh one; a
	// client with a Timeout cannot carry a socket).
	HTTP *http.Client
}

// Watches is an open live watch socket (GET <mount>/operations/realtime,
// REMOTE.md §6): watches of registered queries, each answered with a
// full snapshot at once and again after every commit that can change it.
// Watch and Unwatch may be called while Next waits; Next itself is not
// safe for concurrent use.
type Watches struct {
	conn     *websocket.Conn
	clientID string
}

// WatchEvent is one server message of a watch socket: a snapshot
// (Result) or the watch's failure (Err, with its catalog code).
type WatchEvent struct {
	WatchID string
	Result  *QueryResult
	Err     *OperationError
}

// OpenWatches opens a live watch socket with the client's authentication.
// A refused upgrade is an *HTTPError.
func (c *Client) OpenWatches(ctx context.Context, o WatchOptions) (*Watches, error) {
	u, err := url.Parse(c.o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return nil, fmt.Errorf("client: base URL scheme %q: want http or https", u.Scheme)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/operations/realtime"
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPHeader: c.o.Header.Clone(), HTTPClient: o.HTTP})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var b []byte
			if resp.Body != nil {
				b, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
			}
			return nil, httpError(resp.StatusCode, b)
		}
		return nil, fmt.Errorf("client: GET /operations/realtime: %w", err)
	}
	conn.SetReadLimit(c.o.MaxResponseBytes + 1)
	return &Watches{conn: conn, clientID: c.o.ClientID}, nil
}

// Watch subscribes watchID to the registered query operationID with
// params; its snapshots arrive through Next.
func (w *Watches) Watch(ctx context.Context, watchID, operationID string, params operations.Value) error {
	if !params.Valid() {
		params = operations.Null()
	}
	return w.send(ctx, []string{"kind", "watch", "watchId", watchID, "clientId", w.clientID, "operationId", operationID}, &params)
}

// Unwatch ends watchID; no snapshot for it follows.
func (w *Watches) Unwatch(ctx context.Context, watchID string) error {
	return w.send(ctx, []string{"kind", "unwatch", "watchId", watchID}, nil)
}

// send writes one message: revision 1, the string fields in order (key,
// value pairs), then params when given.
func (w *Watches) send(ctx context.Context, kv []string, params *operations.Value) error {
	rev, _ := operations.SafeNumber(operations.Revision)
	fields := []operations.Field{{Key: "revision", Value: rev}}
	for i := 0; i+1 < len(kv); i += 2 {
		v, err := operations.String(kv[i+1])
		if err != nil {
			return fmt.Errorf("client: watch message %s: %w", kv[i], err)
		}
		fields = append(fields, operations.Field{Key: kv[i], Value: v})
	}
	if params != nil {
		fields = append(fields, operations.Field{Key: "params", Value: *params})
	}
	o, err := operations.Object(fields...)
	if err != nil {
		return fmt.Errorf("client: watch message: %w", err)
	}
	b, err := o.Encode()
	if err != nil {
		return fmt.Errorf("client: watch message: %w", err)
	}
	if err := w.conn.Write(ctx, websocket.MessageBinary, b); err != nil {
		return fmt.Errorf("client: watch socket: %w", err)
	}
	return nil
}

// Next waits for the next server message. A closed socket is an error
// (websocket.CloseStatus tells its close code).
func (w *Watches) Next(ctx context.Context) (WatchEvent, error) {
	_, b, err := w.conn.Read(ctx)
	if err != nil {
		return WatchEvent{}, fmt.Errorf("client: watch socket: %w", err)
	}
	v, err := operations.Decode(b)
	if err != nil {
		return WatchEvent{}, answerErr("%v", err)
	}
	if v.Kind() != operations.KindObject {
		return WatchEvent{}, answerErr("watch message is not an object")
	}
	if rev, _ := getField(v, "revision").AsNumber(); rev != operations.Revision {
		return WatchEvent{}, answerErr("watch message revision is not %d", operations.Revision)
	}
	var ev WatchEvent
	if ev.WatchID, err = wantString(v, "watchId"); err != nil {
		return WatchEvent{}, err
	}
	kind, err := wantString(v, "kind")
	if err != nil {
		return WatchEvent{}, err
	}
	switch kind {
	case "snapshot":
		ev.Result, err = decodeQueryResult(v)
	case "watch_error":
		ev.Err, err = decodeOperationError(v)
	default:
		err = answerErr("watch message kind %q", kind)
	}
	if err != nil {
		return WatchEvent{}, err
	}
	return ev, nil
}

// Close closes the socket normally.
func (w *Watches) Close() error { return w.conn.Close(websocket.StatusNormalClosure, "") }
