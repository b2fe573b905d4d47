// Package blobs is the blob use case (SPEC §5.9): uploads verified
// against their content address while they stream, upload grants, downloads
// re-authorized against the rows that reference the blob, the push-time
// existence check, and the blob GC (the orphan sweep).
//
// The id alone never authorizes a download: a download is authorized iff
// at least one current row referencing the blob passes the §3.4
// stored-row scope test for the actor (the reference index gives the
// candidates), else blob.forbidden. That is not secrecy of the id: inside
// its partition an id tells any authenticated actor whether the blob is
// stored (the grant's present marker, 403 against 404, the push check),
// and gives its bytes to any actor who may push a row with a blob_ref
// column, by referencing it in a row of its own (ARCHITECTURE.md, "What a
// blob id reveals"). Only a presigned URL is a bearer grant, for its
// short lifetime.
package blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Defaults.
const (
	// DefaultMaxBytes is the reference's blob size cap (64 MiB).
	DefaultMaxBytes = 64 << 20
	// DefaultURLTTL is a presigned URL's lifetime.
	DefaultURLTTL = 5 * time.Minute
	// DefaultOrphanGrace is how long an unreferenced blob is kept after
	// its upload (SPEC §5.9.2: 24 h, longer than any upload→push window).
	DefaultOrphanGrace = 24 * time.Hour
	// DefaultGCPage is how many candidates one claim transaction takes.
	DefaultGCPage = 100
	// DefaultTransferBufferBytes is the memory charged for one transfer
	// of a store that does not bound its own (ports.BlobBuffers).
	DefaultTransferBufferBytes = 1 << 20
)

// Storage is what the use case needs of the sync storage.
type Storage interface {
	TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error)
	ListPartitions(ctx context.Context) ([]ports.PartitionInfo, error)
	ports.PushStore
	ports.BlobRefReader
	ports.BlobClaimStore
}

// Metrics hears what the use case did (nil: nothing).
type Metrics interface {
	// Uploaded: an upload stored bytes new to the store (created) or
	// found them stored.
	Uploaded(created bool, bytes int64)
	// Granted: an upload grant answered "url", "present" or "none".
	Granted(answer string)
	// Downloaded: an authorized download answered "bytes" or "url", or a
	// presigned object URL was served ("object").
	Downloaded(delivery string)
	// Collected: one partition's collection, also when it failed part
	// way.
	Collected(r GCResult)
	// GCPassed: a scheduled GC pass over every partition ended.
	GCPassed(failed bool)
}

// Options configure a Service.
type Options struct {
	Blobs    ports.BlobStore
	Storage  Storage
	Resolver ports.ScopeResolver
	// Schema returns the running schema (nil before it compiled).
	Schema func() *schema.Schema
	// MaxBytes caps a blob (default DefaultMaxBytes).
	MaxBytes int64
	// Presign reports whether downloads answer presigned URLs and upload
	// grants mint them (nil: never). The store's own presigner
	// (ports.BlobPresigner) mints them when it has one, else Signer does.
	Presign func() bool
	// Signer mints and verifies the host's native presigned URLs, under
	// URLBase (the external base URL of the sync API, mount included).
	Signer  *signedurl.Signer
	URLBase string
	// URLTTL is a presigned URL's lifetime (default DefaultURLTTL; the
	// native scheme caps it at 15 minutes).
	URLTTL time.Duration
	// OrphanGrace is how long an unreferenced blob is kept after its
	// upload (default DefaultOrphanGrace), and GCPage the candidates
	// one claim takes (default DefaultGCPage): see GC.
	OrphanGrace time.Duration
	GCPage      int
	Metrics     Metrics
	// Events, when set, hears the blob GC (domain/event).
	Events ports.EventSink
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *zap.Logger
}

// Service is the blob use case. It is safe for concurrent use.
type Service struct {
	o         Options
	presigner ports.BlobPresigner // nil: native URLs
	*GC
}

var (
	_ ports.BlobService = (*Service)(nil)
	_ ports.BlobChecker = (*Service)(nil)
)

