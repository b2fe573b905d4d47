package rules

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/commit"
	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/ports"
)

// reactionPlanner runs the reaction rules over an accepted commit's
// operations.
type reactionPlanner struct {
	r       *Rules
	rules   []*reactionRule
	byTable map[string][]*reactionRule
}

var _ ports.ReactionPlanner = (*reactionPlanner)(nil)

type reactionRule struct {
	id, name, table        string
	insert, update, delete bool
	// when and key are nil when the rule has none.
	when, key   *evaluable
	payload     evaluable
	typ         string
	version     int32
	maxAttempts int
}

// PlanReactions implements ports.ReactionPlanner: for each operation in
// commit order, each rule of its table in file order whose on and when
// hold plans one reaction. A key planned already in the commit plans
// nothing more (the first wins). A rule that cannot decide or gives a
// payload out of bounds fails the commit's push as a server failure,
// logged; the client retries it.
func (p *reactionPlanner) PlanReactions(ctx context.Context, c ports.CommitValidation) ([]ports.PlannedReaction, error) {
	var out []ports.PlannedReaction
	var seen map[string]bool
	var ops []any
	for _, o := range c.Operations {
		rules := p.byTable[o.Table]
		if len(rules) == 0 {
			continue
		}
		if ops == nil {
			ops = opValues(c.Operations)
		}
		act := &reactionActivation{activation: activation{op: opName(o.Op), rowID: types.String(o.RowID),
			row: rowMap(o.Row), stored: rowMap(o.Stored), ops: ops, clientID: types.String(c.ClientID),
			clientCommitID: types.String(c.ClientCommitID), actor: types.String(c.ActorID), partition: types.String(c.Partition),
			db: p.r.db(ctx, c.Tx)}, opIndex: types.Int(o.OpIndex)}
		for _, rule := range rules {
			if !rule.plans(o) {
				continue
			}
			if rule.when != nil {
				ok, err := rule.when.evalBool(ctx, act)
				if err != nil {
					return nil, p.failed(ctx, rule.when, c.Partition, err)
				}
				if !ok {
					continue
				}
			}
			key, err := rule.keyOf(ctx, act, o)
			if err != nil {
				return nil, p.failed(ctx, rule.key, c.Partition, err)
			}
			if seen[key] {
				continue
			}
			if len(out) == dompush.MaxReactionsPerCommit {
				return nil, p.failed(ctx, &rule.payload, c.Partition, errTooManyReactions)
			}
			v, err := rule.payload.eval(ctx, act)
			if err != nil {
				return nil, p.failed(ctx, &rule.payload, c.Partition, err)
			}
			payload, err := payloadJSON(v)
			if err != nil {
				return nil, p.failed(ctx, &rule.payload, c.Partition, err)
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[key] = true
			out = append(out, ports.PlannedReaction{Key: key, Type: rule.typ, Version: rule.version,
				Payload: payload, MaxAttempts: rule.maxAttempts})
		}
	}
	return out, nil
}

// plans reports whether the rule's on names the operation's kind: an
// upsert of a row not stored before is an insert, of a stored one an
// update.
func (rule *reactionRule) plans(o ports.OperationEvidence) bool {
	switch {
	case o.Op == commit.OpDelete:
		return rule.delete
	case o.Stored == nil:
		return rule.insert
	}
	return rule.update
}

// keyOf is the reaction's key within the commit: the rule's name, a
// colon, and the key expression's value or, without one,
// "<table>:<row id>:<operation index>", unique within the commit.
func (rule *reactionRule) keyOf(ctx context.Context, act *reactionActivation, o ports.OperationEvidence) (string, error) {
	if rule.key == nil {
		return reactionKey(rule.name, rule.table+":"+o.RowID+":"+strconv.Itoa(o.OpIndex)), nil
	}
	v, err := rule.key.eval(ctx, act)
	if err != nil {
		return "", err
	}
	s, ok := v.(types.String)
	if !ok {
		return "", fmt.Errorf("the key gave a %s, not a string", v.Type().TypeName())
	}
	return reactionKey(rule.name, string(s)), nil
}

// reactionKey joins a rule's name and its key; one longer than a
// record's key may be (a long row id) carries the SHA-256 of its part
// instead, which keeps it deterministic and unique.
func reactionKey(name, part string) string {
	k := name + ":" + part
	if len(k) <= dompush.MaxReactionKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(part))
	return name + ":sha256:" + hex.EncodeToString(sum[:])
}

