// Package realtime holds the §8 realtime control messages: the JSON text
// events a server sends (hello, sync wake-up, heartbeat, presence fanout
// and presence errors) and the messages a client sends (ack, presence
// publish), parsed strictly and encoded in the reference field order, and
// the binary channel tags of §8.7.
//
// Parsing follows §8.1: an unknown event name is tolerated (returned as
// *Unknown), while a known event whose data has the wrong shape is a parse
// error with code sync.invalid_request. Every numeric field must be an
// integer within ±(2^53−1).
package realtime

import (
	"math"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/wire"
)

// Channel tags of binary realtime messages (§8.7).
const (
	TagDelta byte = 0x00 // server→client: one complete SSP2 response message
	TagRound byte = 0x01 // both: one chunk of the in-flight sync round
)

// ProtocolVersion is the hello protocolVersion.
const ProtocolVersion = 1

// WakeReason is the closed set of sync wake-up reasons (§8.3).
type WakeReason string

// Wake reasons.
const (
	WakeDeltaTooLarge   WakeReason = "delta-too-large"
	WakeCatchupRequired WakeReason = "catchup-required"
	WakeResetRequired   WakeReason = "reset-required"
)

// PresenceKind is the closed set of presence fanout kinds (§8.6.2).
type PresenceKind string

// Presence kinds.
const (
	PresenceJoin   PresenceKind = "join"
	PresenceUpdate PresenceKind = "update"
	PresenceLeave  PresenceKind = "leave"
)

// Presence error codes (client-runtime codes, not wire codes).
const (
	PresenceTooLarge  = "presence.too_large"
	PresenceForbidden = "presence.forbidden"
)

// Message is a parsed control message.
type Message interface {
	isMessage()
}

// Hello is the connect handshake (§8.1).
type Hello struct {
	ProtocolVersion int64
	SessionID       string
	ActorID         string
	ClientID        string
	Cursor          int64
	LatestCursor    int64
	RequiresSync    bool
	Timestamp       int64
}

// Wake is the sync wake-up (§8.3); requiresPull is always true.
type Wake struct {
	Cursor    int64
	Reason    WakeReason
	Timestamp int64
}

// Heartbeat is the server heartbeat (§8.5).
type Heartbeat struct {
	Timestamp int64
}

// PresenceFanout tells a receiver that a scope-mate's presence changed.
// Doc is a JSON object (*canonjson.Object) for join and update, nil for
// leave.
type PresenceFanout struct {
	ScopeKey  string
	Kind      PresenceKind
	ActorID   string
	ClientID  string
	Doc       *canonjson.Object
	Timestamp int64
}

// PresenceError answers a publisher whose publish was refused.
type PresenceError struct {
	ScopeKey  string
	Error     string
	Timestamp int64
}

// PresencePublish is a client's publish (Doc set) or leave (Doc nil).
type PresencePublish struct {
	ScopeKey string
	Doc      *canonjson.Object
	// Timestamp is optional on a publish (HasTimestamp).
	Timestamp    int64
	HasTimestamp bool
}

// Ack acknowledges applied deltas (§8.2).
type Ack struct {
	Cursor int64
}

// Unknown is a message whose event (or type) name this version does not
// define; it is tolerated, never an error.
type Unknown struct {
	Name string
}

func (*Hello) isMessage()           {}
func (*Wake) isMessage()            {}
func (*Heartbeat) isMessage()       {}
func (*PresenceFanout) isMessage()  {}
func (*PresenceError) isMessage()   {}
func (*PresencePublish) isMessage() {}
func (*Ack) isMessage()             {}
func (*Unknown) isMessage()         {}

func malformed(format string, args ...any) error {
	return wire.Errorf("malformed realtime control message: "+format, args...)
}

type fields struct {
	o    *canonjson.Object
	what string
	err  error
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = malformed(format, args...)
	}
}

func (f *fields) str(key string) string {
	v, _ := f.o.Get(key)
	s, ok := v.(string)
	if !ok {
		f.fail("%s.%s must be a string", f.what, key)
	}
	return s
}

func (f *fields) boolean(key string) bool {
	v, _ := f.o.Get(key)
	b, ok := v.(bool)
	if !ok {
		f.fail("%s.%s must be a boolean", f.what, key)
	}
	return b
}

func (f *fields) integer(key string) int64 {
	v, _ := f.o.Get(key)
	n, ok := safeInt(v)
	if !ok {
		f.fail("%s.%s must be an integer within the i64 safe range", f.what, key)
	}
	return n
}

func safeInt(v canonjson.Value) (int64, bool) {
	x, ok := v.(float64)
	if !ok || math.IsInf(x, 0) || math.IsNaN(x) || x != math.Trunc(x) || math.Abs(x) > wire.MaxSafeInt {
		return 0, false
	}
	return int64(x), true
}

