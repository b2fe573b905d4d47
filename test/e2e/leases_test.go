package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// leaseClock is an platform.Clock a test moves by hand, from a fixed instant.
type leaseClock struct{ ms atomic.Int64 }

func (c *leaseClock) Now() time.Time                                   { return time.UnixMilli(c.ms.Load()) }
func (c *leaseClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
func (c *leaseClock) advance(d time.Duration)                          { c.ms.Add(d.Milliseconds()) }

// outageResolver is the host's resolver with a switch that makes it report
// a live-authorization outage (ports.ErrResolverOutage).
type outageResolver struct {
	next   ports.ScopeResolver
	outage atomic.Bool
}

func (r *outageResolver) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	if r.outage.Load() {
		return nil, &ports.OutageError{Cause: context.DeadlineExceeded}
	}
	return r.next.ResolveScopes(ctx, req)
}

// sqlHandles is the test store with the engine's database handles, as an
// SQL engine exposes them to the side stores (the lease store among them).
type sqlHandles struct {
	*gatedStore
	h interface {
		DB() *bun.DB
		ReadDB() *bun.DB
	}
}

func (s sqlHandles) DB() *bun.DB     { return s.h.DB() }
func (s sqlHandles) ReadDB() *bun.DB { return s.h.ReadDB() }

