package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestWireRulesPerVersion: one server admitting wires 1 to 3 answers each
// request by its own wire version's rule where the generations differ: a
// changed scope column on update (wire 2 strips it and applies the rest,
// wire 3 refuses the operation) and a baseVersion above the server
// version (wire 2 a conflict, wire 3 sync.invalid_request), and an
// unversioned upsert of a deleted row (wire 2 an insert, wire 3
// sync.row_deleted). Wire 1 writes by wire 2's rules, without an epoch.
func TestWireRulesPerVersion(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{minWire: 1})
		c := call{actor: "alice", scopes: `{"owner":["alice"]}`}
		ep := s.epoch(c)
		projects := s.sch.Table("projects")
		for _, wire := range []uint16{1, 2, 3} {
			t.Run(fmt.Sprintf("wire %d", wire), func(t *testing.T) {
				id := fmt.Sprintf("p-%d", wire)
				// A wire-1/2 payload is a full row, a wire-3 one a sparse
				// row naming every column: the same write either way.
				row := func(owner, name string) []byte {
					cols := ssptest.Cols{"id": rowcodec.String(id), "owner": rowcodec.String(owner),
						"name": rowcodec.String(name), "locked": rowcodec.Bool(false)}
					if wire < 3 {
						return ssptest.Full(t, projects, cols)
					}
					return ssptest.Sparse(t, projects, cols)
				}
				push := func(key string, payload []byte, baseVersion int64) *ssp2.PushResult {
					t.Helper()
					resp, _ := s.sync(c, ssptest.Req{Wire: wire, ClientID: fmt.Sprintf("c-%d", wire), SchemaVersion: s.sch.Version,
						Epoch: ep, Commits: []*ssp2.PushCommit{ssptest.Commit(key, ssptest.Upsert("projects", id, payload, baseVersion))}})
					if resp.Msg.WireVersion != wire {
						t.Fatalf("answered in wire %d", resp.Msg.WireVersion)
					}
					return resp.Results[0]
				}
				stored := func() (owner, name string, version int64) {
					t.Helper()
					r, err := s.store.GetRow(context.Background(), "default", "projects", id)
					if err != nil || r == nil {
						t.Fatalf("row %s: %+v %v", id, r, err)
					}
					if r.Scopes["owner"] != "alice" {
						t.Fatalf("stored scopes %v", r.Scopes)
					}
					cols := ssptest.DecodeRow(t, projects, r.Payload)
					return cols["owner"].Text(), cols["name"].Text(), r.Version
				}
				if r := push("k1", row("alice", "One"), -1); r.Status != ssp2.PushApplied {
					t.Fatalf("insert %+v", r)
				}

				// Re-homing by update.
				r := push("k2", row("bob", "moved?"), -1)
				owner, name, version := stored()
				switch wire {
				case 1, 2:
					if r.Status != ssp2.PushApplied || len(r.Results) != 1 || r.Results[0].Status != ssp2.OpApplied {
						t.Fatalf("wire 2 re-homing update: %+v, want applied", r)
					}
					if owner != "alice" || name != "moved?" || version != 2 {
						t.Fatalf("wire 2 row after the update: owner %q name %q version %d; want the scope kept and the rest applied", owner, name, version)
					}
				case 3:
					rejected(t, r, 0, "sync.invalid_request")
					if owner != "alice" || name != "One" || version != 1 {
						t.Fatalf("wire 3 row after the refused update: owner %q name %q version %d", owner, name, version)
					}
				}

				// A baseVersion the server never issued.
				r = push("k3", row("alice", "ahead"), version+5)
				switch wire {
				case 1, 2:
					if r.Status != ssp2.PushRejected || len(r.Results) != 1 {
						t.Fatalf("wire 2 baseVersion ahead: %+v", r)
					}
					cf := r.Results[0]
					if cf.Status != ssp2.OpConflict || cf.Code != "sync.version_conflict" || cf.ServerVersion != version || cf.ConflictColumns != nil {
						t.Fatalf("wire 2 baseVersion ahead: %+v, want a conflict at version %d", cf, version)
					}
					if got := ssptest.DecodeRow(t, projects, cf.ServerRow)["name"].Text(); got != name {
						t.Fatalf("conflict server row name %q, want %q", got, name)
					}
				case 3:
					rejected(t, r, 0, "sync.invalid_request")
				}
				if _, got, v := stored(); got != name || v != version {
					t.Fatalf("the refused write landed: name %q version %d", got, v)
				}

				// An unversioned upsert after a delete.
				resp, _ := s.sync(c, ssptest.Req{Wire: wire, ClientID: fmt.Sprintf("c-%d", wire), SchemaVersion: s.sch.Version,
					Epoch: ep, Commits: []*ssp2.PushCommit{ssptest.Commit("k4", ssptest.Delete("projects", id))}})
				if resp.Results[0].Status != ssp2.PushApplied {
					t.Fatalf("delete %+v", resp.Results[0])
				}
				r = push("k5", row("alice", "again"), -1)
				switch wire {
				case 1, 2:
					if r.Status != ssp2.PushApplied {
						t.Fatalf("wire 2 unversioned upsert of a deleted row: %+v, want applied (an insert)", r)
					}
					if _, got, v := stored(); got != "again" || v != 1 {
						t.Fatalf("wire 2 re-insert: name %q version %d", got, v)
					}
				case 3:
					rejected(t, r, 0, "sync.row_deleted")
				}
			})
		}
	})
}
