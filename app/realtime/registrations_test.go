package realtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/domain/commit"
	domrt "github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// grantTable is a resolver whose grant the test changes, as a host
// changes an actor's permissions.
type grantTable struct {
	mu      sync.Mutex
	allowed scopes.Allowed
}

func (g *grantTable) ResolveScopes(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.allowed.Clone(), nil
}

func (g *grantTable) set(a scopes.Allowed) {
	g.mu.Lock()
	g.allowed = a
	g.mu.Unlock()
}

// commitRow appends a commit of one row of table carrying the stored
// scope variable=value.
func (f *fakeStore) commitRow(table, variable, value string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := int64(len(f.commits) + 1)
	f.commits = append(f.commits, commit.Commit{Seq: seq, ActorID: "alice", Changes: []commit.Change{
		{Table: table, RowID: fmt.Sprint(table, "-", seq), Op: commit.OpDelete, Scopes: map[string]string{variable: value}},
	}})
	return seq
}

// deltaSections decodes the next message as a delta: per section, its
// subscription id and its commit seqs.
func deltaSections(t *testing.T, c *fakeConn) map[string][]int64 {
	t.Helper()
	m := c.next(t)
	if !m.Binary || m.Data[0] != domrt.TagDelta {
		t.Fatalf("want a delta, got %s", m.Data)
	}
	msg, err := ssp2.Decode(m.Data[1:])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int64{}
	sub := ""
	for _, fr := range msg.Frames {
		switch fr := fr.(type) {
		case *ssp2.SubStart:
			sub = fr.ID
			out[sub] = nil
		case *ssp2.Commit:
			out[sub] = append(out[sub], fr.CommitSeq)
		}
	}
	return out
}

// SPEC §8.1 and §3.2: a socket is registered for the effective scopes,
// what it asked for intersected with what it is granted now, never for
// what it asked for. A grant narrowed or revoked by the host (§8.7's
// refresh) stops the deltas of what it no longer covers. Each case ends
// on a commit the socket is still granted, so a delta of anything else
// shows at once as the next message.
func TestRegistrationsFollowTheGrant(t *testing.T) {
	subs := func(t *testing.T, s ...map[string]any) []byte {
		t.Helper()
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	projects := func(owners ...string) map[string]any {
		return map[string]any{"id": "projects", "table": "projects", "scopes": map[string][]string{"owner": owners}}
	}
	tasks := map[string]any{"id": "tasks", "table": "tasks", "scopes": map[string][]string{"project_id": {"pa"}}}
	for _, tc := range []struct {
		name  string
		subs  []map[string]any
		grant scopes.Allowed
		// before the refresh: commits (table, variable, value) and the
		// delta they make
		before     [][3]string
		wantBefore map[string][]int64
		// the grant after the refresh (nil: no refresh)
		refresh scopes.Allowed
		after   [][3]string
		want    map[string][]int64
	}{
		{
			name:  "a value asked for and not granted is never delivered",
			subs:  []map[string]any{projects("alice", "bob")},
			grant: scopes.Allowed{"owner": {"alice"}},
			after: [][3]string{{"projects", "owner", "bob"}, {"projects", "owner", "alice"}},
			want:  map[string][]int64{"projects": {2}},
		},
		{
			name:       "a grant narrowed by a refresh stops the values it dropped",
			subs:       []map[string]any{projects("alice", "bob")},
			grant:      scopes.Allowed{"owner": {"alice", "bob"}},
			before:     [][3]string{{"projects", "owner", "bob"}},
			wantBefore: map[string][]int64{"projects": {1}},
			refresh:    scopes.Allowed{"owner": {"alice"}},
			after:      [][3]string{{"projects", "owner", "bob"}, {"projects", "owner", "alice"}},
			want:       map[string][]int64{"projects": {3}},
		},
		{
			name:       "a variable revoked by a refresh stops its subscription",
			subs:       []map[string]any{projects("alice"), tasks},
			grant:      scopes.Allowed{"owner": {"alice"}, "project_id": {"pa"}},
			before:     [][3]string{{"projects", "owner", "alice"}},
			wantBefore: map[string][]int64{"projects": {1}},
			refresh:    scopes.Allowed{"project_id": {"pa"}},
			after:      [][3]string{{"projects", "owner", "alice"}, {"tasks", "project_id", "pa"}},
			want:       map[string][]int64{"tasks": {3}},
		},
		{
			name:       "a grant widened by a refresh adds its values",
			subs:       []map[string]any{projects("alice", "bob")},
			grant:      scopes.Allowed{"owner": {"alice"}},
			before:     [][3]string{{"projects", "owner", "alice"}},
			wantBefore: map[string][]int64{"projects": {1}},
			refresh:    scopes.Allowed{"owner": {"alice", "bob"}},
			after:      [][3]string{{"projects", "owner", "bob"}},
			want:       map[string][]int64{"projects": {2}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &grantTable{allowed: tc.grant}
			f := newFixture(t, realtime.Options{Resolver: g})
			f.st.mu.Lock()
			f.st.clients["b"].Subscriptions = subs(t, tc.subs...)
			f.st.mu.Unlock()
			c, _ := f.connect(t, "alice", "b")
			apply := func(cs [][3]string) {
				for _, w := range cs {
					f.publish(f.st.commitRow(w[0], w[1], w[2]))
				}
			}
			if len(tc.before) > 0 {
				apply(tc.before)
				if got := deltaSections(t, c); fmt.Sprint(got) != fmt.Sprint(tc.wantBefore) {
					t.Fatalf("delta before the refresh %v, want %v", got, tc.wantBefore)
				}
			}
			if tc.refresh != nil {
				g.set(tc.refresh)
				if n := f.hub.RefreshScopes(context.Background(), "p", ""); n != 1 {
					t.Fatalf("%d sessions refreshed, want 1", n)
				}
			}
			apply(tc.after)
			if got := deltaSections(t, c); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("delta %v, want %v", got, tc.want)
			}
		})
	}
}
