package jwt

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/syncd-dev/syncd/adapters/clock"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"go.uber.org/zap"
)

// ES256 is accepted only from a JWKS (ECDSA P-256 keys).
const ES256 = "ES256"

// Defaults of the JWKS options.
const (
	DefaultJWKSRefresh    = 5 * time.Minute
	DefaultJWKSMinRefetch = 10 * time.Second
	DefaultJWKSTimeout    = 10 * time.Second
)

const (
	maxJWKSBytes = 1 << 20
	maxKIDLogLen = 64
)

// jwksAlgorithms are the algorithms a key from a JWKS may verify. HMAC is
// never among them: a published key is public, and a public HMAC secret
// lets anyone sign.
func jwksAlgorithms() []string { return []string{RS256, EdDSA, ES256} }

// errUnknownKID marks a lookup that a fresher key set might answer.
var errUnknownKID = errors.New("no matching key in the JWKS")

type jwk struct {
	alg string
	key any
}

// keySet is one fetched JWKS, immutable once built: a refresh swaps the
// whole set, so a rotated-out key stops verifying at the next fetch.
type keySet struct {
	byKID map[string]jwk
	all   []jwk
	kids  []string // sorted, to tell a rotation from a plain refresh in the log
}

// lookup picks the key for a token's kid and alg. A token without kid
// is verified only when the set holds exactly one key for its alg, so a
// kid-less token never gets to try several keys.
func (s *keySet) lookup(kid, alg string) (any, error) {
	if s == nil {
		return nil, errUnknownKID
	}
	if kid == "" {
		var found []jwk
		for _, k := range s.all {
			if k.alg == alg {
				found = append(found, k)
			}
		}
		switch len(found) {
		case 0:
			return nil, fmt.Errorf("token has no kid and %w for %s", errUnknownKID, alg)
		case 1:
			return found[0].key, nil
		}
		return nil, fmt.Errorf("token has no kid and the JWKS holds %d %s keys", len(found), alg)
	}
	k, ok := s.byKID[kid]
	if !ok {
		return nil, fmt.Errorf("kid %q: %w", logKID(kid), errUnknownKID)
	}
	if k.alg != alg {
		return nil, fmt.Errorf("kid %q is a %s key, the token is signed with %s", logKID(kid), k.alg, alg)
	}
	return k.key, nil
}

// logKID bounds a token's kid before it goes into a log line; a kid names
// a public key, it is no secret, but it is the sender's text.
func logKID(kid string) string {
	if len(kid) > maxKIDLogLen {
		return kid[:maxKIDLogLen] + "…"
	}
	return kid
}

// parseJWKS reads a JWK set, keeping the keys this server can verify
// with and naming why each other one was skipped.
func parseJWKS(body []byte) (*keySet, []string, error) {
	var raw jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, nil, fmt.Errorf("not a JWK set: %w", err)
	}
	set := &keySet{byKID: map[string]jwk{}}
	var skipped []string
	for i, m := range raw.Keys {
		k, err := usableKey(m)
		if err == nil && m.KID != "" {
			if _, dup := set.byKID[m.KID]; dup {
				err = errors.New("duplicate kid")
			}
		}
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %v", i, logKID(m.KID), err))
			continue
		}
		if m.KID != "" {
			set.byKID[m.KID] = k
			set.kids = append(set.kids, m.KID)
		}
		set.all = append(set.all, k)
	}
	if len(set.all) == 0 {
		return nil, skipped, fmt.Errorf("no usable signing key (RS256, EdDSA or ES256) among %d keys", len(raw.Keys))
	}
	sort.Strings(set.kids)
	return set, skipped, nil
}

// usableKey turns one JWK into a verification key and the one algorithm
// it verifies, which its type decides; a declared alg must agree.
func usableKey(m jwkset.JWKMarshal) (jwk, error) {
	if m.USE != "" && m.USE != jwkset.UseSig {
		return jwk{}, fmt.Errorf("use %q is not sig", m.USE)
	}
	if len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify) {
		return jwk{}, errors.New("key_ops lacks verify")
	}
	if m.KTY == jwkset.KtyOct {
		return jwk{}, errors.New("symmetric (oct) keys are refused from a JWKS")
	}
	if m.D != "" {
		// A published set holding private material is a leak on the
		// issuer's side; refusing the key makes it loud.
		return jwk{}, errors.New("carries private key material")
	}
	parsed, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
	if err != nil {
		return jwk{}, err
	}
	var alg string
	switch key := parsed.Key().(type) {
	case *rsa.PublicKey:
		if key.N.BitLen() < minRSABits {
			return jwk{}, fmt.Errorf("RSA key is %d bits; at least %d are required", key.N.BitLen(), minRSABits)
		}
		alg = RS256
	case ed25519.PublicKey:
		alg = EdDSA
	case *ecdsa.PublicKey:
		if key.Curve != elliptic.P256() {
			return jwk{}, fmt.Errorf("EC curve %s is not supported (want P-256 for ES256)", key.Curve.Params().Name)
		}
		alg = ES256
	default:
		return jwk{}, fmt.Errorf("key type %s is not supported", m.KTY)
	}
	if m.ALG != "" && string(m.ALG) != alg {
		return jwk{}, fmt.Errorf("alg %q is not accepted (this key can only be %s)", m.ALG, alg)
	}
	return jwk{alg: alg, key: parsed.Key()}, nil
}

