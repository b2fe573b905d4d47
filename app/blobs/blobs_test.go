package blobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

type resolverFunc func(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error)

func (f resolverFunc) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	return f(ctx, req)
}

// counts records the metrics the use case reports.
type counts struct {
	mu         sync.Mutex
	uploaded   map[bool]int
	granted    map[string]int
	downloaded map[string]int
	collected  []GCResult
	passes     map[bool]int
}

func (c *counts) Uploaded(created bool, _ int64) { c.mu.Lock(); c.uploaded[created]++; c.mu.Unlock() }
func (c *counts) Granted(a string)               { c.mu.Lock(); c.granted[a]++; c.mu.Unlock() }
func (c *counts) Downloaded(d string)            { c.mu.Lock(); c.downloaded[d]++; c.mu.Unlock() }
func (c *counts) Collected(r GCResult) {
	c.mu.Lock()
	c.collected = append(c.collected, r)
	c.mu.Unlock()
}
func (c *counts) GCPassed(failed bool) { c.mu.Lock(); c.passes[failed]++; c.mu.Unlock() }

type fixture struct {
	t       *testing.T
	svc     *Service
	store   *memory.Store
	blobs   *memblob.Store
	sch     *schema.Schema
	signer  *signedurl.Signer
	presign bool
	now     time.Time
	grants  map[string]scopes.Allowed
	resErr  error
	m       *counts
}

var (
	alice = ports.Identity{ActorID: "alice", Partition: "p1"}
	bob   = ports.Identity{ActorID: "bob", Partition: "p1"}
)

func newFixture(t *testing.T, edit ...func(*Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, store: memory.New(), blobs: memblob.New(), sch: ssptest.Schema(t), now: time.UnixMilli(10_000_000),
		grants: map[string]scopes.Allowed{"alice": {"project_id": {"pa"}}, "bob": {"project_id": {"pb"}}},
		m:      &counts{uploaded: map[bool]int{}, granted: map[string]int{}, downloaded: map[string]int{}, passes: map[bool]int{}}}
	if err := f.store.EnsureSchema(context.Background(), f.sch, nil); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.signer, err = signedurl.NewSigner([]byte(strings.Repeat("k", 32))); err != nil {
		t.Fatal(err)
	}
	o := Options{
		Blobs: f.blobs, Storage: f.store, Schema: func() *schema.Schema { return f.sch },
		Resolver: resolverFunc(func(_ context.Context, r ports.ScopeRequest) (scopes.Allowed, error) {
			return f.grants[r.ActorID], f.resErr
		}),
		Presign: func() bool { return f.presign }, Signer: f.signer, URLBase: "https://sync.example/api",
		MaxBytes: 1 << 10, Metrics: f.m, Now: func() time.Time { return f.now },
	}
	for _, e := range edit {
		e(&o)
	}
	if f.svc, err = New(o); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) upload(id ports.Identity, data []byte) string {
	f.t.Helper()
	blobID := contentaddr.Of(data)
	if err := f.svc.Upload(context.Background(), id, ports.BlobUploadRequest{BlobID: blobID, MediaType: "text/plain", ByteLength: int64(len(data))}, bytes.NewReader(data)); err != nil {
		f.t.Fatal(err)
	}
	return blobID
}

