package rules

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// FileVersion is the one version of the rules file format.
const FileVersion = 1

// Cost limits of one rule evaluation (CEL's runtime cost units).
const (
	DefaultCostLimit = 100_000
	MaxCostLimit     = 10_000_000
)

// Error is a problem with the rules file, found when it is loaded: it
// names the file, the line and, when it is about one, the rule.
type Error struct {
	File string
	Line int
	// Rule names the rule ("validators.todos/title-length",
	// "commitValidators/bulk-delete", "scopes"); empty for the file's
	// own structure.
	Rule string
	Msg  string
}

func (e *Error) Error() string {
	if e.Rule == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: rule %s: %s", e.File, e.Line, e.Rule, e.Msg)
}

// expr is one CEL expression of the file and where its text starts.
type expr struct {
	src string
	// line is the file line of the expression's first line; col the
	// column of its first character (1-based) when the expression shares
	// the line with its key, 0 for a block scalar.
	line, col int
}

// ruleSpec is one validator rule as the file declares it.
type ruleSpec struct {
	// id names the rule in errors and logs: section/name.
	id   string
	line int
	rule expr
	// on is the operations a row rule runs for (upserts when empty: a
	// rule checks the row being written unless it asks for deletes).
	on []commit.Op
	// opIndex attributes a commit rule's rejection (commit rules only).
	opIndex *expr
	code    string
	message string
	details *ssp2.RejectionDetails
}

// fileSpec is the parsed file before compilation.
type fileSpec struct {
	costLimit uint64
	scopes    *expr
	// tables in file order, each with its rules.
	tables     []string
	validators map[string][]ruleSpec
	tableLines map[string]int
	commit     []ruleSpec
	reactions  []reactionSpec
}

// sections are the kinds of rule a file holds.
const sections = "scopes, validators, commitValidators or reactions"

// parseFile reads the YAML structure of a rules file. Every problem is
// an *Error naming the line; all of them are reported, joined.
func parseFile(name string, data []byte) (*fileSpec, error) {
	p := &parser{file: name}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{File: name, Line: yamlErrorLine(err), Msg: "not YAML: " + err.Error()}
	}
	spec := &fileSpec{costLimit: DefaultCostLimit, validators: map[string][]ruleSpec{}, tableLines: map[string]int{}}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &Error{File: name, Line: 1, Msg: "empty file: want a mapping with " + sections}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: root.Line, Msg: "want a mapping with " + sections}
	}
	for _, kv := range p.pairs(root) {
		k, v := kv[0], kv[1]
		switch k.Value {
		case "version":
			if n, ok := p.integer(v); ok && n != FileVersion {
				p.fail(v.Line, "", fmt.Sprintf("version %d: this server reads version %d", n, FileVersion))
			}
		case "costLimit":
			if n, ok := p.integer(v); ok {
				if n < 1 || n > MaxCostLimit {
					p.fail(v.Line, "", fmt.Sprintf("costLimit %d: want 1..%d", n, MaxCostLimit))
				} else {
					spec.costLimit = uint64(n)
				}
			}
		case "scopes":
			if e, ok := p.expr(v, "scopes"); ok {
				spec.scopes = &e
			}
		case "validators":
			p.validators(v, spec)
		case "commitValidators":
			spec.commit = p.rules(v, "commitValidators", true)
		case "reactions":
			spec.reactions = p.reactions(v)
		default:
			p.fail(k.Line, "", fmt.Sprintf("unknown key %q (want version, costLimit, %s)", k.Value, sections))
		}
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return spec, nil
}

// yamlErrorLine digs the line out of a yaml.v3 syntax error ("yaml: line
// 3: …"); 1 when it names none.
func yamlErrorLine(err error) int {
	var n int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &n); scanErr == nil && n > 0 {
		return n
	}
	return 1
}

// parser collects every structural problem of the file.
type parser struct {
	file string
	errs []error
}

func (p *parser) fail(line int, rule, msg string) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Rule: rule, Msg: msg})
}

// pairs returns a mapping's key and value nodes, refusing duplicate and
// non-scalar keys.
func (p *parser) pairs(n *yaml.Node) [][2]*yaml.Node {
	var out [][2]*yaml.Node
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.fail(k.Line, "", "want a plain key")
			continue
		}
		if seen[k.Value] {
			p.fail(k.Line, "", fmt.Sprintf("duplicate key %q", k.Value))
			continue
		}
		seen[k.Value] = true
		out = append(out, [2]*yaml.Node{k, v})
	}
	return out
}

func (p *parser) integer(v *yaml.Node) (int64, bool) {
	var n int64
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&n) != nil {
		p.fail(v.Line, "", fmt.Sprintf("%q: want a whole number", v.Value))
		return 0, false
	}
	return n, true
}

func (p *parser) str(v *yaml.Node, rule, key string) (string, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		p.fail(v.Line, rule, fmt.Sprintf("%s: want a string", key))
		return "", false
	}
	return v.Value, true
}

// expr reads a CEL expression: a non-empty string, plain, quoted or a
// block scalar.
func (p *parser) expr(v *yaml.Node, rule string) (expr, bool) {
	s, ok := p.str(v, rule, "expression")
	if !ok {
		return expr{}, false
	}
	if strings.TrimSpace(s) == "" {
		p.fail(v.Line, rule, "empty expression")
		return expr{}, false
	}
	e := expr{src: s, line: v.Line, col: v.Column}
	switch v.Style {
	case yaml.LiteralStyle, yaml.FoldedStyle:
		// The text starts on the line after the indicator.
		e.line, e.col = v.Line+1, 0
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		e.col++
	}
	return e, true
}

