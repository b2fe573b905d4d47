package testcontrol

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf16"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// The declarative validator rules of the conformance plane (SPEC §6.7,
// §6.8), interpreted into the push pipeline's real hooks. The hooks are
// installed once per instance and read the rules of the moment, so
// installValidators replaces rules without rebuilding the pipeline.

// rule is one row rule of installValidators.
type rule struct {
	Kind        string          `json:"kind"`
	Column      string          `json:"column"`
	Max         int             `json:"max"`
	GuardColumn string          `json:"guardColumn"`
	GuardValue  json.RawMessage `json:"guardValue"`
	Code        string          `json:"code"`
}

// siblingRule is the commit rule of installCommitValidator.
type siblingRule struct {
	Kind               string          `json:"kind"`
	Table              string          `json:"table"`
	Column             string          `json:"column"`
	Equals             json.RawMessage `json:"equals"`
	SiblingRowIDSuffix string          `json:"siblingRowIdSuffix"`
	Code               string          `json:"code"`
}

type rules struct {
	mu     sync.RWMutex
	row    map[string][]rule // table → rules
	commit *siblingRule
}

// setRow replaces every row rule; an unknown kind or a reserved code is an
// error and changes nothing.
func (r *rules) setRow(specs []struct {
	Table string `json:"table"`
	Rule  rule   `json:"rule"`
}) error {
	m := map[string][]rule{}
	for _, s := range specs {
		switch s.Rule.Kind {
		case "maxLength", "immutableWhen":
		default:
			return fmt.Errorf("validator rule kind %q is not known", s.Rule.Kind)
		}
		if err := ports.CheckHostCode(s.Rule.Code); err != nil {
			return err
		}
		m[s.Table] = append(m[s.Table], s.Rule)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.row = m
	return nil
}

func (r *rules) setCommit(s *siblingRule) error {
	if s != nil {
		if s.Kind != "requireSiblingWhen" {
			return fmt.Errorf("commit validator kind %q is not known", s.Kind)
		}
		if err := ports.CheckHostCode(s.Code); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commit = s
	return nil
}

type rowValidator struct {
	table string
	rules *rules
}

func (v rowValidator) Table() string { return v.table }

func (v rowValidator) ValidateRow(_ context.Context, op ports.RowValidation) error {
	v.rules.mu.RLock()
	rs := v.rules.row[v.table]
	v.rules.mu.RUnlock()
	for _, r := range rs {
		if err := r.check(op); err != nil {
			return err
		}
	}
	return nil
}

func (r rule) check(op ports.RowValidation) error {
	if op.Row == nil { // deletes carry no row
		return nil
	}
	switch r.Kind {
	case "maxLength":
		s, ok := op.Row[r.Column].(string)
		// Length in UTF-16 code units, as the reference host measures it.
		if ok && len(utf16.Encode([]rune(s))) > r.Max {
			return reject(0, r.Code, fmt.Sprintf("%s exceeds %d characters", r.Column, r.Max),
				r.Column, "max_length_exceeded", "edit_fields")
		}
	case "immutableWhen":
		if op.Stored == nil || !sameValue(op.Stored[r.GuardColumn], r.GuardValue) {
			return nil
		}
		if !equalCells(op.Row[r.Column], op.Stored[r.Column]) {
			return reject(0, r.Code, fmt.Sprintf("%s is immutable in this state", r.Column),
				r.Column, "immutable_state", "keep_server")
		}
	}
	return nil
}

type commitValidator struct{ rules *rules }

func (v commitValidator) ValidateCommit(_ context.Context, c ports.CommitValidation) error {
	v.rules.mu.RLock()
	s := v.rules.commit
	v.rules.mu.RUnlock()
	if s == nil {
		return nil
	}
	for _, op := range c.Operations {
		if op.Table != s.Table || op.Row == nil || !sameValue(op.Row[s.Column], s.Equals) {
			continue
		}
		want := op.RowID + s.SiblingRowIDSuffix
		for _, o := range c.Operations {
			if o.Table == s.Table && o.RowID == want {
				return nil
			}
		}
		return reject(op.OpIndex, s.Code, "the aggregate needs a sibling operation in the same commit",
			s.Column, "missing_sibling_operation", "repair_aggregate")
	}
	return nil
}

func reject(opIndex int, code, msg, field, reason, action string) error {
	r, err := ports.RejectOp(opIndex, code, msg, &ssp2.RejectionDetails{
		FieldPaths: []string{field}, Reason: reason, RequiredAction: action})
	if err != nil {
		return err
	}
	return r
}

// sameValue compares a decoded cell with a driver JSON value: bytes as
// {"$bytes": hex}, the rest as their natural JSON form.
func sameValue(cell any, want json.RawMessage) bool {
	got, err := json.Marshal(cellJSON(cell))
	if err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func equalCells(a, b any) bool {
	if ab, ok := a.([]byte); ok {
		bb, ok := b.([]byte)
		return ok && bytes.Equal(ab, bb)
	}
	return a == b
}

// cellJSON is a decoded cell in the driver's JSON form.
func cellJSON(v any) any {
	if b, ok := v.([]byte); ok {
		return map[string]string{"$bytes": hex.EncodeToString(b)}
	}
	return v
}
