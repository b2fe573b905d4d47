package testcontrol

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/auth/granttable"
	"github.com/syncd-dev/syncd/adapters/blobs/memblob"
	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/adapters/crdt/yjsdoc"
	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/adapters/leases/sqllease"
	"github.com/syncd-dev/syncd/adapters/segments/imagebuilder"
	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/adapters/storage/sqlstore"
	"github.com/syncd-dev/syncd/app/blobs"
	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/app/segments"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/lease"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// instance is one test server: its own database (a SQLite file or a
// PostgreSQL schema), its own directory, a virtual clock, a grant table,
// and the same use-case services the real server assembles, behind the
// public routes.
type instance struct {
	id      string
	base    string // URL of the instance's routes, "http://host:port/i/<id>"
	spec    spec
	dir     string
	db      database
	clock   *clock.Virtual
	grants  *granttable.Table
	auth    granttable.Authenticator
	caps    caps // bound the database and what segs and blobs hold
	segs    quotaSegments
	signer  *signedurl.Signer // nil without signedUrls
	ttlSecs atomic.Int64
	// blobs is the instance's in-memory blob store; presign turns
	// presigned blob URLs on (setBlobPresign), minted with blobSigner,
	// a key of the instance's own.
	blobs      quotaBlobs
	presign    atomic.Bool
	blobSigner *signedurl.Signer
	// leases serves §7.3 auth leases over the live database's lease
	// store, leaseStore (nil without the leases create option).
	leases     *leases.Service
	leaseStore atomic.Pointer[sqllease.Store]
	rules      rules
	log        *zap.Logger

	failIdempotency atomic.Bool
	// nextEpoch, when set, is the log epoch the next rotation mints.
	nextEpoch atomic.Pointer[string]

	// mu is held shared by every request and method that reads the live
	// services, exclusively by restore and close, which replace or end them.
	mu     sync.RWMutex
	live   *services
	closed bool
	// captured is set by captureBackup: there is a snapshot to restore.
	captured bool
	routes   http.Handler
	// hub serves the instance's realtime sockets over the live services;
	// relay hands it the instance's commits (one node, no fanout).
	hub   *realtime.Hub
	relay *realtime.Relay
}

// services are what one open database serves with.
type services struct {
	store *sqlstore.Store
	sync  *round.Service
	seg   *segments.Service
	blob  *blobs.Service
	// leases is the lease store in this database (nil without leases).
	leases *sqllease.Store
}

func newInstance(ctx context.Context, id, base, parentDir string, eng engine, s spec, c caps, log *zap.Logger) (*instance, error) {
	dir, err := os.MkdirTemp(parentDir, "syncd-test-instance-*")
	if err != nil {
		return nil, err
	}
	db, err := eng.newDB(ctx, id, dir, c.dbBytes)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	inst, err := assemble(ctx, id, base, dir, db, s, c, log)
	if err != nil {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, db.drop(dctx), os.RemoveAll(dir))
	}
	return inst, nil
}

