package operations

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file reads the SELECT statement of a generated named-query
// descriptor (upstream typegen's analyzed SQL) into the shape a
// QuerySpec states, and refuses everything else: one table, plain
// columns, a conjunction of comparisons between a column and a
// parameter or a literal, an order by columns and a literal LIMIT.
// Nothing it reads becomes SQL; the statement is only a declaration.

// selectStmt is a parsed descriptor statement.
type selectStmt struct {
	table, alias string
	star         bool
	items        []selectItem
	where        []comparison
	orderBy      []orderKey
	limit        int
}

// selectItem is one result column: a column and its result name.
type selectItem struct{ column, as string }

// comparison is column op (a parameter or a literal).
type comparison struct {
	column  string
	op      Op
	param   string // the parameter's SQL name, or "" for a literal
	literal any    // string, int64, float64 or bool
}

// orderKey is a column, or a result name, and its direction.
type orderKey struct {
	name string
	desc bool
}

type tokenKind uint8

const (
	tokEOF tokenKind = iota
	tokIdent
	tokParam
	tokString
	tokNumber
	tokPunct
	tokOther // anything the subset has no use for: quoted identifiers, ?, $1, @x
)

type token struct {
	kind tokenKind
	text string // identifiers as written, parameters without ':', strings unquoted
	pos  int
}

// lexSQL splits a statement into tokens, skipping whitespace and
// comments.
func lexSQL(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(src[i:], "--"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return append(out, token{kind: tokEOF, pos: len(src)}), nil
			}
			i += j + 1
		case strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("unterminated comment at %d", i)
			}
			i += j + 4
		case c == '\'':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(src) {
					return nil, fmt.Errorf("unterminated string at %d", i)
				}
				if src[j] == '\'' {
					if j+1 < len(src) && src[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(src[j])
				j++
			}
			out = append(out, token{kind: tokString, text: b.String(), pos: i})
			i = j + 1
		case c == ':' && i+1 < len(src) && identStart(src[i+1:]):
			j := i + 1 + identLen(src[i+1:])
			out = append(out, token{kind: tokParam, text: src[i+1 : j], pos: i})
			i = j
		case identStart(src[i:]):
			j := i + identLen(src[i:])
			out = append(out, token{kind: tokIdent, text: src[i:j], pos: i})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.') {
				j++
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				j++
				if j < len(src) && (src[j] == '+' || src[j] == '-') {
					j++
				}
				for j < len(src) && src[j] >= '0' && src[j] <= '9' {
					j++
				}
			}
			out = append(out, token{kind: tokNumber, text: src[i:j], pos: i})
			i = j
		default:
			n := 1
			for _, op := range []string{"<=", ">=", "<>", "!=", "==", "||"} {
				if strings.HasPrefix(src[i:], op) {
					n = 2
				}
			}
			kind := tokPunct
			if strings.ContainsRune("\"`[?$@", rune(c)) {
				kind = tokOther
			}
			_, size := utf8.DecodeRuneInString(src[i:])
			n = max(n, size)
			out = append(out, token{kind: kind, text: src[i : i+n], pos: i})
			i += n
		}
	}
	return append(out, token{kind: tokEOF, pos: len(src)}), nil
}

func identStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r)
}

func identLen(s string) int {
	n := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			break
		}
		n += size
	}
	return n
}

// reserved are the keywords that end a clause or that the subset refuses;
// none of them is taken as a table alias or a result name.
var reserved = map[string]bool{
	"select": true, "from": true, "where": true, "and": true, "or": true, "not": true,
	"order": true, "by": true, "asc": true, "desc": true, "limit": true, "offset": true,
	"as": true, "join": true, "inner": true, "left": true, "right": true, "full": true,
	"outer": true, "cross": true, "natural": true, "on": true, "using": true, "group": true,
	"having": true, "union": true, "intersect": true, "except": true, "distinct": true,
	"all": true, "in": true, "is": true, "like": true, "glob": true, "between": true,
	"case": true, "when": true, "then": true, "else": true, "end": true, "null": true,
	"true": true, "false": true, "exists": true, "collate": true, "nulls": true,
	"window": true, "escape": true, "match": true, "regexp": true, "with": true,
}

// refusals name the constructs a reader most likely meets, so the start
// error says what to change rather than only where the reading stopped.
var refusals = map[string]string{
	"join": "joins", "inner": "joins", "left": "joins", "right": "joins", "full": "joins",
	"cross": "joins", "natural": "joins", ",": "joins", "group": "grouping", "having": "grouping",
	"or": "OR", "not": "NOT", "in": "IN lists", "like": "LIKE", "glob": "GLOB", "match": "MATCH",
	"between": "BETWEEN", "is": "IS comparisons", "case": "CASE expressions", "distinct": "DISTINCT",
	"offset": "OFFSET", "union": "compound selects", "intersect": "compound selects",
	"except": "compound selects", "with": "common table expressions", "collate": "COLLATE",
	"nulls": "NULLS FIRST/LAST", "exists": "subqueries", "null": "NULL comparisons",
	"(": "expressions", "+": "expressions", "-": "expressions", "*": "expressions",
	"/": "expressions", "%": "expressions", "||": "expressions",
}