// errTooManyReactions is a commit for which the rules plan more
// reactions than a commit may have.
var errTooManyReactions = fmt.Errorf("the commit plans more than %d reactions", dompush.MaxReactionsPerCommit)

// payloadError is a payload that cannot be a reaction's: its message
// names the problem, never a value.
type payloadError struct{ msg string }

func (e *payloadError) Error() string { return e.msg }

// failed logs a reaction rule that could not plan (its file, line and
// name, and why; CEL's text, which may quote row values, at debug only)
// and returns it as a *RuleError, which fails the push. A context error
// passes through as is.
func (p *reactionPlanner) failed(ctx context.Context, e *evaluable, partition string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	cause := "evaluation error"
	var pe *payloadError
	switch {
	case errors.Is(err, errCostLimit):
		cause = fmt.Sprintf("cost limit %d exceeded", p.r.costLimit)
	case errors.Is(err, errTooManyReactions), errors.As(err, &pe):
		cause = err.Error()
	}
	fields := []zap.Field{zap.String("rules_file", p.r.file), zap.Int("line", e.line), zap.String("rule", e.id),
		zap.String("partition", partition), zap.String("cause", cause)}
	p.r.log.Error("reaction rule failed: the push fails, the client retries it", fields...)
	p.r.log.Debug("reaction rule failed: evaluation detail", append(fields, zap.Error(err))...)
	return &RuleError{File: p.r.file, Line: e.line, Rule: e.id, Cause: err}
}

// payloadJSON turns a payload rule's value into the reaction's plain
// JSON: a map with string keys at the top, at most dompush.MaxReactionPayloadDepth
// levels deep and dompush.MaxReactionPayloadBytes long. Bytes become base64 text,
// timestamps and durations their CEL string() text.
func payloadJSON(v ref.Val) ([]byte, error) {
	if _, ok := v.(traits.Mapper); !ok {
		return nil, &payloadError{fmt.Sprintf("the payload is a %s, not a map", v.Type().TypeName())}
	}
	plain, err := plainJSON(v, 1)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(plain)
	if err != nil {
		return nil, &payloadError{"the payload is not JSON: " + err.Error()}
	}
	if len(b) > dompush.MaxReactionPayloadBytes {
		return nil, &payloadError{fmt.Sprintf("the payload is %d bytes of JSON, at most %d", len(b), dompush.MaxReactionPayloadBytes)}
	}
	return b, nil
}

// plainJSON converts a CEL value to what encoding/json writes; depth
// is the nesting level of a map or list at v.
func plainJSON(v ref.Val, depth int) (any, error) {
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return uint64(x), nil
	case types.Double:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &payloadError{"the payload holds a NaN or infinite number, which JSON lacks"}
		}
		return f, nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(x), nil
	case types.Timestamp, types.Duration:
		// As CEL's string() writes them.
		if s, ok := x.ConvertToType(types.StringType).(types.String); ok {
			return string(s), nil
		}
	case *types.Optional:
		if !x.HasValue() {
			return nil, nil
		}
		return plainJSON(x.GetValue(), depth)
	case traits.Mapper:
		if depth > dompush.MaxReactionPayloadDepth {
			return nil, &payloadError{fmt.Sprintf("the payload is deeper than %d levels", dompush.MaxReactionPayloadDepth)}
		}
		out := map[string]any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, &payloadError{fmt.Sprintf("the payload has a %s map key; JSON object keys are strings", k.Type().TypeName())}
			}
			e, err := plainJSON(x.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		if depth > dompush.MaxReactionPayloadDepth {
			return nil, &payloadError{fmt.Sprintf("the payload is deeper than %d levels", dompush.MaxReactionPayloadDepth)}
		}
		out := []any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			e, err := plainJSON(it.Next(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case *types.Err:
		return nil, x
	}
	return nil, &payloadError{fmt.Sprintf("the payload holds a %s, which is not JSON", v.Type().TypeName())}
}

// reactionActivation binds a reaction rule's variables: a row rule's,
// the commit's and the operation's index.
type reactionActivation struct {
	activation
	opIndex types.Int
}

func (a *reactionActivation) ResolveName(name string) (any, bool) {
	if name == "opIndex" {
		return a.opIndex, true
	}
	return a.activation.ResolveName(name)
}

func (a *reactionActivation) Parent() interpreter.Activation { return nil }
