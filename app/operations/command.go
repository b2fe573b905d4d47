package operations

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/syncd-dev/syncd/app/push"
	"github.com/syncd-dev/syncd/domain/canonjson"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Command is a registered server-authoritative command (REMOTE.md §3):
// custom code that plans one ordinary commit.
type Command struct {
	ID string
	// Authorize is mandatory: false is operation.forbidden, an error
	// operation.execution_failed. The caller's write scopes are resolved
	// too and authorize every row the command writes, as for a push.
	Authorize func(ctx context.Context, who AuthContext, params opdomain.Value) (bool, error)
	// Run plans the commit inside the push transaction, after the
	// partition lock and the idempotency re-check; an applied retry never
	// runs it again. It returns one or more mutations and must have no
	// external side effects (a domain event row may ride the commit; other
	// work belongs to a durable reaction). An error fails the request and
	// stores nothing: a *syncerr.Error with an exposed code is answered
	// with it, anything else with operation.execution_failed.
	Run func(ctx context.Context, c CommandContext, params opdomain.Value) ([]Mutation, error)
}

// CommandContext is what a command's Run sees.
type CommandContext struct {
	AuthContext
	OperationID string
	RequestID   string
	// GetRow reads a row of the push transaction's candidate state, nil
	// when absent or when the caller's resolved scopes do not authorize a
	// write to it (command reads return only authorized rows).
	GetRow func(ctx context.Context, table, rowID string) (ports.RowValues, error)
	// ScanRowsByIndex is the trusted exact lookup through a declared index
	// (SPEC §6.8), over the candidate state: unlike GetRow it is not
	// restricted by the caller's scopes, so a command must not let the
	// caller choose the table, the index or the values unchecked.
	ScanRowsByIndex func(ctx context.Context, q ports.IndexScan) ([]ports.CandidateRow, error)
}

// Mutation is one row write a command returns.
type Mutation struct {
	Table string
	// Delete deletes RowID. Otherwise the mutation is a full-row upsert:
	// Values names every column of the table (nil, string, int64,
	// float64, bool or []byte; json and blob_ref values as their JSON
	// text), and the row id is the rendering of its primary key.
	Delete bool
	RowID  string
	Values map[string]any
}

// CommandPusher runs a command's commit through the push pipeline
// (*push.Pipeline).
type CommandPusher interface {
	PushCommand(ctx context.Context, c push.Command) (*ssp2.PushResult, error)
}

type registeredCommand struct{ c Command }

func (s *Service) runCommand(ctx context.Context, id ports.Identity, req opdomain.Request, reg *registeredCommand) ([]byte, error) {
	who := AuthContext{ActorID: id.ActorID, Partition: id.Partition, ClientID: req.ClientID}
	// 5. The command's own authorization, then the caller's write scopes.
	allowed, err := reg.c.Authorize(ctx, who, req.Params)
	if err != nil {
		return nil, syncerr.Wrap(syncerr.OperationExecFailed, err)
	}
	if !allowed {
		return nil, syncerr.Newf(syncerr.OperationForbidden, "authorize refused command %q", reg.c.ID)
	}
	grant, err := s.resolve(ctx, who)
	if err != nil {
		return nil, err
	}
	if s.o.Pusher == nil {
		return nil, syncerr.Newf(syncerr.OperationStorage, "no push pipeline for commands")
	}
	res := scopes.Granted(grant)
	// 6. The ordinary push under the command's idempotency identity.
	clientID, commitID := opdomain.CommandIdentity(id.ActorID, req.ClientID, reg.c.ID, req.RequestID)
	result, err := s.o.Pusher.PushCommand(ctx, push.Command{
		Identity: id, ClientID: clientID, ClientCommitID: commitID, Scopes: res,
		Plan: func(ctx context.Context, r ports.TxReader) ([]ssp2.PushOperation, error) {
			cc := CommandContext{AuthContext: who, OperationID: reg.c.ID, RequestID: req.RequestID,
				GetRow: func(ctx context.Context, table, rowID string) (ports.RowValues, error) {
					return s.authorizedRow(ctx, r, res, table, rowID)
				},
				ScanRowsByIndex: r.ScanRowsByIndex}
			muts, err := reg.c.Run(ctx, cc, req.Params)
			if err != nil {
				if pub := syncerr.Public(err); pub.Code != syncerr.InternalError {
					return nil, err
				}
				return nil, syncerr.Wrap(syncerr.OperationExecFailed, err)
			}
			return s.commandOperations(muts)
		},
	})
	if err != nil {
		return nil, err
	}
	return encodeCommandResult(reg.c.ID, req.RequestID, result)
}

