package canonjson

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// MaxDepth bounds array/object nesting for Valid and Parse.
const MaxDepth = 10000

// Valid reports whether b is exactly one RFC 8259 JSON document (any
// value, surrounded by optional whitespace). It does not allocate.
func Valid(b []byte) bool {
	p := validator{b: b}
	return p.document()
}

// ValidString is Valid for a string.
func ValidString(s string) bool {
	p := validator{s: s, str: true}
	return p.document()
}

type validator struct {
	b   []byte
	s   string
	str bool
	i   int
}

func (p *validator) at(i int) byte {
	if p.str {
		return p.s[i]
	}
	return p.b[i]
}

func (p *validator) n() int {
	if p.str {
		return len(p.s)
	}
	return len(p.b)
}

func (p *validator) ws() {
	for p.i < p.n() {
		switch p.at(p.i) {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// document validates iteratively with a bit stack (1 = object) so deep
// nesting cannot exhaust the goroutine stack.
func (p *validator) document() bool {
	var stack [MaxDepth/64 + 1]uint64
	depth := 0
	push := func(obj bool) bool {
		if depth >= MaxDepth {
			return false
		}
		if obj {
			stack[depth/64] |= 1 << (depth % 64)
		} else {
			stack[depth/64] &^= 1 << (depth % 64)
		}
		depth++
		return true
	}
	top := func() bool { return stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0 }
	n := p.n()
value:
	p.ws()
	if p.i >= n {
		return false
	}
	switch c := p.at(p.i); c {
	case '{':
		p.i++
		if !push(true) {
			return false
		}
		p.ws()
		if p.i < n && p.at(p.i) == '}' {
			p.i++
			depth--
			goto after
		}
		goto key
	case '[':
		p.i++
		if !push(false) {
			return false
		}
		p.ws()
		if p.i < n && p.at(p.i) == ']' {
			p.i++
			depth--
			goto after
		}
		goto value
	case '"':
		if !p.stringLit() {
			return false
		}
	case 't':
		if !p.lit("true") {
			return false
		}
	case 'f':
		if !p.lit("false") {
			return false
		}
	case 'n':
		if !p.lit("null") {
			return false
		}
	default:
		if c != '-' && (c < '0' || c > '9') {
			return false
		}
		if !p.number() {
			return false
		}
	}
after:
	p.ws()
	if depth == 0 {
		return p.i == n
	}
	if p.i >= n {
		return false
	}
	switch p.at(p.i) {
	case ',':
		p.i++
		if top() {
			goto key
		}
		goto value
	case '}':
		if !top() {
			return false
		}
		p.i++
		depth--
		goto after
	case ']':
		if top() {
			return false
		}
		p.i++
		depth--
		goto after
	}
	return false
key:
	p.ws()
	if p.i >= n || p.at(p.i) != '"' || !p.stringLit() {
		return false
	}
	p.ws()
	if p.i >= n || p.at(p.i) != ':' {
		return false
	}
	p.i++
	goto value
}

func (p *validator) lit(w string) bool {
	if p.i+len(w) > p.n() {
		return false
	}
	for k := 0; k < len(w); k++ {
		if p.at(p.i+k) != w[k] {
			return false
		}
	}
	p.i += len(w)
	return true
}

func (p *validator) stringLit() bool {
	p.i++ // opening quote
	n := p.n()
	for p.i < n {
		c := p.at(p.i)
		switch {
		case c == '"':
			p.i++
			return true
		case c == '\\':
			p.i++
			if p.i >= n {
				return false
			}
			switch p.at(p.i) {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				if p.i+5 > n {
					return false
				}
				for k := 1; k <= 4; k++ {
					if !isHex(p.at(p.i + k)) {
						return false
					}
				}
				p.i += 5
			default:
				return false
			}
		case c < 0x20:
			return false
		case c < 0x80:
			p.i++
		default:
			var r rune
			var size int
			if p.str {
				r, size = utf8.DecodeRuneInString(p.s[p.i:])
			} else {
				r, size = utf8.DecodeRune(p.b[p.i:])
			}
			if r == utf8.RuneError && size <= 1 {
				return false
			}
			p.i += size
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (p *validator) number() bool {
	n := p.n()
	if p.at(p.i) == '-' {
		p.i++
	}
	if p.i >= n {
		return false
	}
	if p.at(p.i) == '0' {
		p.i++
	} else if c := p.at(p.i); c >= '1' && c <= '9' {
		for p.i < n && p.at(p.i) >= '0' && p.at(p.i) <= '9' {
			p.i++
		}
	} else {
		return false
	}
	if p.i < n && p.at(p.i) == '.' {
		p.i++
		start := p.i
		for p.i < n && p.at(p.i) >= '0' && p.at(p.i) <= '9' {
			p.i++
		}
		if p.i == start {
			return false
		}
	}
	if p.i < n && (p.at(p.i) == 'e' || p.at(p.i) == 'E') {
		p.i++
		if p.i < n && (p.at(p.i) == '+' || p.at(p.i) == '-') {
			p.i++
		}
		start := p.i
		for p.i < n && p.at(p.i) >= '0' && p.at(p.i) <= '9' {
			p.i++
		}
		if p.i == start {
			return false
		}
	}
	return true
}

// Parse parses one JSON document with JSON.parse semantics: numbers become
// float64, a duplicate key replaces the earlier value in place, and escaped
// lone surrogates are kept (as WTF-8) so they serialize back as escapes.
func Parse(b []byte) (Value, error) {
	if !Valid(b) {
		return nil, syncerr.Newf(syncerr.InvalidRequest, "not a JSON document")
	}
	p := parser{b: b}
	p.ws()
	return p.value(), nil
}

// ParseString is Parse for a string.
func ParseString(s string) (Value, error) { return Parse([]byte(s)) }

// parser runs only over validated input, so it does not re-check syntax.
type parser struct {
	b []byte
	i int
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value() Value {
	switch c := p.b[p.i]; c {
	case '{':
		p.i++
		o := NewObject(4)
		p.ws()
		if p.b[p.i] == '}' {
			p.i++
			return o
		}
		for {
			p.ws()
			k := p.str()
			p.ws()
			p.i++ // ':'
			p.ws()
			v := p.value()
			o.Set(k, v)
			p.ws()
			if p.b[p.i] == ',' {
				p.i++
				continue
			}
			p.i++ // '}'
			return o
		}
	case '[':
		p.i++
		arr := []Value{}
		p.ws()
		if p.b[p.i] == ']' {
			p.i++
			return arr
		}
		for {
			p.ws()
			arr = append(arr, p.value())
			p.ws()
			if p.b[p.i] == ',' {
				p.i++
				continue
			}
			p.i++ // ']'
			return arr
		}
	case '"':
		return p.str()
	case 't':
		p.i += 4
		return true
	case 'f':
		p.i += 5
		return false
	case 'n':
		p.i += 4
		return nil
	default:
		start := p.i
		for p.i < len(p.b) {
			c := p.b[p.i]
			if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				p.i++
				continue
			}
			break
		}
		f, _ := strconv.ParseFloat(string(p.b[start:p.i]), 64) // ±Inf on overflow, as JSON.parse
		return f
	}
}

func (p *parser) str() string {
	p.i++ // opening quote
	start := p.i
	for p.b[p.i] != '"' && p.b[p.i] != '\\' {
		p.i++
	}
	if p.b[p.i] == '"' {
		s := string(p.b[start:p.i])
		p.i++
		return s
	}
	out := append([]byte(nil), p.b[start:p.i]...)
	for {
		c := p.b[p.i]
		switch c {
		case '"':
			p.i++
			return string(out)
		case '\\':
			p.i++
			e := p.b[p.i]
			p.i++
			switch e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				u := hex4(p.b[p.i:])
				p.i += 4
				if utf16.IsSurrogate(rune(u)) && u < 0xDC00 && p.i+6 <= len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					if lo := hex4(p.b[p.i+2:]); lo >= 0xDC00 && lo <= 0xDFFF {
						p.i += 6
						out = utf8.AppendRune(out, utf16.DecodeRune(rune(u), rune(lo)))
						continue
					}
				}
				out = appendWTF8(out, rune(u))
			default: // '"', '\\', '/'
				out = append(out, e)
			}
		default:
			out = append(out, c)
			p.i++
		}
	}
}

func hex4(b []byte) uint16 {
	var v uint16
	for k := 0; k < 4; k++ {
		c := b[k]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		v = v<<4 | uint16(c)
	}
	return v
}

// appendWTF8 appends r, encoding a lone surrogate as its generalized UTF-8
// three-byte form (which serialization turns back into an escape).
func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(b, r)
}
