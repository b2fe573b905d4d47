package ssp2

import (
	"slices"
	"strings"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/wire"
)

// RejectionDetails is the bounded host recovery metadata of §6.3.1.
type RejectionDetails struct {
	FieldPaths     []string
	Reason         string
	RequiredAction string
	References     []ScopeValue // sorted by key
}

// Limits of §6.3.1.
const (
	detailsMaxBytes        = 4096
	detailsMaxFieldPaths   = 32
	detailsMaxPathLen      = 160
	detailsMaxTokenLen     = 96
	detailsMaxReferences   = 16
	detailsMaxRefKeyLen    = 64
	detailsMaxRefValueSize = 256
)

// utf16Len is the JavaScript string length of s.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

func isFieldPath(s string) bool {
	if s == "" {
		return false
	}
	for _, seg := range strings.Split(s, ".") {
		if seg == "" {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			alpha := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
			if !alpha && (i == 0 || c < '0' || c > '9') {
				return false
			}
		}
	}
	return true
}

// isToken matches [a-z][a-z0-9]*([._-][a-z0-9]+)*.
func isToken(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	sep := false
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'):
			sep = false
		case c == '.' || c == '_' || c == '-':
			if sep {
				return false
			}
			sep = true
		default:
			return false
		}
	}
	return !sep
}

func checkToken(s, what string, max int) error {
	if !isToken(s) || utf16Len(s) > max {
		return wire.Errorf("%s must be a lowercase stable token of at most %d characters", what, max)
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

// isJSWhitespace reports the characters String.prototype.trim removes.
func isJSWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// Normalize validates d against §6.3.1 and returns it with references
// sorted by key.
func (d RejectionDetails) Normalize() (RejectionDetails, error) {
	out := RejectionDetails{Reason: d.Reason, RequiredAction: d.RequiredAction}
	if d.FieldPaths != nil {
		if len(d.FieldPaths) == 0 || len(d.FieldPaths) > detailsMaxFieldPaths {
			return out, wire.Errorf("fieldPaths must contain 1-%d paths", detailsMaxFieldPaths)
		}
		for i, p := range d.FieldPaths {
			if !isFieldPath(p) || utf16Len(p) > detailsMaxPathLen {
				return out, wire.Errorf("fieldPaths entries must be schema paths of at most %d characters", detailsMaxPathLen)
			}
			if slices.Contains(d.FieldPaths[:i], p) {
				return out, wire.Errorf("duplicate field path %q", p)
			}
		}
		out.FieldPaths = slices.Clone(d.FieldPaths)
	}
	if d.Reason != "" {
		if err := checkToken(d.Reason, "reason", detailsMaxTokenLen); err != nil {
			return out, err
		}
	}
	if d.RequiredAction != "" {
		if err := checkToken(d.RequiredAction, "requiredAction", detailsMaxTokenLen); err != nil {
			return out, err
		}
	}
	if d.References != nil {
		refs := slices.Clone(d.References)
		slices.SortFunc(refs, func(a, b ScopeValue) int { return wire.CompareUTF16(a.Key, b.Key) })
		if len(refs) == 0 || len(refs) > detailsMaxReferences {
			return out, wire.Errorf("references must contain 1-%d entries", detailsMaxReferences)
		}
		for i, r := range refs {
			if i > 0 && refs[i-1].Key == r.Key {
				return out, wire.Errorf("duplicate reference key %q", r.Key)
			}
			if err := checkToken(r.Key, "reference key", detailsMaxRefKeyLen); err != nil {
				return out, err
			}
			if r.Value == "" || len(r.Value) > detailsMaxRefValueSize || strings.TrimFunc(r.Value, isJSWhitespace) != r.Value || hasControl(r.Value) {
				return out, wire.Errorf("reference values must be non-empty safe strings of at most %d encoded bytes", detailsMaxRefValueSize)
			}
		}
		out.References = refs
	}
	if out.FieldPaths == nil && out.Reason == "" && out.RequiredAction == "" && out.References == nil {
		return out, wire.Errorf("rejection details must contain at least one supported member")
	}
	if n := len(out.appendJSON(nil)); n > detailsMaxBytes {
		return out, wire.Errorf("rejection details exceed %d encoded bytes", detailsMaxBytes)
	}
	return out, nil
}

// appendJSON appends the normalized compact JSON of d.
func (d RejectionDetails) appendJSON(b []byte) []byte {
	return canonjson.AppendValue(b, d.jsonValue(), "")
}

func (d RejectionDetails) jsonValue() *canonjson.Object {
	o := canonjson.NewObject(4)
	if d.FieldPaths != nil {
		paths := make([]canonjson.Value, len(d.FieldPaths))
		for i, p := range d.FieldPaths {
			paths[i] = p
		}
		o.Set("fieldPaths", paths)
	}
	if d.Reason != "" {
		o.Set("reason", d.Reason)
	}
	if d.RequiredAction != "" {
		o.Set("requiredAction", d.RequiredAction)
	}
	if d.References != nil {
		refs := canonjson.NewObject(len(d.References))
		for _, r := range d.References {
			refs.Set(r.Key, r.Value)
		}
		o.Set("references", refs)
	}
	return o
}

// ParseRejectionDetails parses and normalizes a detailsJson document.
func ParseRejectionDetails(raw []byte) (RejectionDetails, error) {
	var d RejectionDetails
	v, err := canonjson.Parse(raw)
	if err != nil {
		return d, wire.Errorf("details are not a JSON document")
	}
	o, ok := v.(*canonjson.Object)
	if !ok {
		return d, wire.Errorf("rejection details must be an object")
	}
	for _, k := range o.Keys() {
		x, _ := o.Get(k)
		switch k {
		case "fieldPaths":
			arr, ok := x.([]canonjson.Value)
			if !ok {
				return d, wire.Errorf("fieldPaths must contain 1-%d paths", detailsMaxFieldPaths)
			}
			d.FieldPaths = make([]string, len(arr))
			for i, e := range arr {
				s, ok := e.(string)
				if !ok {
					return d, wire.Errorf("fieldPaths entries must be strings")
				}
				d.FieldPaths[i] = s
			}
		case "reason", "requiredAction":
			s, ok := x.(string)
			if !ok || s == "" {
				return d, wire.Errorf("%s must be a lowercase stable token", k)
			}
			if k == "reason" {
				d.Reason = s
			} else {
				d.RequiredAction = s
			}
		case "references":
			ro, ok := x.(*canonjson.Object)
			if !ok {
				return d, wire.Errorf("references must be an object")
			}
			d.References = make([]ScopeValue, 0, ro.Len())
			for _, rk := range ro.Keys() {
				rv, _ := ro.Get(rk)
				s, ok := rv.(string)
				if !ok {
					return d, wire.Errorf("reference values must be strings")
				}
				d.References = append(d.References, ScopeValue{Key: rk, Value: s})
			}
		default:
			return d, wire.Errorf("unknown rejection details member %q", k)
		}
	}
	return d.Normalize()
}