// validators reads the table → rules mapping.
func (p *parser) validators(v *yaml.Node, spec *fileSpec) {
	if v.Kind != yaml.MappingNode {
		p.fail(v.Line, "", "validators: want a mapping of table names to lists of rules")
		return
	}
	for _, kv := range p.pairs(v) {
		table := kv[0].Value
		spec.tables = append(spec.tables, table)
		spec.tableLines[table] = kv[0].Line
		spec.validators[table] = p.rules(kv[1], "validators."+table, false)
	}
}

// rules reads a list of rules of one section.
func (p *parser) rules(v *yaml.Node, section string, commitRules bool) []ruleSpec {
	if v.Kind != yaml.SequenceNode {
		p.fail(v.Line, "", section+": want a list of rules")
		return nil
	}
	var out []ruleSpec
	names := map[string]bool{}
	for i, n := range v.Content {
		id := fmt.Sprintf("%s[%d]", section, i)
		if n.Kind != yaml.MappingNode {
			p.fail(n.Line, id, "want a mapping with name, rule, code and message")
			continue
		}
		r, ok := p.rule(n, section, id, commitRules)
		if !ok {
			continue
		}
		if names[r.id] {
			p.fail(n.Line, r.id, "duplicate rule name in "+section)
			continue
		}
		names[r.id] = true
		out = append(out, r)
	}
	return out
}

func (p *parser) rule(n *yaml.Node, section, id string, commitRules bool) (ruleSpec, bool) {
	r := ruleSpec{id: id, line: n.Line}
	before := len(p.errs)
	var haveRule, haveCode, haveMessage bool
	pairs := p.pairs(n)
	// The name first, so every other problem of the rule names it.
	for _, kv := range pairs {
		if kv[0].Value == "name" {
			if s, ok := p.str(kv[1], id, "name"); ok {
				if s == "" || strings.ContainsAny(s, "/ \t\n") {
					p.fail(kv[1].Line, id, fmt.Sprintf("name %q: want a non-empty name without spaces or slashes", s))
				} else {
					r.id = section + "/" + s
				}
			}
		}
	}
	if r.id == id {
		p.fail(n.Line, id, "name is required")
	}
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		switch k.Value {
		case "name":
		case "rule":
			r.rule, haveRule = p.expr(v, r.id)
		case "code":
			r.code, haveCode = p.str(v, r.id, "code")
		case "message":
			r.message, haveMessage = p.str(v, r.id, "message")
		case "details":
			r.details = p.details(v, r.id)
		case "on":
			if commitRules {
				p.fail(k.Line, r.id, "on: only row validators run per operation kind")
				continue
			}
			r.on = p.ops(v, r.id)
		case "opIndex":
			if !commitRules {
				p.fail(k.Line, r.id, "opIndex: only commit validators attribute a rejection to an operation")
				continue
			}
			if e, ok := p.expr(v, r.id); ok {
				r.opIndex = &e
			}
		default:
			want := "name, on, rule, code, message or details"
			if commitRules {
				want = "name, rule, opIndex, code, message or details"
			}
			p.fail(k.Line, r.id, fmt.Sprintf("unknown key %q (want %s)", k.Value, want))
		}
	}
	for _, m := range []struct {
		have bool
		key  string
	}{{haveRule, "rule"}, {haveCode, "code"}, {haveMessage, "message"}} {
		if !m.have {
			p.fail(n.Line, r.id, m.key+" is required")
		}
	}
	return r, len(p.errs) == before
}

// ops reads a row rule's operation kinds: upsert, delete, or both.
func (p *parser) ops(v *yaml.Node, rule string) []commit.Op {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		p.fail(v.Line, rule, "on: want a list of upsert and delete")
		return nil
	}
	var out []commit.Op
	for _, e := range v.Content {
		switch e.Value {
		case "upsert":
			out = append(out, commit.OpUpsert)
		case "delete":
			out = append(out, commit.OpDelete)
		default:
			p.fail(e.Line, rule, fmt.Sprintf("on: %q: want upsert or delete", e.Value))
		}
	}
	return out
}

// details reads the static recovery metadata of a rejection (SPEC §6.3.1).
func (p *parser) details(v *yaml.Node, rule string) *ssp2.RejectionDetails {
	if v.Kind != yaml.MappingNode {
		p.fail(v.Line, rule, "details: want a mapping with fieldPaths, reason or requiredAction")
		return nil
	}
	d := &ssp2.RejectionDetails{}
	for _, kv := range p.pairs(v) {
		k, val := kv[0], kv[1]
		switch k.Value {
		case "fieldPaths":
			if val.Kind != yaml.SequenceNode {
				p.fail(val.Line, rule, "details.fieldPaths: want a list of strings")
				continue
			}
			d.FieldPaths = []string{}
			for _, e := range val.Content {
				if s, ok := p.str(e, rule, "details.fieldPaths"); ok {
					d.FieldPaths = append(d.FieldPaths, s)
				}
			}
		case "reason":
			d.Reason, _ = p.str(val, rule, "details.reason")
		case "requiredAction":
			d.RequiredAction, _ = p.str(val, rule, "details.requiredAction")
		default:
			p.fail(k.Line, rule, fmt.Sprintf("details: unknown key %q (want fieldPaths, reason or requiredAction)", k.Value))
		}
	}
	return d
}
