package realtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

// registration is one subscription a session receives deltas for: the
// persisted subscription's id and table with its effective scopes.
type registration struct {
	id        string
	table     string
	effective scopes.Map
	digest    string
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
}

// load reads the client record and derives the registrations (SPEC §8.1):
// every persisted subscription of a known table whose requested scopes
// are declared and whose effective scopes, re-resolved now, are not
// revoked. A resolver failure fails closed: no registration. An error is
// a failure to read the record.
func (h *Hub) load(ctx context.Context, id ports.Identity, clientID string) (*ports.ClientRecord, []registration, error) {
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
	res := scopes.Failed()
	allowed, err := h.o.Resolver.ResolveScopes(ctx, ports.ScopeRequest{Partition: id.Partition, ActorID: id.ActorID, ClientID: clientID})
	if err == nil {
		res = scopes.Granted(allowed)
	} else {
		h.log.Warn("scope resolver failed at realtime registration; the session is registered for nothing")
	}
	sch := h.o.Schema()
	var regs []registration
	for _, sub := range subs {
		t := sch.Table(sub.Table)
		if t == nil || scopes.ValidateRequested(t, sub.Scopes) != nil {
			continue
		}
		oc := scopes.Effective(sub.Scopes, res)
		if oc.Revoked() || len(oc.Effective) == 0 {
			continue
		}
		regs = append(regs, newRegistration(sub.ID, sub.Table, oc.Effective))
	}
	return rec, regs, nil
}
