package realtime

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/scopes"
)

// The dispatcher's key prefilter never rules out a registration a change
// matches (it would lose a delta), whichever variable drives it.
func TestWantsAgreesWithTheScopeFilter(t *testing.T) {
	regs := map[string]scopes.Map{
		"one variable":            {"project": {"p1"}},
		"several values":          {"project": {"p1", "p2", "p3"}},
		"two variables":           {"project": {"p1", "p2"}, "owner": {"o1"}},
		"two variables many":      {"project": {"p1"}, "owner": {"o1", "o2", "o3"}},
		"value of another table":  {"owner": {"o9"}},
		"variable never in a row": {"team": {"t1"}},
		"empty value list":        {"project": {}},
	}
	changes := []commit.Change{
		{Table: "tasks", Scopes: map[string]string{"project": "p1", "owner": "o1"}},
		{Table: "tasks", Scopes: map[string]string{"project": "p2", "owner": "o3"}},
		{Table: "tasks", Scopes: map[string]string{"project": "p3"}},
		{Table: "notes", Scopes: map[string]string{"owner": "o9"}},
		{Table: "tasks", Scopes: map[string]string{"project": "p1", "owner": "o2"}},
	}
	for name, eff := range regs {
		r := newRegistration("s", "tasks", eff)
		s := &Session{regs: []registration{r}}
		for i, ch := range changes {
			cs := []commit.Commit{{Seq: 1, Changes: []commit.Change{ch}}}
			want := ch.Table == "tasks" && commit.MatchScopes(ch.Scopes, eff)
			if got := s.wants(cs, changedKeys(cs)); got != want {
				t.Errorf("%s, change %d: wants = %v, the scope filter says %v", name, i, got, want)
			}
		}
		// All changes in one commit: wanted when any one matches.
		all := []commit.Commit{{Seq: 1, Changes: changes}}
		want := len(matching(all, r)) > 0
		if got := s.wants(all, changedKeys(all)); got != want {
			t.Errorf("%s, every change: wants = %v, want %v", name, got, want)
		}
	}
}
