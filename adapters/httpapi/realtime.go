package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// ParamClientID is the realtime upgrade's client id query parameter
// (SPEC §8.1).
const ParamClientID = "clientId"

// RealtimeAdmitFunc admits an authenticated upgrade for clientID, or
// refuses it with a catalog error (answered as §10.1 JSON, before the
// upgrade).
type RealtimeAdmitFunc func(ctx context.Context, id ports.Identity, clientID string) (ports.RealtimeAdmission, error)

// RealtimeOptions configure the realtime endpoint.
type RealtimeOptions struct {
	// Limits bound the identity and the client id.
	Limits limits.Limits
	// MaxMessageBytes bounds one binary client message (a round chunk); a
	// larger one closes the socket with 1009 (0: no bound).
	MaxMessageBytes int64
	// MaxTextBytes bounds one text client message (control, presence,
	// watch messages); a larger one closes the socket with 1009 (0:
	// MaxMessageBytes).
	MaxTextBytes int64
	// MessageTimeout bounds how long a client message may take to arrive
	// once its first frame is in (0: no bound): a client that begins a
	// message and stalls, pinging to stay alive, is closed with 1008.
	MessageTimeout time.Duration
	// Inflight, when set, holds every message being read, as its buffer
	// grows, on the node's in-flight memory budget (the /sync bodies'); a
	// message that finds no room closes the socket with 1013.
	Inflight ports.Inflight
	// Sleep waits on the server's clock (the message deadline); nil: the
	// wall clock.
	Sleep func(ctx context.Context, d time.Duration) error
	// OriginPatterns are the browser origins accepted at the upgrade
	// (host patterns, see coder/websocket); empty accepts any origin,
	// since credentials never come from cookies here: the authenticators
	// read headers and query parameters a cross-site page cannot forge.
	OriginPatterns []string
	// Log receives upgrade failures; nil discards.
	Log *zap.Logger
}

// RealtimeEndpoint serves GET <mount>/realtime (SPEC §8.1): host
// authentication on the upgrade request (the same Authenticate path as
// every route, so a token in a query parameter works where the
// authenticator reads one), the client id, admission, and only then the
// WebSocket upgrade. Every refusal before the upgrade is §10.1 JSON with
// its catalog status. A socket lives long: the /sync bounds apply to each
// of its messages instead (RealtimeOptions), and its rounds are bounded by
// the session.
func RealtimeEndpoint(auth ports.Authenticator, o RealtimeOptions, admit RealtimeAdmitFunc) http.Handler {
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, id, err := Authenticate(r, auth, o.Limits)
		if err != nil {
			WriteError(w, err)
			return
		}
		clientID := r.URL.Query().Get(ParamClientID)
		if err := checkClientID(clientID, o.Limits); err != nil {
			WriteError(w, err)
			return
		}
		if !websocketUpgrade(r) {
			WriteTransportError(w, &StatusError{Status: http.StatusUpgradeRequired,
				Err: syncerr.Newf(syncerr.InvalidRequest, "the realtime route needs a WebSocket upgrade")})
			return
		}
		// The socket outlives the request's context only in name: the
		// session's own context ends it (drain, close, violations).
		ctx := context.WithoutCancel(r.Context())
		adm, err := admit(ctx, id, clientID)
		if err != nil {
			WriteError(w, err)
			return
		}
		ao := &websocket.AcceptOptions{OriginPatterns: o.OriginPatterns}
		if len(o.OriginPatterns) == 0 {
			ao.InsecureSkipVerify = true
		}
		c, err := websocket.Accept(w, r, ao)
		if err != nil {
			adm.Abort()
			log.Debug("realtime upgrade failed", zap.Error(err))
			return
		}
		adm.Run(ctx, newWSConn(c, o))
	})
}

func checkClientID(clientID string, lim limits.Limits) error {
	lim = lim.WithDefaults()
	switch {
	case clientID == "":
		return syncerr.Newf(syncerr.InvalidClientID, "the realtime upgrade needs the %s query parameter", ParamClientID)
	case len(clientID) > lim.MaxIDBytes:
		return syncerr.Newf(syncerr.InvalidClientID, "client id of %d bytes is longer than %d", len(clientID), lim.MaxIDBytes)
	case !utf8.ValidString(clientID):
		return syncerr.Newf(syncerr.InvalidClientID, "client id is not well-formed UTF-8")
	}
	return nil
}

func websocketUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		if strings.EqualFold(strings.TrimSpace(v), "websocket") {
			return true
		}
	}
	return false
}

// wsConn is ports.RealtimeConn over coder/websocket. It reads each
// message itself, so that a message is bounded by its kind's size, by a
// deadline once it has begun, and by the node's in-flight memory: the
// library alone would hold a whole message of up to the read limit,
// indefinitely, outside any budget.
type wsConn struct {
	c     *websocket.Conn
	o     RealtimeOptions
	share ports.InflightShare // the message being read
}