// New returns the use case. Presigning needs the store's presigner or a
// Signer with its URLBase.
func New(o Options) (*Service, error) {
	if o.Blobs == nil || o.Storage == nil || o.Resolver == nil || o.Schema == nil {
		return nil, errors.New("blobs: Options.Blobs, Storage, Resolver and Schema are required")
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.URLTTL <= 0 {
		o.URLTTL = DefaultURLTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	gc, err := NewGC(GCOptions{Blobs: o.Blobs, Storage: o.Storage, OrphanGrace: o.OrphanGrace, Page: o.GCPage, Metrics: o.Metrics, Events: o.Events, Now: o.Now, Log: o.Log})
	if err != nil {
		return nil, err
	}
	s := &Service{o: o, GC: gc}
	s.presigner, _ = o.Blobs.(ports.BlobPresigner)
	if o.Presign != nil && s.presigner == nil && (o.Signer == nil || o.URLBase == "") {
		return nil, errors.New("blobs: presigning needs a store that presigns, or a Signer and URLBase for native URLs")
	}
	return s, nil
}

func (s *Service) presign() bool { return s.o.Presign != nil && s.o.Presign() }

func notFound(msg string) error { return syncerr.New(syncerr.BlobNotFound).WithMessage(msg) }

func forbidden(msg string) error { return syncerr.New(syncerr.BlobForbidden).WithMessage(msg) }

func badID() error {
	return syncerr.New(syncerr.BlobHashMismatch).WithMessage(`blob id is not "sha256:" and 64 lowercase hex digits`)
}

func tooLarge(maxBytes int64) error {
	return syncerr.New(syncerr.BlobTooLarge).WithMessage(fmt.Sprintf("blob exceeds the %d-byte cap", maxBytes))
}

// Upload is PUT <mount>/blobs/{blobId} (SPEC §5.9.3): host authentication
// only; the declared length is checked against the cap at once, and the
// store checks the streamed count and the content address as it reads.
// A blob already stored is an idempotent success.
func (s *Service) Upload(ctx context.Context, id ports.Identity, u ports.BlobUploadRequest, body io.Reader) error {
	if !contentaddr.Valid(u.BlobID) {
		return badID()
	}
	if u.ByteLength > s.o.MaxBytes {
		return tooLarge(s.o.MaxBytes)
	}
	now := s.o.Now().UnixMilli()
	// The partition is registered like any authenticated request's, so
	// the blob GC, which walks the registry, reaches its blobs.
	if _, err := s.o.Storage.TouchPartition(ctx, id.Partition, now); err != nil {
		return fmt.Errorf("touch partition: %w", err)
	}
	info, created, err := s.o.Blobs.Put(ctx, ports.BlobUpload{
		Partition: id.Partition, BlobID: u.BlobID, MediaType: u.MediaType,
		ByteLength: u.ByteLength, MaxBytes: s.o.MaxBytes, CreatedAtMs: now,
	}, body)
	if err != nil {
		return err
	}
	s.o.Metrics.Uploaded(created, info.ByteLength)
	return nil
}

// UploadBufferBytes is the memory the store holds while an upload of u
// streams (the transport reserves it on the in-flight body budget).
func (s *Service) UploadBufferBytes(u ports.BlobUploadRequest) int64 {
	b, ok := s.o.Blobs.(ports.BlobBuffers)
	if !ok {
		return DefaultTransferBufferBytes
	}
	return b.PutBufferBytes(ports.BlobUpload{BlobID: u.BlobID, MediaType: u.MediaType, ByteLength: u.ByteLength, MaxBytes: s.o.MaxBytes})
}

// DownloadBufferBytes is the memory the store holds while length bytes of
// info stream out.
func (s *Service) DownloadBufferBytes(info ports.BlobInfo, length int64) int64 {
	b, ok := s.o.Blobs.(ports.BlobBuffers)
	if !ok {
		return DefaultTransferBufferBytes
	}
	return b.OpenBufferBytes(info, length)
}

// UploadGrant is POST <mount>/blobs/{blobId}/upload-grant (SPEC §5.9.3):
// the cap is checked against the declared length before anything else; a
// blob already stored is "present" (the client skips its upload); with
// presigning on the answer is one presigned PUT of exactly byteLength
// bytes, otherwise no grant (the client uploads through the server).
func (s *Service) UploadGrant(ctx context.Context, id ports.Identity, blobID string, g ports.BlobGrantRequest) (ports.BlobGrant, error) {
	if !contentaddr.Valid(blobID) {
		return ports.BlobGrant{}, badID()
	}
	if g.ByteLength < 0 || g.ByteLength > s.o.MaxBytes {
		return ports.BlobGrant{}, tooLarge(s.o.MaxBytes)
	}
	now := s.o.Now()
	if _, err := s.o.Storage.TouchPartition(ctx, id.Partition, now.UnixMilli()); err != nil {
		return ports.BlobGrant{}, fmt.Errorf("touch partition: %w", err)
	}
	present, err := s.present(ctx, id.Partition, blobID)
	if err != nil {
		return ports.BlobGrant{}, err
	}
	if present {
		s.o.Metrics.Granted("present")
		return ports.BlobGrant{Present: true}, nil
	}
	if !s.presign() {
		s.o.Metrics.Granted("none")
		return ports.BlobGrant{}, nil
	}
	u := ports.BlobUpload{Partition: id.Partition, BlobID: blobID, MediaType: g.MediaType,
		ByteLength: g.ByteLength, MaxBytes: s.o.MaxBytes, CreatedAtMs: now.UnixMilli()}
	var out ports.BlobGrant
	if s.presigner != nil {
		ttl := min(s.o.URLTTL, signedurl.MaxTTL)
		if out.URL, err = s.presigner.PresignPut(ctx, u, ttl); err != nil {
			return ports.BlobGrant{}, fmt.Errorf("presign upload: %w", err)
		}
		out.ExpiresAtMs = now.Add(ttl).UnixMilli()
	} else {
		q, exp := s.o.Signer.MintBlob(signedurl.BlobGrant{Op: signedurl.BlobPut, Blob: blobID, ByteLength: g.ByteLength,
			MediaType: g.MediaType, Partition: id.Partition}, now, s.o.URLTTL)
		out.URL, out.ExpiresAtMs = s.objectURL(blobID, q), exp
	}
	s.o.Metrics.Granted("url")
	return out, nil
}

// present reports whether a blob is stored and not about to be collected.
func (s *Service) present(ctx context.Context, partition, blobID string) (bool, error) {
	_, ok, err := s.o.Blobs.Stat(ctx, partition, blobID)
	if err != nil || !ok {
		return false, err
	}
	claims, err := s.o.Storage.ListBlobClaims(ctx, partition)
	if err != nil {
		return false, fmt.Errorf("read blob claims: %w", err)
	}
	for _, c := range claims {
		if c == blobID {
			return false, nil
		}
	}
	return true, nil
}

func (s *Service) objectURL(blobID, query string) string {
	return s.o.URLBase + signedurl.BlobObjectPath + blobID + "?" + query
}

// Download is GET <mount>/blobs/{blobId} (SPEC §5.9.5): an unknown blob
// is blob.not_found; a known one is authorized against the rows that
// reference it (blob.forbidden otherwise); then, with presigning on, the
// answer is a presigned URL and the bytes are not served here.
func (s *Service) Download(ctx context.Context, id ports.Identity, blobID string) (ports.BlobDownload, error) {
	if !contentaddr.Valid(blobID) {
		return ports.BlobDownload{}, notFound("unknown blob")
	}
	now := s.o.Now()
	if _, err := s.o.Storage.TouchPartition(ctx, id.Partition, now.UnixMilli()); err != nil {
		return ports.BlobDownload{}, fmt.Errorf("touch partition: %w", err)
	}
	info, ok, err := s.o.Blobs.Stat(ctx, id.Partition, blobID)
	if err != nil {
		return ports.BlobDownload{}, err
	}
	if !ok {
		return ports.BlobDownload{}, notFound("unknown blob")
	}
	if err := s.authorize(ctx, id, blobID); err != nil {
		return ports.BlobDownload{}, err
	}
	if !s.presign() {
		s.o.Metrics.Downloaded("bytes")
		return ports.BlobDownload{Info: info}, nil
	}
	d := ports.BlobDownload{Info: info}
	if s.presigner != nil {
		ttl := min(s.o.URLTTL, signedurl.MaxTTL)
		if d.URL, err = s.presigner.PresignGet(ctx, id.Partition, blobID, ttl); err != nil {
			return ports.BlobDownload{}, fmt.Errorf("presign download: %w", err)
		}
		d.ExpiresAtMs = now.Add(ttl).UnixMilli()
	} else {
		q, exp := s.o.Signer.MintBlob(signedurl.BlobGrant{Op: signedurl.BlobGet, Blob: blobID, Partition: id.Partition}, now, s.o.URLTTL)
		d.URL, d.ExpiresAtMs = s.objectURL(blobID, q), exp
	}
	s.o.Metrics.Downloaded("url")
	return d, nil
}

// authorize is the download rule of SPEC §5.9.5: the actor's scopes are
// resolved once, and the first row referencing the blob whose stored
// scopes pass the §3.4 write-path test (steps 1–3) authorizes. No such
// row, or a failed resolver, is blob.forbidden.
func (s *Service) authorize(ctx context.Context, id ports.Identity, blobID string) error {
	sch := s.o.Schema()
	if sch == nil {
		return syncerr.New(syncerr.SchemaNotReady)
	}
	allowed, err := s.o.Resolver.ResolveScopes(ctx, ports.ScopeRequest{Partition: id.Partition, ActorID: id.ActorID})
	if err != nil {
		// A lease never authorizes a download: an outage denies too.
		s.o.Log.Warn("scope resolver failed; blob download forbidden", zap.String("partition", id.Partition), zap.Error(err))
		return forbidden("not authorized to download this blob")
	}
	if err := scopes.ValidateAllowed(sch.ScopeVariables(), allowed); err != nil {
		return err
	}
	res := scopes.Granted(allowed)
	rows, err := s.o.Storage.ListRowsReferencingBlob(ctx, id.Partition, blobID)
	if err != nil {
		return fmt.Errorf("read blob references: %w", err)
	}
	for _, row := range rows {
		t := sch.Table(row.Table)
		if t == nil {
			continue
		}
		if scopes.AuthorizeWrite(t, scopes.Stored(row.Scopes), res) == nil {
			return nil
		}
	}
	return forbidden("not authorized to download this blob")
}

// Open reads an authorized blob.
func (s *Service) Open(ctx context.Context, info ports.BlobInfo, offset, length int64) (io.ReadCloser, error) {
	rc, _, err := s.o.Blobs.Open(ctx, info.Partition, info.BlobID, offset, length)
	return rc, err
}

// verify checks a native presigned URL's query for op: the URL is the
// whole grant, so every failure is blob.forbidden.
func (s *Service) verify(blobID string, q url.Values, op signedurl.BlobOp) (signedurl.BlobGrant, error) {
	if s.o.Signer == nil {
		return signedurl.BlobGrant{}, forbidden("presigned blob urls are not configured")
	}
	g, err := s.o.Signer.VerifyBlob(blobID, q, s.o.Now())
	switch {
	case errors.Is(err, signedurl.ErrExpired):
		return signedurl.BlobGrant{}, forbidden("presigned url expired: request a fresh one")
	case err != nil:
		return signedurl.BlobGrant{}, forbidden("presigned url does not verify")
	case g.Op != op:
		return signedurl.BlobGrant{}, forbidden("presigned url grants another operation")
	}
	return g, nil
}

// GetSigned authorizes GET <mount>/blob-objects/{blobId}: a native
// presigned download URL (SPEC §5.9.5).
func (s *Service) GetSigned(ctx context.Context, blobID string, q url.Values) (ports.BlobInfo, error) {
	if !contentaddr.Valid(blobID) {
		return ports.BlobInfo{}, notFound("unknown blob")
	}
	g, err := s.verify(blobID, q, signedurl.BlobGet)
	if err != nil {
		return ports.BlobInfo{}, err
	}
	info, ok, err := s.o.Blobs.Stat(ctx, g.Partition, blobID)
	if err != nil {
		return ports.BlobInfo{}, err
	}
	if !ok {
		return ports.BlobInfo{}, notFound("unknown blob")
	}
	s.o.Metrics.Downloaded("object")
	return info, nil
}

// PutSigned stores the body of PUT <mount>/blob-objects/{blobId}: a native
// presigned upload URL, which admits exactly the granted length and media
// type; the content address is verified as the bytes stream in, as on the
// direct upload.
func (s *Service) PutSigned(ctx context.Context, blobID string, q url.Values, contentLength int64, body io.Reader) error {
	if !contentaddr.Valid(blobID) {
		return badID()
	}
	g, err := s.verify(blobID, q, signedurl.BlobPut)
	if err != nil {
		return err
	}
	if contentLength >= 0 && contentLength != g.ByteLength {
		return syncerr.New(syncerr.BlobHashMismatch).WithMessage(fmt.Sprintf("body has %d bytes, the grant is for %d", contentLength, g.ByteLength))
	}
	info, created, err := s.o.Blobs.Put(ctx, ports.BlobUpload{
		Partition: g.Partition, BlobID: blobID, MediaType: g.MediaType,
		ByteLength: g.ByteLength, MaxBytes: max(g.ByteLength, 1), CreatedAtMs: s.o.Now().UnixMilli(),
	}, body)
	if err != nil {
		return err
	}
	s.o.Metrics.Uploaded(created, info.ByteLength)
	return nil
}

// BlobExists is the push-time existence check (SPEC §5.9.6): the store has
// the blob (the push pipeline also refuses a blob the GC claimed).
func (s *Service) BlobExists(ctx context.Context, partition, blobID string) (bool, error) {
	_, ok, err := s.o.Blobs.Stat(ctx, partition, blobID)
	return ok, err
}

type noMetrics struct{}

func (noMetrics) Uploaded(bool, int64) {}
func (noMetrics) Granted(string)       {}
func (noMetrics) Downloaded(string)    {}
func (noMetrics) Collected(GCResult)   {}
func (noMetrics) GCPassed(bool)        {}
