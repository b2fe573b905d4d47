package httpapi

import (
	"errors"
	"net/http"

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
	return r.WithContext(ports.WithIdentity(r.Context(), id)), id, nil
}

// SyncServeFunc serves one authenticated POST /sync request whose body
// has been read and decoded. r's context carries id. It writes its
// response through Transport.Respond and answers errors detected before
// its first byte with WriteTransportError.
type SyncServeFunc func(w http.ResponseWriter, r *http.Request, id ports.Identity, body []byte)

// SyncEndpoint composes the transport steps of POST /sync in the
// reference order: authenticate (401), content type (415), then the body
// with its encoding undone and its limits enforced (413, 415, 400); each
// failure is answered as §10.1 JSON before anything else runs. serve gets
// the rest of the request.
func (t *Transport) SyncEndpoint(auth ports.Authenticator, serve SyncServeFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, id, err := Authenticate(r, auth, t.limits)
		if err != nil {
			WriteTransportError(w, err)
			return
		}
		body, err := t.ReadSyncRequest(r)
		if err != nil {
			WriteTransportError(w, err)
			return
		}
		serve(w, r, id, body)
	})
}
