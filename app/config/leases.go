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
	// KeyFile holds the keys that seal stored leases, one per line (at
	// least 32 bytes each), the first sealing and every one verifying, so
	// a key rotates by prepending the new one.
	KeyFile string
}

func (l *Leases) flags(fs *flag.FlagSet) {
	fs.DurationVar(&l.TTL, "auth-lease-ttl", l.TTL, "auth lease window (SPEC §7.3), e.g. 15m: live-authorized rounds issue and slide a lease that serves rounds while the host's scope resolver reports an outage; 0 turns leases off")
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
	return errs
}
