package callout

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/domain/canonjson"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Bounds of one command's exchange with the backend.
const (
	// MaxCommandRounds bounds the callouts of one command: answers that
	// ask for rows, then the one with the writes or a rejection.
	MaxCommandRounds = 4
	// MaxCommandReads bounds the rows one command reads.
	MaxCommandReads = 100
)

// CommandOptions configure the commands.
type CommandOptions struct {
	Client *Client
	// Schema is the running schema: rows are rendered and parsed by its
	// column types.
	Schema *schema.Schema
	// Timeout bounds one command's callouts together
	// (--callout-command-timeout). They run inside the push transaction,
	// holding the partition (on SQLite: the one writer), so it is short.
	Timeout time.Duration
	// Log receives a line per rejection the client cannot be given (a
	// code outside the contract's).
	Log *zap.Logger
}

// Commands answer remote-operation commands (REMOTE.md §3) from
// BASE/commands/<name>, exactly as a Go command's Run would: the writes of
// one ordinary commit, which the push pipeline then authorizes, validates
// and applies, or a refusal with an operation code. The backend may first
// ask for rows of the push transaction's candidate state (a Go command's
// GetRow) and is asked again with them.
//
// An answer that is not of the contract's shape — writes to a table or a
// column the schema does not declare, a value that does not fit its
// column, a row missing a column — is an outage like no answer at all:
// the command fails with the retryable sync.rate_limited, its transaction
// rolls back and nothing of it is applied or stored.
type Commands struct {
	c       *Client
	sch     *schema.Schema
	timeout time.Duration
	log     *zap.Logger
}

