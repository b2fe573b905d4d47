package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// socket is a test client of the realtime channel.
type socket struct {
	t *testing.T
	c *websocket.Conn
}

func dial(t *testing.T, s *server, c call, clientID string) *socket {
	t.Helper()
	u := "ws" + strings.TrimSuffix(strings.TrimPrefix(s.url, "http"), "/sync") + "/realtime?clientId=" + url.QueryEscape(clientID)
	h := http.Header{}
	h.Set("X-Syncd-Actor", c.actor)
	h.Set("X-Syncd-Partition", c.partition)
	if c.scopes != "" {
		h.Set("X-Syncd-Scopes", c.scopes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial realtime: %v", err)
	}
	conn.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = conn.CloseNow() })
	return &socket{t: t, c: conn}
}

// next reads the next message, or returns the error that ended the socket.
func (k *socket) next() (websocket.MessageType, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return k.c.Read(ctx)
}

func (k *socket) must() (websocket.MessageType, []byte) {
	k.t.Helper()
	typ, b, err := k.next()
	if err != nil {
		k.t.Fatalf("read realtime: %v", err)
	}
	return typ, b
}

// event reads the next message as a control event (skipping heartbeats).
func (k *socket) event() realtime.Message {
	k.t.Helper()
	for {
		typ, b := k.must()
		if typ != websocket.MessageText {
			k.t.Fatalf("want a control event, got binary %x", b)
		}
		m, err := realtime.ParseServerEvent(b)
		if err != nil {
			k.t.Fatalf("parse %s: %v", b, err)
		}
		if _, hb := m.(*realtime.Heartbeat); !hb {
			return m
		}
	}
}

func (k *socket) send(typ websocket.MessageType, b []byte) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.c.Write(ctx, typ, b); err != nil {
		k.t.Fatalf("write realtime: %v", err)
	}
}

// round sends req as 0x01 chunks of size n and returns the reassembled
// response stream.
func (k *socket) round(req []byte, n int) []byte {
	k.t.Helper()
	for off := 0; off < len(req); off += n {
		k.send(websocket.MessageBinary, append([]byte{realtime.TagRound}, req[off:min(off+n, len(req))]...))
	}
	var out []byte
	for {
		typ, b := k.must()
		if typ != websocket.MessageBinary {
			continue // control events interleave freely
		}
		if b[0] != realtime.TagRound {
			k.t.Fatalf("a 0x%02x message inside a response stream", b[0])
		}
		out = append(out, b[1:]...)
		if _, err := ssp2.Decode(out); err == nil {
			return out
		}
	}
}

func TestRealtimeChannel(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{})
		ctx := context.Background()
		owner := map[string][]string{"owner": {"alice"}}
		a := newReplica(t, s, alice("rt"), "a")
		a.subscribe("projects", "projects", owner)
		a.pull()
		b := newReplica(t, s, alice("rt"), "b")
		b.subscribe("projects", "projects", owner)
		b.pull()

		// §8.1: hello first; a caught-up client needs no pull.
		kb := dial(t, s, alice("rt"), "b")
		h, ok := kb.event().(*realtime.Hello)
		if !ok || h.RequiresSync || h.ClientID != "b" || h.ActorID != "alice" || h.Cursor != 0 || h.LatestCursor != 0 {
			t.Fatalf("hello %+v", h)
		}

		// §8.2: another client's push arrives as a delta, cursor-contiguous.
		a.pull(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)))
		typ, d := kb.must()
		if typ != websocket.MessageBinary || d[0] != realtime.TagDelta {
			t.Fatalf("want a delta, got %d %s", typ, d)
		}
		delta := ssptest.DecodeResponse(t, d[1:])
		st, en, commits, _ := sections(delta)
		if len(st) != 1 || st[0].ID != "projects" || commits != 1 || en[0].NextCursor != 1 {
			t.Fatalf("delta %+v", delta.Msg.Frames)
		}
		if want := wantDelta(t, s, "rt", "projects", "owner", "alice", 1); !bytes.Equal(d, want) {
			t.Fatalf("delta\n%x\nthe spec's bytes\n%x", d, want)
		}

		// An ack advances the stored cursor (never creating a record).
		kb.send(websocket.MessageText, []byte(`{"type":"ack","cursor":1}`))
		waitFor(t, "the ack stored", func() bool {
			rec, err := s.store.GetClient(ctx, "rt", "b")
			return err == nil && rec != nil && rec.Cursor == 1
		})

		// A behind client is told to pull, and a commit while it is behind
		// is a catchup-required wake-up, never a gap delta.
		c := newReplica(t, s, alice("rt"), "c")
		c.subscribe("projects", "projects", owner)
		c.pull()
		a.pull(ssptest.Commit("k2", ssptest.Upsert("projects", "p-2", project(t, s.sch, "p-2", "alice", "Two"), -1)))
		kc := dial(t, s, alice("rt"), "c")
		if h, ok := kc.event().(*realtime.Hello); !ok || !h.RequiresSync || h.Cursor != 1 || h.LatestCursor != 2 {
			t.Fatalf("behind hello %+v", h)
		}
		a.pull(ssptest.Commit("k3", ssptest.Upsert("projects", "p-3", project(t, s.sch, "p-3", "alice", "Three"), -1)))
		if w, ok := kc.event().(*realtime.Wake); !ok || w.Reason != realtime.WakeCatchupRequired || w.Cursor != 3 {
			t.Fatalf("want catchup-required, got %+v", w)
		}

		// §8.7: a socket round answers byte for byte what POST /sync does.
		req := c.request()
		viaSocket := kc.round(req, 7)
		viaHTTP := s.post(c.c, req)
		if viaHTTP.status != http.StatusOK || !bytes.Equal(viaSocket, viaHTTP.body) {
			t.Fatalf("socket round %x\nPOST /sync %d %x", viaSocket, viaHTTP.status, viaHTTP.body)
		}

		// A request-level failure is RESP_HEADER, ERROR, END on the socket.
		bad := newReplica(t, s, alice("rt"), "not-c").request()
		resp := ssptest.DecodeResponse(t, kc.round(bad, len(bad)))
		if ef, ok := resp.Msg.Frames[len(resp.Msg.Frames)-1].(*ssp2.Error); !ok || ef.Code != "sync.invalid_client_id" {
			t.Fatalf("foreign client id round: %+v", resp.Msg.Frames)
		}

		// Pipelined round bytes close the socket.
		kc.send(websocket.MessageBinary, append(append([]byte{realtime.TagRound}, req...), req...))
		for {
			if _, _, err := kc.next(); err != nil {
				var ce websocket.CloseError
				if !errors.As(err, &ce) {
					t.Fatalf("pipelined: socket ended with %v, want a close", err)
				}
				break
			}
		}
	})
}

