package ports

import (
	"context"
	"errors"
	"net/http"

	"github.com/syncd-dev/syncd/domain/scopes"
)

// Identity is who a request acts as. The protocol carries no credentials
// (SPEC §1.1): the host derives both fields from the transport request.
type Identity struct {
	// ActorID is the authenticated actor; it is recorded on every commit
	// and binds client ids within the partition. Never empty.
	ActorID string
	// Partition names the request's partition (tenant). Never empty.
	Partition string
	// Scopes is the grant the credential itself carries (a signed claim,
	// a development header), for resolvers that read it back through
	// IdentityFrom. nil when the credential carries none; what nil means
	// is up to the resolver paired with the authenticator.
	Scopes scopes.Allowed
	// Claims are the credential's verified claims (a JWT's payload, as
	// JSON decodes it), for resolvers that decide on them (--scopes
	// rules). nil when the credential carries none. Read-only.
	Claims map[string]any
}

// Authenticator maps a transport request to an Identity. It runs on
// every HTTP request and WebSocket upgrade before any protocol work, so it
// is the only place credentials are read (SPEC §1.1).
//
// A failure is a *syncerr.Error with code sync.auth_required (HTTP 401);
// its Reason may explain the failure to operators, its message never does.
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

// ScopeRequest is what a resolver decides on: one actor in one partition,
// optionally on behalf of one client replica.
type ScopeRequest struct {
	Partition string
	ActorID   string
	ClientID  string
}

// ScopeResolver returns the allowed scopes of an actor (SPEC §3.2 rule 3):
// one map over every scope variable the actor holds across all tables,
// variable → values, where "*" admits any value. The server calls it at
// most once per request and decides every subscription and every write of
// that request against the same answer, so it must be stable within a
// request.
//
// It is separate from Authenticator because grants change without
// credentials changing (realtime scope refresh re-resolves a live
// session), and because many hosts keep grants in their own database.
//
// Errors fail closed: an ordinary error revokes the request's
// subscriptions and forbids its writes. A *syncerr.Error fails the whole
// request with that error. ErrResolverOutage (or an *OutageError) asks the
// server to authorize from the client's auth lease instead (SPEC §7.3.3).
type ScopeResolver interface {
	ResolveScopes(ctx context.Context, req ScopeRequest) (scopes.Allowed, error)
}

// ScopeInvalidator is a ScopeResolver that keeps answers (a cache of
// its grant source). InvalidateScopes drops what it keeps for actorID in
// partition (for every actor of the partition when actorID is ""), so
// the next resolution asks the source again: the host's grants changed.
// POST /admin/realtime/refresh-scopes calls it before re-resolving the
// live sessions.
type ScopeInvalidator interface {
	InvalidateScopes(partition, actorID string)
}

// ErrResolverOutage is what a ScopeResolver returns (alone, wrapped with
// %w, or as an *OutageError) when its grant source is temporarily
// unavailable, as opposed to failing. It opts the request into lease
// authorization (SPEC §7.3.3): the server answers from the client's
// stored auth lease, or fails the request with the retryable
// sync.auth_lease_required (sync.auth_lease_revoked for a revoked lease).
// It never revokes subscriptions, so clients purge nothing. Any other
// error is a failure and fails closed (§3.2 rule 5).
var ErrResolverOutage = errors.New("scope resolver outage")

// OutageError reports a resolver outage with its cause (the grant
// database timed out, the identity service answered 503), kept for the
// server's logs. errors.Is(err, ErrResolverOutage) holds for it.
type OutageError struct {
	Cause error
}

func (e *OutageError) Error() string {
	if e.Cause == nil {
		return ErrResolverOutage.Error()
	}
	return ErrResolverOutage.Error() + ": " + e.Cause.Error()
}

// Is makes an OutageError match ErrResolverOutage.
func (e *OutageError) Is(target error) bool { return target == ErrResolverOutage }

// Unwrap returns the cause.
func (e *OutageError) Unwrap() error { return e.Cause }

// IsResolverOutage reports whether a resolver's error is the outage signal.
func IsResolverOutage(err error) bool { return errors.Is(err, ErrResolverOutage) }

type identityKey struct{}

// WithIdentity returns ctx carrying id. The transport stores the
// authenticated identity this way so resolvers and use cases downstream
// see the same value the authenticator produced.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity stored by WithIdentity.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id the transport took
// from the request or generated, for every log line of that request.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the id stored by WithRequestID ("" when none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
