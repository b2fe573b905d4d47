package httpapi

import (
	"context"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// ParamClientID is the realtime upgrade's client id query parameter
// (SPEC §8.1).
const ParamClientID = "clientId"

// RealtimeAdmission is a realtime connection admitted before its upgrade:
// its registrations are loaded and its slot is taken. Run serves the
// accepted socket until it ends; Abort gives the slot back when the
// upgrade fails.
type RealtimeAdmission interface {
	Run(ctx context.Context, c ports.RealtimeConn)
	Abort()
}

// RealtimeAdmitFunc admits an authenticated upgrade for clientID, or
// refuses it with a catalog error (answered as §10.1 JSON, before the
// upgrade).
type RealtimeAdmitFunc func(ctx context.Context, id ports.Identity, clientID string) (RealtimeAdmission, error)

// RealtimeOptions configure the realtime endpoint.
type RealtimeOptions struct {
	// Limits bound the identity and the client id.
	Limits limits.Limits
	// MaxMessageBytes bounds one client message (a control message or a
	// round chunk); a larger one closes the socket.
	MaxMessageBytes int64
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
// its catalog status. The /sync body deadline and in-flight bounds do not
// apply: a socket lives long and its rounds are bounded by the session.
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
		if o.MaxMessageBytes > 0 {
			c.SetReadLimit(o.MaxMessageBytes)
		}
		adm.Run(ctx, &wsConn{c: c})
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

// wsConn is ports.RealtimeConn over coder/websocket.
type wsConn struct{ c *websocket.Conn }

func (w *wsConn) Read(ctx context.Context) (ports.RealtimeMessage, error) {
	t, b, err := w.c.Read(ctx)
	if err != nil {
		return ports.RealtimeMessage{}, err
	}
	return ports.RealtimeMessage{Binary: t == websocket.MessageBinary, Data: b}, nil
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
