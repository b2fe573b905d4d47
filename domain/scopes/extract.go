package scopes

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// ValueFunc returns the rendered value of a row's column (see
// RenderValue), and false when the column is absent, NULL or has no
// string form. It keeps extraction independent of the row codec.
type ValueFunc func(column string) (string, bool)

// Column returns the column a scope pattern reads: the explicit column
// when the pattern names one, else the column named like the variable.
func Column(sc schema.Scope) string {
	if sc.Column != "" {
		return sc.Column
	}
	return sc.Variable
}

// Collect reads the table's declared scope columns from a row and returns
// the values that are present and non-empty. Variables without a value
// are left out, so AuthorizeWrite on the result denies them.
func Collect(t *schema.Table, get ValueFunc) Stored {
	out := make(Stored, len(t.Scopes))
	for _, sc := range t.Scopes {
		if v, ok := get(Column(sc)); ok && v != "" {
			out[sc.Variable] = v
		}
	}
	return out
}

// ExtractStored returns the stored scopes of a change (SPEC §3.1): every
// declared variable mapped to its row's value (upsert: the row after the
// write; delete: the row before removal). A missing or empty value is
// sync.missing_scopes: a change without stored scopes must fail loud.
func ExtractStored(t *schema.Table, get ValueFunc) (Stored, error) {
	out := Collect(t, get)
	for _, sc := range t.Scopes {
		if _, ok := out[sc.Variable]; !ok {
			return nil, syncerr.Newf(syncerr.MissingScopes,
				"table %q: row has no value for scope %q (column %q)", t.Name, sc.Variable, Column(sc))
		}
	}
	return out, nil
}

// RenderValue renders a decoded column value as the string stored scopes
// and row ids use. It follows the reference renderer, which is the
// JavaScript string conversion of the decoded value: strings (and the raw
// text of json and blob_ref values) verbatim, integers in decimal,
// booleans as "true"/"false", floats as ECMAScript Number::toString. NULL,
// byte values (bytes, crdt, encrypted) and empty strings have no string
// form and report false.
//
// Any Go value whose kind is string, integer, unsigned integer, bool or
// float is accepted, so named types of the row codec need no adapter; a
// json.RawMessage renders as its text. Other byte slices are bytes values.
func RenderValue(v any) (string, bool) {
	if v == nil {
		return "", false
	}
	if raw, ok := v.(json.RawMessage); ok {
		// A json value's raw document text, verbatim.
		return string(raw), len(raw) > 0
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return "", false
		}
		rv = rv.Elem()
	}
	var s string
	switch rv.Kind() {
	case reflect.String:
		s = rv.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s = strconv.FormatInt(rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s = strconv.FormatUint(rv.Uint(), 10)
	case reflect.Bool:
		s = strconv.FormatBool(rv.Bool())
	case reflect.Float32, reflect.Float64:
		s = FormatNumber(rv.Float())
	default:
		return "", false
	}
	if s == "" {
		return "", false
	}
	return s, true
}

// FormatNumber renders f the way ECMAScript Number::toString does: the
// shortest decimal that round-trips, plain notation for exponents in
// [-7, 21), exponent notation ("1e+21", "1.5e-7") outside, "NaN",
// "Infinity", "-Infinity", and "0" for both zeros.
func FormatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	case f < 0:
		return "-" + FormatNumber(-f)
	}
	// Shortest round-trip digits d1.d2d3…e±x; n is the decimal point
	// position relative to the digit string (value = 0.digits × 10^n).
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart)
	k := len(digits)
	n := exp + 1
	var b strings.Builder
	switch {
	case k <= n && n <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		b.WriteString(digits[:n])
		b.WriteByte('.')
		b.WriteString(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n))
		b.WriteString(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(n - 1))
	}
	return b.String()
}
