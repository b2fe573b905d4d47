package canonjson

import (
	"math"
	"testing"
)

func TestScopeDigestMatchesVectorDescriptor(t *testing.T) {
	// response/bootstrap-segments pins this digest for {"project":["p1"]}.
	got := ScopeDigest(map[string][]string{"project": {"p1"}})
	if got != "5a993aa4d503af6f5dc77acc12ad399ff2e9d933c393f4de6af5f6aef4fa2977" {
		t.Fatalf("digest %s", got)
	}
}

func TestScopeJSONSortsAndDeduplicates(t *testing.T) {
	got := string(ScopeJSON(map[string][]string{
		"team":    {"t2", "t1", "t2"},
		"project": {"\uff61", "\U0001F600"},
	}))
	want := `{"project":["` + "\U0001F600" + `","` + "\uff61" + `"],"team":["t1","t2"]}`
	if got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestAppendNumberFollowsECMAScript(t *testing.T) {
	cases := map[float64]string{
		0: "0", math.Copysign(0, -1): "0", 1: "1", -7: "-7", 0.125: "0.125", 3.5: "3.5",
		1e21: "1e+21", 1e20: "100000000000000000000", 1.5e-7: "1.5e-7", 0.000001: "0.000001",
		123456789.125: "123456789.125", 9007199254740991: "9007199254740991", 5e-324: "5e-324",
		1.7976931348623157e308: "1.7976931348623157e+308", 0.1: "0.1", -2.5e25: "-2.5e+25",
		math.Inf(1): "null", math.NaN(): "null",
	}
	for f, want := range cases {
		if got := string(AppendNumber(nil, f)); got != want {
			t.Errorf("AppendNumber(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestValidAcceptsRFC8259Documents(t *testing.T) {
	valid := []string{`true`, ` 7 `, `"x"`, `null`, `{"a":[1,2,{"b":null}]}`, `-0.5e+3`, `[]`, `{}`, `"\u00e9\ud800"`}
	invalid := []string{``, `{`, `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `+1`, `"a` + "\x01" + `"`, `tru`, `{"a" 1}`, `[1 2]`, `"\x"`, `1 2`, `NaN`, `{1:2}`}
	for _, s := range valid {
		if !ValidString(s) || !Valid([]byte(s)) {
			t.Errorf("valid %q rejected", s)
		}
	}
	for _, s := range invalid {
		if ValidString(s) {
			t.Errorf("invalid %q accepted", s)
		}
	}
}

func TestValidBoundsNesting(t *testing.T) {
	deep := make([]byte, 0, 2*MaxDepth+2)
	for range MaxDepth + 1 {
		deep = append(deep, '[')
	}
	for range MaxDepth + 1 {
		deep = append(deep, ']')
	}
	if Valid(deep) {
		t.Fatal("nesting beyond MaxDepth accepted")
	}
}

func TestParseAndMarshalFollowJSONParseSemantics(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":1,"a":2,"b":3}`, `{"b":3,"a":2}`},
		{`{"x":1,"10":2,"9":3}`, `{"9":3,"10":2,"x":1}`},
		{`[1.50, 1e400, "\ud83d\ude00", "\udc00", "<&>\u2028"]`, `[1.5,null,"` + "\U0001F600" + `","\udc00","<&>` + "\u2028" + `"]`},
		{`{"tags": ["a", "b"],  "unicode": "𝔘"}`, `{"tags":["a","b"],"unicode":"𝔘"}`},
	}
	for _, c := range cases {
		v, err := ParseString(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := string(Marshal(v, "")); got != c.want {
			t.Errorf("%s: got %s want %s", c.in, got, c.want)
		}
	}
}

func TestMarshalIndentsLikeStringify(t *testing.T) {
	o := NewObject(2).Set("a", []Value{int64(1), NewObject(0)}).Set("b", []Value{})
	want := "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}"
	if got := string(Marshal(o, "  ")); got != want {
		t.Fatalf("got %q", got)
	}
}

func TestValidDoesNotAllocate(t *testing.T) {
	b := []byte(`{"tags": ["a", "b"], "n": -1.5e3, "nested": {"x": [true, false, null]}}`)
	if n := testing.AllocsPerRun(100, func() { Valid(b) }); n != 0 {
		t.Fatalf("Valid allocated %.0f times", n)
	}
}

func TestParseScopesReadsTheHeaderForm(t *testing.T) {
	m, err := ParseScopes([]byte(`{"project":["p2","p1"],"team":[]}`))
	if err != nil || len(m["project"]) != 2 || len(m["team"]) != 0 {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{`[]`, `{"a":"b"}`, `{"a":[1]}`, `{"a":["\ud800"]}`, `{`} {
		if _, err := ParseScopes([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if string(ScopeJSON(m)) != `{"project":["p1","p2"],"team":[]}` {
		t.Fatal(string(ScopeJSON(m)))
	}
}
