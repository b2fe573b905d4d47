package config

import (
	"flag"
	"fmt"
	"time"
)

// Leases are the auth-lease settings (SPEC §7.3). Off unless a TTL is set.
type Leases struct {
	// TTL is the sliding lease window; 0 turns leases off (no LEASE frame,
	// and a resolver outage fails requests with sync.auth_lease_required).
	TTL time.Duration
	// Refresh is how long a lease issued with the same grant is answered
	// as stored instead of rewritten, saving a write per round (capped at
	// a tenth of TTL; 0: every live round rewrites it).
	Refresh time.Duration
	// KeyFile holds the keys that seal stored leases, one per line (at
	// least 32 bytes each), the first sealing and every one verifying, so
	// a key rotates by prepending the new one.
	KeyFile string
}

// DefaultLeases returns the defaults: leases off.
func DefaultLeases() Leases { return Leases{Refresh: 30 * time.Second} }

// EffectiveRefresh is Refresh capped at a tenth of TTL.
func (l Leases) EffectiveRefresh() time.Duration { return min(l.Refresh, l.TTL/10) }

func (l *Leases) flags(fs *flag.FlagSet) {
	fs.DurationVar(&l.TTL, "auth-lease-ttl", l.TTL, "auth lease window (SPEC §7.3), e.g. 15m: live-authorized rounds issue and slide a lease that serves rounds while the host's scope resolver reports an outage; 0 turns leases off")
	fs.DurationVar(&l.Refresh, "auth-lease-refresh", l.Refresh, "--auth-lease-ttl: a lease issued less than this ago with the same grant is answered as stored rather than rewritten, so a lease's expiry trails now+ttl by at most this (capped at a tenth of the ttl; 0: rewrite on every live round)")
	fs.StringVar(&l.KeyFile, "auth-lease-key-file", l.KeyFile, "--auth-lease-ttl: file of the keys (32+ bytes each, one per line, the first seals) that seal stored leases; prepend a new key to rotate")
}

func (l Leases) validate() []error {
	var errs []error
	switch {
	case l.TTL < 0:
		errs = append(errs, fmt.Errorf("--auth-lease-ttl %s: must not be negative", l.TTL))
	case l.TTL > 0 && l.KeyFile == "":
		errs = append(errs, fmt.Errorf("--auth-lease-ttl needs --auth-lease-key-file (stored leases are sealed)"))
	case l.TTL == 0 && l.KeyFile != "":
		errs = append(errs, fmt.Errorf("--auth-lease-key-file is only used by auth leases, which are off without --auth-lease-ttl"))
	}
	if l.Refresh < 0 {
		errs = append(errs, fmt.Errorf("--auth-lease-refresh %s: must not be negative", l.Refresh))
	}
	return errs
}
