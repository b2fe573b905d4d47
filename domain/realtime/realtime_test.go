package realtime_test

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// TestRealtimeVectors: every valid control message parses as a known event
// and re-encodes to an equal JSON document; every invalid one fails with
// its manifest code.
func TestRealtimeVectors(t *testing.T) {
	for _, gen := range []string{"v3", "v2"} {
		t.Run(gen, func(t *testing.T) {
			m, ok := vectortest.Load(t, vectortest.Dir(t, gen), "realtime")
			if !ok {
				t.Fatalf("no %s realtime vectors", gen)
			}
			for _, c := range m.Cases {
				t.Run("realtime/"+c.Name, func(t *testing.T) {
					text := m.Read(t, c.JSON)
					msg, err := realtime.ParseServerEvent(text)
					if err != nil {
						t.Fatalf("parse: %v", err)
					}
					if _, unknown := msg.(*realtime.Unknown); unknown {
						t.Fatal("parsed as an unknown event")
					}
					out, err := realtime.Encode(msg)
					if err != nil {
						t.Fatalf("encode: %v", err)
					}
					if err := vectortest.EqualJSON(out, text); err != nil {
						t.Fatalf("re-encoding differs: %v\n%s", err, out)
					}
				})
			}
			for _, c := range m.Invalid {
				t.Run("realtime/invalid/"+c.Name, func(t *testing.T) {
					_, err := realtime.ParseServerEvent(m.Read(t, c.JSON))
					if got := syncerr.CodeOf(err); string(got) != c.Error {
						t.Fatalf("got %v, want %s", err, c.Error)
					}
				})
			}
		})
	}
}

func TestParseServerEventIsStrictForKnownEvents(t *testing.T) {
	bad := map[string]string{
		"not-json":                `{"event":`,
		"not-object":              `[1]`,
		"event-not-string":        `{"event":1}`,
		"hello-missing-data":      `{"event":"hello"}`,
		"hello-cursor-string":     `{"event":"hello","data":{"protocolVersion":1,"sessionId":"s","actorId":"a","clientId":"c","cursor":"1","latestCursor":1,"requiresSync":true,"timestamp":1}}`,
		"hello-cursor-unsafe":     `{"event":"hello","data":{"protocolVersion":1,"sessionId":"s","actorId":"a","clientId":"c","cursor":9007199254740992,"latestCursor":1,"requiresSync":true,"timestamp":1}}`,
		"wake-unknown-reason":     `{"event":"sync","data":{"cursor":1,"requiresPull":true,"reason":"later","timestamp":1}}`,
		"wake-requires-pull-str":  `{"event":"sync","data":{"cursor":1,"requiresPull":"true","reason":"catchup-required","timestamp":1}}`,
		"heartbeat-fractional":    `{"event":"heartbeat","data":{"timestamp":1.5}}`,
		"presence-empty-key":      `{"event":"presence","data":{"scopeKey":"","doc":null}}`,
		"presence-array-doc":      `{"event":"presence","data":{"scopeKey":"p:1","doc":[]}}`,
		"presence-missing-doc":    `{"event":"presence","data":{"scopeKey":"p:1"}}`,
		"presence-leave-with-doc": `{"event":"presence","data":{"scopeKey":"p:1","kind":"leave","actorId":"a","clientId":"c","doc":{},"timestamp":1}}`,
		"presence-join-null-doc":  `{"event":"presence","data":{"scopeKey":"p:1","kind":"join","actorId":"a","clientId":"c","doc":null,"timestamp":1}}`,
		"presence-error-not-str":  `{"event":"presence","data":{"scopeKey":"p:1","error":1,"timestamp":1}}`,
	}
	for name, text := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := realtime.ParseServerEvent([]byte(text)); syncerr.CodeOf(err) != syncerr.InvalidRequest {
				t.Fatalf("got %v", err)
			}
		})
	}
	msg, err := realtime.ParseServerEvent([]byte(`{"event":"future-thing","data":7}`))
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := msg.(*realtime.Unknown); !ok || u.Name != "future-thing" {
		t.Fatalf("unknown event not tolerated: %#v", msg)
	}
}

func TestParseClientMessage(t *testing.T) {
	m, err := realtime.ParseClientMessage([]byte(`{"type":"ack","cursor":42}`))
	if err != nil || m.(*realtime.Ack).Cursor != 42 {
		t.Fatalf("ack: %v %#v", err, m)
	}
	if _, err := realtime.ParseClientMessage([]byte(`{"type":"ack","cursor":4.2}`)); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("fractional ack accepted: %v", err)
	}
	m, err = realtime.ParseClientMessage([]byte(`{"event":"presence","data":{"scopeKey":"project:p1","doc":null}}`))
	if err != nil || m.(*realtime.PresencePublish).Doc != nil {
		t.Fatalf("leave: %v %#v", err, m)
	}
	if _, err := realtime.ParseClientMessage([]byte(`{"event":"presence","data":{"scopeKey":"project:p1","doc":"online"}}`)); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("scalar doc accepted: %v", err)
	}
	if m, err := realtime.ParseClientMessage([]byte(`{"type":"ping"}`)); err != nil || m.(*realtime.Unknown).Name != "ping" {
		t.Fatalf("unknown type: %v", err)
	}
}

func TestEncodeUsesReferenceFieldOrder(t *testing.T) {
	doc := canonjson.NewObject(1).Set("name", "Ada")
	cases := []struct {
		m    realtime.Message
		want string
	}{
		{&realtime.Wake{Cursor: 64, Reason: realtime.WakeCatchupRequired, Timestamp: 5}, `{"event":"sync","data":{"cursor":64,"requiresPull":true,"reason":"catchup-required","timestamp":5}}`},
		{&realtime.Heartbeat{Timestamp: 9}, `{"event":"heartbeat","data":{"timestamp":9}}`},
		{&realtime.PresenceFanout{ScopeKey: "p:1", Kind: realtime.PresenceLeave, ActorID: "a", ClientID: "c", Timestamp: 1}, `{"event":"presence","data":{"scopeKey":"p:1","kind":"leave","actorId":"a","clientId":"c","doc":null,"timestamp":1}}`},
		{&realtime.PresenceFanout{ScopeKey: "p:1", Kind: realtime.PresenceJoin, ActorID: "a", ClientID: "c", Doc: doc, Timestamp: 1}, `{"event":"presence","data":{"scopeKey":"p:1","kind":"join","actorId":"a","clientId":"c","doc":{"name":"Ada"},"timestamp":1}}`},
		{&realtime.PresenceError{ScopeKey: "p:1", Error: realtime.PresenceTooLarge, Timestamp: 2}, `{"event":"presence","data":{"scopeKey":"p:1","error":"presence.too_large","timestamp":2}}`},
		{&realtime.Ack{Cursor: 3}, `{"type":"ack","cursor":3}`},
	}
	for _, c := range cases {
		got, err := realtime.Encode(c.m)
		if err != nil || string(got) != c.want {
			t.Errorf("%T: got %s (%v), want %s", c.m, got, err, c.want)
		}
	}
	if _, err := realtime.Encode(&realtime.Wake{Reason: "soon"}); err == nil {
		t.Error("unknown wake reason encoded")
	}
	if realtime.DocSize(doc) != len(`{"name":"Ada"}`) {
		t.Error("DocSize")
	}
}
