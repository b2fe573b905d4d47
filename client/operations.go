package client

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"

	"github.com/syncd-dev/syncd/domain/operations"
)

// OperationsContentType is the content type of remote operation request
// and response bodies (REMOTE.md §5).
const OperationsContentType = operations.ContentType

// OperationError is an operation-level failure: the encoded kind "error"
// answer of POST <mount>/operations, carrying its catalog code
// (operation.unknown, operation.forbidden, sync.schema_not_ready, …).
// Refusals before the operation runs (authentication, content type, body
// limits) are *HTTPError instead, as for /sync.
type OperationError struct {
	Code      string
	Message   string
	Retryable bool
}

func (e *OperationError) Error() string { return "operation error " + e.Code + ": " + e.Message }

// QueryResult is a registered query's answer.
type QueryResult struct {
	OperationID string
	// Rows are the result rows, each its columns in the registered order.
	Rows []operations.Row
	// MaxCommitSeq is the partition's highest commit seq in the snapshot
	// the rows were read from.
	MaxCommitSeq int64
}

// CommandResult is a registered command's answer.
type CommandResult struct {
	OperationID string
	RequestID   string
	// Status is applied, cached (a retry of an applied request id) or
	// rejected.
	Status operations.CommandStatus
	// CommitSeq is the commit's seq (0 when the answer carries none).
	CommitSeq int64
	// Results are the commit's per-operation results.
	Results []operations.Value
}

// Query runs the registered query operationID with params (an object of
// the query's parameters, or operations.Null() when it takes none) and
// returns its rows. An operation failure is an *OperationError.
func (c *Client) Query(ctx context.Context, operationID string, params operations.Value) (*QueryResult, error) {
	v, err := c.operation(ctx, operations.KindQuery, operationID, "", params)
	if err != nil {
		return nil, err
	}
	return decodeQueryResult(v)
}

// decodeQueryResult reads a query answer or a watch snapshot: its
// operationId, rows and maxCommitSeq.
func decodeQueryResult(v operations.Value) (*QueryResult, error) {
	r := &QueryResult{}
	var err error
	if r.OperationID, err = wantString(v, "operationId"); err != nil {
		return nil, err
	}
	if r.MaxCommitSeq, err = wantSafeInt(v, "maxCommitSeq"); err != nil {
		return nil, err
	}
	rows, ok := getField(v, "rows").Items()
	if !ok {
		return nil, answerErr("rows is not an array")
	}
	r.Rows = make([]operations.Row, len(rows))
	for i, row := range rows {
		fields, ok := row.Fields()
		if !ok {
			return nil, answerErr("row %d is not an object", i)
		}
		r.Rows[i] = operations.Row(fields)
	}
	return r, nil
}

// Command runs the registered command operationID under the caller-owned
// idempotency key requestID: a retry with the same key answers "cached"
// without running the command again. An operation failure is an
// *OperationError.
func (c *Client) Command(ctx context.Context, operationID, requestID string, params operations.Value) (*CommandResult, error) {
	if requestID == "" {
		return nil, fmt.Errorf("client: command %q needs a request id", operationID)
	}
	v, err := c.operation(ctx, operations.KindCommand, operationID, requestID, params)
	if err != nil {
		return nil, err
	}
	r := &CommandResult{}
	if r.OperationID, err = wantString(v, "operationId"); err != nil {
		return nil, err
	}
	if r.RequestID, err = wantString(v, "requestId"); err != nil {
		return nil, err
	}
	status, err := wantString(v, "status")
	if err != nil {
		return nil, err
	}
	r.Status = operations.CommandStatus(status)
	if _, ok := v.Get("commitSeq"); ok {
		if r.CommitSeq, err = wantSafeInt(v, "commitSeq"); err != nil {
			return nil, err
		}
	}
	var ok bool
	if r.Results, ok = getField(v, "results").Items(); !ok {
		return nil, answerErr("results is not an array")
	}
	return r, nil
}

