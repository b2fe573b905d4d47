package push

import (
	"context"
	"fmt"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// DefaultCascadeLimit caps the operations reference enforcement may append
// to one commit (SPEC §6.11, the reference default).
const DefaultCascadeLimit = 1000

// Reference violation reasons (SPEC §6.11).
const (
	reasonMissingParent    = "missing_parent"
	reasonRestrictedDelete = "restricted_delete"
	reasonCascadeLimit     = "cascade_limit"
)

// stagedOp is a client operation that changed a row, kept for reference
// enforcement.
type stagedOp struct {
	opIndex int
	table   *schema.Table
	rowID   string
	del     bool
	// present and vals describe an upsert's payload and merged row; pk is
	// a deleted row's primary-key value.
	present []bool
	vals    []rowcodec.Value
	pk      any
}

// childRef is a declared reference seen from its parent table.
type childRef struct {
	child *schema.Table
	ref   schema.Reference
}

func childRefs(s *schema.Schema, parent string) []childRef {
	var out []childRef
	for _, t := range s.Tables {
		for _, r := range t.References {
			if r.ParentTable == parent {
				out = append(out, childRef{child: t, ref: r})
			}
		}
	}
	return out
}

func hasReferences(s *schema.Schema) bool {
	for _, t := range s.Tables {
		if len(t.References) > 0 {
			return true
		}
	}
	return false
}

func referenceTerm(opIndex int, reason string, fieldPaths []string, refs ...ssp2.ScopeValue) *termination {
	t := codeTerm(opIndex, syncerr.ReferenceViolation, "")
	d := ssp2.RejectionDetails{Reason: reason, FieldPaths: fieldPaths, References: refs}
	if n, err := d.Normalize(); err == nil {
		t.details = &n
	} else if n, err := (ssp2.RejectionDetails{Reason: reason}).Normalize(); err == nil {
		// A row id that is not a safe reference value stays out of the details.
		t.details = &n
	}
	return t
}

// enforceReferences checks declared references over the candidate state
// once every client operation is staged (SPEC §6.11): missing parents of
// staged upserts, then the delete rules of staged deletes, appending
// cascaded deletes and set-null upserts attributed to the originating
// client delete.
func (a *applier) enforceReferences(ctx context.Context) (*termination, error) {
	sch := a.b.Schema
	for _, op := range a.staged {
		if op.del || len(op.table.References) == 0 {
			continue
		}
		if row, err := a.tx.GetRow(ctx, op.table.Name, op.rowID); err != nil {
			return nil, fmt.Errorf("read row: %w", err)
		} else if row == nil {
			continue // deleted again later in the commit
		}
		for _, ref := range op.table.References {
			c := op.table.ColumnIndex(ref.Column)
			if c < 0 || !op.present[c] || op.vals[c].IsNull() {
				continue
			}
			parentID, ok := rowcodec.ScopeString(op.vals[c])
			if !ok {
				continue
			}
			parent, err := a.tx.GetRow(ctx, ref.ParentTable, parentID)
			if err != nil {
				return nil, fmt.Errorf("read parent: %w", err)
			}
			if parent == nil {
				return referenceTerm(op.opIndex, reasonMissingParent, []string{ref.Column},
					ssp2.ScopeValue{Key: "parent", Value: ref.ParentTable}, ssp2.ScopeValue{Key: "row", Value: parentID}), nil
			}
		}
	}
	type queued struct {
		origin int
		table  *schema.Table
		pk     any
	}
	var queue []queued
	visited := map[[2]string]bool{}
	for _, op := range a.staged {
		if op.del {
			queue = append(queue, queued{origin: op.opIndex, table: op.table, pk: op.pk})
			visited[[2]string{op.table.Name, op.rowID}] = true
		}
	}
	appended := 0
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, cr := range childRefs(sch, q.table.Name) {
			children, err := a.tx.Lookup(ctx, ports.RowLookup{Table: cr.child.Name,
				Equals: map[string]any{cr.ref.Column: q.pk}, Limit: DefaultCascadeLimit - appended + 1})
			if err != nil {
				return nil, fmt.Errorf("find children of %s: %w", q.table.Name, err)
			}
			if len(children) == 0 {
				continue
			}
			if cr.ref.OnDelete != schema.OnDeleteCascade && cr.ref.OnDelete != schema.OnDeleteSetNull {
				return referenceTerm(q.origin, reasonRestrictedDelete, nil, ssp2.ScopeValue{Key: "child", Value: cr.child.Name}), nil
			}
			for _, child := range children {
				key := [2]string{cr.child.Name, child.RowID}
				if cr.ref.OnDelete == schema.OnDeleteCascade && visited[key] {
					continue
				}
				appended++
				if appended > DefaultCascadeLimit {
					return referenceTerm(q.origin, reasonCascadeLimit, nil), nil
				}
				var term *termination
				var pk any
				if cr.ref.OnDelete == schema.OnDeleteCascade {
					visited[key] = true
					pk, term, err = a.cascadeDelete(ctx, q.origin, cr.child, child)
					if err == nil && term == nil {
						queue = append(queue, queued{origin: q.origin, table: cr.child, pk: pk})
					}
				} else {
					term, err = a.setNull(ctx, q.origin, cr.child, child, cr.ref.Column)
				}
				if err != nil || term != nil {
					return term, err
				}
			}
		}
	}
	return nil, nil
}

