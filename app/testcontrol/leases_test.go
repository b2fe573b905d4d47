package testcontrol

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
)

// leaseOf is the response's LEASE frame (nil: none), checked to follow
// RESP_HEADER directly.
func leaseOf(t *testing.T, m *ssp2.Message) *ssp2.Lease {
	t.Helper()
	for i, f := range m.Frames {
		if l, ok := f.(*ssp2.Lease); ok {
			if i != 1 {
				t.Fatalf("LEASE is frame %d, want 1 (after RESP_HEADER)", i)
			}
			return l
		}
	}
	return nil
}

// syncCode posts a request and returns the status and the catalog code of
// a refused one.
func (p *plane) syncCode(id, actor string, frames ...ssp2.Frame) (int, string) {
	p.t.Helper()
	body, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindRequest, Frames: frames})
	if err != nil {
		p.t.Fatal(err)
	}
	code, b := p.do("POST", "/i/"+id+"/sync", body, map[string]string{"x-actor": actor, "Content-Type": "application/vnd.syncular.sync.v2"})
	var e struct{ Code string }
	_ = json.Unmarshal(b, &e)
	return code, e.Code
}

// The leases capability: create option, setResolverOutage and revokeLease,
// with lease issue and expiry on the instance's virtual clock.
func TestLeasesCapability(t *testing.T) {
	eachEngine(t, func(t *testing.T, o Options) {
		p := newPlaneWith(t, o)
		code, b := p.do("GET", "/control/capabilities", nil, nil)
		if code != http.StatusOK || !strings.Contains(string(b), `"leases"`) || !strings.Contains(string(b), `"setResolverOutage"`) ||
			!strings.Contains(string(b), `"revokeLease"`) {
			t.Fatalf("capabilities: %d %s", code, b)
		}
		id := p.create(`, "leases": {"ttlMs": 60000}`)
		p.call(id, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		hdr := func() *ssp2.ReqHeader { return &ssp2.ReqHeader{ClientID: "w", SchemaVersion: 1} }
		first := p.sync(id, "alice", hdr(), p.upsert(id, "t1", "p1", false))
		l := leaseOf(t, first)
		if l == nil || l.ExpiresAtMs != 1000000+60000 {
			t.Fatalf("first round's lease %+v, want expiry on the virtual clock", l)
		}
		epoch := ssp2.Some(first.Frames[0].(*ssp2.RespHeader).LogEpoch)
		withEpoch := func() *ssp2.ReqHeader { h := hdr(); h.LogEpoch = epoch; return h }

		// Outage: served from the lease, nothing refreshed.
		p.call(id, "setResolverOutage", nil, true)
		m := p.post(id, "alice", withEpoch(), p.upsert(id, "t2", "p1", false))
		if pushStatus(m) != ssp2.PushApplied || leaseOf(t, m) != nil {
			t.Fatalf("outage round: %+v", m.Frames)
		}
		// Expired on the virtual clock: auth_lease_required.
		p.call(id, "advanceClock", nil, 60000)
		if code, c := p.syncCode(id, "alice", withEpoch(), p.upsert(id, "t3", "p1", false)); code != http.StatusUnauthorized || c != "sync.auth_lease_required" {
			t.Fatalf("expired lease: %d %s", code, c)
		}
		// Live again: the same lease slides; revoked, the outage says so.
		p.call(id, "setResolverOutage", nil, false)
		again := leaseOf(t, p.post(id, "alice", withEpoch(), p.upsert(id, "t3", "p1", false)))
		if again == nil || again.LeaseID != l.LeaseID || again.ExpiresAtMs != 1000000+120000 {
			t.Fatalf("refresh %+v of %+v", again, l)
		}
		p.call(id, "revokeLease", nil, l.LeaseID)
		p.call(id, "setResolverOutage", nil, true)
		if code, c := p.syncCode(id, "alice", withEpoch(), p.upsert(id, "t4", "p1", false)); code != http.StatusUnauthorized || c != "sync.auth_lease_revoked" {
			t.Fatalf("revoked lease: %d %s", code, c)
		}
		var rows []rowState
		p.call(id, "readRows", &rows, "tasks")
		if len(rows) != 3 {
			t.Fatalf("rows %+v, want t1 to t3", rows)
		}

		// Without the option: no LEASE, and revokeLease is a host error.
		off := p.create("")
		p.call(off, "setAllowedScopes", nil, "alice", map[string][]string{"project_id": {"p1"}})
		if l := leaseOf(t, p.sync(off, "alice", hdr(), p.upsert(off, "t1", "p1", false))); l != nil {
			t.Fatalf("lease %+v without the option", l)
		}
		if code, _ := p.do("POST", "/control/instances/"+off+"/call", `{"method": "revokeLease", "args": ["x"]}`, nil); code != http.StatusInternalServerError {
			t.Fatalf("revokeLease without leases: %d", code)
		}
	})
}
