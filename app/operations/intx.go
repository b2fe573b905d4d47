package operations

import (
	"context"
	"fmt"
	"sort"

	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

var _ ports.TxQueries = (*Registry)(nil)

// QueryTable implements ports.TxQueries: the table the query id (or
// Query.Name) reads, as QueryInTx finds the query.
func (r *Registry) QueryTable(id string) (string, bool) {
	reg := r.inTx(id)
	if reg == nil {
		return "", false
	}
	return reg.plan.Table().Name, true
}

// inTx finds the query QueryInTx runs: by operation id, then by name.
func (r *Registry) inTx(id string) *registered {
	if r == nil {
		return nil
	}
	if reg := r.queries[id]; reg != nil {
		return reg
	}
	return r.names[id]
}

// QueryInTx runs the registered query id (or Query.Name, such as a
// generated descriptor's name) on a push transaction's reader,
// for row and commit validators (SPEC §6.7, §6.8: queryAuthoritative
// bound to the transaction). It reads on the transaction's connection
// and sees the commit's staged writes, selects within the commit's
// partition without a caller's scopes (validators are server code), and
// refuses a result past the query's maxRows with
// operation.result_too_large rather than deciding on part of it. Params
// are typed as for a request (string, int64, int, float64, bool).
func (r *Registry) QueryInTx(ctx context.Context, tx ports.TxReader, id string, params map[string]any) ([]ports.CandidateRow, error) {
	reg := r.inTx(id)
	if reg == nil {
		return nil, syncerr.Newf(syncerr.OperationUnknown, "no query operation %q", id)
	}
	v, err := paramsValue(params)
	if err != nil {
		return nil, err
	}
	conds, err := reg.plan.Bind(v)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryAuthoritative(ctx, ports.AuthoritativeQuery{Table: reg.plan.Table().Name, Where: conds,
		OrderBy: reg.plan.OrderBy(), Limit: reg.plan.FetchLimit()})
	if err != nil {
		return nil, err
	}
	if len(rows) > reg.plan.MaxRows() {
		return nil, syncerr.Newf(syncerr.OperationResultTooLarge, "query %q has more than %d rows", id, reg.plan.MaxRows())
	}
	return rows, nil
}

func paramsValue(p map[string]any) (opdomain.Value, error) {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fields := make([]opdomain.Field, 0, len(p))
	for _, k := range keys {
		var v opdomain.Value
		var err error
		switch x := p[k].(type) {
		case string:
			v, err = opdomain.String(x)
		case int64:
			v = opdomain.Integer(x)
		case int:
			v = opdomain.Integer(int64(x))
		case float64:
			v, err = opdomain.Number(x)
		case bool:
			v = opdomain.Bool(x)
		default:
			err = fmt.Errorf("parameter %q: unsupported type %T", k, x)
		}
		if err != nil {
			return opdomain.Value{}, syncerr.Wrap(syncerr.OperationInvalid, err)
		}
		fields = append(fields, opdomain.Field{Key: k, Value: v})
	}
	return opdomain.Object(fields...)
}
