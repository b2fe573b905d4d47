package operations_test

import (
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/push"
)

func TestCommandIdentity(t *testing.T) {
	tests := []struct {
		name                       string
		actor, client, op, request string
		wantClient, wantCommitID   string
	}{
		{"plain ids", "alice", "c1", "tasks.complete", "r1", `["remote-command","alice","c1"]`, `["tasks.complete","r1"]`},
		{"delimiters cannot collide", "a", "b,c", "x\",\"y", "z", `["remote-command","a","b,c"]`, `["x\",\"y","z"]`},
		{"written as JSON.stringify writes: no HTML or line-separator escapes", "<a>&", "\u2028", "op", "\n",
			"[\"remote-command\",\"<a>&\",\"\u2028\"]", `["op","\n"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, k := operations.CommandIdentity(tt.actor, tt.client, tt.op, tt.request)
			if c != tt.wantClient || k != tt.wantCommitID {
				t.Fatalf("got %s %s, want %s %s", c, k, tt.wantClient, tt.wantCommitID)
			}
			if !strings.HasPrefix(c, push.ReservedClientIDPrefix) {
				t.Fatalf("%s is outside the reserved namespace", c)
			}
		})
	}
}
