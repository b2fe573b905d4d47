package operations

import (
	"strings"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Revision is the protocol revision every message carries (REMOTE.md).
const Revision = 1

// RequestKind is what a request asks for.
type RequestKind string

// Request kinds (REMOTE.md §5).
const (
	KindQuery   RequestKind = "query"
	KindCommand RequestKind = "command"
)

// Request is one decoded POST <mount>/operations body.
type Request struct {
	Kind        RequestKind
	ClientID    string
	OperationID string
	// RequestID is the caller-owned idempotency key of a command; "" for
	// a query.
	RequestID string
	// Params is the operation's parameter value (any kind; null when the
	// operation takes none).
	Params Value
}

// decodeEnvelope decodes a client message of revision 1 (what names it in
// refusals) and returns it with its kind ("" when not a string).
func decodeEnvelope(body []byte, what string) (Value, string, error) {
	v, err := Decode(body)
	if err != nil {
		return Value{}, "", err
	}
	if v.Kind() != KindObject {
		return Value{}, "", invalid(what + " is not an object")
	}
	if rev, ok := v.Get("revision"); !ok || !isRevision(rev) {
		return Value{}, "", invalid(what + " revision is not 1")
	}
	kind, _ := stringField(v, "kind")
	return v, kind, nil
}

// DecodeRequest decodes and checks a request body: an object value with
// revision 1 (a number), kind "query" or "command", non-empty string
// clientId and operationId, a present params value, and for a command a
// non-empty string requestId. Any violation is operation.invalid_request.
func DecodeRequest(body []byte) (Request, error) {
	v, kind, err := decodeEnvelope(body, "request")
	if err != nil {
		return Request{}, err
	}
	var r Request
	switch RequestKind(kind) {
	case KindQuery, KindCommand:
		r.Kind = RequestKind(kind)
	default:
		return Request{}, invalid("request kind is not query or command")
	}
	var ok bool
	if r.ClientID, ok = stringField(v, "clientId"); !ok || r.ClientID == "" {
		return Request{}, invalid("request clientId is missing or empty")
	}
	if r.OperationID, ok = stringField(v, "operationId"); !ok || r.OperationID == "" {
		return Request{}, invalid("request operationId is missing or empty")
	}
	if r.Kind == KindCommand {
		if r.RequestID, ok = stringField(v, "requestId"); !ok || r.RequestID == "" {
			return Request{}, invalid("command requestId is missing or empty")
		}
	}
	if r.Params, ok = v.Get("params"); !ok {
		return Request{}, invalid("request has no params")
	}
	return r, nil
}

func isRevision(v Value) bool {
	f, ok := v.AsNumber()
	return ok && f == Revision
}

func stringField(v Value, key string) (string, bool) {
	f, ok := v.Get(key)
	if !ok {
		return "", false
	}
	return f.AsString()
}

// Row is one result row: its columns in the registered order.
type Row []Field

// QueryResult is a query's success response.
type QueryResult struct {
	OperationID string
	Rows        []Row
	// MaxCommitSeq is the partition's highest commit seq in the snapshot
	// the rows were read from (non-negative, at most 2^53−1).
	MaxCommitSeq int64
}

// CommandStatus is a command's push outcome.
type CommandStatus string

// Command outcomes (REMOTE.md §5).
const (
	CommandApplied  CommandStatus = "applied"
	CommandCached   CommandStatus = "cached"
	CommandRejected CommandStatus = "rejected"
)

// CommandResult is a command's success response.
type CommandResult struct {
	OperationID string
	RequestID   string
	Status      CommandStatus
	// CommitSeq is the applied commit's seq; 0 when absent.
	CommitSeq int64
	// Results are the per-operation results of the commit.
	Results []Value
}

// EncodeQueryResult encodes a query success response.
func EncodeQueryResult(r QueryResult) ([]byte, error) {
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
		field("kind", str(string(KindQuery))),
		field("operationId", str(r.OperationID)),
		field("rows", rowsV),
		field("maxCommitSeq", seq),
	)
}

// EncodeCommandResult encodes a command success response.
func EncodeCommandResult(r CommandResult) ([]byte, error) {
	fields := []Field{
		field("kind", str(string(KindCommand))),
		field("operationId", str(r.OperationID)),
		field("requestId", str(r.RequestID)),
		field("status", str(string(r.Status))),
	}
	if r.CommitSeq != 0 {
		seq, ok := SafeNumber(r.CommitSeq)
		if !ok || r.CommitSeq < 0 {
			return nil, syncerr.Newf(syncerr.OperationExecFailed, "commitSeq %d is not a positive safe integer", r.CommitSeq)
		}
		fields = append(fields, field("commitSeq", seq))
	}
	results, err := Array(r.Results...)
	if err != nil {
		return nil, syncerr.Wrap(syncerr.OperationExecFailed, err)
	}
	fields = append(fields, field("results", results))
	return encodeEnvelope(fields...)
}

// EncodeError encodes an operation-level failure (kind "error") with the
// error's public catalog code, message and retryability: a code outside
// the exposed catalog is sent as sync.internal_error.
func EncodeError(err error) []byte {
	pub := syncerr.Public(err)
	if pub == nil {
		pub = syncerr.New(syncerr.InternalError)
	}
	b, encErr := encodeEnvelope(
		field("kind", str("error")),
		field("code", str(string(pub.Code))),
		field("message", str(pub.Message)),
		field("retryable", Bool(pub.Entry().Retryable)),
	)
	if encErr != nil { // unreachable: catalog messages are UTF-8
		b, _ = encodeEnvelope(field("kind", str("error")), field("code", str(string(syncerr.InternalError))),
			field("message", str("internal error")), field("retryable", Bool(true)))
	}
	return b
}

func encodeEnvelope(fields ...Field) ([]byte, error) {
	rev, _ := SafeNumber(Revision)
	o, err := Object(append([]Field{field("revision", rev)}, fields...)...)
	if err != nil {
		return nil, err
	}
	return o.Encode()
}

func field(k string, v Value) Field { return Field{Key: k, Value: v} }

// str builds a string value from text that may not be UTF-8 (an id the
// caller sent was decoded from JSON, so it is); invalid bytes become the
// replacement character rather than an unencodable value.
func str(s string) Value {
	v, err := String(s)
	if err != nil {
		v, _ = String(strings.ToValidUTF8(s, "\uFFFD"))
	}
	return v
}
