package callout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// ValidateOptions configure the validators.
type ValidateOptions struct {
	Client *Client
	// Schema is the running schema: rows are rendered by its column types.
	Schema *schema.Schema
	// Timeout bounds one validate callout (--callout-validate-timeout).
	// The validator runs inside the push transaction, holding its
	// partition (on SQLite: the one writer), so it is short.
	Timeout time.Duration
	// Log receives a line per rejection the pipeline cannot take (a
	// reserved code, invalid details).
	Log *zap.Logger
}

// Validators answer SPEC §6.7 row validation and §6.8 whole-commit
// validation from BASE/validate, exactly as a Go validator would: an
// accept, a *ports.ValidationRejection (code, message, details; for a
// commit, the operation it is attributed to), or, with no usable answer,
// ports.ErrValidatorUnavailable, which fails the push retryable without
// applying or storing the commit.
type Validators struct {
	c      *Client
	sch    *schema.Schema
	row    Callback
	commit Callback
	log    *zap.Logger
}

// NewValidators builds the validate callouts.
func NewValidators(o ValidateOptions) (*Validators, error) {
	if o.Client == nil || o.Schema == nil || o.Timeout <= 0 {
		return nil, errors.New("callout: validators need a client, the schema and a timeout")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Validators{c: o.Client, sch: o.Schema, log: o.Log,
		row:    Callback{Name: "validate-row", Path: contract.PathValidate, Timeout: o.Timeout},
		commit: Callback{Name: "validate-commit", Path: contract.PathValidate, Timeout: o.Timeout},
	}, nil
}

// Rows returns a row validator for each table; a table the schema does
// not declare is an error.
func (v *Validators) Rows(tables []string) ([]ports.RowValidator, error) {
	out := make([]ports.RowValidator, 0, len(tables))
	for _, name := range tables {
		t := v.sch.Table(name)
		if t == nil {
			return nil, fmt.Errorf("callout: validated table %q is not in the schema", name)
		}
		out = append(out, &rowValidator{v: v, t: t})
	}
	return out, nil
}

// Commit returns the whole-commit validator.
func (v *Validators) Commit() ports.CommitValidator { return commitValidator{v} }

// rowRequest is the body of a row validation.
type rowRequest struct {
	Kind      string          `json:"kind"` // "row"
	Op        string          `json:"op"`
	Table     string          `json:"table"`
	RowID     string          `json:"rowId"`
	OpIndex   int             `json:"opIndex"`
	ActorID   string          `json:"actorId"`
	Partition string          `json:"partition"`
	Row       json.RawMessage `json:"row"`
	Stored    json.RawMessage `json:"stored"`
}

// commitRequest is the body of a whole-commit validation.
type commitRequest struct {
	Kind           string             `json:"kind"` // "commit"
	ClientID       string             `json:"clientId"`
	ClientCommitID string             `json:"clientCommitId"`
	ActorID        string             `json:"actorId"`
	Partition      string             `json:"partition"`
	Operations     []operationRequest `json:"operations"`
}

type operationRequest struct {
	OpIndex int             `json:"opIndex"`
	Op      string          `json:"op"`
	Table   string          `json:"table"`
	RowID   string          `json:"rowId"`
	Row     json.RawMessage `json:"row"`
	Stored  json.RawMessage `json:"stored"`
	// The versions are present when defined (SPEC §6.8).
	StoredServerVersion int64 `json:"storedServerVersion,omitempty"`
	NextServerVersion   int64 `json:"nextServerVersion,omitempty"`
}

// validateAnswer is {"accept": true} or {"reject": {...}}.
type validateAnswer struct {
	Accept *bool      `json:"accept"`
	Reject *rejection `json:"reject"`
}

type rejection struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details"`
	// OpIndex attributes a commit's rejection (default 0, the first
	// operation); a row rejection's is ignored.
	OpIndex *int `json:"opIndex"`
}

type rowValidator struct {
	v *Validators
	t *schema.Table
}

func (r *rowValidator) Table() string { return r.t.Name }

func (r *rowValidator) ValidateRow(ctx context.Context, rv ports.RowValidation) error {
	in := rowRequest{Kind: "row", Op: opName(rv.Op), Table: rv.Table, RowID: rv.RowID, OpIndex: rv.OpIndex,
		ActorID: rv.ActorID, Partition: rv.Partition, Row: renderRow(r.t, rv.Row), Stored: renderRow(r.t, rv.Stored)}
	return r.v.call(ctx, r.v.row, in, false)
}

type commitValidator struct{ v *Validators }