// wantDelta writes by hand, from the spec's field tables (§8.7's 0x00
// tag, §1.2's envelope, §1.6 RESP_HEADER, §4.4 SUB_START and SUB_END,
// §4.5 COMMIT), the delta a registration on one scope value is sent for
// the partition's single-change commit seq: its values (time, actor,
// row, version) read back from storage, its layout never from the codec.
func wantDelta(t *testing.T, s *server, partition, sub, variable, value string, seq int64) []byte {
	t.Helper()
	ctx := context.Background()
	epoch, _, err := s.store.LogEpoch(ctx, partition)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := s.store.ReadCommitRange(ctx, partition, ports.CommitRange{AfterSeq: seq - 1, ThroughSeq: seq, LimitChanges: 10})
	if err != nil || len(sp.Commits) != 1 || len(sp.Commits[0].Changes) != 1 {
		t.Fatalf("commit %d: %+v %v", seq, sp, err)
	}
	c, ch := sp.Commits[0], sp.Commits[0].Changes[0]
	b := ssptest.Response(3)
	b.B = append([]byte{realtime.TagDelta}, b.B...)
	return b.
		// RESP_HEADER: no schema versions, the epoch, no reset.
		Frame(0x10, new(ssptest.Bytes).Absent().Absent().Str(epoch).U8(0)).
		// SUB_START: id, active, no reason, effective scopes {variable:
		// [value]}, not bootstrapping.
		Frame(0x12, new(ssptest.Bytes).Str(sub).U8(1).Str("").U32(1).Str(variable).U32(1).Str(value).U8(0)).
		// COMMIT: seq, time, actor, tables [table], one upsert change at
		// table 0 with its version, stored scopes and row.
		Frame(0x13, new(ssptest.Bytes).I64(c.Seq).I64(c.CreatedAtMs).Str(c.ActorID).U32(1).Str(ch.Table).
			U32(1).U16(0).Str(ch.RowID).U8(1).Present().I64(ch.RowVersion).U32(1).Str(variable).Str(value).Present().Raw(ch.Row)).
		// SUB_END: the cursor, no bootstrap state.
		Frame(0x16, new(ssptest.Bytes).I64(seq).Absent()).
		End().B
}