// operation posts one request and returns the decoded success envelope
// of the asked kind.
func (c *Client) operation(ctx context.Context, kind operations.RequestKind, operationID, requestID string, params operations.Value) (operations.Value, error) {
	if !params.Valid() {
		params = operations.Null()
	}
	body, err := encodeOperationRequest(kind, c.o.ClientID, operationID, requestID, params)
	if err != nil {
		return operations.Value{}, fmt.Errorf("client: encode operation request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.o.BaseURL+"/operations", bytes.NewReader(body))
	if err != nil {
		return operations.Value{}, fmt.Errorf("client: %w", err)
	}
	c.authorize(req)
	req.Header.Set("Content-Type", OperationsContentType)
	req.Header.Set("Accept-Encoding", c.o.AcceptEncoding)
	c.stats.Requests++
	b, err := c.do(req, "POST /operations")
	if err != nil {
		return operations.Value{}, err
	}
	c.stats.ResponseBodyBytes += int64(len(b))
	v, err := operations.Decode(b)
	if err != nil {
		return operations.Value{}, answerErr("%v", err)
	}
	if v.Kind() != operations.KindObject {
		return operations.Value{}, answerErr("answer is not an object")
	}
	if rev, _ := getField(v, "revision").AsNumber(); rev != operations.Revision {
		return operations.Value{}, answerErr("answer revision is not %d", operations.Revision)
	}
	got, err := wantString(v, "kind")
	if err != nil {
		return operations.Value{}, err
	}
	switch got {
	case "error":
		e, err := decodeOperationError(v)
		if err != nil {
			return operations.Value{}, err
		}
		return operations.Value{}, e
	case string(kind):
		return v, nil
	default:
		return operations.Value{}, answerErr("answer kind %q to a %s", got, kind)
	}
}

// decodeOperationError reads a kind "error" answer or a watch_error.
func decodeOperationError(v operations.Value) (*OperationError, error) {
	e := &OperationError{}
	var err error
	if e.Code, err = wantString(v, "code"); err != nil {
		return nil, err
	}
	e.Message, _ = getField(v, "message").AsString()
	e.Retryable, _ = getField(v, "retryable").AsBool()
	return e, nil
}

func encodeOperationRequest(kind operations.RequestKind, clientID, operationID, requestID string, params operations.Value) ([]byte, error) {
	rev, _ := operations.SafeNumber(operations.Revision)
	fields := []operations.Field{{Key: "revision", Value: rev}}
	add := func(key, s string) error {
		v, err := operations.String(s)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		fields = append(fields, operations.Field{Key: key, Value: v})
		return nil
	}
	for _, kv := range [][2]string{{"kind", string(kind)}, {"clientId", clientID}, {"operationId", operationID}} {
		if err := add(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	if kind == operations.KindCommand {
		if err := add("requestId", requestID); err != nil {
			return nil, err
		}
	}
	o, err := operations.Object(append(fields, operations.Field{Key: "params", Value: params})...)
	if err != nil {
		return nil, err
	}
	return o.Encode()
}

// getField returns a field of an object answer (the zero, invalid Value
// when absent).
func getField(v operations.Value, key string) operations.Value {
	f, _ := v.Get(key)
	return f
}

func wantString(v operations.Value, key string) (string, error) {
	s, ok := getField(v, key).AsString()
	if !ok {
		return "", answerErr("%s is missing or not a string", key)
	}
	return s, nil
}

// wantSafeInt reads a number field holding a non-negative integer within
// 2^53−1 (maxCommitSeq, commitSeq).
func wantSafeInt(v operations.Value, key string) (int64, error) {
	f, ok := getField(v, key).AsNumber()
	if !ok || f < 0 || f > 1<<53-1 || f != math.Trunc(f) {
		return 0, answerErr("%s is not a non-negative safe integer", key)
	}
	return int64(f), nil
}

func answerErr(format string, args ...any) error {
	return fmt.Errorf("client: malformed operations answer: "+format, args...)
}