// synthetic returns the next appended operation's index and remembers the
// client operation it came from.
func (a *applier) synthetic(origin int) int {
	idx := len(a.pc.Operations) + len(a.origins)
	a.origins = append(a.origins, origin)
	return idx
}

func (a *applier) cascadeDelete(ctx context.Context, origin int, t *schema.Table, child commit.Row) (any, *termination, error) {
	vals, err := a.b.codec(t).DecodeRow(child.Payload, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("decode row %s/%s: %w", t.Name, child.RowID, err)
	}
	stored := rowValues(t, vals)
	if term, err := a.validateRow(ctx, ports.RowValidation{Op: commit.OpDelete, Table: t.Name, RowID: child.RowID,
		OpIndex: origin, Stored: stored}); term != nil || err != nil {
		return nil, term, err
	}
	if err := a.tx.DeleteRow(ctx, t.Name, child.RowID, origin); err != nil {
		return nil, nil, err
	}
	a.changes = append(a.changes, commit.Change{Table: t.Name, RowID: child.RowID, Op: commit.OpDelete,
		Scopes: copyScopes(child.Scopes)})
	a.ops = append(a.ops, ports.OperationEvidence{OpIndex: a.synthetic(origin), Op: commit.OpDelete,
		Table: t.Name, RowID: child.RowID, Stored: stored, StoredServerVersion: child.Version})
	return vals[t.PKIndex].Plain(), nil, nil
}

func (a *applier) setNull(ctx context.Context, origin int, t *schema.Table, child commit.Row, column string) (*termination, error) {
	codec := a.b.codec(t)
	storedVals, err := codec.DecodeRow(child.Payload, nil)
	if err != nil {
		return nil, fmt.Errorf("decode row %s/%s: %w", t.Name, child.RowID, err)
	}
	n := len(t.Columns)
	cv, err := commit.ExpandColumnVersions(child.ColumnVersions, n, child.Version)
	if err != nil {
		return nil, fmt.Errorf("row %s/%s: %w", t.Name, child.RowID, err)
	}
	c := t.ColumnIndex(column)
	version := child.Version + 1
	merged := append([]rowcodec.Value(nil), storedVals...)
	merged[c] = rowcodec.Null()
	cv[c] = version
	payload, err := codec.AppendRow(nil, merged)
	if err != nil {
		return nil, fmt.Errorf("encode row %s/%s: %w", t.Name, child.RowID, err)
	}
	row, stored := rowValues(t, merged), rowValues(t, storedVals)
	if term, err := a.validateRow(ctx, ports.RowValidation{Op: commit.OpUpsert, Table: t.Name, RowID: child.RowID,
		OpIndex: origin, Row: row, Stored: stored}); term != nil || err != nil {
		return term, err
	}
	scopes := copyScopes(child.Scopes)
	if err := a.tx.UpsertRow(ctx, t.Name, ports.RowWrite{RowID: child.RowID, Version: version, Scopes: scopes,
		Payload: payload, ColumnVersions: commit.EncodeRowColumnVersions(cv, version), Values: cellValues(merged), OpIndex: origin}); err != nil {
		return nil, err
	}
	a.changes = append(a.changes, commit.Change{Table: t.Name, RowID: child.RowID, Op: commit.OpUpsert,
		RowVersion: version, Scopes: scopes, Row: payload})
	a.ops = append(a.ops, ports.OperationEvidence{OpIndex: a.synthetic(origin), Op: commit.OpUpsert, Table: t.Name,
		RowID: child.RowID, Row: row, Stored: stored, StoredServerVersion: child.Version, NextServerVersion: version})
	return nil, nil
}