// jwks caches a remote key set: fetched at start, refreshed in the
// background, and refetched on an unknown kid at most once per
// minRefetch, so a flood of made-up kids costs the issuer one request
// per window.
type jwks struct {
	url        string
	client     *http.Client
	timeout    time.Duration
	refresh    time.Duration
	minRefetch time.Duration
	lazy       bool
	now        func() time.Time
	sleep      func(context.Context, time.Duration) error
	log        *zap.Logger

	set atomic.Pointer[keySet]

	fetchMu   sync.Mutex // one fetch at a time; guards lastFetch
	lastFetch time.Time  // the last attempt, successful or not

	stop context.CancelFunc
	done chan struct{}
}

func newJWKS(opts Options, log *zap.Logger) (*jwks, error) {
	u, err := url.Parse(opts.JWKSURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("jwt auth: JWKS URL %q: want an http(s) URL", opts.JWKSURL)
	}
	j := &jwks{
		url:        opts.JWKSURL,
		client:     opts.HTTPClient,
		timeout:    positiveOr(opts.JWKSTimeout, DefaultJWKSTimeout),
		refresh:    positiveOr(opts.JWKSRefresh, DefaultJWKSRefresh),
		minRefetch: positiveOr(opts.JWKSMinRefetch, DefaultJWKSMinRefetch),
		lazy:       opts.JWKSLazy,
		now:        opts.Now,
		sleep:      opts.Sleep,
		log:        log.With(zap.String("jwks_url", opts.JWKSURL)),
	}
	if j.client == nil {
		j.client = &http.Client{}
	}
	if j.now == nil {
		j.now = time.Now
	}
	if j.sleep == nil {
		j.sleep = clock.Wall{}.Sleep
	}
	return j, nil
}

func positiveOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// start fetches the set once (failing unless lazy) and starts the
// background refresh.
func (j *jwks) start(ctx context.Context) error {
	if !j.lazy {
		j.fetchMu.Lock()
		err := j.load(ctx, "start")
		j.fetchMu.Unlock()
		if err != nil {
			return fmt.Errorf("jwt auth: JWKS %s: %w", j.url, err)
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j.stop, j.done = cancel, make(chan struct{})
	go j.run(runCtx, j.lazy)
	return nil
}

func (j *jwks) close(ctx context.Context) error {
	if j.stop == nil {
		return nil
	}
	j.stop()
	select {
	case <-j.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run refreshes every refresh interval, jittered ±10% so a fleet of
// nodes does not fetch in step. Until a first fetch succeeded (lazy
// start) it retries every minRefetch instead.
func (j *jwks) run(ctx context.Context, fetchNow bool) {
	defer close(j.done)
	for {
		if !fetchNow {
			d := j.refresh
			if j.set.Load() == nil {
				d = j.minRefetch
			}
			if err := j.sleep(ctx, jitter(d)); err != nil {
				return
			}
		}
		fetchNow = false
		j.fetchMu.Lock()
		_ = j.load(ctx, "refresh")
		j.fetchMu.Unlock()
	}
}

func jitter(d time.Duration) time.Duration {
	spread := d / 5
	if spread <= 0 {
		return d
	}
	return d - d/10 + rand.N(spread)
}

// key returns the verification key for a token's kid header and alg,
// refetching the set once, within the rate limit, when no key matches.
func (j *jwks) key(ctx context.Context, kidHeader any, alg string) (any, error) {
	kid, ok := "", true
	if kidHeader != nil {
		kid, ok = kidHeader.(string)
	}
	if !ok {
		return nil, errors.New("malformed kid header: want a string")
	}
	seen := j.set.Load()
	k, err := seen.lookup(kid, alg)
	if !errors.Is(err, errUnknownKID) {
		return k, err
	}
	if !j.refetch(ctx, seen) {
		return nil, fmt.Errorf("%w (JWKS refetched less than %s ago)", err, j.minRefetch)
	}
	return j.set.Load().lookup(kid, alg)
}

// refetch reloads the set for a token whose key was missing from seen.
// It reports whether a set newer than seen is there to look in: loaded
// now, or by another request while this one waited for the lock.
func (j *jwks) refetch(ctx context.Context, seen *keySet) bool {
	j.fetchMu.Lock()
	defer j.fetchMu.Unlock()
	if j.set.Load() != seen {
		return true
	}
	if !j.lastFetch.IsZero() && j.now().Sub(j.lastFetch) < j.minRefetch {
		return false
	}
	return j.load(ctx, "unknown kid") == nil
}

// load fetches and installs the set; on failure the cached set stays.
// The caller holds fetchMu.
func (j *jwks) load(ctx context.Context, why string) error {
	j.lastFetch = j.now()
	set, skipped, err := j.fetch(ctx)
	if err != nil {
		if ctx.Err() == nil {
			cached := 0
			if s := j.set.Load(); s != nil {
				cached = len(s.all)
			}
			// cached_keys says what keeps verifying meanwhile (0 before a
			// first successful fetch).
			j.log.Warn("JWKS fetch failed", zap.String("trigger", why), zap.Error(err),
				zap.Int("cached_keys", cached), zap.Strings("skipped", skipped))
		}
		return err
	}
	prev := j.set.Swap(set)
	lvl := zap.DebugLevel
	if prev == nil || !slices.Equal(prev.kids, set.kids) || len(prev.all) != len(set.all) {
		lvl = zap.InfoLevel
	}
	j.log.Log(lvl, "JWKS loaded", zap.String("trigger", why), zap.Int("keys", len(set.all)),
		zap.Strings("kids", set.kids), zap.Strings("skipped", skipped))
	return nil
}

func (j *jwks) fetch(ctx context.Context) (*keySet, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("HTTP status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(body) > maxJWKSBytes {
		return nil, nil, fmt.Errorf("JWKS body larger than %d bytes", maxJWKSBytes)
	}
	return parseJWKS(body)
}
