package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/adapters/segments/sqlseg"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/signedurl"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// segServer is a server whose segments live in the engine's own database
// (sync_segments, sync_segment_publications).
type segServer struct {
	*server
	segs ports.SegmentStore
	base string
}

// startSegments starts a server with the in-database segment store over
// the test engine (and the extra graph options).
func startSegments(t *testing.T, e engine, cfg func(*config.Config), extra ...fx.Option) *segServer {
	t.Helper()
	ss := &segServer{}
	var once sync.Once
	deco := fx.Decorate(func(st ports.Storage, _ ports.SegmentStore) (ports.SegmentStore, error) {
		var err error
		once.Do(func() {
			h, ok := st.(*gatedStore).Storage.(interface {
				DB() *bun.DB
				ReadDB() *bun.DB
			})
			if !ok {
				err = fmt.Errorf("engine %s exposes no database handles", e.name)
				return
			}
			ss.segs, err = sqlseg.Open(context.Background(), sqlseg.Options{DB: h.DB(), ReadDB: h.ReadDB()})
		})
		return ss.segs, err
	})
	ss.server = start(t, e, serverOpts{extra: append([]fx.Option{deco}, extra...), config: cfg})
	ss.base = strings.TrimSuffix(ss.url, "/sync")
	if ss.segs == nil {
		t.Fatal("the segment store decorator did not run")
	}
	return ss
}

// newClient is a project-built client acting as actor in partition; grant
// is the development X-Syncd-Scopes header ("" grants everything).
func (s *segServer) newClient(t *testing.T, actor, partition, grant string, tune func(*client.Options)) *client.Client {
	t.Helper()
	h := http.Header{}
	h.Set("X-Syncd-Actor", actor)
	h.Set("X-Syncd-Partition", partition)
	if grant != "" {
		h.Set("X-Syncd-Scopes", grant)
	}
	o := client.Options{BaseURL: s.base, Schema: s.sch, Header: h, Accept: ssp2.AcceptExternalRows, LimitSnapshotRows: 500}
	if tune != nil {
		tune(&o)
	}
	c, err := client.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bootstrap pulls until the client settles and returns every segment
// reference it was sent, in order.
func bootstrap(t *testing.T, c *client.Client) []*ssp2.SegmentRef {
	t.Helper()
	var refs []*ssp2.SegmentRef
	for i := 0; i < 100; i++ {
		res, err := c.Pull(context.Background())
		if err != nil {
			t.Fatalf("pull: %v", err)
		}
		busy := false
		for id, sec := range res.Sections {
			if sec.Err != nil {
				t.Fatalf("subscription %s: %v", id, sec.Err)
			}
			refs = append(refs, sec.SegmentRefs...)
			busy = busy || sec.BootstrapState != "" || sec.Commits > 0 || len(sec.SegmentRefs) > 0 || sec.InlineSegments > 0
		}
		if !busy && c.Settled() {
			return refs
		}
	}
	t.Fatal("bootstrap did not settle")
	return nil
}

func metricValue(t *testing.T, s *segServer, name string) string {
	t.Helper()
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// §5.1: a page is built once and every client asking for the same table,
// scope digest, schema version and pin is served the same stored segment.
func TestSegmentReusedBy20Clients(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := startSegments(t, e, nil)
		const rows = 1200
		seedRows(t, s.store, s.sch, "reuse", "alice", "p", rows, rows)
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		// Twenty clients bootstrap at once: each page is built once.
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := s.newClient(t, "alice", "reuse", "", func(o *client.Options) { o.MaxSnapshotPages = 1 })
				c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
				n, err := c.PullUntilIdle(context.Background(), 50)
				if err == nil && len(c.Rows("projects")) != rows {
					err = fmt.Errorf("client %d has %d rows after %d pulls", i, len(c.Rows("projects")), n)
				}
				if st := c.Stats(); err == nil && (st.SegmentRefs != 3 || st.SegmentDownloads != 3) {
					err = fmt.Errorf("client %d: %d refs, %d downloads", i, st.SegmentRefs, st.SegmentDownloads)
				}
				errs <- err
				mu.Lock()
				defer mu.Unlock()
				ids := c.RowIDs("projects")
				seen[fmt.Sprint(c.Stats().SegmentBytes, len(ids), ids[max(len(ids)-1, 0):])]++
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(seen) != 1 {
			t.Fatalf("clients downloaded different byte totals: %v", seen)
		}
		// One more client, sequentially, to read the descriptors.
		c := s.newClient(t, "alice", "reuse", "", func(o *client.Options) { o.MaxSnapshotPages = 1 })
		c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		refs := bootstrap(t, c)
		if len(refs) != 3 || refs[0].RowCursor.Present || refs[2].NextRowCursor.Present {
			t.Fatalf("descriptors %+v", refs)
		}
		digest := scopes.Map{"owner": {"alice"}}.Digest()
		for _, ref := range refs {
			pubs, err := s.segs.Publications(context.Background(), ref.SegmentID)
			if err != nil {
				t.Fatal(err)
			}
			if len(pubs) != 1 || pubs[0].Partition != "reuse" || pubs[0].ScopeDigest != digest || ref.ScopeDigest != digest {
				t.Fatalf("segment %s publications %+v", ref.SegmentID, pubs)
			}
		}
		if b := metricValue(t, s, "syncd_pull_segment_builds_total"); b != "3" {
			t.Fatalf("segment builds = %q, want 3 (one per page)", b)
		}
		if r := metricValue(t, s, "syncd_pull_segment_reuses_total"); r != "60" {
			t.Fatalf("segment reuses = %q, want 60", r)
		}
	})
}

