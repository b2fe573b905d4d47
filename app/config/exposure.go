package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
)

// Admin are the access settings of the admin listener.
type Admin struct {
	// TokenFile holds the bearer token /metrics and /debug/pprof require
	// (health probes stay open). Required when AdminListen is not a
	// loopback address.
	TokenFile string
	// Pprof serves /debug/pprof on the admin listener.
	Pprof bool
	// API serves the read-only admin API (/admin/v1/...) on the admin
	// listener. It requires TokenFile: the API shows client ids, actors
	// and commit metadata, so it never runs without authentication.
	API bool
}

func (c *Config) exposureFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.DevAuth.AllowInsecure, "allow-insecure-dev-auth", c.DevAuth.AllowInsecure, "--auth dev: start even though --listen is not a loopback address (any client that reaches it chooses its own identity)")
	fs.StringVar(&c.Admin.TokenFile, "admin-token-file", c.Admin.TokenFile, "file holding the bearer token /metrics, /debug/pprof and the admin API require (/livez and /readyz stay open); required when --admin-listen is not a loopback address and by --admin-api")
	fs.BoolVar(&c.Admin.Pprof, "pprof", c.Admin.Pprof, "serve /debug/pprof on the admin listener")
	fs.BoolVar(&c.Admin.API, "admin-api", c.Admin.API, "serve the read-only admin API (/admin/v1/...) on the admin listener; requires --admin-token-file")
}

// IsLoopback reports whether a host:port names a loopback address
// (localhost, 127.0.0.0/8, ::1). An empty host listens on every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(host)
}

// validateExposure refuses unsafe exposure and settings that the chosen
// modes would silently ignore. It runs once --auth is resolved.
func (c *Config) validateExposure() []error {
	var errs []error
	if c.Auth == AuthDev && !IsLoopback(c.Listen) && !c.DevAuth.AllowInsecure {
		errs = append(errs, fmt.Errorf("--auth dev with --listen %s: development authentication lets every client that reaches a non-loopback address choose its own identity; "+
			"listen on a loopback address, use --auth jwt, or pass --allow-insecure-dev-auth to accept that", c.Listen))
	}
	if c.Retention.ToActiveFloorsUnsafe && !IsLoopback(c.Listen) {
		errs = append(errs, fmt.Errorf("--%s with --listen %s: pruning to the active clients' floors breaks the SPEC §4.6 retention minimums and is for tests and load runs only; "+
			"it is refused on a listener that is not a loopback address", FlagToActiveFloors, c.Listen))
	}
	if c.DevAuth.AllowInsecure && c.Auth != AuthDev {
		errs = append(errs, fmt.Errorf("--allow-insecure-dev-auth only applies to --auth dev (--auth is %s)", c.Auth))
	}
	if !IsLoopback(c.AdminListen) && c.Admin.TokenFile == "" {
		errs = append(errs, fmt.Errorf("--admin-listen %s is not a loopback address: --admin-token-file is required (it protects /metrics and /debug/pprof)", c.AdminListen))
	}
	if c.Admin.API && c.Admin.TokenFile == "" {
		errs = append(errs, errors.New("--admin-api requires --admin-token-file: the admin API never runs without a bearer token"))
	}
	if c.Auth != AuthJWT {
		if set := c.jwtFlagsSet(); len(set) > 0 {
			errs = append(errs, fmt.Errorf("%s set, but only used with --auth jwt (--auth is %s)", strings.Join(set, ", "), c.Auth))
		}
	}
	if c.Auth != AuthDev {
		var set []string
		if c.DevAuth.Actor != "" {
			set = append(set, "--dev-actor")
		}
		if c.DevAuth.Partition != "" {
			set = append(set, "--dev-partition")
		}
		if len(set) > 0 {
			errs = append(errs, fmt.Errorf("%s set, but only used with --auth dev (--auth is %s)", strings.Join(set, ", "), c.Auth))
		}
	}
	return errs
}

// jwtFlagsSet names the --jwt-* settings that differ from their defaults.
func (c *Config) jwtFlagsSet() []string {
	j := c.JWT
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--jwt-algorithm", j.Algorithm != ""}, {"--jwt-key-file", j.KeyFile != ""},
		{"--jwt-jwks-url", j.JWKSURL != ""}, {"--jwt-jwks-refresh", j.JWKSRefresh != DefaultJWKSRefresh},
		{"--jwt-jwks-min-refetch", j.JWKSMinRefetch != DefaultJWKSMinRefetch}, {"--jwt-jwks-lazy", j.JWKSLazy},
		{"--jwt-issuer", j.Issuer != ""}, {"--jwt-audience", j.Audience != ""},
		{"--jwt-actor-claim", j.ActorClaim != ""}, {"--jwt-partition-claim", j.PartitionClaim != ""},
		{"--jwt-scopes-claim", j.ScopesClaim != ""}, {"--jwt-token-query-param", j.TokenQueryParam != ""},
		{"--jwt-leeway", j.Leeway != DefaultJWTLeeway},
	} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return set
}
