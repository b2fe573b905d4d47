package syncsvc

import (
	"context"
	"errors"
	"net/http"
	"syscall"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// HTTPHandler serves POST /sync with the use case behind an
// httpapi.Transport (the server's route and the test-control plane's
// instances alike).
type HTTPHandler struct {
	Transport *httpapi.Transport
	Service   *Service
	Log       *zap.Logger
}

// Serve answers one authenticated request: request-level failures as
// §10.1 JSON before any byte, the response frames otherwise.
func (h *HTTPHandler) Serve(w http.ResponseWriter, r *http.Request, id ports.Identity, body []byte) {
	resp, err := h.Service.Handle(r.Context(), id, body)
	if err != nil {
		h.logFailure(r.Context(), err, id)
		httpapi.WriteTransportError(w, err)
		return
	}
	defer resp.Release()
	out := h.Transport.Respond(w, r, http.StatusOK, httpapi.ContentTypeSync)
	if err = resp.Encode(out); err != nil {
		if clientGone(r.Context(), err) {
			h.Log.Debug("sync response abandoned by the client", httpapi.RequestIDField(r.Context()), zap.Error(err))
		} else {
			h.Log.Error("encode sync response", httpapi.RequestIDField(r.Context()), zap.Error(err))
		}
		if out.Discard() {
			httpapi.WriteTransportError(w, syncerr.Wrap(syncerr.InternalError, err))
			return
		}
	}
	if cerr := out.Close(); cerr != nil && err == nil {
		h.Log.Debug("write sync response", httpapi.RequestIDField(r.Context()), zap.Error(cerr))
	}
}

// clientGone reports whether err only says that the client went away: its
// request was canceled, or the connection broke under a write.
func clientGone(ctx context.Context, err error) bool {
	return (ctx.Err() != nil && errors.Is(err, ctx.Err())) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

func (h *HTTPHandler) logFailure(ctx context.Context, err error, id ports.Identity) {
	if clientGone(ctx, err) {
		// The client went away (or the server is shutting down): nothing
		// failed on this side.
		h.Log.Debug("sync request abandoned", httpapi.RequestIDField(ctx), zap.String("partition", id.Partition), zap.Error(err))
		return
	}
	var se *syncerr.Error
	if errors.As(err, &se) && syncerr.Lookup(se.Code).Code == se.Code && se.Code != syncerr.InternalError {
		h.Log.Debug("sync request refused", httpapi.RequestIDField(ctx), zap.String("code", string(se.Code)),
			zap.String("reason", se.Reason), zap.String("partition", id.Partition))
		return
	}
	h.Log.Error("sync request failed", httpapi.RequestIDField(ctx), zap.String("partition", id.Partition), zap.Error(err))
}
