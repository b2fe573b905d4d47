package canonjson

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/syncd-dev/syncd/domain/wire"
)

// Marshal serializes v like JSON.stringify(v, null, indent): members in
// object order, strings escaped minimally, numbers in ECMAScript shortest
// form, non-finite numbers as null.
func Marshal(v Value, indent string) []byte {
	return AppendValue(nil, v, indent)
}

// AppendValue appends the serialization of v to b.
func AppendValue(b []byte, v Value, indent string) []byte {
	return appendValue(b, v, indent, 0)
}

func appendValue(b []byte, v Value, indent string, depth int) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		if x {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case uint8:
		return strconv.AppendInt(b, int64(x), 10)
	case uint16:
		return strconv.AppendInt(b, int64(x), 10)
	case float64:
		return AppendNumber(b, x)
	case string:
		return AppendString(b, x)
	case []Value:
		if len(x) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, indent, depth+1)
			b = appendValue(b, e, indent, depth+1)
		}
		b = newline(b, indent, depth)
		return append(b, ']')
	case *Object:
		if x == nil || len(x.keys) == 0 {
			return append(b, "{}"...)
		}
		b = append(b, '{')
		for n, i := range x.order() {
			if n > 0 {
				b = append(b, ',')
			}
			b = newline(b, indent, depth+1)
			b = AppendString(b, x.keys[i])
			b = append(b, ':')
			if indent != "" {
				b = append(b, ' ')
			}
			b = appendValue(b, x.vals[i], indent, depth+1)
		}
		b = newline(b, indent, depth)
		return append(b, '}')
	}
	return append(b, "null"...)
}

func newline(b []byte, indent string, depth int) []byte {
	if indent == "" {
		return b
	}
	b = append(b, '\n')
	for range depth {
		b = append(b, indent...)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal the way JSON.stringify
// writes it: only '"', '\\' and control characters are escaped, and a
// generalized-UTF-8 lone surrogate becomes a \uXXXX escape.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"':
				b = append(b, '\\', '"')
			case '\\':
				b = append(b, '\\', '\\')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
			// Lone surrogate kept by Parse.
			r := rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
			i += 3
			start = i
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendNumber appends f as ECMAScript Number::toString renders it (the
// JSON.stringify form); NaN and ±Infinity become null.
func AppendNumber(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	if f == 0 {
		return append(b, '0')
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // d.ddddde±XX
	var digits [24]byte
	k := 0
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[k] = e[i]
			k++
		}
	}
	exp, _ := strconv.Atoi(string(e[i+1:]))
	n := exp + 1 // value = 0.d1…dk × 10^n
	d := digits[:k]
	switch {
	case k <= n && n <= 21:
		b = append(b, d...)
		for range n - k {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, d[:n]...)
		b = append(b, '.')
		b = append(b, d[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for range -n {
			b = append(b, '0')
		}
		b = append(b, d...)
	default:
		b = append(b, d[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, d[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

// ScopeJSON renders a scope map as §11.2 canonical JSON: no whitespace,
// keys in UTF-16 code-unit order, each value list sorted (code-unit order)
// and deduplicated. It is the X-Syncular-Scopes header form (§5.5).
func ScopeJSON(scopes map[string][]string) []byte {
	keys := make([]string, 0, len(scopes))
	for k := range scopes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, wire.CompareUTF16)
	b := make([]byte, 0, 64)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = append(b, ':', '[')
		vals := slices.Clone(scopes[k])
		slices.SortFunc(vals, wire.CompareUTF16)
		vals = slices.Compact(vals)
		for j, v := range vals {
			if j > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// ScopeDigest is the §3.5 scope digest: lowercase hex SHA-256 of the
// canonical JSON of the effective scope map.
func ScopeDigest(scopes map[string][]string) string {
	sum := sha256.Sum256(ScopeJSON(scopes))
	return hex.EncodeToString(sum[:])
}

// ParseScopes parses a scope map in the X-Syncular-Scopes form: a JSON
// object whose values are lists of strings (a bare string is not accepted).
func ParseScopes(b []byte) (map[string][]string, error) {
	v, err := Parse(b)
	if err != nil {
		return nil, err
	}
	o, ok := v.(*Object)
	if !ok {
		return nil, wire.Errorf("scope map must be a JSON object")
	}
	out := make(map[string][]string, o.Len())
	for i, k := range o.keys {
		list, ok := o.vals[i].([]Value)
		if !ok {
			return nil, wire.Errorf("scope %q must be a list of strings", k)
		}
		vals := make([]string, len(list))
		for j, e := range list {
			s, ok := e.(string)
			if !ok || !utf8.ValidString(s) {
				return nil, wire.Errorf("scope %q must be a list of strings", k)
			}
			vals[j] = s
		}
		out[k] = vals
	}
	return out, nil
}