func root(text []byte) (*canonjson.Object, error) {
	v, err := canonjson.Parse(text)
	if err != nil {
		return nil, malformed("not valid JSON")
	}
	o, ok := v.(*canonjson.Object)
	if !ok {
		return nil, malformed("control message must be a JSON object")
	}
	return o, nil
}

func dataOf(o *canonjson.Object, what string) (*fields, error) {
	v, _ := o.Get("data")
	d, ok := v.(*canonjson.Object)
	if !ok {
		return nil, malformed("%s.data must be a JSON object", what)
	}
	return &fields{o: d, what: what + ".data"}, nil
}

// ParseServerEvent parses a server→client control message (also accepting
// a client presence publish, which shares the presence event name).
func ParseServerEvent(text []byte) (Message, error) {
	o, err := root(text)
	if err != nil {
		return nil, err
	}
	ev, _ := o.Get("event")
	name, ok := ev.(string)
	if !ok {
		return nil, malformed("event must be a string")
	}
	switch name {
	case "hello":
		d, err := dataOf(o, "hello")
		if err != nil {
			return nil, err
		}
		h := &Hello{
			ProtocolVersion: d.integer("protocolVersion"),
			SessionID:       d.str("sessionId"),
			ActorID:         d.str("actorId"),
			ClientID:        d.str("clientId"),
			Cursor:          d.integer("cursor"),
			LatestCursor:    d.integer("latestCursor"),
			RequiresSync:    d.boolean("requiresSync"),
			Timestamp:       d.integer("timestamp"),
		}
		return h, d.err
	case "sync":
		d, err := dataOf(o, "sync")
		if err != nil {
			return nil, err
		}
		reason := d.str("reason")
		if d.err == nil {
			switch WakeReason(reason) {
			case WakeDeltaTooLarge, WakeCatchupRequired, WakeResetRequired:
			default:
				return nil, malformed("unknown wake reason %q", reason)
			}
		}
		if rp, _ := d.o.Get("requiresPull"); rp != true && d.err == nil {
			return nil, malformed("sync.data.requiresPull must be true")
		}
		w := &Wake{Cursor: d.integer("cursor"), Reason: WakeReason(reason), Timestamp: d.integer("timestamp")}
		return w, d.err
	case "heartbeat":
		d, err := dataOf(o, "heartbeat")
		if err != nil {
			return nil, err
		}
		h := &Heartbeat{Timestamp: d.integer("timestamp")}
		return h, d.err
	case "presence":
		return parsePresence(o)
	}
	return &Unknown{Name: name}, nil
}

func parsePresence(o *canonjson.Object) (Message, error) {
	d, err := dataOf(o, "presence")
	if err != nil {
		return nil, err
	}
	key := d.str("scopeKey")
	if d.err != nil {
		return nil, d.err
	}
	if key == "" {
		return nil, malformed("presence.data.scopeKey must be non-empty")
	}
	var ts int64
	hasTS := d.o.Has("timestamp")
	var out Message
	switch {
	case d.o.Has("error"):
		out = &PresenceError{ScopeKey: key, Error: d.str("error")}
	case d.o.Has("kind"):
		kind := PresenceKind(d.str("kind"))
		if d.err != nil {
			return nil, d.err
		}
		if kind != PresenceJoin && kind != PresenceUpdate && kind != PresenceLeave {
			return nil, malformed("unknown presence kind %q", kind)
		}
		f := &PresenceFanout{ScopeKey: key, Kind: kind, ActorID: d.str("actorId"), ClientID: d.str("clientId")}
		doc, _ := d.o.Get("doc")
		if kind == PresenceLeave {
			if doc != nil {
				return nil, malformed("presence leave must carry doc: null")
			}
		} else {
			obj, ok := doc.(*canonjson.Object)
			if !ok {
				return nil, malformed("presence.data.doc must be a JSON object")
			}
			f.Doc = obj
		}
		out = f
	default:
		doc, has := d.o.Get("doc")
		p := &PresencePublish{ScopeKey: key}
		if !has || doc != nil {
			obj, ok := doc.(*canonjson.Object)
			if !ok {
				return nil, malformed("presence.data.doc must be a JSON object or null")
			}
			p.Doc = obj
		}
		out = p
	}
	if hasTS {
		ts = d.integer("timestamp")
	}
	if d.err != nil {
		return nil, d.err
	}
	switch x := out.(type) {
	case *PresenceError:
		x.Timestamp = ts
	case *PresenceFanout:
		x.Timestamp = ts
	case *PresencePublish:
		x.Timestamp, x.HasTimestamp = ts, hasTS
	}
	return out, nil
}

