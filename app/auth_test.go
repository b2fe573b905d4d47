package app

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func TestNewAuth(t *testing.T) {
	s, err := CompileSchema(NewSchemaSource(config.Default()), NewReadiness(NewClock()))
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			tt.cfg(&cfg)
			res, err := NewAuth(AuthParams{Config: cfg, Schema: s, Log: zap.NewNop(), Clock: NewClock()})
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
