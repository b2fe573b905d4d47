package rules

import (
	"fmt"
	"math"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"gopkg.in/yaml.v3"

	dompush "github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/ports"
)

// This file reads and compiles the reactions section: rules that plan
// durable reactions (SPEC §6.9) for the operations of an accepted
// commit. planner.go runs them.

// maxReactionNameBytes bounds a reaction rule's name, so a key made
// from it always fits the record's 256 bytes (reactionKey).
const maxReactionNameBytes = 128

// maxReactionAttempts is the record's bound on attempts (SPEC §6.9).
const maxReactionAttempts = 100

// reactionSpec is one reaction rule as the file declares it.
type reactionSpec struct {
	// id names the rule in errors and logs: reactions/<name>.
	id, name string
	line     int
	table    string
	// tableLine is where the table is named.
	tableLine int
	// on: the operation kinds the rule plans for.
	insert, update, delete bool
	when, key              *expr
	payload                expr
	typ                    string
	version                int32
	maxAttempts            int
}

// reactions reads the list of reaction rules.
func (p *parser) reactions(v *yaml.Node) []reactionSpec {
	if v.Kind != yaml.SequenceNode {
		p.fail(v.Line, "", "reactions: want a list of rules")
		return nil
	}
	var out []reactionSpec
	names := map[string]bool{}
	for i, n := range v.Content {
		id := fmt.Sprintf("reactions[%d]", i)
		if n.Kind != yaml.MappingNode {
			p.fail(n.Line, id, "want a mapping with name, table, type and payload")
			continue
		}
		r, ok := p.reaction(n, id)
		if !ok {
			continue
		}
		if names[r.id] {
			p.fail(n.Line, r.id, "duplicate rule name in reactions")
			continue
		}
		names[r.id] = true
		out = append(out, r)
	}
	return out
}

func (p *parser) reaction(n *yaml.Node, id string) (reactionSpec, bool) {
	r := reactionSpec{id: id, line: n.Line, version: 1, insert: true, update: true, delete: true}
	before := len(p.errs)
	pairs := p.pairs(n)
	// The name first, so every other problem of the rule names it.
	for _, kv := range pairs {
		if kv[0].Value != "name" {
			continue
		}
		s, ok := p.str(kv[1], id, "name")
		switch {
		case !ok:
		case s == "" || strings.ContainsAny(s, "/ \t\n"):
			p.fail(kv[1].Line, id, fmt.Sprintf("name %q: want a non-empty name without spaces or slashes", s))
		case len(s) > maxReactionNameBytes:
			p.fail(kv[1].Line, id, fmt.Sprintf("name: at most %d bytes", maxReactionNameBytes))
		default:
			r.id, r.name = "reactions/"+s, s
		}
	}
	if r.name == "" && len(p.errs) == before {
		p.fail(n.Line, id, "name is required")
	}
	var haveTable, haveType, havePayload bool
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		switch k.Value {
		case "name":
		case "table":
			r.table, _ = p.str(v, r.id, "table")
			r.tableLine, haveTable = v.Line, true
		case "on":
			r.insert, r.update, r.delete = p.reactionOps(v, r.id)
		case "when":
			if e, ok := p.expr(v, r.id); ok {
				r.when = &e
			}
		case "type":
			haveType = true
			if typ, ok := p.str(v, r.id, "type"); ok {
				r.typ = typ
				if !dompush.ReactionType(typ) {
					p.fail(v.Line, r.id, fmt.Sprintf("type %q: want a code-like name (a letter, then letters, digits and . _ - : /) of at most %d bytes",
						typ, dompush.MaxReactionTypeBytes))
				}
			}
		case "version":
			if n, ok := p.integer(v); ok {
				if n < 1 || n > math.MaxInt32 {
					p.fail(v.Line, r.id, fmt.Sprintf("version %d: want a positive whole number", n))
				} else {
					r.version = int32(n)
				}
			}
		case "maxAttempts":
			if n, ok := p.integer(v); ok {
				if n < 1 || n > maxReactionAttempts {
					p.fail(v.Line, r.id, fmt.Sprintf("maxAttempts %d: want 1..%d", n, maxReactionAttempts))
				} else {
					r.maxAttempts = int(n)
				}
			}
		case "payload":
			r.payload, _ = p.expr(v, r.id)
			havePayload = true
		case "key":
			if e, ok := p.expr(v, r.id); ok {
				r.key = &e
			}
		default:
			p.fail(k.Line, r.id, fmt.Sprintf("unknown key %q (want name, table, on, when, type, version, payload, key or maxAttempts)", k.Value))
		}
	}
	for _, m := range []struct {
		have bool
		key  string
	}{{haveTable, "table"}, {haveType, "type"}, {havePayload, "payload"}} {
		if !m.have {
			p.fail(n.Line, r.id, m.key+" is required")
		}
	}
	return r, len(p.errs) == before
}

