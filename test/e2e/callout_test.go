package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/operations"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/client"
	contract "github.com/syncd-dev/syncd/domain/callout"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// calloutBackend is the team's backend of the end-to-end test, in the
// shape docs/callout.md gives one: it verifies every callout's signature
// and answers authenticate (the bearer token is the actor), resolve-scopes
// (the actor's owners, switchable to an outage), validate (a project
// named "bad" is rejected with details, one named "slow" hangs until the
// callout gives up, a commit with a project named "nope" is rejected as a
// whole), the commands projects.rename (reads the project, then writes
// it renamed; refuses one the caller may not write) and projects.garbage
// (answers what the contract does not define), and the reaction webhook
// project.welcome (fails each reaction's first attempt with a 500).
type calloutBackend struct {
	keys [][]byte
	now  func() time.Time

	unsigned    atomic.Int64
	scopeCalls  atomic.Int64
	scopeOutage atomic.Bool
	slowHangs   atomic.Bool
	mu          sync.Mutex
	owners      map[string][]string // actor → owner values granted
	commands    []string            // the command callouts' operation ids, in order
	deliveries  []webhook           // the reaction webhooks, in order
}

// webhook is one reaction webhook as the backend saw it.
type webhook struct {
	key, attempt, bodyKey string
	status                int
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
	case "/hooks/commands/projects.rename", "/hooks/commands/projects.garbage":
		b.command(w, body)
	case "/hooks/reactions/project.welcome":
		var in struct{ IdempotencyKey string }
		_ = json.Unmarshal(body, &in)
		key, _ := url.PathUnescape(r.Header.Get(contract.HeaderIdempotencyKey))
		b.mu.Lock()
		first := true
		for _, d := range b.deliveries {
			first = first && d.key != key
		}
		status := http.StatusNoContent
		if first {
			status = http.StatusInternalServerError
		}
		b.deliveries = append(b.deliveries, webhook{key: key, attempt: r.Header.Get(contract.HeaderReactionAttempt), bodyKey: in.IdempotencyKey, status: status})
		b.mu.Unlock()
		w.WriteHeader(status)
	default:
		http.NotFound(w, r)
	}
}

// command answers a command callout: projects.rename asks for the project
// named by its id parameter, then writes it with its name parameter, or
// refuses when the row came back null (absent, or not the caller's).
func (b *calloutBackend) command(w http.ResponseWriter, body []byte) {
	var in struct {
		OperationID string
		Params      struct{ V [][2]json.RawMessage }
		Rows        []struct {
			Table, RowID string
			Row          map[string]any
		}
	}
	_ = json.Unmarshal(body, &in)
	b.mu.Lock()
	b.commands = append(b.commands, in.OperationID)
	b.mu.Unlock()
	if in.OperationID == "projects.garbage" {
		_, _ = io.WriteString(w, `{"writes":"all of them"}`)
		return
	}
	params := map[string]string{}
	for _, f := range in.Params.V {
		var k string
		var v struct{ V string }
		_ = json.Unmarshal(f[0], &k)
		_ = json.Unmarshal(f[1], &v)
		params[k] = v.V
	}
	answer := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case len(in.Rows) == 0:
		answer(map[string]any{"read": []map[string]string{{"table": "projects", "rowId": params["id"]}}})
	case in.Rows[0].Row == nil:
		answer(map[string]any{"reject": map[string]string{"code": "operation.forbidden", "message": "not a project of yours"}})
	default:
		row := in.Rows[0].Row
		row["name"] = params["name"]
		answer(map[string]any{"writes": []map[string]any{{"table": "projects", "values": row}}})
	}
}

// startCalloutBackend serves a backend that verifies signatures with key
// on now's clock, alice granted her own projects, and returns it with
// its base URL.
func startCalloutBackend(t *testing.T, key string, now func() time.Time) (*calloutBackend, string) {
	t.Helper()
	be := &calloutBackend{keys: [][]byte{[]byte(key)}, now: now, owners: map[string][]string{}}
	be.grant("alice", "alice")
	hooks := httptest.NewServer(be)
	t.Cleanup(hooks.Close)
	return be, hooks.URL + "/hooks"
}

