// Package leases is the auth-lease use case (SPEC §7.3): one scope
// resolution per round that tells a resolver outage from a failure, the
// lease a live-resolved round issues or refreshes, the outage round served
// from the stored lease, and revocation.
//
// A nil *Service is a server with leases off: no lease is ever issued and
// an outage round fails with sync.auth_lease_required (never a purge).
package leases

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Options configure a Service.
type Options struct {
	// Store keeps the leases (required).
	Store ports.LeaseStore
	// Keys seal the records at rest (required): the first key seals,
	// every key verifies.
	Keys *lease.KeySet
	// TTL is the sliding window (required, positive).
	TTL time.Duration
	// Refresh spares the rewrite of a lease issued less than Refresh ago
	// with the same grant: the round answers the stored lease as it is
	// (at most a tenth of TTL; 0: every live round slides the lease).
	Refresh time.Duration
	// NewID mints a lease id (default: "lease_" and 32 random hex digits).
	NewID func() string
	// Now is the clock (default time.Now).
	Now     func() time.Time
	Log     *zap.Logger
	Metrics *Metrics
}

// Service issues, serves and revokes auth leases.
type Service struct {
	o Options
}

// New validates o and builds the Service.
func New(o Options) (*Service, error) {
	switch {
	case o.Store == nil:
		return nil, errors.New("leases: Options.Store is required")
	case o.Keys == nil:
		return nil, errors.New("leases: Options.Keys is required")
	case o.TTL <= 0:
		return nil, fmt.Errorf("leases: TTL %s: must be positive", o.TTL)
	case o.Refresh < 0 || o.Refresh > o.TTL/10:
		return nil, fmt.Errorf("leases: refresh %s: must be between 0 and a tenth of the TTL %s", o.Refresh, o.TTL)
	}
	if o.NewID == nil {
		o.NewID = NewID
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Service{o: o}, nil
}

// NewID returns a fresh random lease id.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "lease_" + hex.EncodeToString(b)
}

// TTL is the lease window.
func (s *Service) TTL() time.Duration { return s.o.TTL }

// Outcome says how a round's scopes were decided.
type Outcome uint8

// Outcomes of Resolve.
const (
	// Live: the resolver answered. A successful round issues or refreshes
	// the client's lease.
	Live Outcome = iota + 1
	// Failed: the resolver failed (not an outage). The round fails closed
	// (§3.2 rule 5) and issues nothing.
	Failed
	// Leased: the resolver reported an outage and the client's valid
	// lease authorized the round (§7.3.3). Nothing is refreshed.
	Leased
)

// Resolution is the outcome of a round's one scope resolution.
type Resolution struct {
	Scopes  scopes.Resolution
	Outcome Outcome
	// Cause is the resolver's error of a Failed resolution.
	Cause error
	// Lease is the lease that authorized a Leased resolution.
	Lease *lease.Record
}

// Resolve makes a round's one resolveScopes call (SPEC §3.2 rule 3) for
// req, whose ClientID keys the lease. A *syncerr.Error of the resolver
// fails the request with that error; any other error fails closed; the
// outage signal (ports.ErrResolverOutage) is answered from the client's
// lease, or with the request-level sync.auth_lease_required or
// sync.auth_lease_revoked. declared is the running schema's scope
// variables: a live answer naming another is a server bug
// (sync.invalid_subscription), a leased one is narrowed to them. s may be
// nil (leases off).
func Resolve(ctx context.Context, s *Service, r ports.ScopeResolver, req ports.ScopeRequest, declared map[string]bool) (Resolution, error) {
	allowed, err := r.ResolveScopes(ctx, req)
	switch {
	case err == nil:
		if err := scopes.ValidateAllowed(declared, allowed); err != nil {
			return Resolution{}, err
		}
		return Resolution{Scopes: scopes.Granted(allowed), Outcome: Live}, nil
	case ports.IsResolverOutage(err):
		if s == nil {
			return Resolution{}, syncerr.Wrap(syncerr.AuthLeaseRequired, err).
				WithMessage("live authorization is unavailable and this server issues no auth leases")
		}
		rec, err := s.Authorize(ctx, req.Partition, req.ClientID, req.ActorID)
		if err != nil {
			return Resolution{}, err
		}
		return Resolution{Scopes: scopes.Granted(lease.Narrow(rec.AllowedScopes, declared)), Outcome: Leased, Lease: rec}, nil
	}
	var se *syncerr.Error
	if errors.As(err, &se) {
		return Resolution{}, err
	}
	return Resolution{Scopes: scopes.Failed(), Outcome: Failed, Cause: err}, nil
}

