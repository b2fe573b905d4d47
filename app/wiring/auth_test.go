package wiring

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	gojwt "github.com/golang-jwt/jwt/v5"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func TestNewAuth(t *testing.T) {
	s, err := platform.CompileSchema(platform.NewSchemaSource(config.Default()), platform.NewReadiness(platform.NewClock()))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "hs256.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     func(*config.Config)
		wantErr bool
	}{
		{"dev", func(c *config.Config) { c.Auth = config.AuthDev; c.DevAuth.Actor = "alice" }, false},
		{"jwt", func(c *config.Config) {
			c.Auth, c.JWT.Algorithm, c.JWT.KeyFile = config.AuthJWT, "HS256", key
		}, false},
		{"jwt missing key file", func(c *config.Config) {
			c.Auth, c.JWT.Algorithm, c.JWT.KeyFile = config.AuthJWT, "HS256", filepath.Join(t.TempDir(), "none")
		}, true},
		{"unknown", func(c *config.Config) { c.Auth = "none" }, true},
		// The callout adapters come from CalloutModule; without them the
		// modes refuse rather than serve without identity or grants.
		{"callout without its adapters", func(c *config.Config) { c.Auth = config.AuthCallout }, true},
		{"callout scopes without their adapter", func(c *config.Config) { c.Scopes = config.ScopesCallout; c.DevAuth.Actor = "alice" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			tt.cfg(&cfg)
			res, err := NewAuth(AuthParams{Config: cfg, Schema: s, Log: zap.NewNop(), Clock: platform.NewClock()})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			req := httptest.NewRequest("POST", "/sync", nil)
			id, err := res.Authenticator.Authenticate(req)
			if cfg.Auth == config.AuthJWT {
				if syncerr.CodeOf(err) != syncerr.AuthRequired {
					t.Fatalf("tokenless request: %v", err)
				}
				return
			}
			if err != nil || id.ActorID != "alice" {
				t.Fatalf("dev identity %+v %v", id, err)
			}
			allowed, err := res.Resolver.ResolveScopes(ports.WithIdentity(context.Background(), id),
				ports.ScopeRequest{Partition: id.Partition, ActorID: id.ActorID})
			if err != nil || len(allowed["list_id"]) != 1 || len(allowed["owner_id"]) != 1 {
				t.Fatalf("dev grant %v %v", allowed, err)
			}
		})
	}
}

// TestNewAuthJWKS: with --jwt-jwks-url the key set is fetched when the
// app starts; an unreachable set fails the start, naming the URL, unless
// the start is lazy.
func TestNewAuthJWKS(t *testing.T) {
	s, err := platform.CompileSchema(platform.NewSchemaSource(config.Default()), platform.NewReadiness(platform.NewClock()))
	if err != nil {
		t.Fatal(err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := jwkset.NewJWKFromKey(priv.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{k.Marshal()}})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	defer up.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	tests := []struct {
		name     string
		url      string
		lazy     bool
		startErr bool
	}{
		{"reachable", up.URL, false, false},
		{"unreachable", down.URL, false, true},
		{"unreachable, lazy", down.URL, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Auth, cfg.JWT.JWKSURL, cfg.JWT.JWKSLazy = config.AuthJWT, tt.url, tt.lazy
			lc := fxtest.NewLifecycle(t)
			res, err := NewAuth(AuthParams{Lifecycle: lc, Config: cfg, Schema: s, Log: zap.NewNop(), Clock: platform.NewClock()})
			if err != nil {
				t.Fatal(err)
			}
			err = lc.Start(t.Context())
			if tt.startErr {
				if err == nil || !strings.Contains(err.Error(), tt.url) {
					t.Fatalf("start: %v, want an error naming %s", err, tt.url)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer lc.RequireStop()
			tok := gojwt.NewWithClaims(gojwt.SigningMethodEdDSA, gojwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
			tok.Header["kid"] = "k1"
			raw, err := tok.SignedString(priv)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", "/sync", nil)
			req.Header.Set("Authorization", "Bearer "+raw)
			id, err := res.Authenticator.Authenticate(req)
			if tt.lazy {
				if err == nil {
					t.Fatal("token accepted before any key was fetched")
				}
				return
			}
			if err != nil || id.ActorID != "alice" {
				t.Fatalf("identity %+v %v", id, err)
			}
		})
	}
}