// attach writes task rowID in project with an attachment referencing
// blobID ("" for none), as an applied push would.
func (f *fixture) attach(rowID, project, blobID string) {
	f.t.Helper()
	tbl := f.sch.Table("tasks")
	ref := rowcodec.Null()
	var refs []string
	if blobID != "" {
		ref = rowcodec.BlobRef(`{"blobId":"` + blobID + `","byteLength":3}`)
		refs = []string{blobID}
	}
	payload := ssptest.Full(f.t, tbl, ssptest.Cols{"id": rowcodec.String(rowID), "project_id": rowcodec.String(project),
		"title": rowcodec.String(rowID), "done": rowcodec.Bool(false), "estimate": rowcodec.Null(), "attachment": ref})
	err := f.store.Push(context.Background(), "p1", ports.PushOptions{WriterVersion: f.sch.Version}, func(tx ports.PushTx) error {
		if err := tx.UpsertRow(context.Background(), "tasks", ports.RowWrite{RowID: rowID, Version: 1,
			Scopes: map[string]string{"project_id": project}, Payload: payload,
			Values: []any{rowID, project, rowID, false, nil, nil}}); err != nil {
			return err
		}
		return tx.SetBlobRefs(context.Background(), "tasks", rowID, refs)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) remove(rowID string) {
	f.t.Helper()
	if err := f.store.Push(context.Background(), "p1", ports.PushOptions{}, func(tx ports.PushTx) error {
		return tx.DeleteRow(context.Background(), "tasks", rowID, 0)
	}); err != nil {
		f.t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code syncerr.Code) {
	t.Helper()
	if syncerr.CodeOf(err) != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
}

func TestUpload(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	data := []byte("attached")
	id := f.upload(alice, data)
	info, ok, _ := f.blobs.Stat(ctx, "p1", id)
	if !ok || info.MediaType != "text/plain" || info.CreatedAtMs != f.now.UnixMilli() || info.ByteLength != int64(len(data)) {
		t.Fatalf("stored %+v %v", info, ok)
	}
	// The uploader's partition is registered, so the blob GC reaches it.
	parts, _ := f.store.ListPartitions(ctx)
	if len(parts) != 1 || parts[0].Partition != "p1" {
		t.Fatalf("partitions %+v", parts)
	}
	f.upload(bob, data) // idempotent
	if f.m.uploaded[true] != 1 || f.m.uploaded[false] != 1 {
		t.Fatalf("upload metrics %v", f.m.uploaded)
	}
	for _, tc := range []struct {
		name string
		u    ports.BlobUploadRequest
		body string
		want syncerr.Code
	}{
		{"malformed id", ports.BlobUploadRequest{BlobID: "sha256:xyz", ByteLength: 1}, "x", syncerr.BlobHashMismatch},
		{"declared over the cap", ports.BlobUploadRequest{BlobID: contentaddr.Of([]byte("y")), ByteLength: 2 << 10}, "y", syncerr.BlobTooLarge},
		{"streamed over the cap", ports.BlobUploadRequest{BlobID: contentaddr.Of(bytes.Repeat([]byte("z"), 2<<10)), ByteLength: -1}, strings.Repeat("z", 2<<10), syncerr.BlobTooLarge},
		{"other bytes", ports.BlobUploadRequest{BlobID: contentaddr.Of([]byte("w")), ByteLength: -1}, "v", syncerr.BlobHashMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, f.svc.Upload(ctx, alice, tc.u, strings.NewReader(tc.body)), tc.want)
		})
	}
	if f.blobs.Len() != 1 {
		t.Fatalf("%d blobs stored, want the one good upload", f.blobs.Len())
	}
}

func TestDownloadAuthorization(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.upload(alice, []byte("in project a"))
	unreferenced := f.upload(alice, []byte("nobody's"))
	f.attach("t1", "pa", id)
	for _, tc := range []struct {
		name   string
		who    ports.Identity
		blob   string
		grants map[string]scopes.Allowed
		resErr error
		want   syncerr.Code
	}{
		{name: "an actor who sees the row", who: alice, blob: id},
		{name: "a wildcard grant", who: bob, blob: id, grants: map[string]scopes.Allowed{"bob": {"project_id": {"*"}}}},
		{name: "an actor who does not see the row", who: bob, blob: id, want: syncerr.BlobForbidden},
		{name: "an actor with no grant", who: ports.Identity{ActorID: "carol", Partition: "p1"}, blob: id, want: syncerr.BlobForbidden},
		{name: "another partition", who: ports.Identity{ActorID: "alice", Partition: "p2"}, blob: id, want: syncerr.BlobNotFound},
		{name: "no referencing row", who: alice, blob: unreferenced, want: syncerr.BlobForbidden},
		{name: "resolver failure", who: alice, blob: id, resErr: errors.New("directory down"), want: syncerr.BlobForbidden},
		{name: "resolver outage", who: alice, blob: id, resErr: ports.ErrResolverOutage, want: syncerr.BlobForbidden},
		{name: "unknown blob", who: alice, blob: contentaddr.Of([]byte("never uploaded")), want: syncerr.BlobNotFound},
		{name: "malformed id", who: alice, blob: "sha256:nope", want: syncerr.BlobNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := f.grants
			if tc.grants != nil {
				f.grants = tc.grants
			}
			f.resErr = tc.resErr
			defer func() { f.grants, f.resErr = saved, nil }()
			d, err := f.svc.Download(ctx, tc.who, tc.blob)
			if tc.want != "" {
				wantCode(t, err, tc.want)
				return
			}
			if err != nil || d.URL != "" || d.Info.BlobID != tc.blob {
				t.Fatalf("Download = %+v %v", d, err)
			}
			rc, err := f.svc.Open(ctx, d.Info, 3, 7)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			_ = rc.Close()
			if string(b) != "project" {
				t.Fatalf("range read %q", b)
			}
		})
	}
	// A second row in b's project authorizes bob; deleting it takes that away.
	f.attach("t2", "pb", id)
	if _, err := f.svc.Download(ctx, bob, id); err != nil {
		t.Fatalf("bob with a row of his own: %v", err)
	}
	f.remove("t2")
	_, err := f.svc.Download(ctx, bob, id)
	wantCode(t, err, syncerr.BlobForbidden)
}

