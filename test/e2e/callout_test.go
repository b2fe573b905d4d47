package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/client"
	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// calloutBackend is the team's backend of the end-to-end test, in the
// shape docs/callout.md gives one: it verifies every callout's signature
// and answers authenticate (the bearer token is the actor), resolve-scopes
// (the actor's owners, switchable to an outage) and validate (a project
// named "bad" is rejected with details, one named "slow" hangs until the
// callout gives up, a commit with a project named "nope" is rejected as a
// whole).
type calloutBackend struct {
	keys [][]byte
	now  func() time.Time

	unsigned    atomic.Int64
	scopeCalls  atomic.Int64
	scopeOutage atomic.Bool
	slowHangs   atomic.Bool
	mu          sync.Mutex
	owners      map[string][]string // actor → owner values granted
}

func (b *calloutBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get(contract.HeaderVersion) != "1" ||
		contract.Verify(r.Header.Get(contract.HeaderSignature), body, b.keys, b.now(), 5*time.Minute) != nil {
		b.unsigned.Add(1)
		http.Error(w, "unsigned", http.StatusBadRequest)
		return
	}
	answer := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/hooks/authenticate":
		var in struct {
			Headers map[string][]string `json:"headers"`
		}
		_ = json.Unmarshal(body, &in)
		auth := in.Headers["authorization"]
		switch {
		case len(auth) == 0:
			w.WriteHeader(http.StatusUnauthorized)
		case auth[0] == "Bearer banned":
			w.WriteHeader(http.StatusForbidden)
		default:
			answer(map[string]string{"actorId": strings.TrimPrefix(auth[0], "Bearer "), "partition": "callout"})
		}
	case "/hooks/resolve-scopes":
		b.scopeCalls.Add(1)
		if b.scopeOutage.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var in struct{ ActorID, Partition, ClientID string }
		_ = json.Unmarshal(body, &in)
		b.mu.Lock()
		owners := append([]string{}, b.owners[in.ActorID]...)
		b.mu.Unlock()
		answer(map[string]any{"scopes": map[string][]string{"owner": owners}})
	case "/hooks/validate":
		var in struct {
			Kind       string
			Row        map[string]any
			Operations []struct {
				OpIndex int
				Row     map[string]any
			}
		}
		_ = json.Unmarshal(body, &in)
		if in.Kind == "commit" {
			for _, op := range in.Operations {
				if op.Row["name"] == "nope" {
					answer(map[string]any{"reject": map[string]any{"code": "app.nope", "message": "not in this commit", "opIndex": op.OpIndex}})
					return
				}
			}
			answer(map[string]bool{"accept": true})
			return
		}
		switch in.Row["name"] {
		case "bad":
			answer(map[string]any{"reject": map[string]any{"code": "app.bad_name", "message": "pick another name",
				"details": map[string]any{"fieldPaths": []string{"name"}, "reason": "bad_name"}}})
		case "slow":
			if b.slowHangs.Load() {
				<-r.Context().Done()
				return
			}
			answer(map[string]bool{"accept": true})
		default:
			answer(map[string]bool{"accept": true})
		}
	default:
		http.NotFound(w, r)
	}
}

func (b *calloutBackend) grant(actor string, owners ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.owners[actor] = owners
}

