package realtime

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
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
	log feedLog // guarded by feeds.mu

	// The dispatcher's: the highest seq noticed, its wake-up, its end.
	target atomic.Int64
	wake   chan struct{}
	stop   chan struct{}
}

// feedLog is what a feed holds of the partition's log.
type feedLog struct {
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
		fs.mu.Unlock()
		return nil, false, nil // the partition's last session left
	}
	fl := &f.log
	for {
		if !fl.started || fl.epoch != epoch || (len(fl.commits) == 0 && fl.loading == nil && after > fl.through) {
			// Nothing held that this window could use: start at it.
			*fl = feedLog{epoch: epoch, base: after, through: after, started: true}
		}
		if after < fl.base {
			fs.mu.Unlock()
			return nil, false, nil
		}
		if target <= fl.through {
			cs := fl.slice(after, target)
			fs.mu.Unlock()
			return cs, true, nil
		}
		if l := fl.loading; l != nil {
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
		fl.loading = l
		go fs.load(fl, l, st, partition, epoch, fl.through, target)
	}
}

func (fs *feeds) load(fl *feedLog, l *feedLoad, st Store, partition, epoch string, from, target int64) {
	ctx, cancel := context.WithTimeout(context.Background(), feedReadTimeout)
	sp, err := st.ReadCommitRange(ctx, partition, ports.CommitRange{AfterSeq: from, ThroughSeq: target, LimitChanges: deltaChangeCap})
	cancel()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fl.loading = nil
	l.err = err
	if err == nil && fl.epoch == epoch && fl.through == from {
		fl.extend(sp, target)
	}
	close(l.done)
}

// extend appends a span read after through; a span the limit cut short
// leaves a gap up to target (those windows are read by their sessions).
func (f *feedLog) extend(sp ports.CommitSpan, target int64) {
	if sp.ThroughSeq < target {
		*f = feedLog{epoch: f.epoch, base: target, through: target, started: true}
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

func (f *feedLog) slice(after, target int64) []commit.Commit {
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

// open starts the partition's feed, with its dispatcher, when its first
// session registers.
func (fs *feeds) open(h *Hub, partition string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m[partition] != nil {
		return
	}
	f := &feed{wake: make(chan struct{}, 1), stop: make(chan struct{})}
	f.target.Store(-1)
	fs.m[partition] = f
	go h.dispatch(partition, f)
}

// forget stops the partition's feed once no session of it is left.
func (fs *feeds) forget(partition string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[partition]; f != nil {
		close(f.stop)
		delete(fs.m, partition)
	}
}

// noticed hands a commit notice to the partition's dispatcher; false
// when the partition has no feed.
func (fs *feeds) noticed(partition string, seq int64) bool {
	fs.mu.Lock()
	f := fs.m[partition]
	fs.mu.Unlock()
	if f == nil {
		return false
	}
	for {
		cur := f.target.Load()
		if seq <= cur || f.target.CompareAndSwap(cur, seq) {
			break
		}
	}
	signal(f.wake)
	return true
}

// dispatch is a feed's dispatcher: for each notice it reads the new
// commits into the feed and wakes only the sessions with a registration
// one of them matches; an unrelated socket costs nothing. When it cannot
// tell (the first notice, a failed read, a gap) it wakes them all and
// each finds out for itself.
func (h *Hub) dispatch(partition string, f *feed) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-f.stop; cancel() }()
	done := int64(-1) // dispatched through; -1 before the first notice
	for {
		select {
		case <-f.stop:
			return
		case <-f.wake:
		}
		target := f.target.Load()
		if target <= done {
			continue
		}
		var cs []commit.Commit
		ok := false
		h.feeds.mu.Lock()
		epoch, started := f.log.epoch, f.log.started
		h.feeds.mu.Unlock()
		if done >= 0 && started {
			var err error
			if cs, ok, err = h.feeds.window(ctx, h.o.Store, partition, epoch, done, target); err != nil && ctx.Err() != nil {
				return
			}
		}
		// The sessions are listed after the read: one registered since has
		// read log bounds that include target.
		h.mu.Lock()
		ss := make([]*Session, 0, len(h.byPart[partition]))
		for s := range h.byPart[partition] {
			ss = append(ss, s)
		}
		h.mu.Unlock()
		var changed map[string]struct{}
		if ok {
			changed = changedKeys(cs)
		}
		for _, s := range ss {
			if !ok || s.wants(cs, changed) {
				s.notify(target)
			}
		}
		done = target
	}
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

// changedKeys are the changeKeys of every change of cs.
func changedKeys(cs []commit.Commit) map[string]struct{} {
	m := map[string]struct{}{}
	for i := range cs {
		for _, ch := range cs[i].Changes {
			for v, val := range ch.Scopes {
				m[changeKey(ch.Table, v, val)] = struct{}{}
			}
		}
	}
	return m
}

// wants says whether a change of cs matches one of s's registrations;
// changed (cs's changedKeys) rules most registrations out without a look
// at the changes.
func (s *Session) wants(cs []commit.Commit, changed map[string]struct{}) bool {
	s.mu.Lock()
	regs := s.regs
	s.mu.Unlock()
	for _, r := range regs {
		hit := false
		for _, k := range r.keys {
			if _, hit = changed[k]; hit {
				break
			}
		}
		if hit && len(matching(cs, r)) > 0 {
			return true
		}
	}
	return false
}
