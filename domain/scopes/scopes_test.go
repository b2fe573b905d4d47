package scopes_test

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// tasks declares two independent dimensions: workspace (own column) and
// project (read from an explicit column).
func tasks() *schema.Table {
	return &schema.Table{
		Name: "tasks",
		Columns: []schema.Column{
			{Name: "id", Type: schema.TypeString},
			{Name: "workspace_id", Type: schema.TypeString},
			{Name: "proj", Type: schema.TypeInteger},
			{Name: "title", Type: schema.TypeString, Nullable: true},
		},
		PrimaryKey: "id",
		Scopes: []schema.Scope{
			{Pattern: "ws:{workspace_id}", Prefix: "ws", Variable: "workspace_id"},
			{Pattern: "project:{project_id}", Prefix: "project", Variable: "project_id", Column: "proj"},
		},
	}
}

func code(err error) syncerr.Code { return syncerr.CodeOf(err) }

func TestValidateRequested(t *testing.T) {
	tbl := tasks()
	tests := []struct {
		name      string
		requested scopes.Map
		want      syncerr.Code
	}{
		{"declared keys pass", scopes.Map{"workspace_id": {"w1"}, "project_id": {"1", "2"}}, ""},
		{"a subset of declared keys passes", scopes.Map{"workspace_id": {"w1"}}, ""},
		{"empty map passes validation (it revokes later)", scopes.Map{}, ""},
		{"rule 2: undeclared key fails the request", scopes.Map{"workspace": {"w1"}}, syncerr.InvalidSubscription},
		{"rule 2: a requested '*' fails the request", scopes.Map{"workspace_id": {"w1", "*"}}, syncerr.InvalidSubscription},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := code(scopes.ValidateRequested(tbl, tc.requested)); got != tc.want {
				t.Fatalf("code = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateAllowed(t *testing.T) {
	declared := map[string]bool{"workspace_id": true, "project_id": true, "org_id": true}
	tests := []struct {
		name    string
		allowed scopes.Allowed
		want    syncerr.Code
	}{
		{"keys declared by this table", scopes.Allowed{"workspace_id": {"w1"}}, ""},
		{"keys declared only by another table are legal", scopes.Allowed{"org_id": {"*"}}, ""},
		{"empty grant", scopes.Allowed{}, ""},
		{"rule 3: a key no table declares is a server bug", scopes.Allowed{"workspace_id": {"w1"}, "tenant": {"t"}}, syncerr.InvalidSubscription},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := code(scopes.ValidateAllowed(declared, tc.allowed)); got != tc.want {
				t.Fatalf("code = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEffective(t *testing.T) {
	tests := []struct {
		name      string
		requested scopes.Map
		res       scopes.Resolution
		want      scopes.Outcome
	}{
		{
			name:      "rule 4: intersection per key, requested order",
			requested: scopes.Map{"workspace_id": {"w3", "w1", "w2"}},
			res:       scopes.Granted(scopes.Allowed{"workspace_id": {"w1", "w2"}}),
			want:      scopes.Outcome{Status: scopes.StatusActive, Effective: scopes.Map{"workspace_id": {"w1", "w2"}}},
		},
		{
			name:      "rule 4: '*' passes the requested values through",
			requested: scopes.Map{"workspace_id": {"w9"}, "project_id": {"1"}},
			res:       scopes.Granted(scopes.Allowed{"workspace_id": {"*"}, "project_id": {"1", "2"}}),
			want: scopes.Outcome{Status: scopes.StatusActive, Effective: scopes.Map{
				"workspace_id": {"w9"}, "project_id": {"1"},
			}},
		},
		{
			name:      "rule 4: keys only in allowed never enter effective",
			requested: scopes.Map{"workspace_id": {"w1"}},
			res:       scopes.Granted(scopes.Allowed{"workspace_id": {"w1"}, "project_id": {"*"}, "org_id": {"o"}}),
			want:      scopes.Outcome{Status: scopes.StatusActive, Effective: scopes.Map{"workspace_id": {"w1"}}},
		},
		{
			name:      "rule 5: resolver threw",
			requested: scopes.Map{"workspace_id": {"w1"}},
			res:       scopes.Failed(),
			want:      scopes.Outcome{Status: scopes.StatusRevoked, Effective: scopes.Map{}},
		},
		{
			name:      "rule 5: a requested key missing from allowed (partial loss) revokes",
			requested: scopes.Map{"workspace_id": {"w1"}, "project_id": {"1"}},
			res:       scopes.Granted(scopes.Allowed{"workspace_id": {"w1"}}),
			want:      scopes.Outcome{Status: scopes.StatusRevoked, Effective: scopes.Map{}},
		},
		{
			name:      "rule 4+5: an empty intersection excludes the key and revokes",
			requested: scopes.Map{"workspace_id": {"w1"}, "project_id": {"3"}},
			res:       scopes.Granted(scopes.Allowed{"workspace_id": {"w1"}, "project_id": {"1", "2"}}),
			want:      scopes.Outcome{Status: scopes.StatusRevoked, Effective: scopes.Map{}},
		},
		{
			name:      "rule 5: empty effective (nothing requested) revokes",
			requested: scopes.Map{},
			res:       scopes.Granted(scopes.Allowed{"workspace_id": {"*"}}),
			want:      scopes.Outcome{Status: scopes.StatusRevoked, Effective: scopes.Map{}},
		},
		{
			name:      "rule 5: a requested key with an empty list revokes",
			requested: scopes.Map{"workspace_id": {}},
			res:       scopes.Granted(scopes.Allowed{"workspace_id": {"*"}}),
			want:      scopes.Outcome{Status: scopes.StatusRevoked, Effective: scopes.Map{}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := scopes.Effective(tc.requested, tc.res)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Effective = %+v, want %+v", got, tc.want)
			}
			if got.Revoked() != (tc.want.Status == scopes.StatusRevoked) {
				t.Fatalf("Revoked() disagrees with Status")
			}
		})
	}
}

func TestEffectiveDoesNotAliasRequested(t *testing.T) {
	req := scopes.Map{"workspace_id": {"w1"}}
	got := scopes.Effective(req, scopes.Granted(scopes.Allowed{"workspace_id": {"*"}}))
	got.Effective["workspace_id"][0] = "changed"
	if req["workspace_id"][0] != "w1" {
		t.Fatal("effective map aliases the requested slice")
	}
}

func TestMatches(t *testing.T) {
	eff := scopes.Map{"workspace_id": {"w1", "w2"}, "project_id": {"1"}}
	tests := []struct {
		name   string
		stored scopes.Stored
		want   bool
	}{
		{"every effective key matches", scopes.Stored{"workspace_id": "w2", "project_id": "1"}, true},
		{"extra stored variables are ignored", scopes.Stored{"workspace_id": "w1", "project_id": "1", "org_id": "o"}, true},
		{"one dimension outside its list", scopes.Stored{"workspace_id": "w1", "project_id": "2"}, false},
		{"stored value missing for an effective key", scopes.Stored{"workspace_id": "w1"}, false},
		{"no implicit pairing: w2 with project 1 still matches", scopes.Stored{"workspace_id": "w2", "project_id": "1"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := scopes.Matches(tc.stored, eff); got != tc.want {
				t.Fatalf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAuthorizeWrite(t *testing.T) {
	tbl := tasks()
	grant := scopes.Granted(scopes.Allowed{"workspace_id": {"w1"}, "project_id": {"*"}})
	tests := []struct {
		name string
		row  scopes.Stored
		res  scopes.Resolution
		want syncerr.Code
	}{
		{"step 3: every declared variable allowed", scopes.Stored{"workspace_id": "w1", "project_id": "7"}, grant, ""},
		{"step 3: one value outside the grant", scopes.Stored{"workspace_id": "w2", "project_id": "7"}, grant, syncerr.Forbidden},
		{"step 2: missing scope value denies", scopes.Stored{"workspace_id": "w1"}, grant, syncerr.Forbidden},
		{"step 2: empty scope value denies even under '*'", scopes.Stored{"workspace_id": "w1", "project_id": ""}, grant, syncerr.Forbidden},
		{"step 3: all declared keys are required (no partial pass)", scopes.Stored{"workspace_id": "w1", "project_id": "7"},
			scopes.Granted(scopes.Allowed{"workspace_id": {"w1"}}), syncerr.Forbidden},
		{"step 4: a throwing resolver forbids", scopes.Stored{"workspace_id": "w1", "project_id": "7"}, scopes.Failed(), syncerr.Forbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := code(scopes.AuthorizeWrite(tbl, tc.row, tc.res)); got != tc.want {
				t.Fatalf("code = %q, want %q", got, tc.want)
			}
		})
	}
}

func row(values map[string]string) scopes.ValueFunc {
	return func(col string) (string, bool) {
		v, ok := values[col]
		return v, ok
	}
}

func TestExtractStored(t *testing.T) {
	tbl := tasks()
	tests := []struct {
		name string
		row  map[string]string
		want scopes.Stored
		code syncerr.Code
	}{
		{"explicit and implicit columns", map[string]string{"id": "t1", "workspace_id": "w1", "proj": "7"},
			scopes.Stored{"workspace_id": "w1", "project_id": "7"}, ""},
		{"missing column", map[string]string{"id": "t1", "workspace_id": "w1"}, nil, syncerr.MissingScopes},
		{"empty value", map[string]string{"id": "t1", "workspace_id": "", "proj": "7"}, nil, syncerr.MissingScopes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scopes.ExtractStored(tbl, row(tc.row))
			if code(err) != tc.code {
				t.Fatalf("code = %q, want %q (err %v)", code(err), tc.code, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("stored = %v, want %v", got, tc.want)
			}
		})
	}
	partial := scopes.Collect(tbl, row(map[string]string{"workspace_id": "w1", "proj": ""}))
	if !reflect.DeepEqual(partial, scopes.Stored{"workspace_id": "w1"}) {
		t.Fatalf("Collect = %v", partial)
	}
}

func TestIndexKeys(t *testing.T) {
	got := scopes.IndexKeys(tasks(), scopes.Stored{"workspace_id": "w1", "project_id": "7"})
	want := []string{"ws:w1", "project:7"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("IndexKeys = %v, want %v", got, want)
	}
}

type named string

func TestRenderValue(t *testing.T) {
	s := "x"
	tests := []struct {
		name string
		v    any
		want string
		ok   bool
	}{
		{"string verbatim", "w1", "w1", true},
		{"named string type", named("n"), "n", true},
		{"pointer to string", &s, "x", true},
		{"empty string has no form", "", "", false},
		{"integer decimal", int64(-42), "-42", true},
		{"integer max safe", int64(9007199254740991), "9007199254740991", true},
		{"boolean true", true, "true", true},
		{"boolean false", false, "false", true},
		{"json raw text", json.RawMessage(`{"a":1}`), `{"a":1}`, true},
		{"float integral", 3.0, "3", true},
		{"float fraction", 0.1, "0.1", true},
		{"nil", nil, "", false},
		{"bytes", []byte("ab"), "", false},
		{"nil pointer", (*string)(nil), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := scopes.RenderValue(tc.v)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("RenderValue(%#v) = %q, %v; want %q, %v", tc.v, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestFormatNumber pins ECMAScript Number::toString outputs.
func TestFormatNumber(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1.5, "-1.5"},
		{123.456, "123.456"},
		{0.000001, "0.000001"},
		{0.0000001, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{1.2345e22, "1.2345e+22"},
		{123456789012345680000, "123456789012345680000"},
		{0.30000000000000004, "0.30000000000000004"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
	}
	for _, tc := range tests {
		if got := scopes.FormatNumber(tc.f); got != tc.want {
			t.Errorf("FormatNumber(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestAllowedAllows(t *testing.T) {
	a := scopes.Allowed{"w": {"*"}, "p": {"1"}}
	if !a.Allows("w", "anything") || a.Allows("w", "") || !a.Allows("p", "1") || a.Allows("p", "2") || a.Allows("x", "1") {
		t.Fatal("Allows disagrees with §3.4 step 3")
	}
}

func TestDigestIgnoresOrderAndDuplicates(t *testing.T) {
	a := scopes.Map{"workspace_id": {"w2", "w1", "w1"}, "project_id": {"1"}}
	b := scopes.Map{"project_id": {"1"}, "workspace_id": {"w1", "w2"}}
	if a.Digest() != b.Digest() || len(a.Digest()) != 64 {
		t.Fatalf("digests differ: %s vs %s", a.Digest(), b.Digest())
	}
	if a.Digest() == (scopes.Map{"workspace_id": {"w1"}}).Digest() {
		t.Fatal("different maps share a digest")
	}
}

func TestResolutionAndClones(t *testing.T) {
	a := scopes.Allowed{"w": {"w1"}}
	g := scopes.Granted(a)
	if !g.OK() || !reflect.DeepEqual(g.Allowed(), a) {
		t.Fatal("Granted lost its grant")
	}
	if f := scopes.Failed(); f.OK() || f.Allowed() != nil {
		t.Fatal("Failed carries a grant")
	}
	c := a.Clone()
	c["w"][0] = "x"
	m := scopes.Map{"w": {"w1"}}
	mc := m.Clone()
	mc["w"][0] = "x"
	if a["w"][0] != "w1" || m["w"][0] != "w1" {
		t.Fatal("Clone aliases its source")
	}
	if scopes.Allowed(nil).Clone() != nil || scopes.Map(nil).Clone() != nil {
		t.Fatal("nil clones are not nil")
	}
	if scopes.StatusActive.String() != "active" || scopes.StatusRevoked.String() != "revoked" {
		t.Fatal("status names")
	}
}