// NewCommands builds the command callouts.
func NewCommands(o CommandOptions) (*Commands, error) {
	if o.Client == nil || o.Schema == nil || o.Timeout <= 0 {
		return nil, errors.New("callout: commands need a client, the schema and a timeout")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Commands{c: o.Client, sch: o.Schema, timeout: o.Timeout, log: o.Log}, nil
}

// CommandCall is one run of a command, inside its push transaction.
type CommandCall struct {
	Name      string // the operation id
	RequestID string
	ActorID   string
	Partition string
	ClientID  string
	Params    opdomain.Value
	// GetRow reads a row of the push transaction's candidate state; nil
	// when absent or when the caller may not write it.
	GetRow func(ctx context.Context, table, rowID string) (ports.RowValues, error)
}

// CommandWrite is one row write of the backend's answer, in the shape of
// a Go command's mutation: a delete of RowID, or a full-row upsert whose
// Values name every column (as ports.RowValues holds them) and whose
// RowID is the rendering of its primary key.
type CommandWrite struct {
	Table  string
	Delete bool
	RowID  string
	Values ports.RowValues
}

// commandRequest is the body of a command callout.
type commandRequest struct {
	OperationID string `json:"operationId"`
	RequestID   string `json:"requestId"`
	ActorID     string `json:"actorId"`
	Partition   string `json:"partition"`
	ClientID    string `json:"clientId"`
	// Params are the request's params in REMOTE.md §4's tagged encoding.
	Params json.RawMessage `json:"params"`
	// Rows are the rows the backend asked for so far, in the order asked.
	Rows []readRow `json:"rows"`
}

type readRow struct {
	Table string          `json:"table"`
	RowID string          `json:"rowId"`
	Row   json.RawMessage `json:"row"`
}

// commandAnswer is {"writes": [...]}, {"read": [...]} or {"reject": {...}}.
type commandAnswer struct {
	Writes []writeAnswer     `json:"writes"`
	Read   []rowRef          `json:"read"`
	Reject *commandRejection `json:"reject"`
}

type writeAnswer struct {
	Table  string                     `json:"table"`
	Delete bool                       `json:"delete"`
	RowID  string                     `json:"rowId"`
	Values map[string]json.RawMessage `json:"values"`
}

type rowRef struct {
	Table string `json:"table"`
	RowID string `json:"rowId"`
}

type commandRejection struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// rejectCodes are the codes a backend refuses a command with: those a Go
// command's Authorize and Run answer.
var rejectCodes = map[syncerr.Code]bool{
	syncerr.OperationForbidden:  true,
	syncerr.OperationInvalid:    true,
	syncerr.OperationExecFailed: true,
}

// Run asks the backend for the command's writes. It returns them, a
// *syncerr.Error with the backend's operation code, or, with no usable
// answer, sync.rate_limited; an error of GetRow is returned as it is.
func (c *Commands) Run(ctx context.Context, call CommandCall) ([]CommandWrite, error) {
	params, err := call.Params.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("callout command %q: encode params: %w", call.Name, err)
	}
	in := commandRequest{OperationID: call.Name, RequestID: call.RequestID, ActorID: call.ActorID,
		Partition: call.Partition, ClientID: call.ClientID, Params: params, Rows: []readRow{}}
	read := map[rowRef]bool{}
	start := c.c.now()
	for round := 1; ; round++ {
		left := c.timeout - c.c.now().Sub(start)
		if left <= 0 {
			return nil, unavailable(&Outage{Callback: "command", Outcome: OutcomeTimeout,
				Err: errors.New("--callout-command-timeout passed between rounds")})
		}
		cb := Callback{Name: "command", Path: contract.CommandPath(call.Name), Timeout: left, Target: call.Name}
		var out []CommandWrite
		var refs []rowRef
		err := c.c.Call(ctx, cb, in, func(status int, body []byte) (Outcome, error) {
			if !ok2xx(status) {
				return unexpected(status)
			}
			var ans commandAnswer
			if err := decodeStrict(body, &ans); err != nil {
				return OutcomeMalformed, err
			}
			var err error
			switch {
			case ans.Writes != nil && ans.Read == nil && ans.Reject == nil:
				if out, err = c.writes(ans.Writes); err != nil {
					return OutcomeMalformed, err
				}
				return OutcomeOK, nil
			case ans.Read != nil && ans.Writes == nil && ans.Reject == nil:
				if refs, err = c.reads(ans.Read, round, len(read)); err != nil {
					return OutcomeMalformed, err
				}
				return OutcomeOK, nil
			case ans.Reject != nil && ans.Writes == nil && ans.Read == nil:
				return OutcomeRefused, c.rejection(ctx, call.Name, *ans.Reject)
			}
			return OutcomeMalformed, errors.New(`want one of {"writes": [...]}, {"read": [...]} or {"reject": {...}}`)
		})
		var o *Outage
		switch {
		case errors.As(err, &o):
			return nil, unavailable(err)
		case err != nil:
			return nil, err
		case refs == nil:
			return out, nil
		}
		for _, ref := range refs {
			if read[ref] {
				continue
			}
			read[ref] = true
			var row ports.RowValues
			if call.GetRow != nil {
				if row, err = call.GetRow(ctx, ref.Table, ref.RowID); err != nil {
					return nil, err
				}
			}
			in.Rows = append(in.Rows, readRow{Table: ref.Table, RowID: ref.RowID, Row: renderRow(c.sch.Table(ref.Table), row)})
		}
	}
}

// unavailable is a command without a usable answer: retryable, so the
// client keeps the request and sends it again.
func unavailable(err error) error {
	return syncerr.Wrap(syncerr.RateLimited, err).WithMessage("command backend unavailable; retry later")
}

// reads checks a request for rows: known tables, row ids, within the
// bounds of a command.
func (c *Commands) reads(refs []rowRef, round, readSoFar int) ([]rowRef, error) {
	switch {
	case len(refs) == 0:
		return nil, errors.New(`"read" names no row`)
	case round >= MaxCommandRounds:
		return nil, fmt.Errorf("asks for rows in callout %d of the command; the answer there must be writes or a rejection", round)
	case readSoFar+len(refs) > MaxCommandReads:
		return nil, fmt.Errorf("asks for more than %d rows in one command", MaxCommandReads)
	}
	for _, r := range refs {
		if c.sch.Table(r.Table) == nil || r.RowID == "" {
			return nil, fmt.Errorf("read of table %q row %q: want a table of the schema and a row id", r.Table, r.RowID)
		}
	}
	return refs, nil
}