func TestNativePresignedURLs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	data := []byte("presigned bytes")
	id := f.upload(alice, data)
	f.attach("t1", "pa", id)
	f.presign = true
	d, err := f.svc.Download(ctx, alice, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.URL, "https://sync.example/api/blob-objects/"+id+"?") || d.ExpiresAtMs != f.now.Add(DefaultURLTTL).UnixMilli() {
		t.Fatalf("download URL %s expires %d", d.URL, d.ExpiresAtMs)
	}
	// The authorization runs before any URL is minted.
	_, err = f.svc.Download(ctx, bob, id)
	wantCode(t, err, syncerr.BlobForbidden)
	q := query(t, d.URL)
	info, err := f.svc.GetSigned(ctx, id, q)
	if err != nil || info.BlobID != id || info.MediaType != "text/plain" {
		t.Fatalf("GetSigned = %+v %v", info, err)
	}
	_, err = f.svc.GetSigned(ctx, contentaddr.Of([]byte("other")), q)
	wantCode(t, err, syncerr.BlobForbidden)
	err = f.svc.PutSigned(ctx, id, q, int64(len(data)), bytes.NewReader(data))
	wantCode(t, err, syncerr.BlobForbidden) // a download URL does not upload
	f.now = f.now.Add(DefaultURLTTL + signedurl.Skew + time.Second)
	_, err = f.svc.GetSigned(ctx, id, q)
	wantCode(t, err, syncerr.BlobForbidden)

	// Upload grants: present, a URL, refused over the cap, none when off.
	g, err := f.svc.UploadGrant(ctx, bob, id, ports.BlobGrantRequest{ByteLength: int64(len(data))})
	if err != nil || !g.Present || g.URL != "" {
		t.Fatalf("grant of a stored blob = %+v %v", g, err)
	}
	fresh := []byte("straight to the store")
	freshID := contentaddr.Of(fresh)
	g, err = f.svc.UploadGrant(ctx, bob, freshID, ports.BlobGrantRequest{ByteLength: int64(len(fresh)), MediaType: "image/png"})
	if err != nil || g.Present || !strings.HasPrefix(g.URL, "https://sync.example/api/blob-objects/"+freshID+"?") {
		t.Fatalf("grant = %+v %v", g, err)
	}
	pq := query(t, g.URL)
	err = f.svc.PutSigned(ctx, freshID, pq, int64(len(fresh))+1, bytes.NewReader(append(fresh, '!')))
	wantCode(t, err, syncerr.BlobHashMismatch)
	err = f.svc.PutSigned(ctx, freshID, pq, -1, strings.NewReader(strings.Repeat("x", len(fresh))))
	wantCode(t, err, syncerr.BlobHashMismatch)
	if err := f.svc.PutSigned(ctx, freshID, pq, int64(len(fresh)), bytes.NewReader(fresh)); err != nil {
		t.Fatal(err)
	}
	if info, ok, _ := f.blobs.Stat(ctx, "p1", freshID); !ok || info.MediaType != "image/png" {
		t.Fatalf("granted upload stored %+v %v", info, ok)
	}
	_, err = f.svc.UploadGrant(ctx, bob, contentaddr.Of([]byte("big")), ports.BlobGrantRequest{ByteLength: 2 << 10})
	wantCode(t, err, syncerr.BlobTooLarge)
	_, err = f.svc.UploadGrant(ctx, bob, "sha256:nope", ports.BlobGrantRequest{ByteLength: 1})
	wantCode(t, err, syncerr.BlobHashMismatch)
	f.presign = false
	g, err = f.svc.UploadGrant(ctx, bob, contentaddr.Of([]byte("later")), ports.BlobGrantRequest{ByteLength: 5})
	if err != nil || g != (ports.BlobGrant{}) {
		t.Fatalf("grant without presigning = %+v %v", g, err)
	}
	if d, err := f.svc.Download(ctx, alice, id); err != nil || d.URL != "" {
		t.Fatalf("download without presigning = %+v %v", d, err)
	}
	if f.m.granted["present"] != 1 || f.m.granted["url"] != 1 || f.m.granted["none"] != 1 || f.m.downloaded["url"] != 1 || f.m.downloaded["object"] != 1 {
		t.Fatalf("metrics %v %v", f.m.granted, f.m.downloaded)
	}
}