func newWSConn(c *websocket.Conn, o RealtimeOptions) *wsConn {
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = o.MaxMessageBytes
	}
	if o.Sleep == nil {
		o.Sleep = clock.Wall{}.Sleep
	}
	var share ports.InflightShare = noShare{}
	if o.Inflight != nil {
		share = o.Inflight.Share()
	}
	// The library's own limit is the backstop; ours, per kind, is below it.
	if lim := max(o.MaxMessageBytes, o.MaxTextBytes); lim > 0 {
		c.SetReadLimit(lim + 1)
	} else {
		c.SetReadLimit(-1)
	}
	return &wsConn{c: c, o: o, share: share}
}

// errMessageTooBig is a message past its kind's bound.
var errMessageTooBig = errors.New("message too big")

// Read returns the next message. Its bytes are held on the budget while
// it arrives, which is when a client can make it last, and given back
// once it is whole: its reader copies what it keeps (a round's chunk goes
// into the round's own buffer, held on the budget by the session).
func (w *wsConn) Read(ctx context.Context) (ports.RealtimeMessage, error) {
	defer w.share.Release()
	t, r, err := w.c.Reader(ctx)
	if err != nil {
		return ports.RealtimeMessage{}, err
	}
	limit := w.o.MaxMessageBytes
	if t == websocket.MessageText {
		limit = w.o.MaxTextBytes
	}
	stalled := w.deadline(ctx)
	b, err := w.readMessage(r, limit)
	if stalled() {
		return ports.RealtimeMessage{}, &ports.RealtimeCloseError{Code: ports.ClosePolicy,
			Reason: fmt.Sprintf("%s: message not completed within %v", syncerr.InvalidRequest, w.o.MessageTimeout)}
	}
	var rl *rateLimitedError
	switch {
	case errors.Is(err, errMessageTooBig):
		return ports.RealtimeMessage{}, &ports.RealtimeCloseError{Code: ports.CloseTooBig,
			Reason: fmt.Sprintf("%s: message larger than %d bytes", syncerr.InvalidRequest, limit)}
	case errors.As(err, &rl):
		return ports.RealtimeMessage{}, &ports.RealtimeCloseError{Code: ports.CloseTryAgainLater,
			Reason: fmt.Sprintf("%s: server busy; retry later", syncerr.RateLimited)}
	case err != nil:
		return ports.RealtimeMessage{}, err
	}
	return ports.RealtimeMessage{Binary: t == websocket.MessageBinary, Data: b}, nil
}

// deadline arms the message deadline: when it passes before the message
// is read, the socket is closed (which ends the blocked read). The
// returned func disarms it and reports whether it fired.
func (w *wsConn) deadline(ctx context.Context) (fired func() bool) {
	if w.o.MessageTimeout <= 0 {
		return func() bool { return false }
	}
	dctx, cancel := context.WithCancel(ctx)
	var hit atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w.o.Sleep(dctx, w.o.MessageTimeout) == nil {
			hit.Store(true)
			_ = w.c.Close(websocket.StatusPolicyViolation, "message not completed in time")
		}
	}()
	return func() bool {
		cancel()
		<-done
		return hit.Load()
	}
}

// readMessage reads one message body, failing with errMessageTooBig past
// limit (0: none). The bytes that arrived are held on the share as they
// arrive; the buffer's slack as it doubles is not (a message carries no
// length to size it by, and counting the slack would refuse a message as
// large as the budget).
func (w *wsConn) readMessage(r io.Reader, limit int64) ([]byte, error) {
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			// Doubling while small, a quarter at a time once past 1 MiB
			// (the slack is memory the budget does not count), never far
			// past the limit.
			more := cap(buf)
			if more >= 1<<20 {
				more /= 4
			}
			if limit > 0 {
				more = max(1, min(more, int(limit)+1-len(buf)))
			}
			buf = slices.Grow(buf, more)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			if limit > 0 && int64(len(buf)+n) > limit {
				return nil, errMessageTooBig
			}
			if rerr := w.share.Reserve(int64(n)); rerr != nil {
				return nil, rerr
			}
			buf = buf[:len(buf)+n]
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (w *wsConn) Write(ctx context.Context, m ports.RealtimeMessage) error {
	t := websocket.MessageText
	if m.Binary {
		t = websocket.MessageBinary
	}
	return w.c.Write(ctx, t, m.Data)
}

func (w *wsConn) Ping(ctx context.Context) error { return w.c.Ping(ctx) }

func (w *wsConn) Close(code int, reason string) error {
	return w.c.Close(websocket.StatusCode(code), reason)
}
