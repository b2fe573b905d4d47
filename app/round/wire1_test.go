package round_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/roundtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestWireOneRequests: with wire 1 admitted, a wire-1 request (no log
// epoch in its header) is served without an epoch check and answered in
// wire 1, whose header carries no epoch, until the partition's epoch is
// rotated; from then on it is refused with sync.client_wire_unsupported
// before any work, while wires 2 and 3 go on by their epoch rules (the
// 0.15 SPEC §1.5, §2.1, §9).
func TestWireOneRequests(t *testing.T) {
	e := roundtest.New(t, func(o *roundtest.Options) {
		o.Round.MinWireVersion = 1
		roundtest.WithPull(o)
	})
	ctx := context.Background()
	full := func(id string) []byte {
		return ssptest.Full(t, e.Table("projects"), ssptest.Cols{"id": rowcodec.String(id),
			"owner": rowcodec.String("alice"), "name": rowcodec.String(id), "locked": rowcodec.Bool(false)})
	}
	wire1 := func(commits ...*ssp2.PushCommit) ssptest.Req {
		r := e.Req(commits...)
		r.Wire = 1
		return r
	}
	// serve answers r and decodes the whole response, pull sections too.
	serve := func(r ssptest.Req) (ssptest.Resp, error) {
		t.Helper()
		resp, err := e.Round.Handle(ctx, e.ID, r.Encode(t))
		if err != nil {
			return ssptest.Resp{}, err
		}
		defer resp.Release()
		var b bytes.Buffer
		if err := resp.Encode(&b); err != nil {
			t.Fatalf("encode response: %v", err)
		}
		return ssptest.DecodeResponse(t, b.Bytes()), nil
	}
	wantWire1 := func(step string, r ssptest.Resp) {
		t.Helper()
		if r.Msg.WireVersion != 1 || r.Header == nil || r.Header.LogEpoch != "" || r.Header.ResetRequired {
			t.Fatalf("%s: answered in wire %d with header %+v", step, r.Msg.WireVersion, r.Header)
		}
	}

	// A database-less producer's push: no epoch, a full row.
	r, err := serve(wire1(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", full("p-1"), -1))))
	if err != nil {
		t.Fatal(err)
	}
	wantWire1("push", r)
	if r.Header.LatestSchemaVersion != ssp2.Some(e.Schema.Version) || len(r.Results) != 1 || r.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("push: header %+v results %+v", r.Header, r.Results)
	}
	// Its retry is the stored result.
	if r, err = serve(wire1(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", full("p-1"), -1)))); err != nil ||
		r.Results[0].Status != ssp2.PushCached {
		t.Fatalf("retry: %+v, %v", r.Results, err)
	}
	// The schema floor, in wire 1.
	old := wire1()
	old.SchemaVersion, old.Pull = e.Schema.Version-1, true
	if r, err = serve(old); err != nil {
		t.Fatal(err)
	}
	wantWire1("schema floor", r)
	if r.Header.RequiredSchemaVersion != ssp2.Some(e.Schema.Version) || len(r.Msg.Frames) != 1 {
		t.Fatalf("schema floor: %+v", r.Msg.Frames)
	}
	// A pull, in wire 1; the client record remembers the generation.
	pull := wire1()
	pull.Pull, pull.SubTable = true, "projects"
	if r, err = serve(pull); err != nil {
		t.Fatal(err)
	}
	wantWire1("pull", r)
	var started bool
	for _, f := range r.Msg.Frames {
		if s, ok := f.(*ssp2.SubStart); ok && s.ID == "s1" {
			started = true
		}
	}
	if rec, err := e.Store.GetClient(ctx, "p1", "c1"); err != nil || !started || rec == nil || rec.WireVersion != 1 {
		t.Fatalf("pull: frames %+v, client record %+v, %v", r.Msg.Frames, rec, err)
	}

	// A restore rotates the epoch: wire 1 is refused from then on, before
	// anything of the request is applied.
	rotated, err := e.Store.RotateLogEpoch(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]ssptest.Req{
		"push": wire1(ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", full("p-2"), -1))),
		"pull": pull,
	} {
		_, err := serve(req)
		roundtest.WantCode(t, err, syncerr.ClientWireUnsupported)
		if syncerr.Public(err).HTTPStatus() != 400 {
			t.Fatalf("%s after rotation: %v", name, err)
		}
	}
	e.NoRow(t, "p-2")
	// Wire 2 with the old epoch is told to reset; wire 3 at the new one syncs.
	w2 := e.Req()
	w2.Wire, w2.Pull = 2, true
	if r, err = serve(w2); err != nil || !r.Header.ResetRequired || r.Header.LogEpoch != rotated {
		t.Fatalf("wire 2 after rotation: %+v, %v", r.Header, err)
	}
	w3 := e.Req(e.Own("k3", "p-3", "alice"))
	w3.Epoch = rotated
	if r, err = serve(w3); err != nil || r.Results[0].Status != ssp2.PushApplied {
		t.Fatalf("wire 3 after rotation: %+v, %v", r.Results, err)
	}
}

// headlessStore is a store that reads no request heads.
type headlessStore struct{ ports.Storage }

// TestWireOneNeedsRequestHeads: only a request head says whether the
// partition's epoch was rotated, so admitting wire 1 over a store without
// one is a configuration error, not a silent gap.
func TestWireOneNeedsRequestHeads(t *testing.T) {
	for _, tc := range []struct {
		min     uint16
		store   func(*memory.Store) round.Store
		wantErr bool
	}{
		{1, func(m *memory.Store) round.Store { return headlessStore{m} }, true},
		{1, func(m *memory.Store) round.Store { return m }, false},
		{2, func(m *memory.Store) round.Store { return headlessStore{m} }, false},
	} {
		e := roundtest.New(t, nil)
		_, err := round.New(round.Options{Schema: func() *schema.Schema { return e.Schema }, Store: tc.store(e.Store),
			Resolver: roundtest.AllowAll, Push: e.Push, MinWireVersion: tc.min})
		if (err != nil) != tc.wantErr {
			t.Fatalf("min wire %d over %T: %v", tc.min, tc.store(e.Store), err)
		}
	}
}