// authorizedRow is a command's GetRow: the candidate row when the grant
// authorizes a write to it (SPEC §3.4), else nil.
func (s *Service) authorizedRow(ctx context.Context, r ports.TxReader, res scopes.Resolution, table, rowID string) (ports.RowValues, error) {
	t := s.o.Schema.Table(table)
	if t == nil {
		return nil, syncerr.Newf(syncerr.OperationInvalid, "command read of unknown table %q", table)
	}
	row, err := r.GetRow(ctx, table, rowID)
	if err != nil || row == nil {
		return nil, err
	}
	stored := scopes.Collect(t, func(col string) (string, bool) { return scopes.RenderValue(row.Values[col]) })
	if scopes.AuthorizeWrite(t, stored, res) != nil {
		return nil, nil
	}
	return row.Values, nil
}

// commandOperations turns mutations into push operations: full-row
// upserts (every column named, unversioned: the command is authoritative)
// and deletes. An empty list, an unknown table or column, a missing
// column, a value of the wrong type or an empty row id is
// operation.invalid_request.
func (s *Service) commandOperations(muts []Mutation) ([]ssp2.PushOperation, error) {
	if len(muts) == 0 {
		return nil, syncerr.Newf(syncerr.OperationInvalid, "command produced no mutations")
	}
	ops := make([]ssp2.PushOperation, len(muts))
	for i, m := range muts {
		t := s.o.Schema.Table(m.Table)
		if t == nil {
			return nil, syncerr.Newf(syncerr.OperationInvalid, "command targets unknown table %q", m.Table)
		}
		if m.Delete {
			if m.RowID == "" {
				return nil, syncerr.Newf(syncerr.OperationInvalid, "command delete on %q has an empty row id", m.Table)
			}
			ops[i] = ssp2.PushOperation{Table: t.Name, RowID: m.RowID, Op: ssp2.OpDelete}
			continue
		}
		for name := range m.Values {
			if t.ColumnIndex(name) < 0 {
				return nil, syncerr.Newf(syncerr.OperationInvalid, "command upsert names unknown column %q of %q", name, m.Table)
			}
		}
		vals := make([]rowcodec.Value, len(t.Columns))
		for k, c := range t.Columns {
			v, ok := m.Values[c.Name]
			if !ok {
				return nil, syncerr.Newf(syncerr.OperationInvalid, "command upsert of %q must name every column; %q is missing", m.Table, c.Name)
			}
			cell, err := cellValue(c, v)
			if err != nil {
				return nil, syncerr.Newf(syncerr.OperationInvalid, "command upsert of %q, column %q: %v", m.Table, c.Name, err)
			}
			vals[k] = cell
		}
		rowID, ok := scopes.RenderValue(m.Values[t.PrimaryKey])
		if !ok || (m.RowID != "" && m.RowID != rowID) {
			return nil, syncerr.Newf(syncerr.OperationInvalid, "command upsert of %q needs a non-empty primary key matching its row id", m.Table)
		}
		payload, err := rowcodec.New(t).AppendSparse(nil, vals)
		if err != nil {
			return nil, syncerr.Wrap(syncerr.OperationInvalid, err)
		}
		ops[i] = ssp2.PushOperation{Table: t.Name, RowID: rowID, Op: ssp2.OpUpsert, Payload: payload}
	}
	return ops, nil
}

