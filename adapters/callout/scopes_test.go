package callout_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/callout"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/testclock"
)

// scopesBackend answers resolve-scopes with answer (a func of the actor),
// counting the calls and keeping the last request.
type scopesBackend struct {
	calls  atomic.Int64
	mu     sync.Mutex
	last   map[string]any
	status atomic.Int64
	answer func(actor string) string
	// gate, when set, holds each request until it is closed.
	gate chan struct{}
}

func (b *scopesBackend) handler(w http.ResponseWriter, r *http.Request) {
	b.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	b.mu.Lock()
	b.last = in
	b.mu.Unlock()
	if b.gate != nil {
		<-b.gate
	}
	if s := b.status.Load(); s != 0 {
		w.WriteHeader(int(s))
		return
	}
	actor, _ := in["actorId"].(string)
	_, _ = io.WriteString(w, b.answer(actor))
}

func newResolver(t *testing.T, b *scopesBackend, clk *testclock.Manual, mut func(*callout.ScopesOptions)) *callout.ScopeResolver {
	t.Helper()
	srv := backend(t, map[string]http.HandlerFunc{"resolve-scopes": b.handler})
	o := callout.ScopesOptions{Client: newClient(t, srv.URL, nil), Timeout: 2 * time.Second, TTL: time.Minute, Now: clk.Now}
	if mut != nil {
		mut(&o)
	}
	r, err := callout.NewScopeResolver(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestResolveScopesCachesPerActorForTheTTL: an answer serves its actor
// in its partition for the TTL on the app clock, then the backend is
// asked again; InvalidateScopes drops one actor's or the whole
// partition's at once.
func TestResolveScopesCachesPerActorForTheTTL(t *testing.T) {
	clk := testclock.New(time.Unix(1_800_000_000, 0))
	b := &scopesBackend{answer: func(actor string) string { return `{"scopes":{"owner":["` + actor + `"]}}` }}
	r := newResolver(t, b, clk, nil)
	ctx := context.Background()
	ask := func(partition, actor string) scopes.Allowed {
		t.Helper()
		g, err := r.ResolveScopes(ctx, ports.ScopeRequest{Partition: partition, ActorID: actor, ClientID: "phone"})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if g := ask("acme", "alice"); !reflect.DeepEqual(g, scopes.Allowed{"owner": {"alice"}}) {
		t.Fatalf("grant %v", g)
	}
	b.mu.Lock()
	want := map[string]any{"actorId": "alice", "partition": "acme", "clientId": "phone"}
	if !reflect.DeepEqual(b.last, want) {
		t.Fatalf("request %v", b.last)
	}
	b.mu.Unlock()
	g := ask("acme", "alice")
	g["owner"][0] = "mallory" // a caller's change never reaches the cache
	ask("acme", "bob")
	ask("other", "alice")
	if n := b.calls.Load(); n != 3 {
		t.Fatalf("%d callouts, want 3 (one per partition and actor)", n)
	}
	if g := ask("acme", "alice"); g["owner"][0] != "alice" {
		t.Fatalf("cached grant changed: %v", g)
	}
	everyone := func() {
		for _, who := range [][2]string{{"acme", "alice"}, {"acme", "bob"}, {"other", "alice"}} {
			ask(who[0], who[1])
		}
	}
	for _, step := range []struct {
		name  string
		do    func()
		calls int64
	}{
		{"past the TTL", func() { clk.Advance(time.Minute) }, 6},
		{"after dropping alice", func() { r.InvalidateScopes("acme", "alice") }, 7},
		{"after dropping the partition", func() { r.InvalidateScopes("acme", "") }, 9},
	} {
		step.do()
		everyone()
		if n := b.calls.Load(); n != step.calls {
			t.Fatalf("%s: %d callouts, want %d", step.name, n, step.calls)
		}
	}
}

// TestResolveScopesOutageIsTheLeaseSignal: a backend without a usable
// answer is ports.ErrResolverOutage (an *ports.OutageError), which
// serves the round from its auth lease; an outage is not cached, and a
// grant is not served past its TTL during one. {"scopes": {}} is a grant
// of nothing, not an outage.
func TestResolveScopesOutageIsTheLeaseSignal(t *testing.T) {
	clk := testclock.New(time.Unix(1_800_000_000, 0))
	answer := `{"scopes":{"owner":["alice"]}}`
	var mu sync.Mutex
	b := &scopesBackend{answer: func(string) string { mu.Lock(); defer mu.Unlock(); return answer }}
	r := newResolver(t, b, clk, nil)
	req := ports.ScopeRequest{Partition: "acme", ActorID: "alice"}
	if _, err := r.ResolveScopes(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	for _, bad := range []string{`{"scopes":null}`, `{}`, `{"scopes":{"owner":"alice"}}`, `{"scope":{}}`, `not json`} {
		mu.Lock()
		answer = bad
		mu.Unlock()
		_, err := r.ResolveScopes(context.Background(), req)
		var oe *ports.OutageError
		if !ports.IsResolverOutage(err) || !errors.As(err, &oe) {
			t.Fatalf("answer %s: %v, want the outage signal", bad, err)
		}
	}
	b.status.Store(http.StatusServiceUnavailable)
	if _, err := r.ResolveScopes(context.Background(), req); !ports.IsResolverOutage(err) {
		t.Fatalf("503: %v", err)
	}
	before := b.calls.Load()
	if _, err := r.ResolveScopes(context.Background(), req); !ports.IsResolverOutage(err) || b.calls.Load() != before+1 {
		t.Fatalf("an outage was cached: %v", err)
	}
	b.status.Store(0)
	mu.Lock()
	answer = `{"scopes":{}}`
	mu.Unlock()
	if g, err := r.ResolveScopes(context.Background(), req); err != nil || g == nil || len(g) != 0 {
		t.Fatalf("a grant of nothing: %v, %v", g, err)
	}
}

// TestInvalidationBeatsAnAnswerInFlight: an answer asked for before an
// invalidation is not kept, so the next resolution asks again.
func TestInvalidationBeatsAnAnswerInFlight(t *testing.T) {
	clk := testclock.New(time.Unix(1_800_000_000, 0))
	b := &scopesBackend{answer: func(string) string { return `{"scopes":{}}` }, gate: make(chan struct{})}
	r := newResolver(t, b, clk, nil)
	req := ports.ScopeRequest{Partition: "acme", ActorID: "alice"}
	done := make(chan error, 1)
	go func() { _, err := r.ResolveScopes(context.Background(), req); done <- err }()
	for b.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.InvalidateScopes("acme", "alice")
	close(b.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := r.ResolveScopes(context.Background(), req); err != nil || b.calls.Load() != 2 {
		t.Fatalf("after the invalidation: %d callouts, %v", b.calls.Load(), err)
	}
}

// TestScopeCacheIsBounded: past MaxEntries the cache makes room, expired
// entries first, so many actors never grow it without bound.
func TestScopeCacheIsBounded(t *testing.T) {
	clk := testclock.New(time.Unix(1_800_000_000, 0))
	b := &scopesBackend{answer: func(string) string { return `{"scopes":{}}` }}
	r := newResolver(t, b, clk, func(o *callout.ScopesOptions) { o.MaxEntries = 3 })
	for i, actor := range []string{"a", "b", "c", "d", "e"} {
		if i == 3 {
			clk.Advance(2 * time.Minute)
		}
		if _, err := r.ResolveScopes(context.Background(), ports.ScopeRequest{Partition: "p", ActorID: actor}); err != nil {
			t.Fatal(err)
		}
		if n := r.CachedScopes(); n > 3 {
			t.Fatalf("after %s: %d entries", actor, n)
		}
	}
	if n := r.CachedScopes(); n != 2 {
		t.Fatalf("the expired entries stayed: %d", n)
	}
}
