// Package jwt authenticates requests by a signed JSON Web Token in the
// Authorization header and resolves scopes from one of its claims.
//
// The verification key is either one configured key, and the accepted
// algorithm is the one that key is for (HS256 with a shared secret, RS256
// with an RSA public key, EdDSA with an Ed25519 public key), or a JWK set
// fetched from a URL (jwks.go), where the token's kid picks the key and
// the key's type its one algorithm (RS256, EdDSA or ES256; never HMAC). A
// token naming any other algorithm is refused before its signature is
// checked, so a public key can never be replayed as an HMAC secret. Expiry, not-before and
// issued-at (a token issued in the future is refused) are enforced with a
// leeway for clock skew; expiry is required unless the options say
// otherwise. The server understands no JWS extension, so a token with a
// crit header is refused (RFC 7515 §4.1.11). A refused token is logged at
// info with the reason, never the token.
//
// The actor, partition and allowed-scope claims are configurable. The
// scopes claim is an object mapping each scope variable to a list of
// strings; the Authenticator puts it on ports.Identity.Scopes and the
// Resolver reads it back from the request context. The verified claims
// themselves go on ports.Identity.Claims, for resolvers that compute
// scopes from them.
package jwt

import (
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Supported algorithms.
const (
	HS256 = "HS256"
	RS256 = "RS256"
	EdDSA = "EdDSA"
)

// Defaults of Options.
const (
	DefaultActorClaim     = "sub"
	DefaultPartitionClaim = "partition"
	DefaultScopesClaim    = "scopes"
	DefaultPartition      = "default"
	DefaultLeeway         = 60 * time.Second
)

const (
	minHMACKeyBytes = 32   // RFC 7518 §3.2: at least the hash output size
	minRSABits      = 2048 // RFC 7518 §3.3
	maxTokenBytes   = 16 << 10
	maxKeyFileBytes = 1 << 20
)

// Options configure the JWT Authenticator.
type Options struct {
	// Algorithm is HS256, RS256 or EdDSA; the only one accepted. With
	// JWKSURL it is optional (RS256, EdDSA or ES256) and narrows the
	// algorithms the set's keys may verify to that one.
	Algorithm string
	// KeyFile is read when Key is nil. It holds one or more keys, any of
	// which verifies a token, so a key rotates without refusing tokens:
	// for HS256 one secret per line (blank lines and lines starting with
	// '#' skipped), for RS256 and EdDSA one or more PEM public keys (PKIX
	// "PUBLIC KEY", PKCS#1 "RSA PUBLIC KEY" or a certificate for RSA).
	// ReloadKeyFile reads it again.
	KeyFile string
	// Key is the verification key itself: []byte for HS256,
	// *rsa.PublicKey for RS256, ed25519.PublicKey for EdDSA.
	Key any

	// JWKSURL, instead of a key, is where the JWK set is fetched
	// (http or https). Start fetches it; Stop ends the refresh.
	JWKSURL string
	// JWKSRefresh is the background refresh interval, jittered ±10%
	// (default 5m).
	JWKSRefresh time.Duration
	// JWKSMinRefetch is the least time between two fetches prompted by a
	// token whose kid is not in the cached set (default 10s).
	JWKSMinRefetch time.Duration
	// JWKSTimeout bounds one fetch (default 10s).
	JWKSTimeout time.Duration
	// JWKSLazy lets Start succeed without a first successful fetch;
	// tokens are refused until one succeeds.
	JWKSLazy bool
	// HTTPClient fetches the JWKS (default a plain http.Client).
	HTTPClient *http.Client
	// Sleep waits between refreshes (default a timer); tests drive it.
	Sleep func(ctx context.Context, d time.Duration) error

	// ActorClaim names the string claim holding the actor id (default "sub").
	ActorClaim string
	// PartitionClaim names the string claim holding the partition
	// (default "partition"); tokens without it get DefaultPartition.
	PartitionClaim string
	// DefaultPartition is the partition of tokens without PartitionClaim
	// (default "default").
	DefaultPartition string
	// ScopesClaim names the claim holding the allowed scopes (default
	// "scopes"): an object, variable → list of strings. Tokens without it
	// are granted nothing.
	ScopesClaim string

	// Issuer and Audience, when set, must match the iss and aud claims.
	Issuer   string
	Audience string
	// Leeway tolerates clock skew on exp, nbf and iat (default 60s;
	// negative means none).
	Leeway time.Duration
	// AllowMissingExpiry accepts tokens without exp.
	AllowMissingExpiry bool
	// TokenQueryParam, when set, also reads the token from that query
	// parameter when no Authorization header is present (browsers cannot
	// set headers on WebSocket upgrades). Tokens in URLs end up in access
	// logs; leave it empty unless needed.
	TokenQueryParam string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives a line per refused token (default: none).
	Log *zap.Logger
}

// Authenticator verifies bearer tokens. It implements ports.Authenticator.
type Authenticator struct {
	algs []string
	// keys are the static verification keys (one or more; nil with a
	// JWKS), swapped whole by ReloadKeyFile.
	keys           atomic.Pointer[[]any]
	keyFile        string
	jwks           *jwks
	parser         *gojwt.Parser
	actorClaim     string
	partitionClaim string
	defPartition   string
	scopesClaim    string
	queryParam     string
	log            *zap.Logger
}

var _ ports.Authenticator = (*Authenticator)(nil)

// New validates opts, loads the key and builds an Authenticator.
// With JWKSURL nothing is fetched until Start.
func New(opts Options) (*Authenticator, error) {
	a := &Authenticator{
		actorClaim:     orDefault(opts.ActorClaim, DefaultActorClaim),
		partitionClaim: orDefault(opts.PartitionClaim, DefaultPartitionClaim),
		defPartition:   orDefault(opts.DefaultPartition, DefaultPartition),
		scopesClaim:    orDefault(opts.ScopesClaim, DefaultScopesClaim),
		queryParam:     opts.TokenQueryParam,
		log:            opts.Log,
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	if err := a.setKey(opts); err != nil {
		return nil, err
	}
	leeway := opts.Leeway
	switch {
	case leeway == 0:
		leeway = DefaultLeeway
	case leeway < 0:
		leeway = 0
	}
	popts := []gojwt.ParserOption{
		gojwt.WithValidMethods(a.algs),
		gojwt.WithLeeway(leeway),
		gojwt.WithIssuedAt(),
	}
	if !opts.AllowMissingExpiry {
		popts = append(popts, gojwt.WithExpirationRequired())
	}
	if opts.Now != nil {
		popts = append(popts, gojwt.WithTimeFunc(opts.Now))
	}
	if opts.Issuer != "" {
		popts = append(popts, gojwt.WithIssuer(opts.Issuer))
	}
	if opts.Audience != "" {
		popts = append(popts, gojwt.WithAudience(opts.Audience))
	}
	a.parser = gojwt.NewParser(popts...)
	return a, nil
}

// setKey installs the one configured key or the JWKS cache.
func (a *Authenticator) setKey(opts Options) error {
	if opts.JWKSURL != "" {
		if opts.Key != nil || opts.KeyFile != "" {
			return errors.New("jwt auth: a JWKS URL and a key or key file are exclusive")
		}
		a.algs = jwksAlgorithms()
		if opts.Algorithm != "" {
			if !slices.Contains(a.algs, opts.Algorithm) {
				return fmt.Errorf("jwt auth: algorithm %q cannot come from a JWKS (want RS256, EdDSA or ES256)", opts.Algorithm)
			}
			a.algs = []string{opts.Algorithm}
		}
		j, err := newJWKS(opts, a.log)
		if err != nil {
			return err
		}
		a.jwks = j
		return nil
	}
	keys := []any{opts.Key}
	if opts.Key == nil {
		if opts.KeyFile == "" {
			return errors.New("jwt auth: a key, key file or JWKS URL is required")
		}
		ks, err := LoadKeys(opts.Algorithm, opts.KeyFile)
		if err != nil {
			return err
		}
		keys, a.keyFile = ks, opts.KeyFile
	}
	for _, k := range keys {
		if err := checkKey(opts.Algorithm, k); err != nil {
			return err
		}
	}
	a.algs = []string{opts.Algorithm}
	a.keys.Store(&keys)
	return nil
}

// ReloadKeyFile reads Options.KeyFile again and, when every key in it is
// usable, verifies with those from then on; otherwise it keeps the keys
// it has and returns the error. It returns the number of keys in use. It
// does nothing (0, nil) without a key file.
func (a *Authenticator) ReloadKeyFile() (int, error) {
	if a.keyFile == "" {
		return 0, nil
	}
	keys, err := LoadKeys(a.algs[0], a.keyFile)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := checkKey(a.algs[0], k); err != nil {
			return 0, err
		}
	}
	a.keys.Store(&keys)
	return len(keys), nil
}

// Start fetches the JWKS once and starts its background refresh; the
// fetch failing fails Start (naming the URL) unless JWKSLazy. Without a
// JWKS it does nothing.
func (a *Authenticator) Start(ctx context.Context) error {
	if a.jwks == nil {
		return nil
	}
	return a.jwks.start(ctx)
}

// Stop ends the JWKS refresh and waits for it, or for ctx.
func (a *Authenticator) Stop(ctx context.Context) error {
	if a.jwks == nil {
		return nil
	}
	return a.jwks.close(ctx)
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// LoadKey reads the one verification key for alg from path (the first,
// when the file holds several).
func LoadKey(alg, path string) (any, error) {
	keys, err := LoadKeys(alg, path)
	if err != nil {
		return nil, err
	}
	return keys[0], nil
}

// LoadKeys reads the verification keys for alg from path: HS256 secrets
// one per line (blank lines and '#' lines skipped, a trailing CR
// dropped), or a sequence of PEM blocks for RS256 and EdDSA.
func LoadKeys(alg, path string) ([]any, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, fmt.Errorf("jwt auth: key file: %w", err)
	}
	var keys []any
	switch alg {
	case HS256:
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			keys = append(keys, []byte(line))
		}
	case RS256, EdDSA:
		rest := data
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			one := pem.EncodeToMemory(b)
			var k any
			if alg == RS256 {
				k, err = gojwt.ParseRSAPublicKeyFromPEM(one)
			} else {
				k, err = gojwt.ParseEdPublicKeyFromPEM(one)
			}
			if err != nil {
				return nil, fmt.Errorf("jwt auth: key file %s, PEM block %d: %w", path, len(keys)+1, err)
			}
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("jwt auth: key file %s: %w", path, gojwt.ErrKeyMustBePEMEncoded)
		}
	default:
		return nil, fmt.Errorf("jwt auth: unsupported algorithm %q (want HS256, RS256 or EdDSA)", alg)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("jwt auth: key file %s holds no key", path)
	}
	return keys, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxKeyFileBytes)
	}
	return data, nil
}