type selectParser struct {
	toks []token
	i    int
}

// parseSelect reads a descriptor statement.
func parseSelect(src string) (*selectStmt, error) {
	toks, err := lexSQL(src)
	if err != nil {
		return nil, err
	}
	p := &selectParser{toks: toks}
	st, err := p.statement()
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (p *selectParser) peek() token { return p.toks[p.i] }

func (p *selectParser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

// is reports whether the next token is the keyword or punctuation s.
func (p *selectParser) is(s string) bool {
	t := p.peek()
	return (t.kind == tokIdent || t.kind == tokPunct) && strings.EqualFold(t.text, s)
}

func (p *selectParser) accept(s string) bool {
	if p.is(s) {
		p.i++
		return true
	}
	return false
}

// unsupported describes the token the subset cannot take.
func (p *selectParser) unsupported(where string) error {
	t := p.peek()
	if t.kind == tokEOF {
		return fmt.Errorf("statement ends early %s", where)
	}
	what := fmt.Sprintf("%q", t.text)
	if t.kind == tokOther {
		what = fmt.Sprintf("%q (quoted identifiers and positional parameters are not read)", t.text)
	} else if r, ok := refusals[strings.ToLower(t.text)]; ok {
		what = fmt.Sprintf("%q (%s are not supported)", t.text, r)
	}
	return fmt.Errorf("unsupported SQL at %s %s: a registered descriptor reads one table's columns, filtered by comparisons with parameters or literals joined by AND, ordered by columns, with an optional literal LIMIT", what, where)
}

func (p *selectParser) expect(s, where string) error {
	if !p.accept(s) {
		return p.unsupported(where)
	}
	return nil
}

// name reads an identifier that is not a keyword.
func (p *selectParser) name() (string, bool) {
	t := p.peek()
	if t.kind != tokIdent || reserved[strings.ToLower(t.text)] {
		return "", false
	}
	p.i++
	return t.text, true
}

// columnRef reads column or qualifier.column.
func (p *selectParser) columnRef() (qualifier, column string, ok bool) {
	first, ok := p.name()
	if !ok {
		return "", "", false
	}
	if !p.is(".") {
		return "", first, true
	}
	p.i++
	second, ok := p.name()
	if !ok {
		return "", "", false
	}
	return first, second, true
}

type qualified struct{ qualifier, column string }

func (p *selectParser) statement() (*selectStmt, error) {
	if err := p.expect("select", "where the statement should begin with SELECT"); err != nil {
		return nil, err
	}
	p.accept("all")
	st := &selectStmt{}
	var items []qualified
	if p.accept("*") {
		st.star = true
	} else {
		for {
			q, c, ok := p.columnRef()
			if !ok {
				return nil, p.unsupported("in the result columns")
			}
			if p.is("(") {
				return nil, funcCall(c)
			}
			item := selectItem{column: c, as: c}
			if p.accept("as") {
				if item.as, ok = p.name(); !ok {
					return nil, p.unsupported("after AS")
				}
			} else if as, ok := p.name(); ok {
				item.as = as
			}
			items = append(items, qualified{q, c})
			st.items = append(st.items, item)
			if !p.accept(",") {
				break
			}
		}
	}
	if err := p.expect("from", "after the result columns"); err != nil {
		return nil, err
	}
	var ok bool
	if st.table, ok = p.name(); !ok {
		return nil, p.unsupported("after FROM")
	}
	if p.accept("as") {
		if st.alias, ok = p.name(); !ok {
			return nil, p.unsupported("after AS")
		}
	} else {
		st.alias, _ = p.name()
	}
	for _, it := range items {
		if err := st.qualifies(it.qualifier); err != nil {
			return nil, err
		}
	}
	if p.accept("where") {
		if err := p.conjunction(st, 0); err != nil {
			return nil, err
		}
	}
	if p.accept("order") {
		if err := p.expect("by", "after ORDER"); err != nil {
			return nil, err
		}
		for {
			q, c, ok := p.columnRef()
			if !ok {
				return nil, p.unsupported("in ORDER BY")
			}
			if err := st.qualifies(q); err != nil {
				return nil, err
			}
			k := orderKey{name: c}
			if p.accept("desc") {
				k.desc = true
			} else {
				p.accept("asc")
			}
			st.orderBy = append(st.orderBy, k)
			if !p.accept(",") {
				break
			}
		}
	}
	if p.accept("limit") {
		t := p.next()
		n, err := strconv.Atoi(t.text)
		if t.kind != tokNumber || err != nil || n < 1 {
			p.i--
			return nil, p.unsupported("after LIMIT (a positive integer literal)")
		}
		st.limit = n
	}
	p.accept(";")
	if p.peek().kind != tokEOF {
		return nil, p.unsupported("where the statement should end")
	}
	return st, nil
}

// qualifies checks a column's qualifier names the statement's table.
func (st *selectStmt) qualifies(q string) error {
	if q == "" || q == st.table && st.alias == "" || q == st.alias && st.alias != "" {
		return nil
	}
	return fmt.Errorf("column qualifier %q names no table of the statement", q)
}

// conjunction reads comparisons joined by AND; parentheses group them.
// An inert TRUE or 1 (a SYQL lowering leaves one for an absent optional
// condition) is skipped.
func (p *selectParser) conjunction(st *selectStmt, depth int) error {
	for {
		switch {
		case p.is("(") && depth < 8:
			p.i++
			if err := p.conjunction(st, depth+1); err != nil {
				return err
			}
			if err := p.expect(")", "where a parenthesized condition should close"); err != nil {
				return err
			}
		case p.isTrue():
			p.i++
		default:
			c, err := p.comparison(st)
			if err != nil {
				return err
			}
			st.where = append(st.where, c)
		}
		if !p.accept("and") {
			return nil
		}
	}
}

// isTrue reports an inert TRUE or 1 standing alone as a condition.
func (p *selectParser) isTrue() bool {
	t := p.peek()
	if !(t.kind == tokIdent && strings.EqualFold(t.text, "true") || t.kind == tokNumber && t.text == "1") {
		return false
	}
	n := p.toks[p.i+1]
	return n.kind == tokEOF || n.kind == tokPunct && (n.text == ")" || n.text == ";") ||
		n.kind == tokIdent && (strings.EqualFold(n.text, "and") || strings.EqualFold(n.text, "order") || strings.EqualFold(n.text, "limit"))
}

var comparisonOps = map[string]Op{"=": OpEq, "==": OpEq, "!=": OpNe, "<>": OpNe, "<": OpLt, "<=": OpLte, ">": OpGt, ">=": OpGte}

// flipped is the comparison with its operands swapped (:p < col is col > :p).
var flipped = map[Op]Op{OpEq: OpEq, OpNe: OpNe, OpLt: OpGt, OpLte: OpGte, OpGt: OpLt, OpGte: OpLte}

func (p *selectParser) comparison(st *selectStmt) (comparison, error) {
	var c comparison
	left, leftCol, err := p.operand(st)
	if err != nil {
		return c, err
	}
	t := p.peek()
	op, ok := comparisonOps[t.text]
	if t.kind != tokPunct || !ok {
		return c, p.unsupported("where a comparison operator should follow")
	}
	p.i++
	right, rightCol, err := p.operand(st)
	if err != nil {
		return c, err
	}
	switch {
	case leftCol && !rightCol:
		c = right
		c.column, c.op = left.column, op
	case rightCol && !leftCol:
		c = left
		c.column, c.op = right.column, flipped[op]
	default:
		return c, fmt.Errorf("unsupported comparison at %d: one side must be a column, the other a parameter or a literal", t.pos)
	}
	return c, nil
}

// operand reads a column, a parameter or a literal.
func (p *selectParser) operand(st *selectStmt) (c comparison, isColumn bool, err error) {
	t := p.peek()
	switch {
	case t.kind == tokParam:
		p.i++
		return comparison{param: t.text}, false, nil
	case t.kind == tokString:
		p.i++
		return comparison{literal: t.text}, false, nil
	case t.kind == tokNumber || t.kind == tokPunct && t.text == "-" && p.toks[p.i+1].kind == tokNumber:
		neg := t.text == "-"
		if neg {
			p.i++
			t = p.peek()
		}
		p.i++
		lit, err := numberLiteral(t.text, neg)
		return comparison{literal: lit}, false, err
	case t.kind == tokIdent && (strings.EqualFold(t.text, "true") || strings.EqualFold(t.text, "false")):
		p.i++
		return comparison{literal: strings.EqualFold(t.text, "true")}, false, nil
	}
	q, col, ok := p.columnRef()
	if !ok {
		return c, false, p.unsupported("in a condition")
	}
	if p.is("(") {
		return c, false, funcCall(col)
	}
	if err := st.qualifies(q); err != nil {
		return c, false, err
	}
	return comparison{column: col}, true, nil
}

func funcCall(name string) error {
	return fmt.Errorf("unsupported SQL at %q: function calls and aggregates are not supported", name)
}

func numberLiteral(text string, neg bool) (any, error) {
	if neg {
		text = "-" + text
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, fmt.Errorf("unsupported number %q", text)
	}
	return f, nil
}
