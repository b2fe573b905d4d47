// Package segments holds the use cases of bootstrap segments: building
// and publishing them, downloading them, and sweeping expired ones.
//
// Building (build.go, Builder): SSG2 rows pages (pages.go, SPEC §5.2)
// and whole-table SQLite images at the scope pin (image.go, §5.3), each
// built once per publication key in this process and reused from the
// segment store; app/pull decides which lane a bootstrap takes and
// writes what the Builder returns into the response.
//
// Downloads (this file, §5.4, §5.5): whether a request may read a stored
// segment, either as the authenticated actor naming its requested scopes,
// or as the bearer of a native signed URL, and the bytes it may read.
// Every download is re-authorized: the actor's scopes are resolved again,
// the effective scopes and their digest recomputed, and the digest must
// belong to a publication of the segment in the caller's own partition and
// live log epoch. A segment reference is not a capability; only a signed
// URL is, for its short lifetime.
//
// The sweep (sweep.go, Sweeper) forgets expired publications and the
// segments no publication is left for.
package segments

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Storage is what the use case reads from the sync storage.
type Storage interface {
	LogEpoch(ctx context.Context, partition string) (epoch string, ok bool, err error)
	ReadCheckpoints(ctx context.Context, partition string) ([]checkpoint.Checkpoint, error)
}

// Options configure a Service.
type Options struct {
	Segments ports.SegmentSource
	Storage  Storage
	Resolver ports.ScopeResolver
	// Schema returns the running schema (nil before it compiled); it names
	// the scope variables requested and resolved scopes may use.
	Schema func() *schema.Schema
	// Signer verifies signed URLs; nil refuses every signed-URL request.
	Signer *signedurl.Signer
	// Events, when set, hears every download answered and every failed
	// scope resolution (domain/event).
	Events ports.EventSink
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *zap.Logger
}

// Service authorizes and opens segment downloads. It is safe for
// concurrent use.
type Service struct {
	o Options
}