// rejection is the error a Go command's Run would return. A code outside
// the contract's is a backend bug: the command fails with
// operation.execution_failed and the reason is logged here.
func (c *Commands) rejection(ctx context.Context, name string, r commandRejection) error {
	code := syncerr.Code(r.Code)
	if !rejectCodes[code] {
		fields := []zap.Field{zap.String("callback", "command"), zap.String("target", name), zap.String("code", r.Code)}
		if id := ports.RequestID(ctx); id != "" {
			fields = append(fields, zap.String("request_id", id))
		}
		c.log.Error("the command callout's rejection code is not operation.forbidden, operation.invalid_request or operation.execution_failed; "+
			"the command fails with operation.execution_failed", fields...)
		return syncerr.Newf(syncerr.OperationExecFailed, "command %q: the backend refused with the code %q", name, r.Code)
	}
	e := syncerr.Newf(code, "command %q: refused by the backend", name)
	if r.Message != "" {
		e = e.WithMessage(r.Message)
	}
	return e
}

// writes parses the answer's writes against the schema.
func (c *Commands) writes(ws []writeAnswer) ([]CommandWrite, error) {
	if len(ws) == 0 {
		return nil, errors.New(`"writes" is empty: a command writes at least one row`)
	}
	out := make([]CommandWrite, len(ws))
	for i, w := range ws {
		t := c.sch.Table(w.Table)
		if t == nil {
			return nil, fmt.Errorf("write %d: table %q is not in the schema", i, w.Table)
		}
		if w.Delete {
			if w.RowID == "" || w.Values != nil {
				return nil, fmt.Errorf("write %d: a delete names its rowId and no values", i)
			}
			out[i] = CommandWrite{Table: t.Name, Delete: true, RowID: w.RowID}
			continue
		}
		vals, err := parseRow(t, w.Values)
		if err != nil {
			return nil, fmt.Errorf("write %d to %q: %w", i, t.Name, err)
		}
		rowID, ok := scopes.RenderValue(vals[t.PrimaryKey])
		if !ok || rowID == "" || (w.RowID != "" && w.RowID != rowID) {
			return nil, fmt.Errorf("write %d to %q: the primary key %q must be set and match rowId", i, t.Name, t.PrimaryKey)
		}
		out[i] = CommandWrite{Table: t.Name, RowID: rowID, Values: vals}
	}
	return out, nil
}

// parseRow reads a full row rendered as SPEC §11.1 renders row values
// (renderRow's inverse): every column of t, no other.
func parseRow(t *schema.Table, values map[string]json.RawMessage) (ports.RowValues, error) {
	for name := range values {
		if t.ColumnIndex(name) < 0 {
			return nil, fmt.Errorf("no column %q", name)
		}
	}
	row := make(ports.RowValues, len(t.Columns))
	for _, col := range t.Columns {
		raw, ok := values[col.Name]
		if !ok {
			return nil, fmt.Errorf("column %q is missing: an upsert names every column", col.Name)
		}
		v, err := parseCell(col.Type, bytes.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", col.Name, err)
		}
		row[col.Name] = v
	}
	return row, nil
}

// parseCell reads one value of a column of type typ: null, a string, an
// integer (no fraction or exponent), a finite number, a boolean, any JSON
// document (json), a BlobRef object (blob_ref) or standard base64 (bytes,
// crdt, encrypted columns).
func parseCell(typ schema.ColumnType, raw json.RawMessage) (any, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	switch typ {
	case schema.TypeString:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errors.New("want a string")
		}
		return s, nil
	case schema.TypeInteger:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return nil, errors.New("want an integer within ±2^63")
		}
		return n, nil
	case schema.TypeFloat:
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return nil, errors.New("want a number")
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return nil, errors.New("want a finite number")
		}
		return f, nil
	case schema.TypeBoolean:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, errors.New("want true or false")
		}
		return b, nil
	case schema.TypeJSON, schema.TypeBlobRef:
		var doc bytes.Buffer
		if err := json.Compact(&doc, raw); err != nil || !canonjson.Valid(doc.Bytes()) {
			return nil, errors.New("want a JSON document")
		}
		if typ == schema.TypeBlobRef {
			if err := rowcodec.CheckBlobRef(doc.Bytes()); err != nil {
				return nil, fmt.Errorf("want a BlobRef object: %w", err)
			}
		}
		return doc.String(), nil
	case schema.TypeBytes, schema.TypeCRDT:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errors.New("want a standard base64 string")
		}
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, errors.New("want a standard base64 string")
		}
		return b, nil
	}
	return nil, fmt.Errorf("column type %s cannot be written by a command", typ)
}
