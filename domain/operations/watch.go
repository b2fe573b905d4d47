package operations

import "github.com/syncd-dev/syncd/domain/syncerr"

// WatchKind is what a client message of a live watch socket asks for
// (REMOTE.md §6).
type WatchKind string

// Client message kinds.
const (
	KindWatch   WatchKind = "watch"
	KindUnwatch WatchKind = "unwatch"
)

// WatchMessage is one decoded client message of
// <mount>/operations/realtime.
type WatchMessage struct {
	Kind    WatchKind
	WatchID string
	// ClientID, OperationID and Params are a watch's ("" and the zero
	// Value for an unwatch).
	ClientID    string
	OperationID string
	Params      Value
}

// DecodeWatchMessage decodes and checks a client message: revision 1,
// kind watch or unwatch, a non-empty watchId, and for a watch non-empty
// clientId and operationId and a params value. Any violation is
// operation.invalid_request.
func DecodeWatchMessage(body []byte) (WatchMessage, error) {
	v, kind, err := decodeEnvelope(body, "message")
	if err != nil {
		return WatchMessage{}, err
	}
	var m WatchMessage
	m.Kind = WatchKind(kind)
	if m.Kind != KindWatch && m.Kind != KindUnwatch {
		return WatchMessage{}, invalid("message kind is not watch or unwatch")
	}
	var ok bool
	if m.WatchID, ok = stringField(v, "watchId"); !ok || m.WatchID == "" {
		return WatchMessage{}, invalid("message watchId is missing or empty")
	}
	if m.Kind == KindUnwatch {
		return m, nil
	}
	if m.ClientID, ok = stringField(v, "clientId"); !ok || m.ClientID == "" {
		return WatchMessage{}, invalid("watch clientId is missing or empty")
	}
	if m.OperationID, ok = stringField(v, "operationId"); !ok || m.OperationID == "" {
		return WatchMessage{}, invalid("watch operationId is missing or empty")
	}
	if m.Params, ok = v.Get("params"); !ok {
		return WatchMessage{}, invalid("watch has no params")
	}
	return m, nil
}

// EncodeSnapshot encodes a watch's full replacement snapshot: the query
// result's rows and maxCommitSeq under the watch id.
func EncodeSnapshot(watchID string, r QueryResult) ([]byte, error) {
	seq, ok := SafeNumber(r.MaxCommitSeq)
	if !ok || r.MaxCommitSeq < 0 {
		return nil, syncerr.Newf(syncerr.OperationQueryFailed, "maxCommitSeq %d is not a non-negative safe integer", r.MaxCommitSeq)
	}
	rows := make([]Value, len(r.Rows))
	for i, row := range r.Rows {
		o, err := Object(row...)
		if err != nil {
			return nil, syncerr.Wrap(syncerr.OperationQueryFailed, err)
		}
		rows[i] = o
	}
	rowsV, _ := Array(rows...)
	return encodeEnvelope(
		field("kind", str("snapshot")),
		field("watchId", str(watchID)),
		field("operationId", str(r.OperationID)),
		field("rows", rowsV),
		field("maxCommitSeq", seq),
	)
}

// EncodeWatchError encodes a watch's failure (kind "watch_error") with
// the error's public catalog code, message and retryability.
func EncodeWatchError(watchID string, err error) []byte {
	pub := syncerr.Public(err)
	if pub == nil {
		pub = syncerr.New(syncerr.InternalError)
	}
	b, _ := encodeEnvelope( // catalog texts and decoded ids always encode
		field("kind", str("watch_error")),
		field("watchId", str(watchID)),
		field("code", str(string(pub.Code))),
		field("message", str(pub.Message)),
		field("retryable", Bool(pub.Entry().Retryable)),
	)
	return b
}
