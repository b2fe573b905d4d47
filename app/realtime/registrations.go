package realtime

import (
	"context"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/leases"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// registration is one subscription a session receives deltas for: the
// persisted subscription's id and table with its effective scopes, and
// the projection of its rows onto the schema version its client's last
// pull accepted (nil: the current version's shape).
type registration struct {
	id        string
	table     string
	effective scopes.Map
	digest    string
	proj      *schema.Projection
	// version is the schema version the registration's codec is.
	version int32
	// keys are changeKeys of its driving variable (the one with the
	// fewest values): a change it matches has one of them.
	keys []string
}

func newRegistration(id, table string, effective scopes.Map) registration {
	drive := ""
	for v, vals := range effective {
		if drive == "" || len(vals) < len(effective[drive]) || (len(vals) == len(effective[drive]) && v < drive) {
			drive = v
		}
	}
	r := registration{id: id, table: table, effective: effective, digest: effective.Digest()}
	for _, val := range effective[drive] {
		r.keys = append(r.keys, changeKey(table, drive, val))
	}
	return r
}

// changeKey names a (table, variable, value) a change carries.
func changeKey(table, variable, value string) string {
	return table + "\x00" + variable + "\x00" + value
}

// storedSub is the part of a persisted subscription list entry the
// channel reads (the list app/pull writes).
type storedSub struct {
	ID     string              `json:"id"`
	Table  string              `json:"table"`
	Scopes map[string][]string `json:"scopes"`
	// SchemaVersion is the codec version the pull that wrote the entry
	// accepted; 0 in entries written before pulls recorded it.
	SchemaVersion int32 `json:"schemaVersion"`
}

// load reads the client record and derives the registrations (SPEC §8.1):
// every persisted subscription of a known table whose requested scopes
// are declared and whose effective scopes, re-resolved now, are not
// revoked, with the codec of the schema version its last pull accepted
// (§9): an entry of a version the window does not serve registers
// nothing, nor, on a window of several versions, one that records no
// version (written before pulls recorded it) until the next pull does. During a resolver outage the client's valid auth lease
// stands in for the resolver (§7.3.3), as in a socket round. A resolver
// failure, or an outage no lease serves, fails closed: no registration.
// An error is a failure to read the record.
func (h *Hub) load(ctx context.Context, id ports.Identity, clientID string) (*ports.ClientRecord, []registration, error) {
	// Resolvers read the identity from the context, as on a request; an
	// admin refresh arrives on a context of its own, without the session's.
	ctx = ports.WithIdentity(ctx, id)
	rec, err := h.o.Store.GetClient(ctx, id.Partition, clientID)
	if err != nil {
		return nil, nil, fmt.Errorf("read client record: %w", err)
	}
	if rec == nil || len(rec.Subscriptions) == 0 {
		return rec, nil, nil
	}
	var subs []storedSub
	if err := json.Unmarshal(rec.Subscriptions, &subs); err != nil {
		return nil, nil, fmt.Errorf("decode stored subscriptions: %w", err)
	}
	win := h.o.Window()
	sch := win.Current()
	res := scopes.Failed()
	r, err := leases.Resolve(ctx, h.o.Leases, h.o.Resolver, ports.ScopeRequest{Partition: id.Partition, ActorID: id.ActorID, ClientID: clientID},
		sch.ScopeVariables())
	switch {
	case err != nil:
		h.log.Warn("scopes not resolved at realtime registration; the session is registered for nothing",
			zap.String("partition", id.Partition), zap.String("client_id", clientID), zap.Error(err))
	case r.Outcome == leases.Failed:
		h.log.Warn("scope resolver failed at realtime registration; the session is registered for nothing",
			zap.String("partition", id.Partition), zap.String("client_id", clientID), zap.Error(r.Cause))
	default:
		res = r.Scopes
	}
	var regs []registration
	for _, sub := range subs {
		view := win.View(sub.SchemaVersion)
		if sub.SchemaVersion == 0 && win.Len() == 1 {
			view = win.CurrentView()
		}
		if view == nil {
			continue
		}
		t := sch.Table(sub.Table)
		p := view.Table(sub.Table)
		if t == nil || p == nil || scopes.ValidateRequested(t, sub.Scopes) != nil {
			continue
		}
		oc := scopes.Effective(sub.Scopes, res)
		if oc.Revoked() || len(oc.Effective) == 0 {
			continue
		}
		r := newRegistration(sub.ID, sub.Table, oc.Effective)
		r.version = view.Version()
		if !p.Identity() {
			r.proj = p
		}
		regs = append(regs, r)
	}
	return rec, regs, nil
}