// §5.5: every download is re-authorized against the caller's partition,
// live epoch and current scopes.
func TestSegmentDownloadAuthorization(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := startSegments(t, e, nil)
		ctx := context.Background()
		seedRows(t, s.store, s.sch, "auth", "alice", "p", 600, 600)
		c := s.newClient(t, "alice", "auth", "", nil)
		c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		refs := bootstrap(t, c)
		if len(refs) != 2 || len(c.Rows("projects")) != 600 {
			t.Fatalf("%d refs, %d rows", len(refs), len(c.Rows("projects")))
		}
		id := refs[0].SegmentID

		// Direct download in every encoding, verified by content address.
		for _, enc := range []string{"identity", "gzip", "zstd"} {
			cc := s.newClient(t, "alice", "auth", "", func(o *client.Options) { o.AcceptEncoding = enc })
			cc.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
			if _, err := cc.DownloadSegment(ctx, "projects", id); err != nil {
				t.Fatalf("%s download: %v", enc, err)
			}
		}

		// Headers, ETag and 304.
		get := func(hdr map[string]string) *http.Response {
			req, _ := http.NewRequest(http.MethodGet, s.base+"/segments/"+id, nil)
			req.Header.Set("X-Syncd-Actor", "alice")
			req.Header.Set("X-Syncd-Partition", "auth")
			req.Header.Set("X-Syncular-Scopes", `{"owner":["alice"]}`)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = resp.Body.Close() })
			return resp
		}
		resp := get(map[string]string{"Accept-Encoding": "zstd"})
		if resp.StatusCode != 200 || resp.Header.Get("ETag") != `"`+id+`"` || resp.Header.Get("Content-Encoding") != "zstd" ||
			resp.Header.Get("Cache-Control") != "private, max-age=0" || resp.Header.Get("Vary") != "Authorization, X-Syncular-Scopes, Accept-Encoding" ||
			resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("download: %d %v", resp.StatusCode, resp.Header)
		}
		if resp := get(map[string]string{"If-None-Match": `"` + id + `"`}); resp.StatusCode != http.StatusNotModified {
			t.Fatalf("If-None-Match: %d", resp.StatusCode)
		}

		refused := func(name string, cc *client.Client, segID string, status int, code string) {
			t.Helper()
			_, err := cc.DownloadSegment(ctx, "projects", segID)
			he, ok := err.(*client.HTTPError)
			if !ok || he.Status != status || he.Code != code {
				t.Fatalf("%s: %v, want %d %s", name, err, status, code)
			}
		}
		sub := func(cc *client.Client, sc map[string][]string) *client.Client {
			cc.Subscribe("projects", "projects", sc)
			return cc
		}
		alice := map[string][]string{"owner": {"alice"}}
		// Scope loss: the grant no longer holds alice.
		refused("scope loss", sub(s.newClient(t, "alice", "auth", `{"owner":["bob"],"project_id":["*"]}`, nil), alice), id, 403, "sync.forbidden")
		// Another effective scope set: another digest.
		refused("digest mismatch", sub(s.newClient(t, "alice", "auth", "", nil), map[string][]string{"owner": {"alice", "bob"}}), id, 403, "sync.forbidden")
		// Another partition never learns the segment exists.
		refused("other partition", sub(s.newClient(t, "alice", "elsewhere", "", nil), alice), id, 404, "sync.not_found")
		refused("unknown segment", sub(s.newClient(t, "alice", "auth", "", nil), alice), contentaddr.Of([]byte("nothing")), 404, "sync.not_found")
		refused("requested wildcard", sub(s.newClient(t, "alice", "auth", "", nil), map[string][]string{"owner": {"*"}}), id, 400, "sync.invalid_subscription")
		if resp := get(map[string]string{"X-Syncular-Scopes": ""}); resp.StatusCode != 400 {
			t.Fatalf("no scopes header: %d", resp.StatusCode)
		}
		req, _ := http.NewRequest(http.MethodGet, s.base+"/segments/"+id, nil)
		req.Header.Set("X-Syncular-Scopes", `{"owner":["alice"]}`)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
			t.Fatalf("no credentials: %v %v", resp, err)
		} else {
			_ = resp.Body.Close()
		}

		// An epoch rotation (restore) orphans the old publications.
		if _, err := s.store.RotateLogEpoch(ctx, "auth"); err != nil {
			t.Fatal(err)
		}
		refused("older epoch", sub(s.newClient(t, "alice", "auth", "", nil), alice), id, 404, "sync.not_found")
		c2 := s.newClient(t, "alice", "auth", "", nil)
		c2.Subscribe("projects", "projects", alice)
		refs2 := bootstrap(t, c2)
		if len(refs2) != 2 || len(c2.Rows("projects")) != 600 {
			t.Fatalf("after rotation: %d refs, %d rows", len(refs2), len(c2.Rows("projects")))
		}

		// 0.24: a checkpoint at a newer schema version expires older segments.
		if _, err := s.store.DeclareCheckpoint(ctx, checkpoint.Declaration{Partition: "auth", Name: "next", SchemaVersion: s.sch.Version + 1}, time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		refused("newer checkpoint", sub(s.newClient(t, "alice", "auth", "", nil), alice), refs2[0].SegmentID, 404, "sync.segment_expired")
	})
}

