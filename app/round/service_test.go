package round_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestResolverFailureForbidsWrites(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) {
		o.Round.Resolver = roundtest.ResolverFunc(func(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
			return nil, errors.New("down")
		})
	})
	resp, _ := e.Must(e.Req(ssptest.Commit("k1", ssptest.Delete("projects", "p-1"))))
	roundtest.WantRejected(t, resp.Results[0], 0, "sync.forbidden")
}

func TestRequestLevelRefusals(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) { o.MaxOperations = 2 })
	ops := []ssp2.PushOperation{ssptest.Delete("projects", "a"), ssptest.Delete("projects", "b")}
	_, _, err := e.Do(e.Req(ssptest.Commit("k1", ops...), ssptest.Commit("k2", ops[0])))
	roundtest.WantCode(t, err, syncerr.TooManyOperations)
	r := e.Req(ssptest.Commit("k1", ops[0]))
	r.ClientID = `["remote-command","a","b"]`
	_, _, err = e.Do(r)
	roundtest.WantCode(t, err, syncerr.InvalidClientID)
	if _, err := e.Store.BindClient(context.Background(), "p1", "c1", "bob"); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.Do(e.Req(ssptest.Commit("k1", ops[0])))
	roundtest.WantCode(t, err, syncerr.InvalidClientID)
	// Pull is refused honestly, before any push applies.
	r = e.Req(ssptest.Commit("k9", ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1)))
	r.ClientID, r.Pull, r.SubTable = "c2", true, "projects"
	_, _, err = e.Do(r)
	roundtest.WantCode(t, err, syncerr.InternalError)
	if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-1"); row != nil {
		t.Fatal("push applied in a refused request")
	}
	// Malformed bodies are invalid_request.
	for _, b := range [][]byte{nil, []byte("SSP2"), []byte("garbage garbage")} {
		if _, err := e.Round.Handle(context.Background(), e.ID, b); syncerr.CodeOf(err) != syncerr.InvalidRequest {
			t.Fatalf("body %q: %v", b, err)
		}
	}
}

func TestSchemaFloorAndEpoch(t *testing.T) {
	e := roundtest.New(t, nil)
	r := e.Req(ssptest.Commit("k1", ssptest.Delete("projects", "a")))
	r.SchemaVersion = 1
	resp, _ := e.Must(r)
	h := resp.Header
	if len(resp.Msg.Frames) != 1 || !h.RequiredSchemaVersion.Present || h.RequiredSchemaVersion.Value != 2 ||
		h.LatestSchemaVersion.Value != 2 || h.LogEpoch != e.Epoch || h.ResetRequired {
		t.Fatalf("floor %+v", resp.Msg.Frames)
	}
	for _, r := range []ssptest.Req{
		{ClientID: "c1", SchemaVersion: 2, NoEpoch: true},
		{ClientID: "c1", SchemaVersion: 2, Epoch: "other", Commits: []*ssp2.PushCommit{ssptest.Commit("k1",
			ssptest.Upsert("projects", "p-1", e.Project("p-1", "alice", "One"), -1))}},
	} {
		if r.NoEpoch {
			r.Pull = true
		}
		resp, _ := e.Must(r)
		if len(resp.Msg.Frames) != 1 || !resp.Header.ResetRequired || resp.Header.LogEpoch != e.Epoch {
			t.Fatalf("reset %+v", resp.Msg.Frames)
		}
	}
	if row, _ := e.Store.GetRow(context.Background(), "p1", "projects", "p-1"); row != nil {
		t.Fatal("push applied under a foreign epoch")
	}
}

// TestLatestSchemaVersionInEveryHeader: every RESP_HEADER names the
// newest schema version the server knows (§1.6, informational), on every
// admitted wire version: a served request, both epoch resets, a cached
// replay and the schema floor; only the floor names a required version.
func TestLatestSchemaVersionInEveryHeader(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) { o.Round.MinWireVersion = 2 })
	for _, wire := range []uint16{2, 3} {
		payload := e.Project(fmt.Sprintf("p-%d", wire), "alice", "One")
		if wire == 2 {
			payload = ssptest.Full(t, e.Table("projects"), ssptest.Cols{"id": rowcodec.String(fmt.Sprintf("p-%d", wire)),
				"owner": rowcodec.String("alice"), "name": rowcodec.String("One"), "locked": rowcodec.Bool(false)})
		}
		commit := ssptest.Commit(fmt.Sprintf("k-%d", wire), ssptest.Upsert("projects", fmt.Sprintf("p-%d", wire), payload, -1))
		served := ssptest.Req{Wire: wire, ClientID: "c1", SchemaVersion: 2, Epoch: e.Epoch, Commits: []*ssp2.PushCommit{commit}}
		tests := []struct {
			name     string
			req      ssptest.Req
			required bool
		}{
			{"served", served, false},
			{"cached replay", served, false},
			{"epoch acquisition", ssptest.Req{Wire: wire, ClientID: "c1", SchemaVersion: 2, NoEpoch: true, Pull: true}, false},
			{"epoch mismatch", ssptest.Req{Wire: wire, ClientID: "c1", SchemaVersion: 2, Epoch: "other", Commits: []*ssp2.PushCommit{commit}}, false},
			{"schema floor", ssptest.Req{Wire: wire, ClientID: "c1", SchemaVersion: 1, Epoch: e.Epoch, Commits: []*ssp2.PushCommit{commit}}, true},
		}
		for _, tc := range tests {
			t.Run(fmt.Sprintf("wire %d/%s", wire, tc.name), func(t *testing.T) {
				resp, _ := e.Must(tc.req)
				h := resp.Header
				if h == nil || !h.LatestSchemaVersion.Present || h.LatestSchemaVersion.Value != 2 {
					t.Fatalf("header %+v: want latestSchemaVersion 2", h)
				}
				if h.RequiredSchemaVersion.Present != tc.required {
					t.Fatalf("header %+v: requiredSchemaVersion present = %v, want %v", h, h.RequiredSchemaVersion.Present, tc.required)
				}
			})
		}
	}
}

// TestSchemaFloorNamesTheEpochState: a schema-floor header still carries
// resetRequired with its §1.6 meaning (the request omitted its logEpoch
// or sent another one), so a client learns both at once; schema upgrade
// takes precedence in its surface.
func TestSchemaFloorNamesTheEpochState(t *testing.T) {
	e := roundtest.New(t, nil)
	for _, tc := range []struct {
		name  string
		req   ssptest.Req
		reset bool
	}{
		{"the partition's epoch", ssptest.Req{ClientID: "c1", SchemaVersion: 1, Epoch: e.Epoch, Pull: true}, false},
		{"another epoch", ssptest.Req{ClientID: "c1", SchemaVersion: 1, Epoch: "other", Pull: true}, true},
		{"no epoch", ssptest.Req{ClientID: "c1", SchemaVersion: 1, NoEpoch: true, Pull: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := e.Must(tc.req)
			h := resp.Header
			if len(resp.Msg.Frames) != 1 || !h.RequiredSchemaVersion.Present || h.LogEpoch != e.Epoch || h.ResetRequired != tc.reset {
				t.Fatalf("floor %+v: want resetRequired %v", h, tc.reset)
			}
		})
	}
}
