package realtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/syncd-dev/syncd/app/realtime"
	"github.com/syncd-dev/syncd/domain/commit"
	domrt "github.com/syncd-dev/syncd/domain/realtime"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/ports"
)

// clients adds n caught-up clients of alice registered on her projects
// and connects them.
func (f *fixture) clients(t *testing.T, n int) []*fakeConn {
	t.Helper()
	subs, _ := json.Marshal([]map[string]any{{"id": "projects", "table": "projects", "scopes": map[string][]string{"owner": {"alice"}}}})
	var cs []*fakeConn
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		f.st.mu.Lock()
		f.st.clients[id] = &ports.ClientRecord{Partition: "p", ClientID: id, ActorID: "alice", WireVersion: 3, Cursor: int64(len(f.st.commits)), Subscriptions: subs}
		f.st.mu.Unlock()
		c, _ := f.connect(t, "alice", id)
		cs = append(cs, c)
	}
	return cs
}

// deltaSeqs decodes a delta's commit seqs.
func deltaSeqs(t *testing.T, c *fakeConn) []int64 {
	t.Helper()
	m := c.next(t)
	if !m.Binary || m.Data[0] != domrt.TagDelta {
		t.Fatalf("want a delta, got %s", m.Data)
	}
	msg, err := ssp2.Decode(m.Data[1:])
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, fr := range msg.Frames {
		if c, ok := fr.(*ssp2.Commit); ok {
			seqs = append(seqs, c.CommitSeq)
		}
	}
	return seqs
}

// commitChanges appends a commit of n changes to alice's projects.
func (s *fakeStore) commitChanges(n int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := int64(len(s.commits) + 1)
	c := commit.Commit{Seq: seq, ActorID: "alice"}
	for i := range n {
		c.Changes = append(c.Changes, commit.Change{Table: "projects", RowID: fmt.Sprint("p", i), Op: commit.OpDelete, Scopes: map[string]string{"owner": "alice"}})
	}
	s.commits = append(s.commits, c)
	return seq
}

func TestSessionsShareOneReadPerCommit(t *testing.T) {
	t.Run("a node reads each commit once, whatever its sockets", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		cs := f.clients(t, 20)
		f.st.commit("bob") // matches no one: read, matched in memory, sent to no one
		f.publish(1)
		f.publish(f.st.commit("alice"))
		for _, c := range cs {
			if got := deltaSeqs(t, c); fmt.Sprint(got) != "[2]" {
				t.Fatalf("delta commits %v, want [2]", got)
			}
		}
		f.publish(f.st.commit("alice"))
		for _, c := range cs {
			if got := deltaSeqs(t, c); fmt.Sprint(got) != "[3]" {
				t.Fatalf("delta commits %v, want [3]", got)
			}
		}
		// Commits 1–2 may be read together or apart, 3 apart: never per socket.
		if r, w := f.st.reads(); r < 2 || r > 3 || w != 0 {
			t.Fatalf("%d range reads and %d window reads for 3 commits and 20 sockets", r, w)
		}
	})
	t.Run("a commit past the read's change limit is read by each session for itself", func(t *testing.T) {
		f := newFixture(t, realtime.Options{})
		cs := f.clients(t, 3)
		f.st.rangeLimit = 2
		f.publish(f.st.commitChanges(3))
		for _, c := range cs {
			if got := deltaSeqs(t, c); fmt.Sprint(got) != "[1]" {
				t.Fatalf("delta commits %v, want [1]", got)
			}
		}
		if _, w := f.st.reads(); w != 3 {
			t.Fatalf("%d window reads, want one per session", w)
		}
		// Past the gap the feed serves again.
		f.publish(f.st.commit("alice"))
		for _, c := range cs {
			if got := deltaSeqs(t, c); fmt.Sprint(got) != "[2]" {
				t.Fatalf("delta commits %v, want [2]", got)
			}
		}
		if _, w := f.st.reads(); w != 3 {
			t.Fatalf("%d window reads after the gap, want still 3", w)
		}
	})
}

// gatedStore holds range reads until released, failing them once their
// context ends (as a database driver does).
type gatedStore struct {
	*fakeStore
	entered chan struct{}
	release chan struct{}
}

func (g *gatedStore) ReadCommitRange(ctx context.Context, p string, r ports.CommitRange) (ports.CommitSpan, error) {
	g.entered <- struct{}{}
	<-g.release
	if err := ctx.Err(); err != nil {
		return ports.CommitSpan{}, err
	}
	return g.fakeStore.ReadCommitRange(ctx, p, r)
}

func TestAClosingSessionDoesNotCancelTheSharedRead(t *testing.T) {
	f := newFixture(t, realtime.Options{})
	g := &gatedStore{fakeStore: f.st, entered: make(chan struct{}, 1), release: make(chan struct{})}
	f.hub = f.rebuild(t, realtime.Options{Store: g})
	cs := f.clients(t, 5)
	f.publish(f.st.commit("alice"))
	<-g.entered
	// Every session but the last leaves while the read is in flight; the
	// read was begun on behalf of one of them.
	for _, c := range cs[:4] {
		_ = c.Close(ports.CloseNormal, "")
	}
	close(g.release)
	if got := deltaSeqs(t, cs[4]); fmt.Sprint(got) != "[1]" {
		t.Fatalf("delta commits %v, want [1]", got)
	}
}

// A feed holds a bounded tail of the log: what it drops from its front
// is no longer its to serve. A session whose window reaches below what
// the feed kept reads that window itself, so its delta is still every
// commit after its cursor (SPEC §8.2: cursor-contiguous), never the
// feed's tail alone.
func TestAFeedServesOnlyWhatItKept(t *testing.T) {
	f := newFixture(t, realtime.Options{})
	c, _ := f.connect(t, "alice", "b")
	// More commits at once than a feed keeps (4,096): the feed reads them
	// all and drops the oldest.
	const n = 5000
	for range n {
		f.st.commit("alice")
	}
	f.publish(n)
	seqs := deltaSeqs(t, c)
	if len(seqs) != n || seqs[0] != 1 || seqs[n-1] != n {
		first, last := int64(0), int64(0)
		if len(seqs) > 0 {
			first, last = seqs[0], seqs[len(seqs)-1]
		}
		t.Fatalf("delta of %d commits (%d through %d), want all %d from 1", len(seqs), first, last, n)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("delta commit %d is seq %d: not contiguous", i, s)
		}
	}
	// The feed serves again above what it kept.
	f.publish(f.st.commit("alice"))
	if got := deltaSeqs(t, c); fmt.Sprint(got) != fmt.Sprint([]int64{n + 1}) {
		t.Fatalf("next delta %v, want [%d]", got, n+1)
	}
}