func checkKey(alg string, key any) error {
	switch alg {
	case HS256:
		k, ok := key.([]byte)
		if !ok {
			return fmt.Errorf("jwt auth: HS256 needs a []byte secret, got %T", key)
		}
		if len(k) < minHMACKeyBytes {
			return fmt.Errorf("jwt auth: HS256 secret is %d bytes; at least %d are required", len(k), minHMACKeyBytes)
		}
	case RS256:
		k, ok := key.(*rsa.PublicKey)
		if !ok || k == nil {
			return fmt.Errorf("jwt auth: RS256 needs an *rsa.PublicKey, got %T", key)
		}
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("jwt auth: RSA key is %d bits; at least %d are required", k.N.BitLen(), minRSABits)
		}
	case EdDSA:
		k, ok := key.(ed25519.PublicKey)
		if !ok || len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("jwt auth: EdDSA needs an ed25519.PublicKey, got %T", key)
		}
	default:
		return fmt.Errorf("jwt auth: unsupported algorithm %q (want HS256, RS256 or EdDSA)", alg)
	}
	return nil
}

// Authenticate verifies the request's bearer token and maps its claims
// to an Identity. Every failure is sync.auth_required; a presented token
// that is refused is logged at info with the reason (never the token).
func (a *Authenticator) Authenticate(r *http.Request) (ports.Identity, error) {
	raw, err := a.token(r)
	if err != nil {
		if !errors.Is(err, errNoToken) {
			a.refused(err)
		}
		return ports.Identity{}, fail(err)
	}
	claims := gojwt.MapClaims{}
	keyFor := func(t *gojwt.Token) (any, error) { return a.keyFor(r.Context(), t) }
	if _, err := a.parser.ParseWithClaims(raw, claims, keyFor); err != nil {
		a.refused(err)
		return ports.Identity{}, fail(err)
	}
	id, err := a.identity(claims)
	if err != nil {
		a.refused(err)
		return ports.Identity{}, fail(err)
	}
	return id, nil
}