// freeAddr reserves a loopback port for a server whose public URL must be
// known before it starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// §5.4: native signed URLs are the whole grant; tampered, expired,
// misdirected and foreign-partition tokens are refused.
func TestSegmentSignedURLs(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		key := bytes.Repeat([]byte("k3y"), 16)
		keyFile := filepath.Join(t.TempDir(), "url.key")
		if err := os.WriteFile(keyFile, append(key, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		s := startSegments(t, e, func(c *config.Config) {
			c.Listen = addr
			c.Segments.SignedURLKeyFile = keyFile
			c.Segments.PublicURL = "http://" + addr
			c.Segments.SignedURLTTL = 5 * time.Minute
		})
		ctx := context.Background()
		seedRows(t, s.store, s.sch, "signed", "alice", "p", 600, 600)
		c := s.newClient(t, "alice", "signed", "", func(o *client.Options) {
			o.Accept = ssp2.AcceptExternalRows | ssp2.AcceptSignedURLs
		})
		c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		refs := bootstrap(t, c)
		if len(refs) != 2 || len(c.Rows("projects")) != 600 || c.Stats().SignedDownloads != 2 {
			t.Fatalf("%d refs, %d rows, stats %+v", len(refs), len(c.Rows("projects")), c.Stats())
		}
		ref := refs[0]
		now := time.Now()
		if !ref.URL.Present || !ref.URLExpiresAtMs.Present || ref.URLExpiresAtMs.Value > now.Add(5*time.Minute+time.Second).UnixMilli() ||
			ref.URLExpiresAtMs.Value < now.Add(4*time.Minute).UnixMilli() {
			t.Fatalf("descriptor url %+v expires %+v", ref.URL, ref.URLExpiresAtMs)
		}
		url := ref.URL.Value
		prefix, tok, ok := strings.Cut(url, "?st=")
		if !ok || prefix != s.base+"/segments/"+ref.SegmentID {
			t.Fatalf("signed url %q", url)
		}
		fetch := func(u string) (int, string, []byte) {
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.Header.Set("Accept-Encoding", "gzip, zstd")
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			code := ""
			if resp.StatusCode != 200 {
				var j struct{ Code string }
				_ = jsonUnmarshal(b, &j)
				code = j.Code
			}
			if resp.StatusCode == 200 && resp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("signed-url bytes served with Content-Encoding %q", resp.Header.Get("Content-Encoding"))
			}
			return resp.StatusCode, code, b
		}
		// Valid, with no host credentials at all.
		if st, _, b := fetch(url); st != 200 || contentaddr.Of(b) != ref.SegmentID {
			t.Fatalf("valid signed url: %d", st)
		}
		p64, m64, _ := strings.Cut(tok, ".")
		payload, err := base64.RawURLEncoding.DecodeString(p64)
		if err != nil {
			t.Fatal(err)
		}
		longer := bytes.Replace(payload, []byte(`"exp":`), []byte(`"exp":9`), 1)
		flipped := []byte(m64)
		flipped[5] ^= 1
		if flipped[5] == '.' || flipped[5] == '/' {
			flipped[5] = 'A'
		}
		signer, err := signedurl.NewSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		foreign, _ := signer.Mint(ref.SegmentID, ref.ScopeDigest, "some-other-partition", now, 5*time.Minute)
		expired, _ := signer.Mint(ref.SegmentID, ref.ScopeDigest, "signed", now.Add(-20*time.Minute), 5*time.Minute)
		otherKey, _ := signedurl.NewSigner(bytes.Repeat([]byte("x"), 32))
		forged, _ := otherKey.Mint(ref.SegmentID, ref.ScopeDigest, "signed", now, 5*time.Minute)
		wrongDigest, _ := signer.Mint(ref.SegmentID, scopes.Map{"owner": {"bob"}}.Digest(), "signed", now, 5*time.Minute)
		for _, tc := range []struct {
			name   string
			url    string
			status int
			code   string
		}{
			{"altered payload", prefix + "?st=" + base64.RawURLEncoding.EncodeToString(longer) + "." + m64, 403, "sync.forbidden"},
			{"altered mac", prefix + "?st=" + p64 + "." + string(flipped), 403, "sync.forbidden"},
			{"token of another segment", s.base + "/segments/" + refs[1].SegmentID + "?st=" + tok, 403, "sync.forbidden"},
			{"foreign partition", prefix + "?st=" + foreign, 404, "sync.not_found"},
			{"expired", prefix + "?st=" + expired, 404, "sync.segment_expired"},
			{"another key", prefix + "?st=" + forged, 403, "sync.forbidden"},
			{"unauthorized digest", prefix + "?st=" + wrongDigest, 403, "sync.forbidden"},
			{"empty token", prefix + "?st=", 403, "sync.forbidden"},
		} {
			if st, code, _ := fetch(tc.url); st != tc.status || code != tc.code {
				t.Errorf("%s: %d %s, want %d %s", tc.name, st, code, tc.status, tc.code)
			}
		}
		// A client without bit 3 gets no url and downloads directly.
		d := s.newClient(t, "alice", "signed", "", nil)
		d.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		for _, r := range bootstrap(t, d) {
			if r.URL.Present {
				t.Fatalf("url sent to a client without accept bit 3: %+v", r)
			}
		}
		if d.Stats().SignedDownloads != 0 || d.Stats().SegmentDownloads != 2 {
			t.Fatalf("direct client stats %+v", d.Stats())
		}
		_ = ctx
	})
}