// New returns the use case.
func New(o Options) (*Service, error) {
	if o.Segments == nil || o.Storage == nil || o.Resolver == nil || o.Schema == nil {
		return nil, errors.New("segments: Options.Segments, Storage, Resolver and Schema are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Service{o: o}, nil
}

func notFound() error {
	return syncerr.New(syncerr.NotFound).WithMessage("segment not found")
}

func forbidden(reason string) error {
	e := syncerr.New(syncerr.Forbidden).WithMessage("not authorized to download this segment")
	e.Reason = reason
	return e
}

func expired(msg string) error {
	return syncerr.New(syncerr.SegmentExpired).WithMessage(msg)
}

// AuthorizeDirect authorizes GET <mount>/segments/{id} for an
// authenticated actor whose X-Syncular-Scopes header is scopesJSON
// (SPEC §5.5).
func (s *Service) AuthorizeDirect(ctx context.Context, id ports.Identity, segmentID string, scopesJSON []byte) (ports.SegmentPublication, error) {
	if len(scopesJSON) == 0 {
		return ports.SegmentPublication{}, syncerr.New(syncerr.InvalidSubscription).WithMessage("X-Syncular-Scopes header is required")
	}
	parsed, err := canonjson.ParseScopes(scopesJSON)
	if err != nil {
		return ports.SegmentPublication{}, syncerr.New(syncerr.InvalidSubscription).WithMessage("invalid requested scopes (X-Syncular-Scopes)")
	}
	requested := scopes.Map(parsed)
	sch := s.o.Schema()
	if sch == nil {
		return ports.SegmentPublication{}, syncerr.New(syncerr.SchemaNotReady)
	}
	mine, err := s.livePublications(ctx, segmentID, id.Partition, nil)
	if err != nil {
		return ports.SegmentPublication{}, err
	}
	if t := sch.Table(mine[0].Table); t != nil {
		if err := scopes.ValidateRequested(t, requested); err != nil {
			return ports.SegmentPublication{}, err
		}
	} else if err := validateRequestedLoose(requested); err != nil {
		return ports.SegmentPublication{}, err
	}
	allowed, err := s.o.Resolver.ResolveScopes(ctx, ports.ScopeRequest{Partition: id.Partition, ActorID: id.ActorID})
	if err != nil {
		if s.o.Events != nil {
			s.o.Events.Emit(event.ScopeResolutionFailed{Who: event.Who{Partition: id.Partition, ActorID: id.ActorID},
				Operation: event.OperationSegment, Outage: ports.IsResolverOutage(err), Code: event.CodeOf(forbiddenOr(err))})
		}
		var se *syncerr.Error
		if errors.As(err, &se) {
			return ports.SegmentPublication{}, err
		}
		s.o.Log.Warn("scope resolver failed; segment download forbidden",
			zap.String("partition", id.Partition), zap.Error(err))
		return ports.SegmentPublication{}, forbidden("scope resolution failed")
	}
	if err := scopes.ValidateAllowed(sch.ScopeVariables(), allowed); err != nil {
		return ports.SegmentPublication{}, err
	}
	out := scopes.Effective(requested, scopes.Granted(allowed))
	if out.Revoked() {
		return ports.SegmentPublication{}, forbidden("requested scopes are revoked")
	}
	return s.choose(ctx, id.Partition, mine, out.Effective.Digest())
}

// forbiddenOr is the error a failed resolution answers the download with.
func forbiddenOr(err error) error {
	var se *syncerr.Error
	if errors.As(err, &se) {
		return err
	}
	return forbidden("")
}

// validateRequestedLoose applies the table-independent requested-scope
// rules when the publication's table is not in the running schema.
func validateRequestedLoose(m scopes.Map) error {
	for k, vs := range m {
		for _, v := range vs {
			if v == scopes.Wildcard {
				return syncerr.Newf(syncerr.InvalidSubscription, "requested scope %q must not be %q", k, scopes.Wildcard)
			}
		}
	}
	return nil
}

// AuthorizeSigned authorizes a signed-URL download: the token is the whole
// grant (SPEC §5.4), no host authentication is involved.
func (s *Service) AuthorizeSigned(ctx context.Context, segmentID, token string) (ports.SegmentPublication, error) {
	if s.o.Signer == nil {
		return ports.SegmentPublication{}, forbidden("signed urls are not configured")
	}
	c, err := s.o.Signer.Verify(token, s.o.Now())
	switch {
	case errors.Is(err, signedurl.ErrExpired):
		return ports.SegmentPublication{}, expired("signed url expired: re-pull for a fresh descriptor")
	case err != nil:
		return ports.SegmentPublication{}, forbidden(err.Error())
	}
	if c.Segment != segmentID {
		return ports.SegmentPublication{}, forbidden("signed url names another segment")
	}
	// The partition is the one whose keyed audience the token carries.
	aud := func(p ports.SegmentPublication) bool { return s.o.Signer.MatchesAudience(c, p.Partition) }
	mine, err := s.livePublications(ctx, segmentID, "", aud)
	if err != nil {
		return ports.SegmentPublication{}, err
	}
	return s.choose(ctx, mine[0].Partition, mine, c.ScopeDigest)
}

// livePublications returns the publications of segmentID in one partition
// (named, or selected by match) at its live log epoch; none is
// sync.not_found, so nothing leaks about other partitions.
func (s *Service) livePublications(ctx context.Context, segmentID, partition string, match func(ports.SegmentPublication) bool) ([]ports.SegmentPublication, error) {
	if !contentaddr.Valid(segmentID) {
		return nil, notFound()
	}
	pubs, err := s.o.Segments.Publications(ctx, segmentID)
	if err != nil {
		return nil, err
	}
	var inPartition []ports.SegmentPublication
	for _, p := range pubs {
		if (partition != "" && p.Partition == partition) || (match != nil && match(p)) {
			inPartition = append(inPartition, p)
		}
	}
	if len(inPartition) == 0 {
		return nil, notFound()
	}
	p := inPartition[0].Partition
	epoch, ok, err := s.o.Storage.LogEpoch(ctx, p)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound()
	}
	var live []ports.SegmentPublication
	for _, pub := range inPartition {
		if pub.Partition == p && pub.LogEpoch == epoch {
			live = append(live, pub)
		}
	}
	if len(live) == 0 {
		return nil, notFound()
	}
	return live, nil
}

// choose selects the publication authorized by digest: none is
// sync.forbidden; only expired ones, or one older than a backfill
// checkpoint of the partition, are sync.segment_expired.
func (s *Service) choose(ctx context.Context, partition string, live []ports.SegmentPublication, digest string) (ports.SegmentPublication, error) {
	now := s.o.Now().UnixMilli()
	var pick ports.SegmentPublication
	matched, fresh := false, false
	for _, p := range live {
		if p.ScopeDigest != digest {
			continue
		}
		matched = true
		if p.Expired(now) {
			continue
		}
		if !fresh || p.CreatedAtMs >= pick.CreatedAtMs {
			pick, fresh = p, true
		}
	}
	if !matched {
		return ports.SegmentPublication{}, forbidden("scope digest matches no publication of the segment")
	}
	if !fresh {
		return ports.SegmentPublication{}, expired("segment expired: re-pull for a fresh descriptor")
	}
	cps, err := s.o.Storage.ReadCheckpoints(ctx, partition)
	if err != nil {
		return ports.SegmentPublication{}, err
	}
	for _, cp := range cps {
		if cp.SchemaVersion > pick.SchemaVersion {
			return ports.SegmentPublication{}, expired("segment predates the partition backfill checkpoint: re-pull")
		}
	}
	return pick, nil
}

// Open returns the bytes of an authorized download (the publication an
// Authorize method returned).
func (s *Service) Open(ctx context.Context, p ports.SegmentPublication) (io.ReadCloser, int64, error) {
	return s.o.Segments.Open(ctx, p.SegmentID)
}

var _ ports.SegmentDownloadObserver = (*Service)(nil)

// ObservingDownloads implements ports.SegmentDownloadObserver: only a
// service with an event sink records downloads.
func (s *Service) ObservingDownloads() bool { return s.o.Events != nil }

// SegmentDownloaded implements ports.SegmentDownloadObserver: the
// download's event.
func (s *Service) SegmentDownloaded(_ context.Context, d ports.SegmentDownload) {
	if s.o.Events == nil {
		return
	}
	e := event.SegmentDownloaded{
		Partition: d.Publication.Partition, ActorID: d.Identity.ActorID, SegmentID: d.Publication.SegmentID,
		Signed: d.Signed, NotModified: d.NotModified, Encoding: d.Encoding, Bytes: d.Bytes, Duration: d.Elapsed,
	}
	if d.Status >= http.StatusInternalServerError {
		e.Code = string(syncerr.InternalError)
	}
	s.o.Events.Emit(e)
}
