package e2e

import (
	"testing"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/realtime"
)

func projectMember(actor, partition string) call {
	return call{actor: actor, partition: partition, scopes: `{"project_id":["p1","p2"]}`}
}

func (k *socket) publish(key, doc string) {
	k.t.Helper()
	k.send(websocket.MessageText, []byte(`{"event":"presence","data":{"scopeKey":"`+key+`","doc":`+doc+`}}`))
}

// presence reads the next presence event: a fanout or an error.
func (k *socket) presence() (*realtime.PresenceFanout, *realtime.PresenceError) {
	k.t.Helper()
	switch m := k.event().(type) {
	case *realtime.PresenceFanout:
		return m, nil
	case *realtime.PresenceError:
		return nil, m
	default:
		k.t.Fatalf("want a presence event, got %T", m)
		return nil, nil
	}
}

func (k *socket) wantPresence(kind realtime.PresenceKind, client, doc string) {
	k.t.Helper()
	f, e := k.presence()
	got := ""
	if f != nil && f.Doc != nil {
		got = string(canonjson.Marshal(f.Doc, ""))
	}
	if f == nil || f.Kind != kind || f.ClientID != client || got != doc || f.ScopeKey != "project:p1" {
		k.t.Fatalf("got %+v / %+v, want %s of %s with %s", f, e, kind, client, doc)
	}
}

// wantError reads the next event as a presence error; as answers come in
// order, it also proves nothing else reached the socket before.
func (k *socket) wantError(key, code string) {
	k.t.Helper()
	if _, e := k.presence(); e == nil || e.ScopeKey != key || e.Error != code {
		k.t.Fatalf("want %s on %s, got %+v", code, key, e)
	}
}

func TestPresenceOverTheSocket(t *testing.T) {
	forEngine(t, func(t *testing.T, e engine) {
		s := start(t, e, serverOpts{config: func(c *config.Config) { c.Realtime.MaxPresenceBytes = 64 }})
		open := func(actor, client, project string) *socket {
			r := newReplica(t, s, projectMember(actor, "pr"), client)
			r.subscribe("tasks", "tasks", map[string][]string{"project_id": {project}})
			r.pull()
			k := dial(t, s, projectMember(actor, "pr"), client)
			if _, ok := k.event().(*realtime.Hello); !ok {
				t.Fatal("hello is not the first message")
			}
			return k
		}
		a := open("ann", "a", "p1")
		b := open("bea", "b", "p1")
		d := open("dan", "d", "p2")

		a.publish("project:p1", `{"cursor":1}`)
		b.wantPresence(realtime.PresenceJoin, "a", `{"cursor":1}`)
		a.publish("project:p1", `{"cursor":2}`)
		b.wantPresence(realtime.PresenceUpdate, "a", `{"cursor":2}`)

		// Refusals: an unheld key, an over-cap document; neither fans out.
		d.publish("project:p1", `{"evil":true}`)
		d.wantError("project:p1", realtime.PresenceForbidden)
		a.publish("project:p1", `{"big":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
		a.wantError("project:p1", realtime.PresenceTooLarge) // and not its own fanout
		d.publish("project:p2", `{"y":2}`)
		d.publish("project:p9", `{}`)
		d.wantError("project:p9", realtime.PresenceForbidden) // d heard nothing of p1

		// A socket round re-registers the same grant: presence survives.
		ra := newReplica(t, s, projectMember("ann", "pr"), "a")
		ra.subscribe("tasks", "tasks", map[string][]string{"project_id": {"p1"}})
		a.round(ra.request(), 1<<20)
		a.publish("project:p1", `{"cursor":3}`)
		b.wantPresence(realtime.PresenceUpdate, "a", `{"cursor":3}`)

		// A late joiner gets the join burst; a disconnect is a leave.
		c := open("cid", "c", "p1")
		c.wantPresence(realtime.PresenceJoin, "a", `{"cursor":3}`)
		_ = a.c.Close(websocket.StatusNormalClosure, "")
		b.wantPresence(realtime.PresenceLeave, "a", "")
		c.wantPresence(realtime.PresenceLeave, "a", "")
		b.publish("project:p1", `null`) // b never published: nothing to leave
		b.publish("project:p9", `{}`)
		b.wantError("project:p9", realtime.PresenceForbidden)
		c.publish("project:p9", `{}`)
		c.wantError("project:p9", realtime.PresenceForbidden)
	})
}
