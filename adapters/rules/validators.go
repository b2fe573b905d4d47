package rules

import (
	"context"
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// rowValidator runs one table's rules in file order; the first that
// rejects decides.
type rowValidator struct {
	r     *Rules
	table string
	rules []*rowRule
}

var _ ports.RowValidator = (*rowValidator)(nil)

type rowRule struct {
	evaluable
	upsert, delete bool
	rej            ports.ValidationRejection
}

// Table implements ports.RowValidator.
func (v *rowValidator) Table() string { return v.table }

// ValidateRow implements ports.RowValidator: nil when every rule holds,
// the first false rule's rejection, or a *RuleError for a rule that
// could not decide.
func (v *rowValidator) ValidateRow(ctx context.Context, rv ports.RowValidation) error {
	act := &activation{op: opName(rv.Op), rowID: types.String(rv.RowID), row: rowMap(rv.Row), stored: rowMap(rv.Stored),
		actor: types.String(rv.ActorID), partition: types.String(rv.Partition), db: v.r.db(ctx, rv.Tx)}
	for _, rule := range v.rules {
		if (rv.Op == commit.OpUpsert && !rule.upsert) || (rv.Op == commit.OpDelete && !rule.delete) {
			continue
		}
		ok, err := rule.evalBool(ctx, act)
		if serr := act.db.storageErr(); serr != nil {
			return serr
		}
		if err != nil {
			return v.r.failed(ctx, &rule.evaluable, rv.Partition, err)
		}
		if !ok {
			rej := rule.rej
			return &rej
		}
	}
	return nil
}

// commitValidator runs the commit rules in file order; the first that
// rejects decides.
type commitValidator struct {
	r     *Rules
	rules []*commitRule
}

var _ ports.CommitValidator = (*commitValidator)(nil)

type commitRule struct {
	evaluable
	// opIndex, when set, picks the operation a rejection is attributed
	// to; without it, the first (0).
	opIndex *evaluable
	rej     ports.ValidationRejection
}

// ValidateCommit implements ports.CommitValidator.
func (v *commitValidator) ValidateCommit(ctx context.Context, c ports.CommitValidation) error {
	act := &activation{ops: opValues(c.Operations), clientID: types.String(c.ClientID),
		clientCommitID: types.String(c.ClientCommitID), actor: types.String(c.ActorID), partition: types.String(c.Partition),
		db: v.r.db(ctx, c.Tx)}
	for _, rule := range v.rules {
		ok, err := rule.evalBool(ctx, act)
		if serr := act.db.storageErr(); serr != nil {
			return serr
		}
		if err != nil {
			return v.r.failed(ctx, &rule.evaluable, c.Partition, err)
		}
		if ok {
			continue
		}
		rej := rule.rej
		if rule.opIndex != nil {
			idx, err := rule.opIndex.eval(ctx, act)
			if serr := act.db.storageErr(); serr != nil {
				return serr
			}
			if err == nil {
				i, isInt := idx.(types.Int)
				if !isInt {
					err = fmt.Errorf("opIndex gave a %s, not an int", idx.Type().TypeName())
				}
				rej.OpIndex = int(i)
			}
			if err != nil {
				return v.r.failed(ctx, rule.opIndex, c.Partition, err)
			}
		}
		return &rej
	}
	return nil
}

// db is the db variable of one evaluation inside a push.
func (r *Rules) db(ctx context.Context, tx ports.TxReader) *db {
	return &db{ctx: ctx, tx: tx, queries: r.queries}
}

// opName is an operation kind as rules see it.
func opName(op commit.Op) types.String {
	switch op {
	case commit.OpUpsert:
		return "upsert"
	case commit.OpDelete:
		return "delete"
	}
	return types.String(op.String())
}

// rowMap is a row as the object types read it; nil stays nil (null).
func rowMap(v ports.RowValues) map[string]any {
	if v == nil {
		return nil
	}
	return map[string]any(v)
}

// opValues lays out the commit's operations for the ops variable.
func opValues(ops []ports.OperationEvidence) []any {
	out := make([]any, len(ops))
	for i, o := range ops {
		m := map[string]any{"index": int64(o.OpIndex), "op": string(opName(o.Op)), "table": o.Table, "rowId": o.RowID,
			"row": nil, "stored": nil}
		if o.Row != nil {
			m["row"] = map[string]any(o.Row)
		}
		if o.Stored != nil {
			m["stored"] = map[string]any(o.Stored)
		}
		out[i] = m
	}
	return out
}

// orNull hands a row to CEL: a nil map must be a nil interface, which
// CEL reads as null (a typed nil map would read as an empty map).
func orNull(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// activation binds a rule's variables without a map per evaluation.
// Each environment declares only its own variables, so a rule never asks
// for one its kind does not set.
type activation struct {
	actor, partition         types.String
	op, rowID                types.String
	row, stored              map[string]any
	ops                      []any
	clientID, clientCommitID types.String
	claims                   map[string]any
	db                       *db
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "actor":
		return a.actor, true
	case "partition":
		return a.partition, true
	case "op":
		return a.op, true
	case "rowId":
		return a.rowID, true
	case "row":
		return orNull(a.row), true
	case "stored":
		return orNull(a.stored), true
	case "ops":
		return a.ops, true
	case "clientId":
		return a.clientID, true
	case "clientCommitId":
		return a.clientCommitID, true
	case "claims":
		return a.claims, true
	case "db":
		if a.db == nil {
			return nil, false
		}
		return a.db, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
