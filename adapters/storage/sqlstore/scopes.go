package sqlstore

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// decodeScopes decodes a stored scope map. Stored scopes are flat objects
// of plain strings, so a small scanner handles them; anything it does not
// recognise (escapes, other value types) goes through encoding/json.
func decodeScopes(raw []byte) (map[string]string, error) {
	return decodeScopesIn(raw, nil)
}

// maxInterned bounds an interner: scope variables and values repeat across
// the rows of one page, so each distinct text is allocated once.
const maxInterned = 1024

// interner hands out one string per distinct text; nil interns nothing.
type interner map[string]string

func (in interner) str(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in) < maxInterned {
		in[s] = s
	}
	return s
}

// decodeScopesIn is decodeScopes with keys and values taken from in. raw
// is not retained (it may be a sql.RawBytes).
func decodeScopesIn(raw []byte, in interner) (map[string]string, error) {
	if len(raw) == 0 {
		return map[string]string{}, nil
	}
	if m, ok := scanFlatObject(raw, in); ok {
		return m, nil
	}
	m := map[string]string{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode stored scopes: %w", err)
	}
	return m, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string without escapes starting at b[i]=='"'.
func plainString(b []byte, i int, in interner) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			if !utf8.Valid(s) {
				return "", i, false
			}
			return in.str(s), j + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		}
	}
	return "", i, false
}

// scanFlatObject parses {"k":"v",...} with optional whitespace.
func scanFlatObject(b []byte, in interner) (map[string]string, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	m := make(map[string]string, 2)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return m, skipSpace(b, i+1) == len(b)
	}
	for {
		k, j, ok := plainString(b, i, in)
		if !ok {
			return nil, false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		v, j, ok := plainString(b, skipSpace(b, i+1), in)
		if !ok {
			return nil, false
		}
		m[k] = v
		i = skipSpace(b, j)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return m, skipSpace(b, i+1) == len(b)
		}
		return nil, false
	}
}
