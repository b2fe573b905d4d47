package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/syncsvc"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Value groups of host hooks. Provide into them with the helpers below.
const (
	GroupRowValidators   = "syncd.row_validators"
	GroupCRDTMergers     = "syncd.crdt_mergers"
	GroupCommitListeners = "syncd.commit_listeners"
)

// SyncModule serves POST <mount>/sync: the sync use case over the
// storage in the graph, with the ports.Authenticator and
// ports.ScopeResolver of the graph (AuthModule builds them from --auth)
// and the host hooks provided into the groups below. Without a
// ports.Storage in the graph the route keeps answering
// sync.not_found.
//
// A host that embeds the server replaces the configured identity with its
// own implementations (see examples/embed):
//
//	fx.Decorate(func(ports.Authenticator) ports.Authenticator { return myAuth })
//	fx.Decorate(func(ports.ScopeResolver) ports.ScopeResolver { return myResolver })
var SyncModule = fx.Module("syncd.sync",
	fx.Provide(
		NewSyncTransport,
		NewSyncService,
		fx.Annotate(newSyncRoutes, fx.ResultTags(`group:"syncd.routes,flatten"`)),
	),
	PullModule,
	ReactionsModule,
)

// ProvideRowValidator registers a row validator constructor (SPEC §6.7).
func ProvideRowValidator(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.RowValidator)), fx.ResultTags(`group:"`+GroupRowValidators+`"`)))
}

// ProvideCRDTMerger registers a CRDT merger constructor (SPEC §5.10).
func ProvideCRDTMerger(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.CRDTMerger)), fx.ResultTags(`group:"`+GroupCRDTMergers+`"`)))
}

// ProvideCommitListener registers a listener of applied commits.
func ProvideCommitListener(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.CommitListener)), fx.ResultTags(`group:"`+GroupCommitListeners+`"`)))
}

// ProvideCommitValidator registers the whole-commit validator (SPEC §6.8).
func ProvideCommitValidator(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.CommitValidator))))
}

// ProvideReactionPlanner registers the durable reaction planner (SPEC §6.9).
func ProvideReactionPlanner(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.As(new(ports.ReactionPlanner))))
}

// NewSyncTransport builds the body and compression handling of /sync,
// with the in-flight bounds and the body read deadline of cfg.HTTP.
func NewSyncTransport(cfg config.Config, clock Clock) (*httpapi.Transport, error) {
	lim, err := httpapi.NewLimiter(httpapi.LimiterOptions{
		MaxRequests:  cfg.HTTP.MaxInflightRequests,
		MaxBodyBytes: cfg.HTTP.MaxInflightBodyBytes,
	})
	if err != nil {
		return nil, err
	}
	timeout := cfg.HTTP.BodyReadTimeout
	if timeout == 0 {
		timeout = -1 // the transport's "no bound"
	}
	return httpapi.NewTransport(httpapi.TransportOptions{
		MaxBodyBytes:        cfg.Sync.MaxBodyBytes,
		MaxDecodedBodyBytes: cfg.Sync.MaxDecodedBodyBytes,
		Limits:              cfg.Limits.Domain(),
		BodyReadTimeout:     timeout,
		Limiter:             lim,
		Now:                 clock.Now,
	})
}

// SyncServiceParams are the inputs of the sync use case.
type SyncServiceParams struct {
	fx.In
	Config          config.Config
	Log             *zap.Logger
	Readiness       *Readiness
	Resolver        ports.ScopeResolver
	Store           ports.Storage            `optional:"true"`
	Declarations    []checkpoint.Declaration `optional:"true"`
	RowValidators   []ports.RowValidator     `group:"syncd.row_validators"`
	Mergers         []ports.CRDTMerger       `group:"syncd.crdt_mergers"`
	CommitValidator ports.CommitValidator    `optional:"true"`
	ReactionPlanner ports.ReactionPlanner    `optional:"true"`
	Blobs           ports.BlobChecker        `optional:"true"`
	Listeners       []ports.CommitListener   `group:"syncd.commit_listeners"`
	Metrics         *Metrics                 `optional:"true"`
	Pull            *pull.Service            `optional:"true"`
}