func (c commitValidator) ValidateCommit(ctx context.Context, cv ports.CommitValidation) error {
	in := commitRequest{Kind: "commit", ClientID: cv.ClientID, ClientCommitID: cv.ClientCommitID,
		ActorID: cv.ActorID, Partition: cv.Partition, Operations: make([]operationRequest, len(cv.Operations))}
	for i, op := range cv.Operations {
		t := c.v.sch.Table(op.Table)
		in.Operations[i] = operationRequest{OpIndex: op.OpIndex, Op: opName(op.Op), Table: op.Table, RowID: op.RowID,
			Row: renderRow(t, op.Row), Stored: renderRow(t, op.Stored),
			StoredServerVersion: op.StoredServerVersion, NextServerVersion: op.NextServerVersion}
	}
	return c.v.call(ctx, c.v.commit, in, true)
}

// call runs one validation and maps its answer.
func (v *Validators) call(ctx context.Context, cb Callback, in any, attributed bool) error {
	err := v.c.Call(ctx, cb, in, func(status int, body []byte) (Outcome, error) {
		if !ok2xx(status) {
			return unexpected(status)
		}
		var ans validateAnswer
		if err := decodeStrict(body, &ans); err != nil {
			return OutcomeMalformed, err
		}
		switch {
		case ans.Accept != nil && *ans.Accept && ans.Reject == nil:
			return OutcomeOK, nil
		case ans.Accept == nil && ans.Reject != nil:
			return OutcomeRefused, v.rejection(ctx, cb, *ans.Reject, attributed)
		}
		return OutcomeMalformed, errors.New(`want {"accept": true} or {"reject": {...}}`)
	})
	var o *Outage
	if errors.As(err, &o) {
		return fmt.Errorf("%w: %w", ports.ErrValidatorUnavailable, err)
	}
	return err
}

// rejection builds the *ports.ValidationRejection a Go validator would
// return. A rejection the pipeline cannot take — a reserved code, details
// outside §6.3.1 — is a backend bug: like a Go validator whose
// NewValidationRejection failed, it rejects the commit with
// sync.constraint_violation, and the reason is logged here.
func (v *Validators) rejection(ctx context.Context, cb Callback, r rejection, attributed bool) error {
	var details *ssp2.RejectionDetails
	if len(r.Details) > 0 && string(r.Details) != "null" {
		d, err := ssp2.ParseRejectionDetails(r.Details)
		if err != nil {
			return v.unusable(ctx, cb, r.Code, fmt.Errorf("details: %w", err))
		}
		details = &d
	}
	idx := 0
	if attributed && r.OpIndex != nil {
		idx = *r.OpIndex
	}
	rej, err := ports.RejectOp(idx, r.Code, r.Message, details)
	if err != nil {
		return v.unusable(ctx, cb, r.Code, err)
	}
	return rej
}

func (v *Validators) unusable(ctx context.Context, cb Callback, code string, err error) error {
	fields := []zap.Field{zap.String("callback", cb.Name), zap.String("code", code), zap.Error(err)}
	if id := ports.RequestID(ctx); id != "" {
		fields = append(fields, zap.String("request_id", id))
	}
	v.log.Error("the validate callout's rejection is unusable; the commit is rejected as sync.constraint_violation", fields...)
	return fmt.Errorf("callout %s: unusable rejection %q: %w", cb.Name, code, err)
}

func opName(op commit.Op) string {
	if op == commit.OpDelete {
		return "delete"
	}
	return "upsert"
}

// renderRow renders a row as SPEC §11.1 renders row values: an object of
// the table's columns present in it, NULL as null, integers and floats
// as numbers (non-finite floats as null), json and blob_ref columns
// embedded parsed, bytes, crdt and encrypted columns as standard base64.
// A nil row is null. A value whose Go type does not fit its column (a
// hook contract breach) is rendered by its Go type.
func renderRow(t *schema.Table, row ports.RowValues) json.RawMessage {
	if row == nil || t == nil {
		return json.RawMessage("null")
	}
	vals := make([]rowcodec.Value, len(t.Columns))
	for i, c := range t.Columns {
		if v, ok := row[c.Name]; ok {
			vals[i] = cell(c.Type, v)
		}
	}
	return canonjson.Marshal(rowcodec.RenderRowValues(t.Columns, vals), "")
}

// cell turns a hook's plain value (ports.RowValues) back into the codec
// value of its column type.
func cell(typ schema.ColumnType, v any) rowcodec.Value {
	switch x := v.(type) {
	case nil:
		return rowcodec.Null()
	case string:
		switch typ {
		case schema.TypeJSON:
			return rowcodec.JSON(x)
		case schema.TypeBlobRef:
			return rowcodec.BlobRef(x)
		}
		return rowcodec.String(x)
	case int64:
		return rowcodec.Int(x)
	case float64:
		return rowcodec.Float(x)
	case bool:
		return rowcodec.Bool(x)
	case []byte:
		if typ == schema.TypeCRDT {
			return rowcodec.CRDT(x)
		}
		return rowcodec.Bytes(x)
	}
	return rowcodec.String(fmt.Sprint(v))
}