// TestAuthLeasesCarryOfflineRoundsThroughAnOutage drives the shipped
// server graph with --auth-lease-ttl on both engines through SPEC §7.3
// with the project's Go client: live rounds issue and slide the lease,
// an outage is served from it (no purge), expiry and revocation refuse
// rounds request-level with the local data and the outbox untouched, and
// a live round recovers.
func TestAuthLeasesCarryOfflineRoundsThroughAnOutage(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		keyFile := filepath.Join(t.TempDir(), "lease.keys")
		if err := os.WriteFile(keyFile, []byte("# newest first\n"+strings.Repeat("k", 40)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		clk := &leaseClock{}
		clk.ms.Store(1_800_000_000_000)
		res := &outageResolver{}
		var handles sqlHandles
		s := start(t, e, serverOpts{
			config: func(c *config.Config) { c.Leases = config.Leases{TTL: 15 * time.Minute, KeyFile: keyFile} },
			extra: []fx.Option{
				fx.Decorate(func(platform.Clock) platform.Clock { return clk }),
				fx.Decorate(func(r ports.ScopeResolver) ports.ScopeResolver { res.next = r; return res }),
				fx.Decorate(func(st ports.Storage) ports.Storage {
					gs := st.(*gatedStore)
					handles = sqlHandles{gatedStore: gs, h: gs.Storage.(interface {
						DB() *bun.DB
						ReadDB() *bun.DB
					})}
					return handles
				}),
			},
		})
		ctx := t.Context()
		h := http.Header{}
		h.Set("X-Syncd-Actor", "alice")
		h.Set("X-Syncd-Partition", "leases")
		h.Set("X-Syncd-Scopes", `{"owner":["alice"]}`)
		c, err := client.New(client.Options{BaseURL: strings.TrimSuffix(s.url, "/sync"), Schema: s.sch, ClientID: "phone", Header: h})
		if err != nil {
			t.Fatal(err)
		}
		c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		write := func(id string) {
			op, err := c.Upsert("projects", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "owner": rowcodec.String("alice"),
				"name": rowcodec.String(id), "locked": rowcodec.Bool(false)}, -1)
			if err != nil {
				t.Fatal(err)
			}
			c.Queue(op)
		}
		sync := func() error {
			_, err := c.Sync(ctx)
			return err
		}

		// §7.3.3: a live round issues the lease; the next one slides it.
		write("p-1")
		if err := sync(); err != nil {
			t.Fatal(err)
		}
		first := c.Lease()
		if first.LeaseID == "" || first.ExpiresAtMs != clk.ms.Load()+15*60_000 || first.ErrorCode != "" {
			t.Fatalf("first lease %+v", first)
		}
		clk.advance(time.Minute)
		if err := sync(); err != nil {
			t.Fatal(err)
		}
		if l := c.Lease(); l.LeaseID != first.LeaseID || l.ExpiresAtMs != first.ExpiresAtMs+60_000 {
			t.Fatalf("refresh %+v of %+v", l, first)
		}
		held := c.Lease()
		var stored int
		if err := handles.DB().QueryRowContext(ctx, `SELECT count(*) FROM sync_leases WHERE partition = 'leases'`).Scan(&stored); err != nil || stored != 1 {
			t.Fatalf("the lease is not in the sync database: %d, %v", stored, err)
		}

		// §7.3.3: during an outage the lease authorizes the round: the
		// write applies and the subscription stays active (no purge).
		res.outage.Store(true)
		write("p-2")
		if err := sync(); err != nil {
			t.Fatalf("outage round: %v", err)
		}
		if got := c.RowIDs("projects"); len(got) != 2 || len(c.Pending()) != 0 || c.Lease() != held {
			t.Fatalf("outage round: rows %v, pending %v, lease %+v", got, c.Pending(), c.Lease())
		}

		// Past the window: sync.auth_lease_required, nothing lost.
		clk.advance(15 * time.Minute)
		write("p-3")
		if err := sync(); client.CodeOf(err) != "sync.auth_lease_required" {
			t.Fatalf("expired lease: %v", err)
		}
		if l := c.Lease(); l.ErrorCode != "sync.auth_lease_required" || len(c.Pending()) != 1 || len(c.RowIDs("projects")) != 2 {
			t.Fatalf("after the refusal: lease %+v, pending %v, rows %v", l, c.Pending(), c.RowIDs("projects"))
		}

		// The resolver is back: the round drains the outbox and slides the
		// same lease again, clearing the error.
		res.outage.Store(false)
		if err := sync(); err != nil {
			t.Fatal(err)
		}
		if l := c.Lease(); l.LeaseID != first.LeaseID || l.ErrorCode != "" || len(c.Pending()) != 0 || len(c.RowIDs("projects")) != 3 {
			t.Fatalf("recovered: lease %+v, pending %v, rows %v", l, c.Pending(), c.RowIDs("projects"))
		}

		// §7.3.4: the operator revokes it on the admin listener.
		resp, err := http.Post(s.admin+"/admin/leases/revoke", "application/json",
			bytes.NewReader([]byte(`{"partition":"leases","leaseId":"`+first.LeaseID+`"}`)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var answer struct{ Revoked, Found bool }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || !answer.Found {
			t.Fatalf("revoke: %d %s", resp.StatusCode, body)
		}
		res.outage.Store(true)
		write("p-4")
		if err := sync(); client.CodeOf(err) != "sync.auth_lease_revoked" {
			t.Fatalf("revoked lease: %v", err)
		}
		if len(c.RowIDs("projects")) != 3 || len(c.Pending()) != 1 {
			t.Fatalf("revocation touched local data: rows %v, pending %v", c.RowIDs("projects"), c.Pending())
		}
		res.outage.Store(false)
		if err := sync(); err != nil {
			t.Fatal(err)
		}
		if l := c.Lease(); l.LeaseID == "" || l.LeaseID == first.LeaseID || l.ErrorCode != "" || len(c.RowIDs("projects")) != 4 {
			t.Fatalf("after revocation a live round mints a fresh lease: %+v, rows %v", l, c.RowIDs("projects"))
		}

		// The realtime channel's rounds carry LEASE the same way.
		rt, err := c.Connect(ctx, client.RealtimeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		before := c.Lease()
		clk.advance(time.Minute)
		if err := sync(); err != nil {
			t.Fatal(err)
		}
		if l := c.Lease(); c.Stats().Rounds == 0 || l.LeaseID != before.LeaseID || l.ExpiresAtMs != before.ExpiresAtMs+60_000 {
			t.Fatalf("socket round: lease %+v (before %+v), rounds %d", l, before, c.Stats().Rounds)
		}

		metrics := scrape(t, s)
		for _, want := range []string{`syncd_auth_leases_issued_total{kind="issued"} 2`, `syncd_auth_lease_outage_rounds_total{outcome="served"} 1`,
			`syncd_auth_lease_outage_rounds_total{outcome="expired"} 1`, `syncd_auth_lease_outage_rounds_total{outcome="revoked"} 1`,
			`syncd_auth_lease_revocations_total 1`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}
