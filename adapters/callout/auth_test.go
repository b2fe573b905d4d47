package callout_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/callout"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// TestAuthenticateAsksTheBackend: the request's Authorization, Cookie
// and configured headers, its method, path, query and socket client id
// reach BASE/authenticate; 200 is the identity, 401 sync.auth_required,
// 403 sync.forbidden, and every outage — another status, an answer that
// does not parse or lacks a member, a null scope list, no answer in time
// — the retryable sync.rate_limited.
func TestAuthenticateAsksTheBackend(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		answer   string
		hang     bool
		want     ports.Identity
		wantCode syncerr.Code
	}{
		{name: "identity with scopes", status: 200, answer: `{"actorId":"alice","partition":"acme","scopes":{"project_id":["p1","p2"]}}`,
			want: ports.Identity{ActorID: "alice", Partition: "acme", Scopes: scopes.Allowed{"project_id": {"p1", "p2"}}}},
		{name: "identity without scopes", status: 200, answer: `{"actorId":"bob","partition":"acme"}`,
			want: ports.Identity{ActorID: "bob", Partition: "acme"}},
		{name: "401", status: 401, answer: `{}`, wantCode: syncerr.AuthRequired},
		{name: "403", status: 403, wantCode: syncerr.Forbidden},
		{name: "500", status: 500, answer: `{"actorId":"alice","partition":"acme"}`, wantCode: syncerr.RateLimited},
		{name: "302", status: 302, wantCode: syncerr.RateLimited},
		{name: "garbage", status: 200, answer: `actorId=alice`, wantCode: syncerr.RateLimited},
		{name: "no actor", status: 200, answer: `{"partition":"acme"}`, wantCode: syncerr.RateLimited},
		{name: "no partition", status: 200, answer: `{"actorId":"alice"}`, wantCode: syncerr.RateLimited},
		{name: "misspelt member", status: 200, answer: `{"actorID":"alice","actorId":"alice","partition":"acme"}`, wantCode: syncerr.RateLimited},
		{name: "a member twice", status: 200, answer: `{"actorId":"mallory","actorId":"alice","partition":"acme"}`, wantCode: syncerr.RateLimited},
		{name: "trailing data", status: 200, answer: `{"actorId":"alice","partition":"acme"} {}`, wantCode: syncerr.RateLimited},
		{name: "a null scope list", status: 200, answer: `{"actorId":"alice","partition":"acme","scopes":{"project_id":null}}`, wantCode: syncerr.RateLimited},
		{name: "scopes of another shape", status: 200, answer: `{"actorId":"alice","partition":"acme","scopes":["p1"]}`, wantCode: syncerr.RateLimited},
		{name: "no answer in time", hang: true, wantCode: syncerr.RateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got map[string]any
			srv := backend(t, map[string]http.HandlerFunc{"authenticate": func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(body, &got)
				if tt.hang {
					<-r.Context().Done()
					return
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.answer)
			}})
			a, err := callout.NewAuthenticator(callout.AuthOptions{Client: newClient(t, srv.URL, nil), Timeout: 200 * time.Millisecond,
				ForwardHeaders: []string{"x-tenant", "authorization"}})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/api/sync/realtime?clientId=phone&token=t1", nil)
			req.Header.Set("Authorization", "Bearer abc")
			req.Header.Add("Cookie", "sid=1")
			req.Header.Add("Cookie", "theme=dark")
			req.Header.Set("X-Tenant", "acme")
			req.Header.Set("X-Other", "not forwarded")
			id, err := a.Authenticate(req)
			if tt.wantCode != "" {
				if c := syncerr.CodeOf(err); c != tt.wantCode {
					t.Fatalf("Authenticate = %v, want %s", err, tt.wantCode)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(id, tt.want) {
				t.Fatalf("Authenticate = %+v, %v", id, err)
			}
			want := map[string]any{"method": "GET", "path": "/api/sync/realtime", "query": "clientId=phone&token=t1", "clientId": "phone",
				"headers": map[string]any{"authorization": []any{"Bearer abc"}, "cookie": []any{"sid=1", "theme=dark"}, "x-tenant": []any{"acme"}}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("request body %v\nwant %v", got, want)
			}
		})
	}
}

// TestIdentityScopesReadsTheAnswerBack: with --scopes auth the grant is
// the authenticate answer's, from the request's identity.
func TestIdentityScopesReadsTheAnswerBack(t *testing.T) {
	req := ports.ScopeRequest{Partition: "acme", ActorID: "alice"}
	ctx := ports.WithIdentity(context.Background(), ports.Identity{ActorID: "alice", Partition: "acme", Scopes: scopes.Allowed{"p": {"1"}}})
	if g, err := (callout.IdentityScopes{}).ResolveScopes(ctx, req); err != nil || !reflect.DeepEqual(g, scopes.Allowed{"p": {"1"}}) {
		t.Fatalf("grant %v, %v", g, err)
	}
	ctx = ports.WithIdentity(context.Background(), ports.Identity{ActorID: "alice", Partition: "acme"})
	if g, err := (callout.IdentityScopes{}).ResolveScopes(ctx, req); err != nil || g == nil || len(g) != 0 {
		t.Fatalf("no scopes member: %v, %v", g, err)
	}
	if _, err := (callout.IdentityScopes{}).ResolveScopes(context.Background(), req); err == nil || ports.IsResolverOutage(err) {
		t.Fatalf("no identity: %v", err)
	}
}
