package callout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// MaxValidateQueries bounds the queries one validate answer asks for.
const MaxValidateQueries = 8

// ValidateOptions configure the validators.
type ValidateOptions struct {
	Client *Client
	// Schema is the running schema: rows are rendered by its column types.
	Schema *schema.Schema
	// Timeout bounds one validation (--callout-validate-timeout): its
	// callout, or, when the backend asks for queries, both callouts and
	// the queries between them. The validator runs inside the push
	// transaction, holding its partition (on SQLite: the one writer), so
	// it is short.
	Timeout time.Duration
	// Queries runs the queries a backend asks for before it decides (SPEC
	// §6.7, §6.8 queryAuthoritative bound to the transaction): the
	// registered queries and descriptors of --operations. Without it
	// every asked query fails with operation.unknown.
	Queries ports.TxQueries
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
//
// Instead of deciding, the backend may ask for up to MaxValidateQueries
// registered queries (queryAuthoritative, which it cannot run itself:
// the rows it needs include the transaction's staged writes). They run
// on the push transaction and the backend is asked again, with the same
// request and their results; that answer must decide.
type Validators struct {
	c       *Client
	sch     *schema.Schema
	row     Callback
	commit  Callback
	timeout time.Duration
	queries ports.TxQueries
	log     *zap.Logger
}

// NewValidators builds the validate callouts.
func NewValidators(o ValidateOptions) (*Validators, error) {
	if o.Client == nil || o.Schema == nil || o.Timeout <= 0 {
		return nil, errors.New("callout: validators need a client, the schema and a timeout")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	// The header tells a backend it may ask for queries.
	features := http.Header{contract.HeaderFeatures: {contract.FeatureValidateQueries}}
	return &Validators{c: o.Client, sch: o.Schema, log: o.Log, timeout: o.Timeout, queries: o.Queries,
		row:    Callback{Name: "validate-row", Path: contract.PathValidate, Timeout: o.Timeout, Header: features},
		commit: Callback{Name: "validate-commit", Path: contract.PathValidate, Timeout: o.Timeout, Header: features},
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
	// QueryResults are present in the callout after an answer that asked
	// for queries, and only there.
	QueryResults []queryResult `json:"queryResults,omitempty"`
}

// commitRequest is the body of a whole-commit validation.
type commitRequest struct {
	Kind           string             `json:"kind"` // "commit"
	ClientID       string             `json:"clientId"`
	ClientCommitID string             `json:"clientCommitId"`
	ActorID        string             `json:"actorId"`
	Partition      string             `json:"partition"`
	Operations     []operationRequest `json:"operations"`
	QueryResults   []queryResult      `json:"queryResults,omitempty"`
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

// validateAnswer is {"accept": true}, {"reject": {...}} or, in the first
// callout, {"queries": [...]}.
type validateAnswer struct {
	Accept  *bool      `json:"accept"`
	Reject  *rejection `json:"reject"`
	Queries []queryAsk `json:"queries"`
}

// queryAsk is one query an answer asks for: a registered query's id or a
// descriptor's name, and its parameters.
type queryAsk struct {
	ID     string                     `json:"id"`
	Params map[string]json.RawMessage `json:"params"`
}

// queryResult is the outcome of one asked query, in the order asked: its
// table and rows, or the error that stopped it.
type queryResult struct {
	ID    string `json:"id"`
	Table string `json:"table,omitempty"`
	// Rows is a pointer so that no rows is [] and an error has none.
	Rows  *[]resultRow `json:"rows,omitempty"`
	Error *queryError  `json:"error,omitempty"`
}

type resultRow struct {
	RowID string          `json:"rowId"`
	Row   json.RawMessage `json:"row"`
}

type queryError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
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
	in := &rowRequest{Kind: "row", Op: opName(rv.Op), Table: rv.Table, RowID: rv.RowID, OpIndex: rv.OpIndex,
		ActorID: rv.ActorID, Partition: rv.Partition, Row: renderRow(r.t, rv.Row), Stored: renderRow(r.t, rv.Stored)}
	return r.v.call(ctx, validation{cb: r.v.row, in: in, results: &in.QueryResults, tx: rv.Tx})
}

type commitValidator struct{ v *Validators }

func (c commitValidator) ValidateCommit(ctx context.Context, cv ports.CommitValidation) error {
	in := &commitRequest{Kind: "commit", ClientID: cv.ClientID, ClientCommitID: cv.ClientCommitID,
		ActorID: cv.ActorID, Partition: cv.Partition, Operations: make([]operationRequest, len(cv.Operations))}
	for i, op := range cv.Operations {
		t := c.v.sch.Table(op.Table)
		in.Operations[i] = operationRequest{OpIndex: op.OpIndex, Op: opName(op.Op), Table: op.Table, RowID: op.RowID,
			Row: renderRow(t, op.Row), Stored: renderRow(t, op.Stored),
			StoredServerVersion: op.StoredServerVersion, NextServerVersion: op.NextServerVersion}
	}
	return c.v.call(ctx, validation{cb: c.v.commit, in: in, results: &in.QueryResults, tx: cv.Tx, attributed: true})
}

// validation is one validation's exchange: its callback, its request,
// where in the request the query results go, the transaction the queries
// read, and whether a rejection names its operation (a commit's).
type validation struct {
	cb         Callback
	in         any
	results    *[]queryResult
	tx         ports.TxReader
	attributed bool
}

// call runs one validation and maps its answer: one callout, or, when
// the backend asks for queries, the queries and a second callout with
// their results, all within the timeout.
func (v *Validators) call(ctx context.Context, x validation) error {
	start := v.c.now()
	var asks []queryAsk
	err := v.c.Call(ctx, x.cb, x.in, v.decide(ctx, x, &asks))
	if err != nil || asks == nil {
		return unavailableValidator(err)
	}
	left := v.timeout - v.c.now().Sub(start)
	if left <= 0 {
		return v.timedOut(ctx, x.cb, errors.New("--callout-validate-timeout passed before the asked queries ran"))
	}
	qctx, cancel := context.WithTimeout(ctx, left)
	results, failed, err := v.runQueries(qctx, x, asks)
	expired := qctx.Err() != nil
	cancel()
	switch {
	case err != nil && ctx.Err() == nil && expired:
		return v.timedOut(ctx, x.cb, fmt.Errorf("--callout-validate-timeout passed while the asked queries ran: %w", err))
	case err != nil:
		return err
	}
	left = v.timeout - v.c.now().Sub(start)
	if left <= 0 {
		return v.timedOut(ctx, x.cb, errors.New("--callout-validate-timeout passed while the asked queries ran"))
	}
	*x.results = results
	cb := x.cb
	cb.Timeout = left
	cb.Attributes = append(cb.Attributes[:len(cb.Attributes):len(cb.Attributes)],
		attrQueries.Int(len(results)), attrQueriesFailed.Int(failed))
	return unavailableValidator(v.c.Call(ctx, cb, x.in, v.decide(ctx, x, nil)))
}

// decide reads a validate answer. asks is where the first callout's
// answer may put the queries it asks for; the second callout's (asks
// nil) must accept or reject.
func (v *Validators) decide(ctx context.Context, x validation, asks *[]queryAsk) Decide {
	return func(status int, body []byte) (Outcome, error) {
		if !ok2xx(status) {
			return unexpected(status)
		}
		var ans validateAnswer
		if err := decodeStrict(body, &ans); err != nil {
			return OutcomeMalformed, err
		}
		switch {
		case ans.Accept != nil && *ans.Accept && ans.Reject == nil && ans.Queries == nil:
			return OutcomeOK, nil
		case ans.Accept == nil && ans.Reject != nil && ans.Queries == nil:
			return OutcomeRefused, v.rejection(ctx, x.cb, *ans.Reject, x.attributed)
		case ans.Accept == nil && ans.Reject == nil && ans.Queries != nil:
			if asks == nil {
				return OutcomeMalformed, errors.New("asked for queries again in the answer to their results; that answer must accept or reject")
			}
			if err := checkAsks(ans.Queries); err != nil {
				return OutcomeMalformed, err
			}
			*asks = ans.Queries
			return OutcomeQueries, nil
		}
		return OutcomeMalformed, errors.New(`want {"accept": true}, {"reject": {...}} or {"queries": [...]}`)
	}
}

// checkAsks bounds a request for queries: 1 to MaxValidateQueries, each
// naming its query.
func checkAsks(asks []queryAsk) error {
	if len(asks) == 0 || len(asks) > MaxValidateQueries {
		return fmt.Errorf(`"queries" asks for %d queries; want 1 to %d`, len(asks), MaxValidateQueries)
	}
	for i, q := range asks {
		if q.ID == "" {
			return fmt.Errorf(`query %d has no "id"`, i)
		}
	}
	return nil
}

// queryErrorCodes are the failures of an asked query the backend is
// answered with, query by query: what is wrong with the ask itself.
var queryErrorCodes = map[syncerr.Code]bool{
	syncerr.OperationUnknown:        true, // no such query or descriptor
	syncerr.OperationInvalid:        true, // a parameter missing, unknown or of the wrong type
	syncerr.OperationResultTooLarge: true, // more rows than the query's maxRows
}

// runQueries runs the asked queries, in order, on the push transaction
// and returns their results and how many failed. A query whose ask is
// wrong (queryErrorCodes) answers the backend its code; any other error
// — the storage's, the context's — ends the validation as it would a Go
// validator that got it.
func (v *Validators) runQueries(ctx context.Context, x validation, asks []queryAsk) ([]queryResult, int, error) {
	out := make([]queryResult, len(asks))
	failed := 0
	for i, q := range asks {
		out[i] = queryResult{ID: q.ID}
		table, rows, err := v.query(ctx, x.tx, q)
		var se *syncerr.Error
		switch {
		case err == nil:
			t := v.sch.Table(table)
			rendered := make([]resultRow, len(rows))
			for j, r := range rows {
				rendered[j] = resultRow{RowID: r.RowID, Row: renderRow(t, r.Values)}
			}
			out[i].Table, out[i].Rows = table, &rendered
			v.c.metrics.query(x.cb.Name, "rows")
		case ctx.Err() == nil && errors.As(err, &se) && queryErrorCodes[se.Code]:
			msg := se.Reason
			if msg == "" {
				msg = se.Message
			}
			out[i].Error = &queryError{Code: string(se.Code), Message: msg}
			failed++
			v.c.metrics.query(x.cb.Name, string(se.Code))
		default:
			return nil, 0, fmt.Errorf("callout %s: query %q: %w", x.cb.Name, q.ID, err)
		}
	}
	return out, failed, nil
}

// query runs one asked query: its table and rows.
func (v *Validators) query(ctx context.Context, tx ports.TxReader, q queryAsk) (string, []ports.CandidateRow, error) {
	table, ok := "", false
	if v.queries != nil {
		table, ok = v.queries.QueryTable(q.ID)
	}
	if !ok {
		return "", nil, syncerr.Newf(syncerr.OperationUnknown, "no query or descriptor %q is registered (--operations)", q.ID)
	}
	params, err := queryParams(q.Params)
	if err != nil {
		return "", nil, err
	}
	rows, err := v.queries.QueryInTx(ctx, tx, q.ID, params)
	return table, rows, err
}

// queryParams types an asked query's parameters as QueryInTx takes them:
// a string, a boolean, a number written without fraction or exponent
// that fits 64 bits as an integer, any other finite number as a float.
// The query's own types then bind them (an integer column takes 3.0).
func queryParams(raw map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(raw))
	for name, r := range raw {
		r = bytes.TrimSpace(r)
		text := string(r)
		switch {
		case text == "true" || text == "false":
			out[name] = text == "true"
		case len(r) > 0 && r[0] == '"':
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return nil, syncerr.Newf(syncerr.OperationInvalid, "parameter %q: %v", name, err)
			}
			out[name] = s
		case len(r) > 0 && (r[0] == '-' || (r[0] >= '0' && r[0] <= '9')):
			if n, err := strconv.ParseInt(text, 10, 64); err == nil {
				out[name] = n
				continue
			}
			f, err := strconv.ParseFloat(text, 64)
			if err != nil || math.IsInf(f, 0) {
				return nil, syncerr.Newf(syncerr.OperationInvalid, "parameter %q: %s is not a finite number", name, text)
			}
			out[name] = f
		default:
			return nil, syncerr.Newf(syncerr.OperationInvalid, "parameter %q: want a string, a number or a boolean", name)
		}
	}
	return out, nil
}

// timedOut is a validation whose time ran out between its callouts: an
// outage like a callout's own timeout.
func (v *Validators) timedOut(ctx context.Context, cb Callback, err error) error {
	o := &Outage{Callback: cb.Name, Outcome: OutcomeTimeout, Err: err}
	v.c.logOutage(ctx, cb, OutcomeTimeout, o)
	return unavailableValidator(o)
}

// unavailableValidator marks an outage as the validator's: the push fails
// retryable, unapplied. Other errors are returned as they are.
func unavailableValidator(err error) error {
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