// NewSyncService builds the sync use case; nil without storage.
func NewSyncService(p SyncServiceParams) (*syncsvc.Service, error) {
	if p.Store == nil {
		return nil, nil
	}
	if p.Config.Sync.MinWireVersion < int(syncsvc.LowestMinWireVersion) && p.Config.Sync.MinWireVersion != 0 {
		return nil, fmt.Errorf("--min-wire-version %d: want 2 or 3", p.Config.Sync.MinWireVersion)
	}
	if p.Config.Sync.MinWireVersion < int(syncsvc.MaxWireVersion) && p.Config.Sync.MinWireVersion != 0 {
		p.Log.Warn("admitting wire-2 clients: their pushes are applied under the wire-3 column rules",
			zap.Int("min_wire_version", p.Config.Sync.MinWireVersion))
	}
	pm, err := newPushMetrics(p.Metrics)
	if err != nil {
		return nil, err
	}
	return syncsvc.New(syncsvc.Options{
		Observe:         pm.observe,
		Schema:          p.Readiness.Schema,
		Store:           p.Store,
		Resolver:        p.Resolver,
		Declarations:    p.Declarations,
		RowValidators:   p.RowValidators,
		CommitValidator: p.CommitValidator,
		ReactionPlanner: p.ReactionPlanner,
		Mergers:         p.Mergers,
		Blobs:           p.Blobs,
		Listeners:       p.Listeners,
		Pull:            p.Pull,
		MinWireVersion:  uint16(p.Config.Sync.MinWireVersion),
		MaxOperations:   p.Config.Sync.MaxOperations,
		Limits:          p.Config.Limits.Domain(),
		Log:             p.Log.Named("sync"),
	})
}

type syncRouteParams struct {
	fx.In
	Transport *httpapi.Transport
	Auth      ports.Authenticator
	Service   *syncsvc.Service `optional:"true"`
	Log       *zap.Logger
}

func newSyncRoutes(p syncRouteParams) ([]RouteHandler, error) {
	if p.Service == nil {
		return nil, nil
	}
	if p.Auth == nil {
		return nil, errNoAuthenticator
	}
	h := &syncHandler{t: p.Transport, svc: p.Service, log: p.Log.Named("sync")}
	return []RouteHandler{{Route: httpapi.RouteSync, Handler: p.Transport.SyncEndpoint(p.Auth, h.serve)}}, nil
}

type syncHandler struct {
	t   *httpapi.Transport
	svc *syncsvc.Service
	log *zap.Logger
}

// serve answers one authenticated request: request-level failures as
// §10.1 JSON before any byte, the response frames otherwise.
func (h *syncHandler) serve(w http.ResponseWriter, r *http.Request, id ports.Identity, body []byte) {
	resp, err := h.svc.Handle(r.Context(), id, body)
	if err != nil {
		h.logFailure(r.Context(), err, id)
		httpapi.WriteTransportError(w, err)
		return
	}
	defer resp.Release()
	out := h.t.Respond(w, r, http.StatusOK, httpapi.ContentTypeSync)
	enc := ssp2.NewEncoder(out, ssp2.KindResponse, resp.WireVersion)
	for _, f := range resp.Frames {
		if err = enc.WriteFrame(f); err != nil {
			break
		}
	}
	if err == nil && resp.Sections != nil {
		_, err = resp.Sections.WriteTo(out) // pull sections, already encoded
	}
	if err == nil {
		err = enc.Close()
	}
	if err != nil {
		if clientGone(r.Context(), err) {
			h.log.Debug("sync response abandoned by the client", zap.Error(err))
		} else {
			h.log.Error("encode sync response", zap.Error(err))
		}
		if out.Discard() {
			httpapi.WriteTransportError(w, syncerr.Wrap(syncerr.InternalError, err))
			return
		}
	}
	if cerr := out.Close(); cerr != nil && err == nil {
		h.log.Debug("write sync response", zap.Error(cerr))
	}
}

// clientGone reports whether err only says that the client went away: its
// request was canceled, or the connection broke under a write.
func clientGone(ctx context.Context, err error) bool {
	return (ctx.Err() != nil && errors.Is(err, ctx.Err())) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

func (h *syncHandler) logFailure(ctx context.Context, err error, id ports.Identity) {
	if clientGone(ctx, err) {
		// The client went away (or the server is shutting down): nothing
		// failed on this side.
		h.log.Debug("sync request abandoned", zap.String("partition", id.Partition), zap.Error(err))
		return
	}
	var se *syncerr.Error
	if errors.As(err, &se) && syncerr.Lookup(se.Code).Code == se.Code && se.Code != syncerr.InternalError {
		h.log.Debug("sync request refused", zap.String("code", string(se.Code)),
			zap.String("reason", se.Reason), zap.String("partition", id.Partition))
		return
	}
	h.log.Error("sync request failed", zap.String("partition", id.Partition), zap.Error(err))
}
