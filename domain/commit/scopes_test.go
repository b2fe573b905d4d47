package commit

import "testing"

func TestMatchScopes(t *testing.T) {
	stored := map[string]string{"project": "p1", "owner": "o1"}
	tests := []struct {
		name   string
		filter ScopeFilter
		want   bool
	}{
		{"empty filter", ScopeFilter{}, true},
		{"one variable", ScopeFilter{"project": {"p2", "p1"}}, true},
		{"value not allowed", ScopeFilter{"project": {"p2"}}, false},
		{"two variables", ScopeFilter{"project": {"p1"}, "owner": {"o1"}}, true},
		{"second variable fails", ScopeFilter{"project": {"p1"}, "owner": {"o2"}}, false},
		{"variable not stored", ScopeFilter{"team": {"p1"}}, false},
		{"empty value list", ScopeFilter{"project": {}}, false},
	}
	for _, tt := range tests {
		if got := MatchScopes(stored, tt.filter); got != tt.want {
			t.Errorf("%s: MatchScopes = %v", tt.name, got)
		}
	}
}

func TestIndexVariable(t *testing.T) {
	if v := IndexVariable(nil); v != "" {
		t.Fatalf("empty filter → %q", v)
	}
	if v := IndexVariable(ScopeFilter{"project": {"a"}, "owner": {"b"}, "team": nil}); v != "owner" {
		t.Fatalf("IndexVariable = %q, want the first sorted key", v)
	}
}
