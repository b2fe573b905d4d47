package httpapi

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// ContentTypeOperations is the content type of remote operation bodies
// (REMOTE.md §5).
const ContentTypeOperations = operations.ContentType

// CheckOperationsContentType refuses a request whose Content-Type is not
// ContentTypeOperations (parameters ignored) with HTTP 415 and
// operation.invalid_request, the code the reference answers it with.
func CheckOperationsContentType(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != ContentTypeOperations {
		return &StatusError{Status: http.StatusUnsupportedMediaType, Err: syncerr.Newf(syncerr.OperationInvalid,
			"Content-Type %q", r.Header.Get("Content-Type")).WithMessage("unsupported content type; send " + ContentTypeOperations)}
	}
	return nil
}

// OperationsEndpoint serves POST /operations in the order of POST /sync:
// authenticate (401), content type (415), the body within the transport's
// limits, deadline and in-flight bounds; each of those refusals is §10.1
// JSON with its status. What the operation itself answers, failures
// included, is the encoded response with status 200 (REMOTE.md §5:
// operation-level failures are kind "error" responses).
func (t *Transport) OperationsEndpoint(auth ports.Authenticator, svc ports.OperationsService, log *zap.Logger) http.Handler {
	if log == nil {
		log = zap.NewNop()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, id, err := Authenticate(r, auth, t.limits)
		if err != nil {
			WriteTransportError(w, err)
			return
		}
		lease := t.limiter.Lease()
		defer lease.Release()
		body, err := t.readBodyChecked(w, r, lease, CheckOperationsContentType)
		if err == nil {
			err = lease.acquire()
		}
		if err != nil {
			setRetryAfter(w, err)
			WriteTransportError(w, err)
			return
		}
		out, code := svc.Handle(r.Context(), id, body)
		if code != "" {
			noteCode(w, code)
		}
		w.Header().Set("Cache-Control", "no-store")
		if err := t.WriteEncoded(w, r, http.StatusOK, ContentTypeOperations, out); err != nil {
			log.Debug("operations response not delivered", zap.Error(err))
		}
	})
}

// readBodyChecked is readSyncBody with another content-type check.
func (t *Transport) readBodyChecked(w http.ResponseWriter, r *http.Request, lease *Lease, check func(*http.Request) error) ([]byte, error) {
	if err := check(r); err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	rc := http.NewResponseController(w)
	if t.bodyTimeout > 0 {
		_ = rc.SetReadDeadline(t.now().Add(t.bodyTimeout))
	}
	body, err := t.readBody(r, lease)
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, fmt.Errorf("read operations body: %w", err)
	}
	if t.bodyTimeout > 0 {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, nil
}

// OperationsWatchAdmitFunc admits an authenticated watch socket before
// its upgrade (its socket slot taken), or refuses it with a catalog error
// (answered as §10.1 JSON, before the upgrade).
type OperationsWatchAdmitFunc func(ctx context.Context, id ports.Identity) (ports.RealtimeAdmission, error)

// OperationsRealtimeEndpoint serves GET <mount>/operations/realtime
// (REMOTE.md §6): host authentication on the upgrade request, admission
// (the node's socket caps, shared with the realtime route), then the
// WebSocket upgrade (refusals before it are §10.1 JSON with their catalog
// status), then serve until the socket ends. Client ids travel in each
// watch message, not the URL.
func OperationsRealtimeEndpoint(auth ports.Authenticator, o RealtimeOptions, admit OperationsWatchAdmitFunc) http.Handler {
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
		if !websocketUpgrade(r) {
			WriteTransportError(w, &StatusError{Status: http.StatusUpgradeRequired,
				Err: syncerr.Newf(syncerr.InvalidRequest, "the operations realtime route needs a WebSocket upgrade")})
			return
		}
		// The session's own context ends the socket (close, drain).
		ctx := context.WithoutCancel(r.Context())
		adm, err := admit(ctx, id)
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
			log.Debug("operations realtime upgrade failed", zap.Error(err))
			return
		}
		// The session's own context ends the socket (close, drain).
		adm.Run(ctx, newWSConn(c, o))
	})
}
