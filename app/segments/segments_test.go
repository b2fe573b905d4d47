package segments

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/segments/memseg"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

type fakeStorage struct {
	epochs map[string]string
	cps    map[string][]checkpoint.Checkpoint
}

func (f *fakeStorage) LogEpoch(_ context.Context, p string) (string, bool, error) {
	e, ok := f.epochs[p]
	return e, ok, nil
}

func (f *fakeStorage) ReadCheckpoints(_ context.Context, p string) ([]checkpoint.Checkpoint, error) {
	return f.cps[p], nil
}

type resolverFunc func(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error)

func (f resolverFunc) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	return f(ctx, req)
}

type fixture struct {
	svc     *Service
	store   *memseg.Store
	storage *fakeStorage
	signer  *signedurl.Signer
	now     time.Time
	allowed scopes.Allowed
	resErr  error
	id      string
	pub     ports.SegmentPublication
}

var actor = ports.Identity{ActorID: "alice", Partition: "p1"}

const header = `{"project_id":["pa"]}`

func newFixture(t *testing.T) *fixture {
	t.Helper()
	sch := ssptest.Schema(t)
	f := &fixture{
		store:   memseg.New(),
		storage: &fakeStorage{epochs: map[string]string{"p1": "e1", "p2": "e2"}, cps: map[string][]checkpoint.Checkpoint{}},
		now:     time.UnixMilli(1_000_000),
		allowed: scopes.Allowed{"project_id": {"pa", "pb"}},
	}
	var err error
	f.signer, err = signedurl.NewSigner([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	f.svc, err = New(Options{
		Segments: f.store, Storage: f.storage,
		Resolver: resolverFunc(func(context.Context, ports.ScopeRequest) (scopes.Allowed, error) { return f.allowed, f.resErr }),
		Schema:   func() *schema.Schema { return sch },
		Signer:   f.signer,
		Now:      func() time.Time { return f.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.pub = f.publish(t, []byte("segment"), "p1", "e1", scopes.Map{"project_id": {"pa"}}.Digest(), 2_000_000)
	f.id = f.pub.SegmentID
	return f
}

func (f *fixture) publish(t *testing.T, b []byte, partition, epoch, digest string, expires int64) ports.SegmentPublication {
	t.Helper()
	p, err := f.store.Put(context.Background(), b, ports.SegmentPublication{
		SegmentKey: ports.SegmentKey{Partition: partition, LogEpoch: epoch, Table: "tasks", SchemaVersion: 2,
			MediaType: ports.SegmentRows, ScopeDigest: digest, AsOfCommitSeq: 7, PageSize: 100},
		SegmentID: contentaddr.Of(b), RowCount: 1, CreatedAtMs: 1, ExpiresAtMs: expires,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, err error, code syncerr.Code) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	if syncerr.CodeOf(err) != code {
		t.Fatalf("error %v, want %s", err, code)
	}
}

func TestDirect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, f *fixture)
		id     string
		header string
		want   syncerr.Code
	}{
		{name: "authorized"},
		{name: "scopes header order and duplicates do not matter", header: `{"project_id":["pa","pa"]}`},
		{name: "missing header", header: "-", want: syncerr.InvalidSubscription},
		{name: "malformed header", header: `{"project_id":"pa"}`, want: syncerr.InvalidSubscription},
		{name: "wildcard requested", header: `{"project_id":["*"]}`, want: syncerr.InvalidSubscription},
		{name: "undeclared requested key", header: `{"owner":["pa"]}`, want: syncerr.InvalidSubscription},
		{name: "unknown segment", id: contentaddr.Of([]byte("nothing")), want: syncerr.NotFound},
		{name: "malformed id", id: "sha256:zz", want: syncerr.NotFound},
		{name: "other partition only", setup: func(t *testing.T, f *fixture) {
			f.storage.epochs["p1"] = "e1"
			f.store = memseg.New()
			f.svc.o.Segments = f.store
			f.publish(t, []byte("segment"), "p2", "e2", scopes.Map{"project_id": {"pa"}}.Digest(), 2_000_000)
		}, want: syncerr.NotFound},
		{name: "older epoch", setup: func(t *testing.T, f *fixture) { f.storage.epochs["p1"] = "e9" }, want: syncerr.NotFound},
		{name: "unregistered partition", setup: func(t *testing.T, f *fixture) { delete(f.storage.epochs, "p1") }, want: syncerr.NotFound},
		{name: "digest mismatch", header: `{"project_id":["pa","pb"]}`, want: syncerr.Forbidden},
		{name: "revoked", setup: func(t *testing.T, f *fixture) { f.allowed = scopes.Allowed{"project_id": {"pb"}} }, want: syncerr.Forbidden},
		{name: "resolver failed", setup: func(t *testing.T, f *fixture) { f.resErr = errors.New("down") }, want: syncerr.Forbidden},
		{name: "resolver outage", setup: func(t *testing.T, f *fixture) { f.resErr = ports.ErrResolverOutage }, want: syncerr.Forbidden},
		{name: "resolver catalog error", setup: func(t *testing.T, f *fixture) { f.resErr = syncerr.New(syncerr.RateLimited) }, want: syncerr.RateLimited},
		{name: "resolver grants an undeclared key", setup: func(t *testing.T, f *fixture) { f.allowed["nope"] = []string{"x"} }, want: syncerr.InvalidSubscription},
		{name: "wildcard grant", setup: func(t *testing.T, f *fixture) { f.allowed = scopes.Allowed{"project_id": {"*"}} }},
		{name: "expired", setup: func(t *testing.T, f *fixture) { f.now = time.UnixMilli(2_000_000) }, want: syncerr.SegmentExpired},
		{name: "expired but republished", setup: func(t *testing.T, f *fixture) {
			f.now = time.UnixMilli(2_000_000)
			f.pub.ExpiresAtMs = 3_000_000
			f.pub.CreatedAtMs = 1_500_000
			if _, err := f.store.Put(context.Background(), []byte("segment"), f.pub); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "newer checkpoint", setup: func(t *testing.T, f *fixture) {
			f.storage.cps["p1"] = []checkpoint.Checkpoint{{Partition: "p1", Name: "x", SchemaVersion: 3}}
		}, want: syncerr.SegmentExpired},
		{name: "checkpoint at the same version", setup: func(t *testing.T, f *fixture) {
			f.storage.cps["p1"] = []checkpoint.Checkpoint{{Partition: "p1", Name: "x", SchemaVersion: 2}}
		}},
		{name: "second publication under another scope", setup: func(t *testing.T, f *fixture) {
			f.publish(t, []byte("segment"), "p1", "e1", scopes.Map{"project_id": {"pb"}}.Digest(), 2_000_000)
		}, header: `{"project_id":["pb"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(t, f)
			}
			id := tc.id
			if id == "" {
				id = f.id
			}
			h := tc.header
			switch h {
			case "":
				h = header
			case "-":
				h = ""
			}
			d, err := f.svc.AuthorizeDirect(context.Background(), actor, id, []byte(h))
			wantCode(t, err, tc.want)
			if tc.want != "" {
				return
			}
			if d.SegmentID != f.id || d.Partition != "p1" {
				t.Fatalf("authorized %+v", d)
			}
			rc, n, err := f.svc.Open(context.Background(), d)
			if err != nil || n != int64(len("segment")) {
				t.Fatalf("Open: %v %d", err, n)
			}
			_ = rc.Close()
		})
	}
}

func TestSigned(t *testing.T) {
	digest := scopes.Map{"project_id": {"pa"}}.Digest()
	for _, tc := range []struct {
		name  string
		token func(f *fixture) string
		setup func(t *testing.T, f *fixture)
		want  syncerr.Code
	}{
		{name: "authorized"},
		{name: "no signer configured", setup: func(t *testing.T, f *fixture) { f.svc.o.Signer = nil }, want: syncerr.Forbidden},
		{name: "expired token", setup: func(t *testing.T, f *fixture) { f.now = f.now.Add(16*time.Minute + time.Minute) }, want: syncerr.SegmentExpired},
		{name: "within skew", setup: func(t *testing.T, f *fixture) { f.now = f.now.Add(15*time.Minute + 59*time.Second) }},
		{name: "altered payload", token: func(f *fixture) string {
			tok, _ := f.signer.Mint(f.id, digest, "p1", f.now, time.Minute)
			p, m, _ := strings.Cut(tok, ".")
			other, _ := f.signer.Mint(f.id, scopes.Map{"project_id": {"pb"}}.Digest(), "p1", f.now, time.Minute)
			op, _, _ := strings.Cut(other, ".")
			_ = p
			return op + "." + m
		}, want: syncerr.Forbidden},
		{name: "altered mac", token: func(f *fixture) string {
			tok, _ := f.signer.Mint(f.id, digest, "p1", f.now, time.Minute)
			// A character well inside the MAC: the last ones carry
			// padding bits, so changing them may change nothing.
			i := len(tok) - 10
			flip := "A"
			if tok[i] == 'A' {
				flip = "B"
			}
			return tok[:i] + flip + tok[i+1:]
		}, want: syncerr.Forbidden},
		{name: "another key", token: func(f *fixture) string {
			s, _ := signedurl.NewSigner([]byte(strings.Repeat("o", 32)))
			tok, _ := s.Mint(f.id, digest, "p1", f.now, time.Minute)
			return tok
		}, want: syncerr.Forbidden},
		{name: "wrong segment", token: func(f *fixture) string {
			tok, _ := f.signer.Mint(contentaddr.Of([]byte("other")), digest, "p1", f.now, time.Minute)
			return tok
		}, want: syncerr.Forbidden},
		{name: "foreign partition audience", token: func(f *fixture) string {
			tok, _ := f.signer.Mint(f.id, digest, "p2", f.now, time.Minute)
			return tok
		}, want: syncerr.NotFound},
		{name: "digest not published", token: func(f *fixture) string {
			tok, _ := f.signer.Mint(f.id, "feed", "p1", f.now, time.Minute)
			return tok
		}, want: syncerr.Forbidden},
		{name: "epoch rotated", setup: func(t *testing.T, f *fixture) { f.storage.epochs["p1"] = "e9" }, want: syncerr.NotFound},
		{name: "newer checkpoint", setup: func(t *testing.T, f *fixture) {
			f.storage.cps["p1"] = []checkpoint.Checkpoint{{Partition: "p1", Name: "x", SchemaVersion: 5}}
		}, want: syncerr.SegmentExpired},
		{name: "garbage", token: func(*fixture) string { return "not-a-token" }, want: syncerr.Forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tok, _ := f.signer.Mint(f.id, digest, "p1", f.now, 15*time.Minute)
			if tc.token != nil {
				tok = tc.token(f)
			}
			if tc.setup != nil {
				tc.setup(t, f)
			}
			d, err := f.svc.AuthorizeSigned(context.Background(), f.id, tok)
			wantCode(t, err, tc.want)
			if tc.want == "" && d.Partition != "p1" {
				t.Fatalf("authorized %+v", d)
			}
		})
	}
}