// reactionOps reads the operation kinds a reaction rule plans for:
// insert, update (an upsert of a row that is stored, or not), upsert
// (both) and delete.
func (p *parser) reactionOps(v *yaml.Node, rule string) (insert, update, del bool) {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		p.fail(v.Line, rule, "on: want a list of insert, update, upsert and delete")
		return true, true, true
	}
	for _, e := range v.Content {
		switch e.Value {
		case "insert":
			insert = true
		case "update":
			update = true
		case "upsert":
			insert, update = true, true
		case "delete":
			del = true
		default:
			p.fail(e.Line, rule, fmt.Sprintf("on: %q: want insert, update, upsert or delete", e.Value))
		}
	}
	return insert, update, del
}

// reactionEnv is what a reaction rule's expressions see: a row rule's
// variables for the rule's table, the commit's (ops, its ids), and the
// operation's index in the commit.
func reactionEnv(base *cel.Env, table string) (*cel.Env, error) {
	env, err := rowEnv(base, table)
	if err != nil {
		return nil, err
	}
	return env.Extend(
		cel.Variable("opIndex", cel.IntType),
		cel.Variable("ops", cel.ListType(cel.ObjectType(opTypeName))),
		cel.Variable("clientId", cel.StringType),
		cel.Variable("clientCommitId", cel.StringType),
	)
}

func (c *compiler) reactions(r *Rules, specs []reactionSpec) *reactionPlanner {
	pl := &reactionPlanner{r: r, byTable: map[string][]*reactionRule{}}
	envs := map[string]*cel.Env{}
	for _, s := range specs {
		if c.schema.Table(s.table) == nil {
			c.fail(&Error{File: c.file, Line: s.tableLine, Rule: s.id,
				Msg: fmt.Sprintf("table %q is not in the served schema (tables: %s)", s.table, strings.Join(c.tableNames(), ", "))})
			continue
		}
		env := envs[s.table]
		if env == nil {
			var err error
			if env, err = reactionEnv(c.tx, s.table); err != nil {
				c.fail(err)
				continue
			}
			envs[s.table] = env
		}
		rr := &reactionRule{id: s.id, name: s.name, table: s.table, insert: s.insert, update: s.update, delete: s.delete,
			typ: s.typ, version: s.version, maxAttempts: s.maxAttempts}
		ok := true
		one := func(suffix string, e expr, want func(*types.Type) string) *evaluable {
			prg, err := compile(env, c.file, s.id, e, c.costLimit, want)
			if err != nil {
				c.fail(err)
				ok = false
				return nil
			}
			c.checkDBCalls(prg.ast, c.file, s.id, e)
			return &evaluable{id: s.id + suffix, line: e.line, prg: prg.prg}
		}
		if s.when != nil {
			rr.when = one(" (when)", *s.when, wantWhen)
		}
		if s.key != nil {
			rr.key = one(" (key)", *s.key, wantKey)
		}
		if p := one(" (payload)", s.payload, wantPayload); p != nil {
			rr.payload = *p
		}
		if ok {
			pl.rules = append(pl.rules, rr)
			pl.byTable[s.table] = append(pl.byTable[s.table], rr)
		}
	}
	if len(pl.rules) == 0 {
		return nil
	}
	return pl
}

func (c *compiler) tableNames() []string {
	names := make([]string, len(c.schema.Tables))
	for i, t := range c.schema.Tables {
		names[i] = t.Name
	}
	return names
}

// A reaction rule's condition and key.
var (
	wantWhen = wantType(types.BoolType, "when")
	wantKey  = wantType(types.StringType, "key")
)

// wantPayload checks a reaction rule's payload: a map with string keys
// (a JSON object), or something that may be one at run time.
func wantPayload(t *types.Type) string {
	if t.IsExactType(types.DynType) {
		return ""
	}
	if t.Kind() == types.MapKind {
		if k := t.Parameters()[0]; k.IsExactType(types.StringType) || k.IsExactType(types.DynType) {
			return ""
		}
	}
	return fmt.Sprintf("payload must be a map with string keys (a JSON object), this one is a %s", t)
}

// ReactionPlanner returns the reaction rules' planner, nil without
// reaction rules.
func (r *Rules) ReactionPlanner() ports.ReactionPlanner {
	if r.reactions == nil {
		return nil
	}
	return r.reactions
}

// ReactionTypes are the types the reaction rules plan, in file order,
// each once.
func (r *Rules) ReactionTypes() []string {
	if r.reactions == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, rr := range r.reactions.rules {
		if !seen[rr.typ] {
			seen[rr.typ] = true
			out = append(out, rr.typ)
		}
	}
	return out
}

// ReactionRules is how many reaction rules the file has.
func (r *Rules) ReactionRules() int {
	if r.reactions == nil {
		return 0
	}
	return len(r.reactions.rules)
}