// refused logs why a token was refused. The reasons are the parser's and
// this package's own texts, which name claims and rules, never token bytes.
func (a *Authenticator) refused(err error) {
	a.log.Info("bearer token refused", zap.String("reason", err.Error()))
}

func fail(err error) error {
	return syncerr.Wrap(syncerr.AuthRequired, fmt.Errorf("jwt auth: %w", err))
}

var errNoToken = errors.New("no bearer token")

func (a *Authenticator) token(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" && a.queryParam != "" {
		if t := r.URL.Query().Get(a.queryParam); t != "" {
			return checkLen(t)
		}
	}
	if h == "" {
		return "", errNoToken
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errors.New("authorization header is not a bearer token")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", errors.New("empty bearer token")
	}
	return checkLen(tok)
}

func checkLen(t string) (string, error) {
	if len(t) > maxTokenBytes {
		return "", fmt.Errorf("token longer than %d bytes", maxTokenBytes)
	}
	return t, nil
}

// keyFor hands the verifier a key only for an accepted signing method;
// the parser's method allow-list already refuses others, this keeps the
// pin even if that option were dropped. From a JWKS the key must also be
// one for the token's method (jwks.key).
//
// It also enforces RFC 7515 §4.1.11: crit lists header extensions the
// recipient must understand, and this server understands none, so any
// crit header is refused — one naming an extension as not understood, a
// malformed one (not a non-empty array of strings) as malformed.
func (a *Authenticator) keyFor(ctx context.Context, t *gojwt.Token) (any, error) {
	if t.Method == nil || !slices.Contains(a.algs, t.Method.Alg()) {
		return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
	}
	if crit, present := t.Header["crit"]; present {
		return nil, checkCrit(crit)
	}
	if a.jwks != nil {
		return a.jwks.key(ctx, t.Header["kid"], t.Method.Alg())
	}
	keys := *a.keys.Load()
	if len(keys) == 1 {
		return keys[0], nil
	}
	// During a rotation any configured key verifies (no kid is needed).
	set := gojwt.VerificationKeySet{Keys: make([]gojwt.VerificationKey, len(keys))}
	for i, k := range keys {
		set.Keys[i] = k
	}
	return set, nil
}