// Two project-built clients bootstrap through referenced segments, write,
// and converge; a replayed commit is answered from the idempotency cache.
func TestSegmentClientsConverge(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := startSegments(t, e, nil)
		ctx := context.Background()
		seedRows(t, s.store, s.sch, "conv", "alice", "p", 700, 700)
		mk := func() *client.Client {
			c := s.newClient(t, "alice", "conv", "", func(o *client.Options) { o.RequestEncoding = "zstd" })
			c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
			if _, err := c.PullUntilIdle(ctx, 20); err != nil {
				t.Fatal(err)
			}
			return c
		}
		a, b := mk(), mk()
		project := func(c *client.Client, id, name string, base int64) ssp2.PushOperation {
			op, err := c.Upsert("projects", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "owner": rowcodec.String("alice"),
				"name": rowcodec.String(name), "locked": rowcodec.Bool(false)}, base)
			if err != nil {
				t.Fatal(err)
			}
			return op
		}
		_, v, ok := a.Get("projects", "p-000001")
		if !ok || v != 1 {
			t.Fatalf("bootstrapped row version %d %v", v, ok)
		}
		a.QueueWithID("a-1", project(a, "p-000001", "renamed by a", v), project(a, "a-new", "made by a", -1))
		b.Queue(project(b, "b-new", "made by b", -1), b.Delete("projects", "p-000002", 1))
		for _, c := range []*client.Client{a, b} {
			if _, err := c.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if len(c.Pending()) != 0 {
				t.Fatalf("pending after sync: %v", c.Pending())
			}
		}
		for _, c := range []*client.Client{a, b} {
			if _, err := c.PullUntilIdle(ctx, 20); err != nil {
				t.Fatal(err)
			}
		}
		if len(a.Rows("projects")) != 701 || fmt.Sprint(a.Rows("projects")) != fmt.Sprint(b.Rows("projects")) {
			t.Fatalf("replicas differ: %d vs %d rows", len(a.Rows("projects")), len(b.Rows("projects")))
		}
		row, v, _ := b.Get("projects", "p-000001")
		if row["name"].Text() != "renamed by a" || v != 2 {
			t.Fatalf("b sees %v at version %d", row["name"].Text(), v)
		}
		// Replay: the same commit id again is the stored result.
		a.QueueWithID("a-1", project(a, "p-000001", "renamed by a", 1), project(a, "a-new", "made by a", -1))
		res, err := a.Push(ctx)
		if err != nil || len(res.Pushes) != 1 || res.Pushes[0].Status != ssp2.PushCached {
			t.Fatalf("replay: %+v %v", res, err)
		}
	})
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