// Authorize serves an outage round of actorID on (partition, clientID)
// from the stored lease (§7.3.3): the lease when it is the actor's, valid
// now and unrevoked, else the refusal as a request-level *syncerr.Error.
// A lease whose seal does not verify is treated as absent (and logged):
// the store was written by someone without the keys. Reading the store
// may fail; that error is not a refusal.
func (s *Service) Authorize(ctx context.Context, partition, clientID, actorID string) (*lease.Record, error) {
	st, err := s.o.Store.GetLease(ctx, partition, clientID)
	if err != nil {
		return nil, fmt.Errorf("read auth lease: %w", err)
	}
	st = s.trusted(st)
	if _, refused := lease.Authorize(st, actorID, s.o.Now().UnixMilli()); refused != 0 {
		s.o.Metrics.outage(refused.String())
		return nil, refused.Err()
	}
	s.o.Metrics.outage("served")
	rec := st.Record
	return &rec, nil
}

// trusted returns st when its seal verifies, else nil.
func (s *Service) trusted(st *lease.Stored) *lease.Stored {
	if st == nil || s.o.Keys.Verify(st.Record, st.Signature) {
		return st
	}
	s.o.Metrics.sealFailure()
	s.o.Log.Error("stored auth lease has a seal none of the keys made; treated as absent",
		zap.String("partition", st.Partition), zap.String("client_id", st.ClientID))
	return nil
}

// maxIssueAttempts bounds the compare-and-set retries of Issue: each
// retry means another write to the same client's lease came first.
const maxIssueAttempts = 8

// Issue issues or refreshes the lease of actorID on (partition, clientID)
// after a successful live-resolved round (§7.3.3), with the round's
// allowed map, and returns what the LEASE frame carries. A refresh slides
// the same id; a revoked, foreign or untrusted lease is replaced under a
// fresh id. Within Options.Refresh of the last write, an unchanged lease
// is answered as stored.
func (s *Service) Issue(ctx context.Context, partition, clientID, actorID string, allowed scopes.Allowed) (lease.Record, error) {
	for range maxIssueAttempts {
		cur, err := s.o.Store.GetLease(ctx, partition, clientID)
		if err != nil {
			return lease.Record{}, fmt.Errorf("read auth lease: %w", err)
		}
		now := s.o.Now().UnixMilli()
		trusted := s.trusted(cur)
		if lease.Current(trusted, actorID, allowed, now, s.o.Refresh) {
			s.o.Metrics.kept()
			return trusted.Record, nil
		}
		next := lease.Issue(trusted, partition, clientID, actorID, allowed, now, s.o.TTL, s.o.NewID)
		ok, err := s.o.Store.PutLease(ctx, cur, lease.Stored{Record: next, Signature: s.o.Keys.Sign(next)})
		if err != nil {
			return lease.Record{}, fmt.Errorf("store auth lease: %w", err)
		}
		if ok {
			fresh := cur == nil || cur.LeaseID != next.LeaseID
			s.o.Metrics.issued(fresh)
			if fresh {
				s.o.Log.Debug("auth lease issued", zap.String("partition", partition), zap.String("client_id", clientID),
					zap.String("actor_id", actorID), zap.Int64("expires_at_ms", next.ExpiresAtMs))
			}
			return next, nil
		}
	}
	return lease.Record{}, fmt.Errorf("store auth lease: %d concurrent writes to the lease of client %q came first", maxIssueAttempts, clientID)
}

// Revoke revokes the lease leaseID of partition (§7.3.4), durably: the
// next outage round of its client fails with sync.auth_lease_revoked, and
// the id is never issued again (a live round mints a fresh one). found
// reports whether a stored lease carried the id; an unknown id is
// recorded all the same.
func (s *Service) Revoke(ctx context.Context, partition, leaseID string) (found bool, err error) {
	if partition == "" || leaseID == "" {
		return false, syncerr.Newf(syncerr.InvalidRequest, "revoke auth lease: partition and lease id are required")
	}
	found, err = s.o.Store.RevokeLease(ctx, partition, leaseID)
	if err != nil {
		return false, fmt.Errorf("revoke auth lease: %w", err)
	}
	s.o.Metrics.revoked()
	s.o.Log.Info("auth lease revoked", zap.String("partition", partition), zap.String("lease_id", leaseID), zap.Bool("found", found))
	return found, nil
}
