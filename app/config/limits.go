package config

import (
	"flag"
	"fmt"

	"github.com/syncd-dev/syncd/domain/limits"
)

// Limits bound identifiers and request shape (domain/limits): the protocol
// fixes none, so these keep one request from storing megabytes of id or
// making the server plan thousands of subscriptions.
type Limits struct {
	// MaxIDBytes bounds client ids, client commit ids, subscription ids,
	// actor ids and partitions.
	MaxIDBytes int
	// MaxScopeValueBytes bounds one scope value (requested, granted or
	// stored with a row).
	MaxScopeValueBytes int
	// MaxScopeValues bounds the scope values of one subscription.
	MaxScopeValues int
	// MaxSubscriptions bounds the subscriptions of one request.
	MaxSubscriptions int
}

// DefaultLimits returns the default bounds.
func DefaultLimits() Limits {
	d := limits.Default()
	return Limits{MaxIDBytes: d.MaxIDBytes, MaxScopeValueBytes: d.MaxScopeValueBytes,
		MaxScopeValues: d.MaxScopeValues, MaxSubscriptions: d.MaxSubscriptions}
}

// Domain returns the limits as the domain checks them.
func (l Limits) Domain() limits.Limits {
	return limits.Limits{MaxIDBytes: l.MaxIDBytes, MaxScopeValueBytes: l.MaxScopeValueBytes,
		MaxScopeValues: l.MaxScopeValues, MaxSubscriptions: l.MaxSubscriptions}
}

func (l *Limits) flags(fs *flag.FlagSet) {
	fs.IntVar(&l.MaxIDBytes, "max-id-bytes", l.MaxIDBytes, "longest client id, client commit id, subscription id, actor id or partition, in bytes")
	fs.IntVar(&l.MaxScopeValueBytes, "max-scope-value-bytes", l.MaxScopeValueBytes, "longest scope value a subscription may request, a credential grant or a row store, in bytes")
	fs.IntVar(&l.MaxScopeValues, "max-scope-values", l.MaxScopeValues, "most scope values one subscription may request (over all its variables)")
	fs.IntVar(&l.MaxSubscriptions, "max-subscriptions", l.MaxSubscriptions, "most subscriptions one /sync request may carry")
}

func (l Limits) validate() []error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{
		{"max-id-bytes", l.MaxIDBytes}, {"max-scope-value-bytes", l.MaxScopeValueBytes},
		{"max-scope-values", l.MaxScopeValues}, {"max-subscriptions", l.MaxSubscriptions},
	} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("--%s %d: must be positive", f.name, f.v))
		}
	}
	return errs
}