// ParseClientMessage parses a client→server control message: an ack
// ({"type":"ack","cursor":n}) or a presence publish. Other names are
// returned as *Unknown.
func ParseClientMessage(text []byte) (Message, error) {
	o, err := root(text)
	if err != nil {
		return nil, err
	}
	if tv, ok := o.Get("type"); ok {
		name, ok := tv.(string)
		if !ok {
			return nil, malformed("type must be a string")
		}
		if name != "ack" {
			return &Unknown{Name: name}, nil
		}
		f := &fields{o: o, what: "ack"}
		a := &Ack{Cursor: f.integer("cursor")}
		return a, f.err
	}
	ev, _ := o.Get("event")
	name, ok := ev.(string)
	if !ok {
		return nil, malformed("control message needs a type or event name")
	}
	if name != "presence" {
		return &Unknown{Name: name}, nil
	}
	m, err := parsePresence(o)
	if err != nil {
		return nil, err
	}
	p, ok := m.(*PresencePublish)
	if !ok {
		return nil, malformed("a client presence message must be a publish or leave")
	}
	return p, nil
}

// Encode serializes a control message as compact JSON in the reference
// field order.
func Encode(m Message) ([]byte, error) {
	var v *canonjson.Object
	switch x := m.(type) {
	case *Hello:
		v = event("hello", canonjson.NewObject(8).
			Set("protocolVersion", x.ProtocolVersion).Set("sessionId", x.SessionID).Set("actorId", x.ActorID).
			Set("clientId", x.ClientID).Set("cursor", x.Cursor).Set("latestCursor", x.LatestCursor).
			Set("requiresSync", x.RequiresSync).Set("timestamp", x.Timestamp))
		if err := checkInts(x.ProtocolVersion, x.Cursor, x.LatestCursor, x.Timestamp); err != nil {
			return nil, err
		}
	case *Wake:
		switch x.Reason {
		case WakeDeltaTooLarge, WakeCatchupRequired, WakeResetRequired:
		default:
			return nil, malformed("unknown wake reason %q", x.Reason)
		}
		if err := checkInts(x.Cursor, x.Timestamp); err != nil {
			return nil, err
		}
		v = event("sync", canonjson.NewObject(4).Set("cursor", x.Cursor).Set("requiresPull", true).
			Set("reason", string(x.Reason)).Set("timestamp", x.Timestamp))
	case *Heartbeat:
		if err := checkInts(x.Timestamp); err != nil {
			return nil, err
		}
		v = event("heartbeat", canonjson.NewObject(1).Set("timestamp", x.Timestamp))
	case *PresenceFanout:
		if x.ScopeKey == "" {
			return nil, malformed("presence scopeKey must be non-empty")
		}
		if err := checkInts(x.Timestamp); err != nil {
			return nil, err
		}
		var doc canonjson.Value
		switch x.Kind {
		case PresenceJoin, PresenceUpdate:
			if x.Doc == nil {
				return nil, malformed("presence %s needs a doc object", x.Kind)
			}
			doc = x.Doc
		case PresenceLeave:
		default:
			return nil, malformed("unknown presence kind %q", x.Kind)
		}
		v = event("presence", canonjson.NewObject(6).Set("scopeKey", x.ScopeKey).Set("kind", string(x.Kind)).
			Set("actorId", x.ActorID).Set("clientId", x.ClientID).Set("doc", doc).Set("timestamp", x.Timestamp))
	case *PresenceError:
		if err := checkInts(x.Timestamp); err != nil {
			return nil, err
		}
		v = event("presence", canonjson.NewObject(3).Set("scopeKey", x.ScopeKey).Set("error", x.Error).Set("timestamp", x.Timestamp))
	case *PresencePublish:
		if x.ScopeKey == "" {
			return nil, malformed("presence scopeKey must be non-empty")
		}
		var doc canonjson.Value
		if x.Doc != nil {
			doc = x.Doc
		}
		d := canonjson.NewObject(3).Set("scopeKey", x.ScopeKey).Set("doc", doc)
		if x.HasTimestamp {
			d.Set("timestamp", x.Timestamp)
		}
		v = event("presence", d)
	case *Ack:
		if err := checkInts(x.Cursor); err != nil {
			return nil, err
		}
		v = canonjson.NewObject(2).Set("type", "ack").Set("cursor", x.Cursor)
	default:
		return nil, malformed("cannot encode %T", m)
	}
	return canonjson.Marshal(v, ""), nil
}

func event(name string, data *canonjson.Object) *canonjson.Object {
	return canonjson.NewObject(2).Set("event", name).Set("data", data)
}

func checkInts(vs ...int64) error {
	for _, v := range vs {
		if !wire.SafeInt(v) {
			return malformed("number %d is outside the i64 safe range", v)
		}
	}
	return nil
}

// DocSize returns the serialized size of a presence document, the measure
// the presence size cap applies to.
func DocSize(doc *canonjson.Object) int {
	if doc == nil {
		return len("null")
	}
	return len(canonjson.Marshal(doc, ""))
}
