package httpapi

import (
	"context"
	"errors"
	"net/http"
	"syscall"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// SyncServe answers authenticated POST /sync requests with svc, for
// SyncEndpoint (the server's route and the test-control plane's instances
// alike): request-level failures as §10.1 JSON before any byte, the
// response frames otherwise, compressed per Accept-Encoding.
func (t *Transport) SyncServe(svc ports.SyncService, log *zap.Logger) SyncServeFunc {
	s := &syncServer{t: t, svc: svc, log: orNop(log)}
	return s.serve
}

type syncServer struct {
	t   *Transport
	svc ports.SyncService
	log *zap.Logger
}

func (s *syncServer) serve(w http.ResponseWriter, r *http.Request, id ports.Identity, body []byte) {
	resp, err := s.svc.Sync(r.Context(), id, body)
	if err != nil {
		s.logFailure(r.Context(), err, id)
		WriteTransportError(w, err)
		return
	}
	defer resp.Release()
	out := s.t.Respond(w, r, http.StatusOK, ContentTypeSync)
	if err = resp.Encode(out); err != nil {
		if clientGone(r.Context(), err) {
			s.log.Debug("sync response abandoned by the client", RequestIDField(r.Context()), zap.Error(err))
		} else {
			s.log.Error("encode sync response", RequestIDField(r.Context()), zap.Error(err))
		}
		if out.Discard() {
			WriteTransportError(w, syncerr.Wrap(syncerr.InternalError, err))
			return
		}
	}
	if cerr := out.Close(); cerr != nil && err == nil {
		s.log.Debug("write sync response", RequestIDField(r.Context()), zap.Error(cerr))
	}
}

// clientGone reports whether err only says that the client went away: its
// request was canceled, or the connection broke under a write.
func clientGone(ctx context.Context, err error) bool {
	return (ctx.Err() != nil && errors.Is(err, ctx.Err())) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

func (s *syncServer) logFailure(ctx context.Context, err error, id ports.Identity) {
	if clientGone(ctx, err) {
		// The client went away (or the server is shutting down): nothing
		// failed on this side.
		s.log.Debug("sync request abandoned", RequestIDField(ctx), zap.String("partition", id.Partition), zap.Error(err))
		return
	}
	var se *syncerr.Error
	if errors.As(err, &se) && syncerr.Lookup(se.Code).Code == se.Code && se.Code != syncerr.InternalError {
		s.log.Debug("sync request refused", RequestIDField(ctx), zap.String("code", string(se.Code)),
			zap.String("reason", se.Reason), zap.String("partition", id.Partition))
		return
	}
	s.log.Error("sync request failed", RequestIDField(ctx), zap.String("partition", id.Partition), zap.Error(err))
}
