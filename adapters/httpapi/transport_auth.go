package httpapi

import (
	"errors"
	"net/http"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Authenticate runs the host Authenticator on r (SPEC §1.1: on every
// request, before any protocol work) and returns r with the identity on
// its context (ports.WithIdentity), where scope resolvers read it.
//
// Every failure is sync.auth_required (401): an authenticator error that
// carries no catalog code, or an identity without actor or partition, is
// wrapped so its text stays in logs. A catalog error the authenticator
// chose deliberately (e.g. sync.rate_limited) passes through.
func Authenticate(r *http.Request, auth ports.Authenticator) (*http.Request, ports.Identity, error) {
	id, err := auth.Authenticate(r)
	if err != nil {
		var se *syncerr.Error
		if errors.As(err, &se) {
			return r, ports.Identity{}, err
		}
		return r, ports.Identity{}, syncerr.Wrap(syncerr.AuthRequired, err)
	}
	if id.ActorID == "" || id.Partition == "" {
		return r, ports.Identity{}, syncerr.Newf(syncerr.AuthRequired, "authenticator returned an identity without actor or partition")
	}
	return r.WithContext(ports.WithIdentity(r.Context(), id)), id, nil
}
