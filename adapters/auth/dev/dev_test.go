package dev_test

import (
	"context"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/adapters/auth/dev"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func TestAuthenticate(t *testing.T) {
	tests := []struct {
		name    string
		opts    dev.Options
		target  string
		headers map[string]string
		want    ports.Identity
		code    syncerr.Code
	}{
		{
			name:    "headers",
			target:  "/sync",
			headers: map[string]string{dev.HeaderActor: "alice", dev.HeaderPartition: "acme"},
			want:    ports.Identity{ActorID: "alice", Partition: "acme"},
		},
		{
			name:   "query parameters",
			target: "/realtime?actor=bob&partition=p2",
			want:   ports.Identity{ActorID: "bob", Partition: "p2"},
		},
		{
			name:    "headers win over query",
			target:  "/sync?actor=bob&partition=p2",
			headers: map[string]string{dev.HeaderActor: "alice", dev.HeaderPartition: "acme"},
			want:    ports.Identity{ActorID: "alice", Partition: "acme"},
		},
		{
			name:   "partition defaults to default",
			target: "/sync?actor=bob",
			want:   ports.Identity{ActorID: "bob", Partition: "default"},
		},
		{
			name:   "configured defaults",
			opts:   dev.Options{DefaultActor: "dev", DefaultPartition: "local"},
			target: "/sync",
			want:   ports.Identity{ActorID: "dev", Partition: "local"},
		},
		{
			name:   "no actor and no default",
			target: "/sync",
			code:   syncerr.AuthRequired,
		},
		{
			name:    "scopes header",
			target:  "/sync?actor=a",
			headers: map[string]string{dev.HeaderScopes: `{"workspace_id":["w1","w2"],"project_id":["*"]}`},
			want: ports.Identity{ActorID: "a", Partition: "default", Scopes: scopes.Allowed{
				"workspace_id": {"w1", "w2"}, "project_id": {"*"},
			}},
		},
		{
			name:    "empty scopes object grants nothing",
			target:  "/sync?actor=a",
			headers: map[string]string{dev.HeaderScopes: `{}`},
			want:    ports.Identity{ActorID: "a", Partition: "default", Scopes: scopes.Allowed{}},
		},
		{
			name:    "malformed scopes header",
			target:  "/sync?actor=a",
			headers: map[string]string{dev.HeaderScopes: `{"workspace_id":"w1"}`},
			code:    syncerr.AuthRequired,
		},
		{
			name:    "scopes header with trailing data",
			target:  "/sync?actor=a",
			headers: map[string]string{dev.HeaderScopes: `{} {}`},
			code:    syncerr.AuthRequired,
		},
		{
			name:    "scopes header null",
			target:  "/sync?actor=a",
			headers: map[string]string{dev.HeaderScopes: `null`},
			code:    syncerr.AuthRequired,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := dev.NewAuthenticator(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("POST", tc.target, nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			got, err := a.Authenticate(r)
			if syncerr.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %q", err, tc.code)
			}
			if tc.code == "" && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("identity = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNewAuthenticatorValidates(t *testing.T) {
	if _, err := dev.NewAuthenticator(dev.Options{DefaultPartition: " p"}); err == nil {
		t.Fatal("want an error for a padded partition")
	}
}

func TestResolver(t *testing.T) {
	r, err := dev.NewResolver(dev.ResolverOptions{Variables: map[string]bool{"workspace_id": true, "project_id": true}})
	if err != nil {
		t.Fatal(err)
	}
	req := ports.ScopeRequest{Partition: "p", ActorID: "a", ClientID: "c"}
	all := scopes.Allowed{"workspace_id": {"*"}, "project_id": {"*"}}
	header := scopes.Allowed{"workspace_id": {"w1"}}
	tests := []struct {
		name    string
		ctx     context.Context
		want    scopes.Allowed
		wantErr bool
	}{
		{"no identity in context grants everything", context.Background(), all, false},
		{"identity without scopes header grants everything",
			ports.WithIdentity(context.Background(), ports.Identity{ActorID: "a", Partition: "p"}), all, false},
		{"scopes header is the grant",
			ports.WithIdentity(context.Background(), ports.Identity{ActorID: "a", Partition: "p", Scopes: header}), header, false},
		{"identity of another actor is refused",
			ports.WithIdentity(context.Background(), ports.Identity{ActorID: "b", Partition: "p", Scopes: header}), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.ResolveScopes(tc.ctx, req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("allowed = %v, want %v", got, tc.want)
			}
		})
	}
	// The grant is a copy: callers may not mutate the identity's map.
	ctx := ports.WithIdentity(context.Background(), ports.Identity{ActorID: "a", Partition: "p", Scopes: header})
	got, _ := r.ResolveScopes(ctx, req)
	got["workspace_id"][0] = "x"
	if header["workspace_id"][0] != "w1" {
		t.Fatal("resolver result aliases the identity's scopes")
	}
}

// TestEndToEnd shows the intended flow: authenticate, store the identity
// on the context, resolve against it.
func TestEndToEnd(t *testing.T) {
	a, _ := dev.NewAuthenticator(dev.Options{})
	res, _ := dev.NewResolver(dev.ResolverOptions{Variables: map[string]bool{"workspace_id": true}})
	r := httptest.NewRequest("POST", "/sync?actor=alice", nil)
	r.Header.Set(dev.HeaderScopes, `{"workspace_id":["w1"]}`)
	id, err := a.Authenticate(r)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ports.WithIdentity(r.Context(), id)
	got, err := res.ResolveScopes(ctx, ports.ScopeRequest{Partition: id.Partition, ActorID: id.ActorID})
	if err != nil || !reflect.DeepEqual(got, scopes.Allowed{"workspace_id": {"w1"}}) {
		t.Fatalf("got %v, %v", got, err)
	}
}
