package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Authenticate runs the host Authenticator on r (SPEC §1.1: on every
// request, before any protocol work) and returns r with the identity on
// its context (ports.WithIdentity), where scope resolvers read it.
//
// Every failure is sync.auth_required (401): an authenticator error that
// carries no catalog code is wrapped so its text stays in logs. A catalog
// error the authenticator chose deliberately (e.g. sync.rate_limited)
// passes through.
//
// This is the one place every authenticator's answer passes, the host's
// own included, so the identity is checked here (limits.Identity): an
// actor or partition that is empty, not well-formed UTF-8, has control
// characters or is longer than lim allows, or credential scopes that are
// not UTF-8 or too long, are sync.auth_required too. The actor is stored
// with every commit and echoed in COMMIT frames, so a value the response
// encoder would refuse must never get in.
func Authenticate(r *http.Request, auth ports.Authenticator, lim limits.Limits) (*http.Request, ports.Identity, error) {
	id, err := auth.Authenticate(r)
	if err != nil {
		var se *syncerr.Error
		if errors.As(err, &se) {
			return r, ports.Identity{}, err
		}
		return r, ports.Identity{}, syncerr.Wrap(syncerr.AuthRequired, err)
	}
	if err := lim.Identity(id.ActorID, id.Partition, id.Scopes); err != nil {
		return r, ports.Identity{}, err
	}
	noteIdentity(r.Context(), id)
	return r.WithContext(ports.WithIdentity(r.Context(), id)), id, nil
}

// SyncServeFunc serves one authenticated POST /sync request whose body
// has been read and decoded. r's context carries id. It writes its
// response through Transport.Respond and answers errors detected before
// its first byte with WriteTransportError.
type SyncServeFunc func(w http.ResponseWriter, r *http.Request, id ports.Identity, body []byte)

// SyncEndpoint composes the transport steps of POST /sync in the
// reference order: authenticate (401), content type (415), then the body
// with its encoding undone and its limits enforced (413, 415, 400, 408
// past the body read deadline); each failure is answered as §10.1 JSON
// before anything else runs. With a Limiter, the body's buffers are
// charged to the body-memory bound as they grow and the request takes a
// processing slot once its body is in; past either bound it is answered
// sync.rate_limited (429, Retry-After). serve gets the rest of the
// request.
func (t *Transport) SyncEndpoint(auth ports.Authenticator, serve SyncServeFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, id, err := Authenticate(r, auth, t.limits)
		if err != nil {
			WriteTransportError(w, err)
			return
		}
		lease := t.limiter.Lease()
		defer lease.Release()
		body, err := t.readSyncBody(w, r, lease)
		if err == nil {
			err = lease.acquire()
		}
		if err != nil {
			setRetryAfter(w, err)
			WriteTransportError(w, err)
			return
		}
		serve(w, r, id, body)
	})
}

// readSyncBody reads the request under the body read deadline. The
// deadline is cleared once the body is in, so neither a long response nor
// the server's wait for the next request is cut by it. On failure the
// connection is closed after the answer: net/http would otherwise drain
// the unread rest of a slow body with no deadline at all.
func (t *Transport) readSyncBody(w http.ResponseWriter, r *http.Request, lease *Lease) ([]byte, error) {
	rc := http.NewResponseController(w)
	if t.bodyTimeout > 0 {
		// ErrNotSupported (a writer without a connection) leaves it unbounded.
		_ = rc.SetReadDeadline(t.now().Add(t.bodyTimeout))
	}
	body, err := t.readSyncRequest(r, lease)
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	if t.bodyTimeout > 0 {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, nil
}