// cellValue types a Go value for column c.
func cellValue(c schema.Column, v any) (rowcodec.Value, error) {
	if v == nil {
		return rowcodec.Null(), nil
	}
	typ := c.Type
	switch x := v.(type) {
	case string:
		switch typ {
		case schema.TypeString:
			return rowcodec.String(x), nil
		case schema.TypeJSON:
			if !canonjson.ValidString(x) {
				return rowcodec.Value{}, errors.New("not a JSON document")
			}
			return rowcodec.JSON(x), nil
		case schema.TypeBlobRef:
			return rowcodec.BlobRef(x), nil
		}
	case int64:
		if typ == schema.TypeInteger {
			return rowcodec.Int(x), nil
		}
	case int:
		if typ == schema.TypeInteger {
			return rowcodec.Int(int64(x)), nil
		}
	case float64:
		if typ == schema.TypeFloat && !math.IsNaN(x) && !math.IsInf(x, 0) {
			return rowcodec.Float(x), nil
		}
	case bool:
		if typ == schema.TypeBoolean {
			return rowcodec.Bool(x), nil
		}
	case []byte:
		switch typ {
		case schema.TypeBytes:
			return rowcodec.Bytes(x), nil
		case schema.TypeCRDT:
			return rowcodec.CRDT(x), nil
		}
	}
	return rowcodec.Value{}, fmt.Errorf("%T is not a %s value", v, typ)
}

// encodeCommandResult maps the push result to the command response.
func encodeCommandResult(opID, requestID string, r *ssp2.PushResult) ([]byte, error) {
	out := opdomain.CommandResult{OperationID: opID, RequestID: requestID}
	switch r.Status {
	case ssp2.PushApplied:
		out.Status, out.CommitSeq = opdomain.CommandApplied, r.CommitSeq
	case ssp2.PushCached:
		out.Status, out.CommitSeq = opdomain.CommandCached, r.CommitSeq
	default:
		out.Status = opdomain.CommandRejected
	}
	for _, res := range r.Results {
		v, err := opResultValue(res)
		if err != nil {
			return nil, syncerr.Wrap(syncerr.OperationExecFailed, err)
		}
		out.Results = append(out.Results, v)
	}
	return opdomain.EncodeCommandResult(out)
}

// opResultValue is one operation result in the push frame's shape:
// {opIndex, status} for applied; code, message, serverVersion, serverRow
// and conflictColumns for a conflict; code, message and retryable for an
// error.
func opResultValue(r ssp2.OpResult) (opdomain.Value, error) {
	idx, _ := opdomain.SafeNumber(int64(r.OpIndex))
	f := func(k string, v opdomain.Value) opdomain.Field { return opdomain.Field{Key: k, Value: v} }
	text := func(s string) opdomain.Value { v, _ := opdomain.String(s); return v }
	fields := []opdomain.Field{f("opIndex", idx)}
	switch r.Status {
	case ssp2.OpApplied:
		fields = append(fields, f("status", text("applied")))
	case ssp2.OpConflict:
		sv, ok := opdomain.SafeNumber(r.ServerVersion)
		if !ok {
			return opdomain.Value{}, fmt.Errorf("server version %d", r.ServerVersion)
		}
		fields = append(fields, f("status", text("conflict")), f("code", text(r.Code)), f("message", text(r.Message)),
			f("serverVersion", sv), f("serverRow", opdomain.Bytes(r.ServerRow)))
		if len(r.ConflictColumns) > 0 {
			fields = append(fields, f("conflictColumns", opdomain.Bytes(r.ConflictColumns)))
		}
	default:
		fields = append(fields, f("status", text("error")), f("code", text(r.Code)), f("message", text(r.Message)),
			f("retryable", opdomain.Bool(r.Retryable)))
	}
	return opdomain.Object(fields...)
}
