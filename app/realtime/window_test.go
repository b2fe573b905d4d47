package realtime_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/domain/commit"
	domrt "github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// On a window host each registration gets its deltas in the shape of the
// schema version its last pull recorded; an entry recording none
// registers nothing until a pull records one.
func TestWindowDeltasFollowEachRegistrationsCodec(t *testing.T) {
	w := ssptest.Window(t)
	v3 := w.Current().Table("tasks")
	row := ssptest.Full(t, v3, ssptest.Cols{"id": rowcodec.String("t-1"), "project_id": rowcodec.String("pr-1"),
		"title": rowcodec.String("one"), "done": rowcodec.Bool(false), "estimate": rowcodec.Null(),
		"attachment": rowcodec.Null(), "priority": rowcodec.Int(4)})

	tests := []struct {
		name    string
		version int32 // the version the tasks entry records (0: none)
		cols    int   // the delta row's columns; 0: no tasks section
	}{
		{name: "an older client", version: 2, cols: 6},
		{name: "a current client", version: 3, cols: 7},
		{name: "an entry without a version", version: 0},
		{name: "a version the window does not serve", version: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subs, _ := json.Marshal([]map[string]any{
				{"id": "projects", "table": "projects", "scopes": map[string][]string{"owner": {"alice"}}, "schemaVersion": 3},
				{"id": "tasks", "table": "tasks", "scopes": map[string][]string{"project_id": {"pr-1"}}, "schemaVersion": tt.version},
			})
			st := &fakeStore{binds: map[string]string{}, clients: map[string]*ports.ClientRecord{
				"b": {Partition: "p", ClientID: "b", ActorID: "alice", WireVersion: 3, Cursor: 0, Subscriptions: subs},
			}}
			f := &fixture{st: st, fan: &fakeFanout{}}
			f.hub = f.rebuild(t, realtime.Options{Store: st, Resolver: windowGrants{},
				Window: func() *schema.Window { return w }})
			c, _ := f.connect(t, "alice", "b")

			st.mu.Lock()
			st.commits = append(st.commits, commit.Commit{Seq: 1, ActorID: "alice", Changes: []commit.Change{
				{Table: "projects", RowID: "p", Op: commit.OpDelete, Scopes: map[string]string{"owner": "alice"}},
				{Table: "tasks", RowID: "t-1", Op: commit.OpUpsert, RowVersion: 1, Scopes: map[string]string{"project_id": "pr-1"}, Row: row},
			}})
			st.mu.Unlock()
			f.publish(1)

			m := c.next(t)
			if !m.Binary || m.Data[0] != domrt.TagDelta {
				t.Fatalf("want a delta, got %s", m.Data)
			}
			msg, err := ssp2.Decode(m.Data[1:])
			if err != nil {
				t.Fatal(err)
			}
			sections, cols := map[string]bool{}, 0
			sub := ""
			for _, fr := range msg.Frames {
				switch fr := fr.(type) {
				case *ssp2.SubStart:
					sub, sections[fr.ID] = fr.ID, true
				case *ssp2.Commit:
					if sub != "tasks" {
						continue
					}
					tbl := w.View(tt.version).Table("tasks").Table()
					if _, err := rowcodec.New(tbl).DecodeRow(fr.Changes[0].Row, nil); err != nil {
						t.Fatalf("delta row in version %d's shape: %v", tt.version, err)
					}
					cols = len(tbl.Columns)
				}
			}
			if !sections["projects"] || sections["tasks"] != (tt.cols > 0) || cols != tt.cols {
				t.Fatalf("sections %v, row of %d columns; want tasks with %d", sections, cols, tt.cols)
			}
		})
	}
}

// windowGrants grants alice's projects and project pr-1.
type windowGrants struct{}

func (windowGrants) ResolveScopes(context.Context, ports.ScopeRequest) (scopes.Allowed, error) {
	return scopes.Allowed{"owner": {"alice"}, "project_id": {"pr-1"}}, nil
}