// TestCalloutsDriveTheStockServer runs the shipped server graph with
// --auth callout, --scopes callout and callout validators against a
// backend on both engines: identity, scopes and write decisions come
// from the backend; its rejection reaches the client with code and
// details; a validator past --callout-validate-timeout fails the push
// retryable with nothing applied and the write kept; the scope cache
// holds a grant until the admin refresh drops it; and an outage of
// resolve-scopes is carried by the client's auth lease.
func TestCalloutsDriveTheStockServer(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		dir := t.TempDir()
		key := strings.Repeat("c", 40)
		keyFile, leaseKeys := filepath.Join(dir, "callout.keys"), filepath.Join(dir, "lease.keys")
		for f, k := range map[string]string{keyFile: key, leaseKeys: strings.Repeat("l", 40)} {
			if err := os.WriteFile(f, []byte(k+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		clk := &stillClock{}
		clk.ms.Store(1_800_000_000_000)
		be := &calloutBackend{keys: [][]byte{[]byte(key)}, now: clk.Now, owners: map[string][]string{}}
		be.grant("alice", "alice")
		be.slowHangs.Store(true)
		hooks := httptest.NewServer(be)
		t.Cleanup(hooks.Close)
		s := start(t, e, serverOpts{
			config: func(c *config.Config) {
				c.Auth, c.Scopes = config.AuthCallout, config.ScopesCallout
				c.Callout.URL, c.Callout.KeyFile = hooks.URL+"/hooks", keyFile
				c.Callout.ValidateTables, c.Callout.ValidateCommits = "projects", true
				c.Callout.ScopesTTL = time.Minute
				// Generous bounds, so a loaded machine never times out an
				// answering backend; the hanging one is timed out anyway.
				c.Callout.Timeout, c.Callout.ValidateTimeout = 10*time.Second, 2*time.Second
				c.Leases = config.Leases{TTL: 15 * time.Minute, KeyFile: leaseKeys}
			},
			extra: []fx.Option{fx.Decorate(func(platform.Clock) platform.Clock { return clk })},
		})
		ctx := t.Context()

		// The backend refuses a request without credentials (401) and
		// a banned one (403) before any protocol work.
		req := ssptest.Req{ClientID: "probe", SchemaVersion: s.sch.Version, NoEpoch: true, Pull: true}.Encode(t)
		s.jsonError(s.post(call{}, req), http.StatusUnauthorized, syncerr.AuthRequired)
		s.jsonError(s.post(call{bearer: "banned"}, req), http.StatusForbidden, syncerr.Forbidden)

		h := http.Header{}
		h.Set("Authorization", "Bearer alice")
		c, err := client.New(client.Options{BaseURL: strings.TrimSuffix(s.url, "/sync"), Schema: s.sch, ClientID: "phone", Header: h})
		if err != nil {
			t.Fatal(err)
		}
		c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
		write := func(id, owner, name string) {
			op, err := c.Upsert("projects", id, map[string]rowcodec.Value{"id": rowcodec.String(id), "owner": rowcodec.String(owner),
				"name": rowcodec.String(name), "locked": rowcodec.Bool(false)}, -1)
			if err != nil {
				t.Fatal(err)
			}
			c.Queue(op)
		}
		sync := func() *client.Result {
			t.Helper()
			res, err := c.Sync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}

		// Authenticated by the backend, scoped by it, validated by it.
		write("p-1", "alice", "one")
		if res := sync(); len(res.Pushes) != 1 || res.Pushes[0].Status != ssp2.PushApplied || c.Lease().LeaseID == "" {
			t.Fatalf("first round: %+v, lease %+v", res.Pushes, c.Lease())
		}
		if got := c.RowIDs("projects"); len(got) != 1 || got[0] != "p-1" {
			t.Fatalf("rows %v", got)
		}

		// The backend's grant decides the write: bob's project is not
		// alice's to write. A new grant waits for the cache, until the
		// admin refresh drops it.
		write("p-bob", "bob", "theirs")
		if res := sync(); res.Pushes[0].Status != ssp2.PushRejected || res.Pushes[0].Results[0].Code != string(syncerr.Forbidden) {
			t.Fatalf("write outside the grant: %+v", res.Pushes[0])
		}
		be.grant("alice", "alice", "bob")
		write("p-bob", "bob", "theirs")
		if res := sync(); res.Pushes[0].Status != ssp2.PushRejected {
			t.Fatalf("the cached grant did not hold: %+v", res.Pushes[0])
		}
		calls := be.scopeCalls.Load()
		refresh, err := http.Post(s.admin+"/admin/realtime/refresh-scopes", "application/json", strings.NewReader(`{"partition":"callout","actorId":"alice"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = refresh.Body.Close()
		write("p-bob", "bob", "theirs")
		if res := sync(); res.Pushes[0].Status != ssp2.PushApplied || be.scopeCalls.Load() != calls+1 {
			t.Fatalf("after the refresh: %+v, %d scope callouts", res.Pushes[0], be.scopeCalls.Load()-calls)
		}

		// A row rejection reaches the client with its code and details,
		// exactly as a Go validator's; so does a whole-commit rejection.
		write("p-2", "alice", "bad")
		res := sync()
		if p := res.Pushes[0]; p.Status != ssp2.PushRejected || p.Results[0].Code != "app.bad_name" || p.Results[0].Message != "pick another name" {
			t.Fatalf("row rejection: %+v", p)
		}
		if d := pushDetails(res); d == nil || d.Entries[0].Details.Reason != "bad_name" || d.Entries[0].Details.FieldPaths[0] != "name" {
			t.Fatalf("rejection details: %+v", d)
		}
		write("p-3", "alice", "fine")
		write("p-4", "alice", "nope")
		if p := sync().Pushes; p[0].Status != ssp2.PushApplied || p[1].Status != ssp2.PushRejected || p[1].Results[0].Code != "app.nope" {
			t.Fatalf("commit rejection: %+v, %+v", p[0], p[1])
		}

		// A validator past --callout-validate-timeout: the push fails
		// retryable, nothing of it is applied or stored, the write stays
		// queued and applies once the backend answers in time.
		write("p-slow", "alice", "slow")
		_, err = c.Sync(ctx)
		var he *client.HTTPError
		if !errors.As(err, &he) || he.Code != string(syncerr.RateLimited) || !he.Retryable {
			t.Fatalf("slow validator: %v", err)
		}
		if row, _ := s.store.GetRow(ctx, "callout", "projects", "p-slow"); row != nil || len(c.Pending()) != 1 {
			t.Fatalf("slow validator: row %+v, pending %v", row, c.Pending())
		}
		be.slowHangs.Store(false)
		if res := sync(); res.Pushes[0].Status != ssp2.PushApplied || len(c.Pending()) != 0 {
			t.Fatalf("retry after the slow validator: %+v", res.Pushes[0])
		}

		// resolve-scopes is down past the cache: the client's auth lease
		// carries the round, the write applies and nothing is revoked.
		held := c.Lease()
		be.scopeOutage.Store(true)
		clk.advance(2 * time.Minute)
		write("p-5", "alice", "offline")
		if res := sync(); res.Pushes[0].Status != ssp2.PushApplied || res.Lease != nil || c.Lease() != held {
			t.Fatalf("outage round: %+v, lease frame %+v", res.Pushes[0], res.Lease)
		}
		if got := c.RowIDs("projects"); strings.Join(got, ",") != "p-1,p-3,p-5,p-slow" {
			t.Fatalf("rows after the outage round: %v", got)
		}
		be.scopeOutage.Store(false)

		if n := be.unsigned.Load(); n != 0 {
			t.Fatalf("%d callouts did not verify", n)
		}
		metrics := scrape(t, s)
		for _, want := range []string{
			`syncd_auth_lease_outage_rounds_total{outcome="served"} 1`,
			`syncd_callouts_total{callback="authenticate",outcome="refused"} 2`,
			`syncd_callouts_total{callback="resolve-scopes",outcome="bad_status"} 1`,
			`syncd_callouts_total{callback="validate-row",outcome="refused"} 1`,
			`syncd_callouts_total{callback="validate-row",outcome="timeout"} 1`,
			`syncd_callouts_total{callback="validate-commit",outcome="refused"} 1`,
			`syncd_callout_duration_seconds_count{callback="authenticate"}`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

// stillClock is a clock a test moves by hand whose sleeps never end
// (but the zero sleep):
// the periodic jobs wait instead of spinning, so the callouts' real
// timeouts are not starved of CPU.
type stillClock struct{ leaseClock }

func (*stillClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	<-ctx.Done()
	return ctx.Err()
}

// pushDetails is the response's PUSH_RESULT_DETAILS frame, if any.
func pushDetails(res *client.Result) *ssp2.PushResultDetails {
	for _, f := range res.Message.Frames {
		if d, ok := f.(*ssp2.PushResultDetails); ok {
			return d
		}
	}
	return nil
}

// TestCalloutSettingsRefuseToStart: a validated table the schema does not
// declare stops the start, naming the flag.
func TestCalloutSettingsRefuseToStart(t *testing.T) {
	hooks := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(hooks.Close)
	cfg := config.Default()
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Database = filepath.Join(t.TempDir(), "syncd.db")
	cfg.Callout.URL, cfg.Callout.ValidateTables = hooks.URL, "nope"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := fx.New(app.Options(cfg, platform.BuildInfo{}, zap.NewNop()))
	err := a.Err()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err = a.Start(ctx); err == nil {
			_ = a.Stop(ctx)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "--callout-validate-tables") || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("start: %v", err)
	}
}