// waitFor polls cond until it holds or a generous deadline passes (it
// waits for an event; it asserts no duration).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A socket round of a wire version the server does not admit is refused
// in the request's own generation, so the client can read why (HTTP
// answers the same refusal as JSON).
func TestSocketRoundRefusedInTheRequestsWire(t *testing.T) {
	s := start(t, engines()[0], serverOpts{}) // admits wire 3 only
	k := dial(t, s, alice("rt"), "w2")
	if _, ok := k.event().(*realtime.Hello); !ok {
		t.Fatal("hello first")
	}
	req := ssptest.Req{Wire: 2, ClientID: "w2", SchemaVersion: s.sch.Version, NoEpoch: true, Pull: true}.Encode(t)
	resp := ssptest.DecodeResponse(t, k.round(req, 1<<16))
	if resp.Msg.WireVersion != 2 || resp.Error == nil || resp.Error.Code != string(syncerr.InvalidRequest) ||
		!strings.Contains(resp.Error.Message, "--min-wire-version") {
		t.Fatalf("wire %d, error %+v", resp.Msg.WireVersion, resp.Error)
	}
	// A refusal echoes the epoch the request carries: no epoch change.
	req = ssptest.Req{Wire: 2, ClientID: "w2", SchemaVersion: s.sch.Version, Epoch: "an-epoch-of-the-client", Pull: true}.Encode(t)
	resp = ssptest.DecodeResponse(t, k.round(req, 1<<16))
	if resp.Error == nil || resp.Header == nil || resp.Header.LogEpoch != "an-epoch-of-the-client" {
		t.Fatalf("refusal header %+v, error %+v", resp.Header, resp.Error)
	}
	// A wire-1 refusal is written in wire 1, whose header has no epoch.
	req = ssptest.Req{Wire: 1, ClientID: "w2", SchemaVersion: s.sch.Version, Pull: true}.Encode(t)
	resp = ssptest.DecodeResponse(t, k.round(req, 1<<16))
	if resp.Msg.WireVersion != 1 || resp.Error == nil || resp.Error.Code != string(syncerr.InvalidRequest) ||
		!strings.Contains(resp.Error.Message, "--min-wire-version 1") || resp.Header.LogEpoch != "" {
		t.Fatalf("wire %d, header %+v, error %+v", resp.Msg.WireVersion, resp.Header, resp.Error)
	}
}

// TestWireOneOverTheSocket: a wire-1 client of a server admitting wire 1
// pulls in wire 1, so its socket's deltas are written in wire 1 (no epoch
// in their header) and its socket rounds are answered in wire 1; once the
// partition's epoch was rotated, a socket round of it is refused with
// sync.client_wire_unsupported, in wire 1.
func TestWireOneOverTheSocket(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{minWire: 1})
		c := alice("rt")
		request := func(commits ...*ssp2.PushCommit) []byte {
			m := &ssp2.Message{WireVersion: 1, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{
				&ssp2.ReqHeader{ClientID: "w1", SchemaVersion: s.sch.Version}}}
			for _, pc := range commits {
				m.Frames = append(m.Frames, pc)
			}
			m.Frames = append(m.Frames, &ssp2.PullHeader{LimitCommits: 100, LimitSnapshotRows: 100, MaxSnapshotPages: 1,
				Accept: ssp2.AcceptInlineRows}, &ssp2.Subscription{ID: "projects", Table: "projects",
				Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {"alice"}}), Cursor: -1})
			b, err := ssp2.Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		wantWire1 := func(step string, r ssptest.Resp) {
			t.Helper()
			if r.Msg.WireVersion != 1 || r.Header == nil || r.Header.LogEpoch != "" {
				t.Fatalf("%s: wire %d, header %+v", step, r.Msg.WireVersion, r.Header)
			}
		}
		rep := s.post(c, request())
		if rep.status != http.StatusOK {
			t.Fatalf("wire-1 pull: %d %s", rep.status, rep.body)
		}
		wantWire1("pull", ssptest.DecodeResponse(t, rep.body))

		k := dial(t, s, c, "w1")
		if h, ok := k.event().(*realtime.Hello); !ok || h.RequiresSync {
			t.Fatalf("hello %+v", h)
		}
		a := newReplica(t, s, c, "a")
		a.pull(ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", "One"), -1)))
		typ, d := k.must()
		if typ != websocket.MessageBinary || d[0] != realtime.TagDelta {
			t.Fatalf("want a delta, got %d %s", typ, d)
		}
		delta := ssptest.DecodeResponse(t, d[1:])
		wantWire1("delta", delta)
		if st, _, commits, _ := sections(delta); len(st) != 1 || commits != 1 {
			t.Fatalf("delta %+v", delta.Msg.Frames)
		}

		full := ssptest.Full(t, s.sch.Table("projects"), ssptest.Cols{"id": rowcodec.String("p-2"),
			"owner": rowcodec.String("alice"), "name": rowcodec.String("Two"), "locked": rowcodec.Bool(false)})
		req := request(ssptest.Commit("w1-k1", ssptest.Upsert("projects", "p-2", full, -1)))
		resp := ssptest.DecodeResponse(t, k.round(req, 1<<16))
		wantWire1("socket round", resp)
		if len(resp.Results) != 1 || resp.Results[0].Status != ssp2.PushApplied {
			t.Fatalf("socket round %+v", resp.Msg.Frames)
		}

		if _, err := s.store.RotateLogEpoch(context.Background(), "rt"); err != nil {
			t.Fatal(err)
		}
		resp = ssptest.DecodeResponse(t, k.round(request(), 1<<16))
		wantWire1("refused round", resp)
		if resp.Error == nil || resp.Error.Code != string(syncerr.ClientWireUnsupported) {
			t.Fatalf("round after rotation %+v", resp.Msg.Frames)
		}
	})
}