func query(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// presigningStore is a store with its own presigner (an object store).
type presigningStore struct {
	*memblob.Store
	ttl time.Duration
}

func (p *presigningStore) PresignGet(_ context.Context, partition, blobID string, ttl time.Duration) (string, error) {
	p.ttl = ttl
	return "https://bucket.example/" + partition + "/" + blobID + "?X-Sig=get", nil
}

func (p *presigningStore) PresignPut(_ context.Context, u ports.BlobUpload, ttl time.Duration) (string, error) {
	p.ttl = ttl
	return fmt.Sprintf("https://bucket.example/%s/%s?X-Len=%d", u.Partition, u.BlobID, u.ByteLength), nil
}

func TestStorePresigner(t *testing.T) {
	ps := &presigningStore{Store: memblob.New()}
	f := newFixture(t, func(o *Options) { o.Blobs, o.Signer, o.URLBase, o.URLTTL = ps, nil, "", time.Hour })
	f.blobs = ps.Store
	ctx := context.Background()
	id := f.upload(alice, []byte("in the bucket"))
	f.attach("t1", "pa", id)
	f.presign = true
	d, err := f.svc.Download(ctx, alice, id)
	if err != nil || d.URL != "https://bucket.example/p1/"+id+"?X-Sig=get" || ps.ttl != signedurl.MaxTTL || d.ExpiresAtMs != f.now.Add(signedurl.MaxTTL).UnixMilli() {
		t.Fatalf("Download = %+v %v (ttl %s)", d, err, ps.ttl)
	}
	g, err := f.svc.UploadGrant(ctx, alice, contentaddr.Of([]byte("new")), ports.BlobGrantRequest{ByteLength: 3})
	if err != nil || !strings.HasSuffix(g.URL, "?X-Len=3") {
		t.Fatalf("grant = %+v %v", g, err)
	}
	if _, err := New(Options{Blobs: memblob.New(), Storage: f.store, Resolver: f.svc.o.Resolver, Schema: f.svc.o.Schema, Presign: func() bool { return true }}); err == nil {
		t.Fatal("presigning without a presigner or a signer accepted")
	}
}

func TestBlobExists(t *testing.T) {
	f := newFixture(t)
	id := f.upload(alice, []byte("here"))
	for _, tc := range []struct {
		partition, id string
		want          bool
	}{{"p1", id, true}, {"p2", id, false}, {"p1", contentaddr.Of([]byte("absent")), false}} {
		if ok, err := f.svc.BlobExists(context.Background(), tc.partition, tc.id); err != nil || ok != tc.want {
			t.Errorf("BlobExists(%s, %s) = %v %v", tc.partition, tc.id, ok, err)
		}
	}
}

// plainStore is a blob store that does not bound its transfers.
type plainStore struct{ ports.BlobStore }

// TestTransferBufferBytes: the routes reserve what the store says one
// transfer holds, and a conservative default for a store that cannot say.
func TestTransferBufferBytes(t *testing.T) {
	f := newFixture(t)
	if got := f.svc.UploadBufferBytes(ports.BlobUploadRequest{ByteLength: 300}); got != 300 {
		t.Fatalf("memblob upload of 300 bytes: %d", got)
	}
	if got := f.svc.UploadBufferBytes(ports.BlobUploadRequest{ByteLength: -1}); got != 1<<10 {
		t.Fatalf("memblob upload of unknown length: %d, want the cap", got)
	}
	if got := f.svc.DownloadBufferBytes(ports.BlobInfo{ByteLength: 300}, 300); got != 0 {
		t.Fatalf("memblob download: %d", got)
	}
	p := newFixture(t, func(o *Options) { o.Blobs = plainStore{o.Blobs} })
	if got := p.svc.UploadBufferBytes(ports.BlobUploadRequest{ByteLength: 300}); got != DefaultTransferBufferBytes {
		t.Fatalf("upload to a store without bounds: %d", got)
	}
	if got := p.svc.DownloadBufferBytes(ports.BlobInfo{ByteLength: 300}, 300); got != DefaultTransferBufferBytes {
		t.Fatalf("download from a store without bounds: %d", got)
	}
}
