// Package httpapi is the HTTP transport of the sync API: the routes of
// SPEC §1.1 under a mount prefix, the readiness gate in front of them, and
// the one function that answers an error as §10.1 JSON.
package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// ContentTypeJSON is the content type of every JSON error body.
const ContentTypeJSON = "application/json"

// WriteError answers err as a SPEC §10.1 JSON body with its catalog HTTP
// status. Errors without an exposed catalog code are answered as
// sync.internal_error (500) and never leak their text. It returns the
// catalog error actually written, for logging and metrics.
func WriteError(w http.ResponseWriter, err error) *syncerr.Error {
	pub := syncerr.Public(err)
	if pub == nil {
		pub = syncerr.New(syncerr.InternalError)
	}
	body, mErr := json.Marshal(pub)
	if mErr != nil { // unreachable: Body marshals plain fields only
		pub = syncerr.New(syncerr.InternalError)
		body, _ = json.Marshal(pub)
	}
	noteCode(w, pub.Code)
	h := w.Header()
	h.Set("Content-Type", ContentTypeJSON)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(pub.HTTPStatus())
	_, _ = w.Write(append(body, '\n'))
	return pub
}