// assemble builds the instance over its new database; the caller drops
// the database and the directory when it fails.
func assemble(ctx context.Context, id, base, dir string, db database, s spec, c caps, log *zap.Logger) (*instance, error) {
	var err error
	vclock := clock.NewVirtual(s.nowMs)
	mem := &memQuota{max: c.memBytes, segs: memseg.New()}
	inst := &instance{
		id: id, base: base, spec: s, dir: dir, db: db,
		clock: vclock, grants: granttable.NewTable(),
		auth: granttable.Authenticator{Partition: s.partition}, caps: c,
		segs: quotaSegments{Store: mem.segs, q: mem, now: vclock.NowMs}, blobs: quotaBlobs{Store: memblob.New(), q: mem}, log: log,
	}
	inst.ttlSecs.Store(s.signedURLSeconds)
	if s.leaseTTL > 0 {
		if inst.leases, err = inst.newLeases(); err != nil {
			return nil, err
		}
	}
	inst.relay = &realtime.Relay{Log: log.Named("realtime")}
	// No heartbeat and no pings: nothing in an instance runs on a timer.
	inst.hub, err = realtime.New(realtime.Options{
		Store: liveStore{inst}, Schema: func() *schema.Schema { return s.schema }, Resolver: inst.grants, Leases: inst.leases,
		Rounds: liveRounds{inst}, MaxDeltaBytes: s.maxDeltaBytes, MaxPresenceBytes: s.maxPresenceBytes, Now: inst.clock.Now, Sleep: clock.Wall{}.Sleep, Log: log.Named("realtime"),
	})
	if err != nil {
		return nil, err
	}
	inst.relay.SetHandler(inst.hub)
	if s.signedURLs {
		key := make([]byte, signedurl.MinKeyBytes)
		_, _ = rand.Read(key)
		if inst.signer, err = signedurl.NewSigner(key); err != nil {
			return nil, err
		}
	}
	key := make([]byte, signedurl.MinKeyBytes)
	_, _ = rand.Read(key)
	if inst.blobSigner, err = signedurl.NewSigner(key); err != nil {
		return nil, err
	}
	live, err := inst.open(ctx)
	if err != nil {
		return nil, err
	}
	inst.setLive(live)
	if err := db.ready(ctx); err != nil {
		_ = live.store.Close()
		return nil, err
	}
	inst.routes, err = inst.router()
	if err != nil {
		_ = live.store.Close()
		return nil, err
	}
	return inst, nil
}

// storeOptions are the instance's store options: its epochs and its clock.
func (in *instance) storeOptions() storeOptions {
	return storeOptions{newEpoch: in.mintEpoch, now: in.clock.Now}
}

// layout makes the tables of the instance schema and of the lease store
// in a store open on an instance database.
func (in *instance) layout(ctx context.Context, st *sqlstore.Store) error {
	_, err := in.layoutLeases(ctx, st)
	return err
}

// layoutLeases is layout, returning the lease store over st (nil without
// leases).
func (in *instance) layoutLeases(ctx context.Context, st *sqlstore.Store) (*sqllease.Store, error) {
	if err := st.EnsureSchema(ctx, in.spec.schema, nil); err != nil {
		return nil, err
	}
	if in.leases == nil {
		return nil, nil
	}
	return sqllease.Open(ctx, sqllease.Options{DB: st.DB(), ReadDB: st.ReadDB(), Now: in.clock.NowMs})
}

// open opens the instance database, ensures its schema and assembles the
// services over it. The instance answers only once this returned.
func (in *instance) open(ctx context.Context) (*services, error) {
	st, err := in.db.open(ctx, in.storeOptions())
	if err != nil {
		return nil, err
	}
	// Leases live in the instance database, so a restore brings back
	// the leases of the snapshot with the rest.
	ls, err := in.layoutLeases(ctx, st)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	sch := in.spec.schema
	schemaFn := func() *schema.Schema { return sch }
	var signer ports.SegmentURLSigner
	if in.signer != nil {
		signer = urlSigner{in}
	}
	// Images are built in the instance's directory, removed with it.
	images, err := imagebuilder.New(imagebuilder.Options{Dir: in.dir})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	pl, err := pull.New(pull.Options{
		Store: st, Segments: in.segs, Signer: signer,
		Images:         images,
		InlineMaxBytes: in.spec.inlineMaxBytes, SegmentTTL: in.spec.segmentTTL,
		ClientRefresh: -1, // every pull stamps last-seen, as the reference does
		Now:           in.clock.Now, Log: in.log.Named("pull"),
	})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	var validators []ports.RowValidator
	for _, t := range sch.Tables {
		validators = append(validators, rowValidator{table: t.Name, rules: &in.rules})
	}
	// The blob store outlives a restore (it is not in the database), so
	// blobs uploaded before a captured backup stay downloadable after it.
	bl, err := blobs.New(blobs.Options{
		Blobs: in.blobs, Storage: st, Resolver: in.grants, Schema: schemaFn,
		Presign: in.presign.Load, Signer: in.blobSigner, URLBase: in.base,
		URLTTL: DefaultSignedURLSeconds * time.Second,
		Now:    in.clock.Now, Log: in.log.Named("blobs"),
	})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	fs := faultStore{Store: st, in: in}
	pp, err := push.New(push.Options{
		Schema: schemaFn, Store: fs,
		Blobs:         bl,
		RowValidators: validators, CommitValidator: commitValidator{rules: &in.rules},
		Mergers:       []ports.CRDTMerger{yjsdoc.New(yjsdoc.Options{})}, // the crdt capability
		Listeners:     []ports.CommitListener{in.relay},
		MaxOperations: in.spec.maxOperations,
		Now:           in.clock.Now, Log: in.log.Named("sync"),
	})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	sv, err := round.New(round.Options{
		Schema: schemaFn, Store: fs, Resolver: in.grants, Push: pp, Leases: in.leases,
		Pull: pl, MinWireVersion: round.LowestMinWireVersion, MaxOperations: in.spec.maxOperations,
		HeadReuse: sqlstore.DefaultTouchInterval,
		Now:       in.clock.Now, Log: in.log.Named("sync"),
	})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	sg, err := segments.New(segments.Options{
		Segments: in.segs, Storage: st, Resolver: in.grants, Schema: schemaFn,
		Signer: in.signer, Now: in.clock.Now, Log: in.log.Named("segments"),
	})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &services{store: st, sync: sv, seg: sg, blob: bl, leases: ls}, nil
}