func checkCrit(v any) error {
	malformed := errors.New("malformed crit header: want a non-empty array of header parameter names")
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return malformed
	}
	names := make([]string, 0, len(list))
	for _, e := range list {
		name, ok := e.(string)
		if !ok || name == "" {
			return malformed
		}
		names = append(names, name)
	}
	if len(names[0]) > 64 {
		return errors.New("crit header names an extension this server does not understand")
	}
	return fmt.Errorf("crit header names extension %q, which this server does not understand", names[0])
}

func (a *Authenticator) identity(c gojwt.MapClaims) (ports.Identity, error) {
	actor, ok := c[a.actorClaim].(string)
	if !ok || actor == "" {
		return ports.Identity{}, fmt.Errorf("claim %q: want a non-empty string", a.actorClaim)
	}
	id := ports.Identity{ActorID: actor, Partition: a.defPartition, Claims: c}
	if v, present := c[a.partitionClaim]; present {
		p, ok := v.(string)
		if !ok || p == "" {
			return ports.Identity{}, fmt.Errorf("claim %q: want a non-empty string", a.partitionClaim)
		}
		id.Partition = p
	}
	if v, present := c[a.scopesClaim]; present {
		allowed, err := parseScopes(v)
		if err != nil {
			return ports.Identity{}, fmt.Errorf("claim %q: %w", a.scopesClaim, err)
		}
		id.Scopes = allowed
	}
	return id, nil
}

// parseScopes reads a decoded scopes claim: an object of string lists.
func parseScopes(v any) (scopes.Allowed, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want an object of string lists, got %T", v)
	}
	out := make(scopes.Allowed, len(obj))
	for k, raw := range obj {
		if k == "" {
			return nil, errors.New("empty scope variable")
		}
		list, ok := raw.([]any)
		if !ok {
			return nil, fmt.Errorf("scope %q: want a list of strings, got %T", k, raw)
		}
		values := make([]string, 0, len(list))
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("scope %q: want a list of strings, got a %T element", k, e)
			}
			values = append(values, s)
		}
		out[k] = values
	}
	return out, nil
}

// Resolver grants the scopes claim the Authenticator put on the identity.
// It implements ports.ScopeResolver.
type Resolver struct{}

var _ ports.ScopeResolver = (*Resolver)(nil)

// NewResolver builds a claim-reading Resolver.
func NewResolver() *Resolver { return &Resolver{} }

// ResolveScopes returns the token's scopes claim; a token without one is
// granted nothing. It fails when ctx carries no identity for the request,
// which revokes rather than widens.
func (*Resolver) ResolveScopes(ctx context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	id, ok := ports.IdentityFrom(ctx)
	if !ok {
		return nil, errors.New("jwt resolver: no authenticated identity in context")
	}
	if id.ActorID != req.ActorID || id.Partition != req.Partition {
		return nil, errors.New("jwt resolver: identity in context does not match the request")
	}
	if id.Scopes == nil {
		return scopes.Allowed{}, nil
	}
	return id.Scopes.Clone(), nil
}
