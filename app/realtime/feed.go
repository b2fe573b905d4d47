package realtime

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// A feed is one partition's recent commits on this node: read from
// storage once per notice, whole, and matched by every session against
// its registrations in memory. A node with a thousand sockets on a
// partition reads each commit once, not once per socket.
//
// Bounds: the feed keeps at most feedMaxCommits commits and feedMaxBytes
// of row payload, dropping the oldest; a read that the change limit cuts
// short leaves a gap. A session whose window starts below the feed (it
// was behind, or the gap) reads its registrations' windows itself.
type feed struct {
	epoch string
	// commits holds every commit in (base, through], oldest first.
	base, through int64
	commits       []commit.Commit
	bytes         int
	started       bool
	loading       *feedLoad
}

type feedLoad struct {
	done chan struct{}
	err  error
}

const (
	feedMaxCommits = 4096
	feedMaxBytes   = 16 << 20
	// feedReadTimeout bounds a shared read: it runs for every waiting
	// session, so no one session's context may cancel it.
	feedReadTimeout = 30 * time.Second
)

// feeds holds the feeds of the partitions with sessions on this node.
type feeds struct {
	mu sync.Mutex
	m  map[string]*feed
}

// window returns the partition's commits in (after, target] as the feed
// holds them (shared: callers must not modify them); ok is false when the
// feed cannot serve the window and the caller must read it itself.
func (fs *feeds) window(ctx context.Context, st Store, partition, epoch string, after, target int64) (cs []commit.Commit, ok bool, err error) {
	fs.mu.Lock()
	f := fs.m[partition]
	if f == nil {
		f = &feed{}
		fs.m[partition] = f
	}
	for {
		if !f.started || f.epoch != epoch || (len(f.commits) == 0 && f.loading == nil && after > f.through) {
			// Nothing held that this window could use: start at it.
			*f = feed{epoch: epoch, base: after, through: after, started: true}
		}
		if after < f.base {
			fs.mu.Unlock()
			return nil, false, nil
		}
		if target <= f.through {
			cs := f.slice(after, target)
			fs.mu.Unlock()
			return cs, true, nil
		}
		if l := f.loading; l != nil {
			fs.mu.Unlock()
			select {
			case <-l.done:
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
			if l.err != nil {
				return nil, false, l.err
			}
			fs.mu.Lock()
			continue
		}
		// The read is shared by every waiting session: it runs detached,
		// so no one session's context cancels it, and each waits on its own.
		l := &feedLoad{done: make(chan struct{})}
		f.loading = l
		go fs.load(f, l, st, partition, epoch, f.through, target)
	}
}

func (fs *feeds) load(f *feed, l *feedLoad, st Store, partition, epoch string, from, target int64) {
	ctx, cancel := context.WithTimeout(context.Background(), feedReadTimeout)
	sp, err := st.ReadCommitRange(ctx, partition, ports.CommitRange{AfterSeq: from, ThroughSeq: target, LimitChanges: deltaChangeCap})
	cancel()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.loading = nil
	l.err = err
	if err == nil && f.epoch == epoch && f.through == from {
		f.extend(sp, target)
	}
	close(l.done)
}

// extend appends a span read after through; a span the limit cut short
// leaves a gap up to target (those windows are read by their sessions).
func (f *feed) extend(sp ports.CommitSpan, target int64) {
	if sp.ThroughSeq < target {
		*f = feed{epoch: f.epoch, base: target, through: target, started: true}
		return
	}
	for i := range sp.Commits {
		f.commits = append(f.commits, sp.Commits[i])
		f.bytes += commitBytes(&sp.Commits[i])
	}
	f.through = sp.ThroughSeq
	drop := 0
	for len(f.commits)-drop > feedMaxCommits || (f.bytes > feedMaxBytes && drop < len(f.commits)) {
		f.bytes -= commitBytes(&f.commits[drop])
		f.base = f.commits[drop].Seq
		drop++
	}
	if drop > 0 {
		f.commits = append(f.commits[:0:0], f.commits[drop:]...)
	}
}

func (f *feed) slice(after, target int64) []commit.Commit {
	lo := sort.Search(len(f.commits), func(i int) bool { return f.commits[i].Seq > after })
	hi := sort.Search(len(f.commits), func(i int) bool { return f.commits[i].Seq > target })
	return f.commits[lo:hi:hi]
}

func commitBytes(c *commit.Commit) int {
	n := 64
	for i := range c.Changes {
		n += 64 + len(c.Changes[i].RowID) + len(c.Changes[i].Row)
	}
	return n
}

// forget drops the partition's feed once no session of it is left.
func (fs *feeds) forget(partition string) {
	fs.mu.Lock()
	delete(fs.m, partition)
	fs.mu.Unlock()
}

// matching is r's part of cs: the commits with a change of r's table
// within r's effective scopes, carrying only those changes.
func matching(cs []commit.Commit, r registration) []commit.Commit {
	var out []commit.Commit
	for i := range cs {
		var chs []commit.Change
		for _, ch := range cs[i].Changes {
			if ch.Table == r.table && commit.MatchScopes(ch.Scopes, r.effective) {
				chs = append(chs, ch)
			}
		}
		if len(chs) > 0 {
			c := cs[i]
			c.Changes = chs
			out = append(out, c)
		}
	}
	return out
}