// mintEpoch is the store's epoch source: the pending rotation name once,
// random otherwise.
func (in *instance) mintEpoch() string {
	if p := in.nextEpoch.Swap(nil); p != nil {
		return *p
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// router mounts the public sync API routes of the instance.
func (in *instance) router() (http.Handler, error) {
	t, err := httpapi.NewTransport(httpapi.TransportOptions{})
	if err != nil {
		return nil, err
	}
	r, err := httpapi.New(httpapi.Options{
		Handlers: map[httpapi.Route]http.Handler{
			httpapi.RouteSync:    t.SyncEndpoint(in.auth, t.SyncServe(syncService{in}, in.log.Named("sync"))),
			httpapi.RouteSegment: t.SegmentEndpoint(in.auth, segmentService{in}, in.log.Named("segments")),
			httpapi.RouteRealtime: httpapi.RealtimeEndpoint(in.auth, httpapi.RealtimeOptions{
				Log: in.log.Named("realtime"),
			}, in.hub.Admit),
			httpapi.RouteBlobPut:         t.BlobUploadEndpoint(in.auth, blobService{in}, in.log.Named("blobs")),
			httpapi.RouteBlobUploadGrant: t.BlobUploadGrantEndpoint(in.auth, blobService{in}, in.log.Named("blobs")),
			httpapi.RouteBlobGet:         t.BlobDownloadEndpoint(in.auth, blobService{in}, in.log.Named("blobs")),
			httpapi.RouteBlobObjectGet:   t.BlobObjectGetEndpoint(blobService{in}, in.log.Named("blobs")),
			httpapi.RouteBlobObjectPut:   t.BlobObjectPutEndpoint(blobService{in}, in.log.Named("blobs")),
		},
		Logger: in.log.Named("routes"),
		Now:    in.clock.Now,
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ServeHTTP serves the instance routes while it is open. A realtime
// socket does not hold the instance lock for its life (restore and close
// would wait for it): its session reads the live services per use, and
// close ends it.
func (in *instance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in.mu.RLock()
	if in.closed {
		in.mu.RUnlock()
		httpapi.WriteError(w, syncerr.New(syncerr.NotFound).WithMessage("test instance closed"))
		return
	}
	if r.URL.Path == httpapi.RouteRealtime.Path() {
		in.mu.RUnlock()
		in.routes.ServeHTTP(w, r)
		return
	}
	defer in.mu.RUnlock()
	in.routes.ServeHTTP(w, r)
}

// current returns the live services (nil once closed).
func (in *instance) current() *services {
	in.mu.RLock()
	defer in.mu.RUnlock()
	if in.closed {
		return nil
	}
	return in.live
}

var errInstanceClosed = errors.New("test instance closed")

// liveStore is the realtime hub's storage: the live database of the moment.
type liveStore struct{ in *instance }

func (l liveStore) store() (*sqlstore.Store, error) {
	sv := l.in.current()
	if sv == nil {
		return nil, errInstanceClosed
	}
	return sv.store, nil
}

func (l liveStore) TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error) {
	st, err := l.store()
	if err != nil {
		return "", err
	}
	return st.TouchPartition(ctx, partition, nowMs)
}

func (l liveStore) LogEpoch(ctx context.Context, partition string) (string, bool, error) {
	st, err := l.store()
	if err != nil {
		return "", false, err
	}
	return st.LogEpoch(ctx, partition)
}

func (l liveStore) GetClient(ctx context.Context, partition, clientID string) (*ports.ClientRecord, error) {
	st, err := l.store()
	if err != nil {
		return nil, err
	}
	return st.GetClient(ctx, partition, clientID)
}

func (l liveStore) BindClient(ctx context.Context, partition, clientID, actorID string) (string, error) {
	st, err := l.store()
	if err != nil {
		return "", err
	}
	return st.BindClient(ctx, partition, clientID, actorID)
}

func (l liveStore) AdvanceClientCursor(ctx context.Context, a ports.CursorAdvance) (bool, error) {
	st, err := l.store()
	if err != nil {
		return false, err
	}
	return st.AdvanceClientCursor(ctx, a)
}

func (l liveStore) LogBounds(ctx context.Context, partition string) (ports.LogBounds, error) {
	st, err := l.store()
	if err != nil {
		return ports.LogBounds{}, err
	}
	return st.LogBounds(ctx, partition)
}

func (l liveStore) ReadCommitWindow(ctx context.Context, partition string, w ports.CommitWindow) ([]commit.Commit, error) {
	st, err := l.store()
	if err != nil {
		return nil, err
	}
	return st.ReadCommitWindow(ctx, partition, w)
}

func (l liveStore) ReadCommitRange(ctx context.Context, partition string, r ports.CommitRange) (ports.CommitSpan, error) {
	st, err := l.store()
	if err != nil {
		return ports.CommitSpan{}, err
	}
	return st.ReadCommitRange(ctx, partition, r)
}

// newLeases builds the instance's lease use case, sealing with a key of
// its own, over the live database's lease store.
func (in *instance) newLeases() (*leases.Service, error) {
	key := make([]byte, lease.MinKeyBytes)
	_, _ = rand.Read(key)
	ks, err := lease.NewKeySet(key)
	if err != nil {
		return nil, err
	}
	return leases.New(leases.Options{Store: liveLeases{in}, Keys: ks, TTL: in.spec.leaseTTL,
		Now: in.clock.Now, Log: in.log.Named("leases")})
}

// setLive makes sv the live services; the caller holds in.mu exclusively
// or is the constructor.
func (in *instance) setLive(sv *services) {
	in.live = sv
	in.leaseStore.Store(sv.leases)
}

// liveLeases is the instance's lease store: the live database's. It reads
// an atomic pointer, not in.mu: a POST /sync holds in.mu shared already,
// and a second shared lock could wait behind a restore's.
type liveLeases struct{ in *instance }

func (l liveLeases) store() (*sqllease.Store, error) {
	st := l.in.leaseStore.Load()
	if st == nil {
		return nil, errInstanceClosed
	}
	return st, nil
}

func (l liveLeases) GetLease(ctx context.Context, partition, clientID string) (*lease.Stored, error) {
	st, err := l.store()
	if err != nil {
		return nil, err
	}
	return st.GetLease(ctx, partition, clientID)
}

func (l liveLeases) PutLease(ctx context.Context, prev *lease.Stored, next lease.Stored) (bool, error) {
	st, err := l.store()
	if err != nil {
		return false, err
	}
	return st.PutLease(ctx, prev, next)
}

func (l liveLeases) RevokeLease(ctx context.Context, partition, leaseID string) (bool, error) {
	st, err := l.store()
	if err != nil {
		return false, err
	}
	return st.RevokeLease(ctx, partition, leaseID)
}

func (l liveLeases) PruneLeases(ctx context.Context, q ports.LeasePrune) (ports.LeasePruneCounts, error) {
	st, err := l.store()
	if err != nil {
		return ports.LeasePruneCounts{}, err
	}
	return st.PruneLeases(ctx, q)
}

// liveRounds runs socket rounds through the live sync use case.
type liveRounds struct{ in *instance }

func (l liveRounds) Handle(ctx context.Context, id ports.Identity, body []byte) (*round.Response, error) {
	sv := l.in.current()
	if sv == nil {
		return nil, errInstanceClosed
	}
	return sv.sync.Handle(ctx, id, body)
}

// syncService forwards POST /sync to the live sync use case (read per
// request: the live services change on restoreBackup; ServeHTTP holds the
// instance lock around the request).
type syncService struct{ in *instance }

func (s syncService) Sync(ctx context.Context, id ports.Identity, body []byte) (ports.SyncResponse, error) {
	return s.in.live.sync.Sync(ctx, id, body)
}

// segmentService forwards downloads to the live segment use case.
type segmentService struct{ in *instance }

func (s segmentService) AuthorizeDirect(ctx context.Context, id ports.Identity, segmentID string, scopesJSON []byte) (ports.SegmentPublication, error) {
	return s.in.live.seg.AuthorizeDirect(ctx, id, segmentID, scopesJSON)
}

func (s segmentService) AuthorizeSigned(ctx context.Context, segmentID, token string) (ports.SegmentPublication, error) {
	return s.in.live.seg.AuthorizeSigned(ctx, segmentID, token)
}

func (s segmentService) Open(ctx context.Context, p ports.SegmentPublication) (io.ReadCloser, int64, error) {
	return s.in.live.seg.Open(ctx, p)
}

// blobService forwards the blob routes to the live blob use case.
type blobService struct{ in *instance }

func (b blobService) Upload(ctx context.Context, id ports.Identity, u ports.BlobUploadRequest, body io.Reader) error {
	return b.in.live.blob.Upload(ctx, id, u, body)
}

func (b blobService) UploadGrant(ctx context.Context, id ports.Identity, blobID string, g ports.BlobGrantRequest) (ports.BlobGrant, error) {
	return b.in.live.blob.UploadGrant(ctx, id, blobID, g)
}

func (b blobService) Download(ctx context.Context, id ports.Identity, blobID string) (ports.BlobDownload, error) {
	return b.in.live.blob.Download(ctx, id, blobID)
}

func (b blobService) Open(ctx context.Context, info ports.BlobInfo, offset, length int64) (io.ReadCloser, error) {
	return b.in.live.blob.Open(ctx, info, offset, length)
}

func (b blobService) GetSigned(ctx context.Context, blobID string, q url.Values) (ports.BlobInfo, error) {
	return b.in.live.blob.GetSigned(ctx, blobID, q)
}

func (b blobService) PutSigned(ctx context.Context, blobID string, q url.Values, n int64, body io.Reader) error {
	return b.in.live.blob.PutSigned(ctx, blobID, q, n, body)
}

func (b blobService) UploadBufferBytes(u ports.BlobUploadRequest) int64 {
	return b.in.live.blob.UploadBufferBytes(u)
}

func (b blobService) DownloadBufferBytes(info ports.BlobInfo, length int64) int64 {
	return b.in.live.blob.DownloadBufferBytes(info, length)
}

// urlSigner mints §5.4 native signed URLs pointing at this instance's
// segment route, with the TTL of the moment (0: born expired).
type urlSigner struct{ in *instance }

func (u urlSigner) SignSegmentURL(_ context.Context, r ports.SegmentURLRequest) (string, int64, error) {
	s := u.in.signer
	now := time.UnixMilli(r.NowMs)
	var tok string
	var exp int64
	if ttl := u.in.ttlSecs.Load(); ttl > 0 {
		tok, exp = s.Mint(r.SegmentID, r.ScopeDigest, r.Partition, now, time.Duration(ttl)*time.Second)
	} else {
		sec := now.Unix()
		tok = s.Sign(signedurl.Claims{Segment: r.SegmentID, ScopeDigest: r.ScopeDigest, Audience: s.Audience(r.Partition), Expires: sec})
		exp = sec * 1000
	}
	return u.in.base + "/segments/" + r.SegmentID + "?" + httpapi.ParamSignedToken + "=" + tok, exp, nil
}

// faultStore is the instance storage with the one-shot idempotency fault:
// the next record read returns bytes no stored result can be decoded
// from, the unreadable record of SPEC §6.3, whether or not a record
// exists (the lookup itself fails, as the reference host's does).
type faultStore struct {
	*sqlstore.Store
	in *instance
}

// unreadableRecord is what the fault returns in place of a push result.
var unreadableRecord = []byte("\x00unreadable push result")

// GetPushResult is the optimistic lookup. It takes the fault only when a
// record exists: the record's owner stays known, so the answer is the
// cache miss, not another actor's refusal. Without a record the owner is
// not known here, so the fault waits for the locked lookup of the same
// commit, which knows the pushing actor.
func (f faultStore) GetPushResult(ctx context.Context, partition, clientID, clientCommitID string) (ports.PushRecord, bool, error) {
	rec, ok, err := f.Store.GetPushResult(ctx, partition, clientID, clientCommitID)
	if err == nil && ok && f.in.failIdempotency.CompareAndSwap(true, false) {
		rec.Result = unreadableRecord
	}
	return rec, ok, err
}

// TouchPartitionHead takes the fault for the optimistic lookup read with
// the request head, as GetPushResult does.
func (f faultStore) TouchPartitionHead(ctx context.Context, q ports.HeadQuery) (ports.RequestHead, error) {
	h, err := f.Store.TouchPartitionHead(ctx, q)
	if err == nil && h.PushFound && f.in.failIdempotency.CompareAndSwap(true, false) {
		h.Push.Result = unreadableRecord
	}
	return h, err
}

// Push hands the transaction's locked lookup the fault still armed, and
// answers a push past the database cap with a clear refusal.
func (f faultStore) Push(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) error {
	if err := f.in.db.room(ctx); err != nil {
		return err
	}
	return f.in.storeFull(f.Store.Push(ctx, partition, o, func(tx ports.PushTx) error {
		return fn(faultTx{PushTx: tx, in: f.in, actor: o.ActorID})
	}))
}

// PushThenReadGate hands the locked lookup the fault as Push does.
func (f faultStore) PushThenReadGate(ctx context.Context, partition string, o ports.PushOptions, fn func(ports.PushTx) error) (checkpoint.ServeGate, bool, error) {
	if err := f.in.db.room(ctx); err != nil {
		return checkpoint.ServeGate{}, false, err
	}
	g, read, err := f.Store.PushThenReadGate(ctx, partition, o, func(tx ports.PushTx) error {
		return fn(faultTx{PushTx: tx, in: f.in, actor: o.ActorID})
	})
	return g, read, f.in.storeFull(err)
}

type faultTx struct {
	ports.PushTx
	in    *instance
	actor string
}

func (t faultTx) GetPushResult(ctx context.Context, clientID, clientCommitID string) (ports.PushRecord, bool, error) {
	rec, ok, err := t.PushTx.GetPushResult(ctx, clientID, clientCommitID)
	if err != nil || !t.in.failIdempotency.CompareAndSwap(true, false) {
		return rec, ok, err
	}
	if !ok {
		rec = ports.PushRecord{ActorID: t.actor}
	}
	rec.Result = unreadableRecord
	return rec, true, nil
}

// close ends the instance and deletes its database and directory: its
// sockets are closed first, its store before its database. Idempotent.
func (in *instance) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = in.hub.Drain(ctx)
	cancel()
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil
	}
	in.closed = true
	err := in.live.store.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(err, in.db.drop(ctx), os.RemoveAll(in.dir))
}

// bounds reads the partition's log bounds.
func (in *instance) bounds(ctx context.Context) (ports.LogBounds, error) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	if in.closed {
		return ports.LogBounds{}, errors.New("instance closed")
	}
	return in.live.store.LogBounds(ctx, in.spec.partition)
}