// calloutAuth points c's identity and scopes at the backend at base,
// signing with keyFile.
func calloutAuth(c *config.Config, base, keyFile string) {
	c.Auth, c.Scopes = config.AuthCallout, config.ScopesCallout
	c.Callout.URL, c.Callout.KeyFile = base, keyFile
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
		be, hooks := startCalloutBackend(t, key, clk.Now)
		be.slowHangs.Store(true)
		s := start(t, e, serverOpts{
			config: func(c *config.Config) {
				calloutAuth(c, hooks, keyFile)
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

		c := aliceClient(t, s)
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

// TestCalloutCommandsAndReactions runs the shipped server graph with
// --callout-commands and --callout-reactions against a backend on both
// engines. A command's writes, planned by the backend from a row it asked
// for, commit through the push pipeline and reach a client's pull; a
// retry of its request id is answered cached without asking again; the
// backend's refusal reaches the caller with its operation code; an answer
// outside the contract fails the command retryable with nothing applied.
// A reaction a commit planned (the stock binary plans none: a host's
// planner plans it here) is delivered to the webhook with its
// idempotency key, retried after a 500 and completed by a 2xx.
func TestCalloutCommandsAndReactions(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		key := strings.Repeat("c", 40)
		keyFile := filepath.Join(t.TempDir(), "callout.keys")
		if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		be, hooks := startCalloutBackend(t, key, time.Now)
		s := start(t, e, serverOpts{
			config: func(c *config.Config) {
				calloutAuth(c, hooks, keyFile)
				c.Callout.Commands, c.Callout.Reactions = "projects.rename,projects.garbage", "project.welcome"
				// Generous bounds, so a loaded machine never times out an
				// answering backend.
				c.Callout.Timeout, c.Callout.CommandTimeout, c.Callout.ReactionTimeout = 10*time.Second, 10*time.Second, 10*time.Second
			},
			extra: []fx.Option{welcomeReactions()},
		})
		ctx := t.Context()
		c := aliceClient(t, s)
		op, err := c.Upsert("projects", "p-1", map[string]rowcodec.Value{"id": rowcodec.String("p-1"), "owner": rowcodec.String("alice"),
			"name": rowcodec.String("one"), "locked": rowcodec.Bool(false)}, -1)
		if err != nil {
			t.Fatal(err)
		}
		c.Queue(op)
		if res, err := c.Sync(ctx); err != nil || res.Pushes[0].Status != ssp2.PushApplied {
			t.Fatalf("insert: %v", err)
		}

		rename := func(id, name string) opdomain.Value {
			idv, _ := opdomain.String(id)
			namev, _ := opdomain.String(name)
			v, _ := opdomain.Object(opdomain.Field{Key: "id", Value: idv}, opdomain.Field{Key: "name", Value: namev})
			return v
		}
		commandCallouts := func() int {
			be.mu.Lock()
			defer be.mu.Unlock()
			return len(be.commands)
		}

		// The backend reads the row, then writes it renamed: the commit
		// applies and a pull brings it; a retry is cached, unasked.
		res, err := c.Command(ctx, "projects.rename", "req-1", rename("p-1", "renamed"))
		if err != nil || res.Status != opdomain.CommandApplied || res.CommitSeq == 0 || commandCallouts() != 2 {
			t.Fatalf("rename: %+v, %v, %d callouts", res, err, commandCallouts())
		}
		if res, err := c.Command(ctx, "projects.rename", "req-1", rename("p-1", "renamed")); err != nil || res.Status != opdomain.CommandCached || commandCallouts() != 2 {
			t.Fatalf("retry: %+v, %v, %d callouts", res, err, commandCallouts())
		}
		if _, err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if row, _, ok := c.Get("projects", "p-1"); !ok || row["name"].Text() != "renamed" || row["owner"].Text() != "alice" {
			t.Fatalf("pulled row %v", row)
		}

		// A row the caller may not write reads as null: the backend
		// refuses with its code and message.
		_, err = c.Command(ctx, "projects.rename", "req-2", rename("p-bob", "mine"))
		var oe *client.OperationError
		if !errors.As(err, &oe) || oe.Code != string(syncerr.OperationForbidden) || oe.Message != "not a project of yours" || oe.Retryable {
			t.Fatalf("refused command: %v", err)
		}

		// An answer outside the contract: retryable, nothing applied.
		before, err := s.store.GetRow(ctx, "callout", "projects", "p-1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Command(ctx, "projects.garbage", "req-3", rename("p-1", "garbage"))
		if !errors.As(err, &oe) || oe.Code != string(syncerr.RateLimited) || !oe.Retryable {
			t.Fatalf("garbage answer: %v", err)
		}
		if after, err := s.store.GetRow(ctx, "callout", "projects", "p-1"); err != nil || after.Version != before.Version {
			t.Fatalf("garbage answer applied: %+v, %v", after, err)
		}

		// The insert planned project.welcome: the webhook's first attempt
		// answers 500, the runner retries after its backoff, the second
		// answers 204 and completes it.
		rs, err := s.store.ListReactions(ctx, "callout", nil, 10)
		if err != nil || len(rs) != 1 {
			t.Fatalf("reactions %+v, %v", rs, err)
		}
		rkey := rs[0].IdempotencyKey
		deadline := time.Now().Add(30 * time.Second) // only stops a hung test
		for {
			r, err := s.store.GetReaction(ctx, "callout", rkey)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status == ports.ReactionCompleted {
				if r.Attempts != 2 {
					t.Fatalf("completed after %d attempts", r.Attempts)
				}
				break
			}
			if r.Status == ports.ReactionDeadLetter || time.Now().After(deadline) {
				t.Fatalf("reaction %+v", r)
			}
			time.Sleep(50 * time.Millisecond)
		}
		be.mu.Lock()
		got := append([]webhook(nil), be.deliveries...)
		be.mu.Unlock()
		want := []webhook{{key: rkey, attempt: "1", bodyKey: rkey, status: 500}, {key: rkey, attempt: "2", bodyKey: rkey, status: 204}}
		if !reflect.DeepEqual(got, want) || !strings.Contains(rkey, `"welcome:p-1"`) {
			t.Fatalf("webhooks %+v, want %+v", got, want)
		}

		if n := be.unsigned.Load(); n != 0 {
			t.Fatalf("%d callouts did not verify", n)
		}
		metrics := scrape(t, s)
		for _, want := range []string{
			`syncd_callouts_total{callback="command",outcome="ok"} 3`,
			`syncd_callouts_total{callback="command",outcome="refused"} 1`,
			`syncd_callouts_total{callback="command",outcome="malformed"} 1`,
			`syncd_callouts_total{callback="reaction",outcome="bad_status"} 1`,
			`syncd_callouts_total{callback="reaction",outcome="ok"} 1`,
			`syncd_reaction_transitions_total{transition="completed"} 1`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

// aliceClient is a client the backend authenticates as alice (its bearer
// token), subscribed to her projects.
func aliceClient(t *testing.T, s *server) *client.Client {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer alice")
	c, err := client.New(client.Options{BaseURL: strings.TrimSuffix(s.url, "/sync"), Schema: s.sch, ClientID: "phone", Header: h})
	if err != nil {
		t.Fatal(err)
	}
	c.Subscribe("projects", "projects", map[string][]string{"owner": {"alice"}})
	return c
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
// declare stops the start, naming the flag; so does a command or a
// reaction type both the backend and the embedding host serve.
func TestCalloutSettingsRefuseToStart(t *testing.T) {
	hooks := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(hooks.Close)
	tests := []struct {
		name  string
		set   func(*config.Callout)
		extra []fx.Option
		want  []string
	}{
		{"an undeclared validated table", func(k *config.Callout) { k.ValidateTables = "nope" }, nil,
			[]string{"--callout-validate-tables", `"nope"`}},
		{"a command the host serves too", func(k *config.Callout) { k.Commands = "tasks.complete" },
			[]fx.Option{app.ProvideRemoteCommand(func() operations.Command {
				return operations.Command{ID: "tasks.complete",
					Authorize: func(context.Context, operations.AuthContext, opdomain.Value) (bool, error) { return true, nil },
					Run: func(context.Context, operations.CommandContext, opdomain.Value) ([]operations.Mutation, error) {
						return nil, nil
					}}
			})},
			[]string{`remote command "tasks.complete": registered twice`}},
		{"a reaction type the host serves too", func(k *config.Callout) { k.Reactions = "project.welcome" },
			[]fx.Option{wiring.StorageModule, app.ProvideReactionHandler(func() *welcomeHandler { return &welcomeHandler{} })},
			[]string{`two handlers for type "project.welcome"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
			cfg.ShutdownDelay = 0
			cfg.Database = filepath.Join(t.TempDir(), "syncd.db")
			cfg.Callout.URL = hooks.URL
			tt.set(&cfg.Callout)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			a := fx.New(app.Options(cfg, platform.BuildInfo{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), tt.extra...))
			err := a.Err()
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err = a.Start(ctx); err == nil {
					_ = a.Stop(ctx)
				}
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("start: %v, want %s", err, w)
				}
			}
		})
	}
}
