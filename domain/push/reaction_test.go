package push_test

import (
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/push"
)

func TestReactionType(t *testing.T) {
	for s, want := range map[string]bool{
		"project.welcome": true, "mail/send:v2": true, "A_b-c": true, strings.Repeat("a", 128): true,
		"": false, "1st": false, ".x": false, "a b": false, "é": false, strings.Repeat("a", 129): false,
	} {
		if got := push.ReactionType(s); got != want {
			t.Errorf("ReactionType(%q) = %v, want %v", s, got, want)
		}
	}
}
