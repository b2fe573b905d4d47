package sqlstore

import (
	"container/list"
	"sync"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
)

// The recent log: each partition's newest commits, as this store committed
// them, kept in memory so a pull whose window they hold whole reads no
// index (ports.RecentWindowReader). Most incremental pulls are of that
// kind: a client pulling what was pushed since its last pull, a few
// commits behind the head.
//
// What it holds is exactly the log's content for a dense range of seqs,
// (lo, hi], under one log epoch:
//   - commits enter only once their transaction committed, in seq order
//     (a group's leader adds its members' before it wakes them);
//   - a commit extends the range only when its seq is hi+1: the seqs are
//     dense, so no other writer (another node, a bulk seed, a push
//     outside the groups) committed in between. Any other seq starts the
//     range afresh at that commit: what lies between was written by
//     someone else and is not held;
//   - the log never changes a committed commit (pruning deletes below
//     the horizon, which a window the cache answers is complete without);
//   - the range is tagged with the log epoch the pushes read under their
//     lock, and answers only pulls whose bounds were read at that epoch:
//     a restored database (older commits reusing the seqs) rotates the
//     epoch before it is served.
//
// Memory is bounded: per partition at most recentMaxCommits commits, and
// overall Config.RecentLogBytes (oldest commits of the partition being
// added to go first, then the partitions added to least recently).

// DefaultRecentLogBytes bounds the recent log's memory (Config.RecentLogBytes).
const DefaultRecentLogBytes = 16 << 20

// recentMaxCommits bounds one partition's held commits: a window longer
// than that is a catch-up, read from the log.
const recentMaxCommits = 2048

// What a held commit, change and scope map, and a partition's entry,
// take beyond their bytes (Go's headers, a small map's buckets),
// approximately: the bound is on the heap the log keeps alive.
const (
	recentOverhead  = 160
	recentMapBytes  = 256
	recentPartBytes = 512
)

type recentLog struct {
	maxBytes int64

	mu    sync.RWMutex
	bytes int64
	parts map[string]*recentPart
	lru   *list.List // of *recentPart, most recently added first
}

type recentPart struct {
	partition string
	epoch     string
	lo        int64 // every commit in (lo, lo+len(commits)] is held
	commits   []heldCommit
	head      int // commits[head:] are held; the slice is compacted on growth
	bytes     int64
	el        *list.Element
}

type heldCommit struct {
	c    commit.Commit
	size int64
}

// appended is a commit a push transaction appended, as the log holds it.
type appended struct {
	seq int64
	c   commit.Commit
}

func newRecentLog(maxBytes int64) *recentLog {
	if maxBytes < 0 {
		return nil
	}
	if maxBytes == 0 {
		maxBytes = DefaultRecentLogBytes
	}
	return &recentLog{maxBytes: maxBytes, parts: map[string]*recentPart{}, lru: list.New()}
}

// heldForm is c as a window read returns it: scopes decoded afresh into
// their own map, no row version or row for a delete, an upsert's row
// copied (the caller's bytes may be reused once the push returns).
func heldForm(seq int64, c ports.NewCommit) appended {
	out := commit.Commit{Seq: seq, CreatedAtMs: c.CreatedAtMs, ActorID: c.ActorID, Changes: make([]commit.Change, len(c.Changes))}
	for i, ch := range c.Changes {
		h := commit.Change{Table: ch.Table, RowID: ch.RowID, Op: ch.Op, Scopes: make(map[string]string, len(ch.Scopes))}
		for k, v := range ch.Scopes {
			h.Scopes[k] = v
		}
		if ch.Op == commit.OpUpsert {
			h.RowVersion = ch.RowVersion
			h.Row = append(make([]byte, 0, len(ch.Row)), ch.Row...)
		}
		out.Changes[i] = h
	}
	return appended{seq: seq, c: out}
}

func heldSize(c *commit.Commit) int64 {
	n := int64(recentOverhead + len(c.ActorID))
	for i := range c.Changes {
		ch := &c.Changes[i]
		n += int64(recentOverhead + recentMapBytes + len(ch.Table) + len(ch.RowID) + len(ch.Row))
		for k, v := range ch.Scopes {
			n += int64(len(k) + len(v) + 32)
		}
	}
	return n
}

// add records commits that committed on partition, in seq order, under
// the log epoch their transaction read ("" when it read none: the range
// is then dropped, as nothing vouches for the epoch).
func (r *recentLog) add(partition, epoch string, cs []appended) {
	if r == nil || len(cs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[partition]
	if epoch == "" {
		if p != nil {
			r.drop(p)
		}
		return
	}
	if p == nil {
		p = &recentPart{partition: partition}
		p.el = r.lru.PushFront(p)
		r.parts[partition] = p
		r.bytes += recentPartBytes
	} else {
		r.lru.MoveToFront(p.el)
	}
	for _, a := range cs {
		switch {
		case p.epoch == epoch && a.seq <= p.lo:
			continue // older than the range: a late group; its successor is held
		case p.epoch != epoch || a.seq != p.hi()+1:
			// Someone else wrote between (or seqs were reused): start afresh.
			r.clear(p)
			p.epoch, p.lo = epoch, a.seq-1
		}
		size := heldSize(&a.c)
		if size > r.maxBytes/4 {
			// Too large to hold: the range starts after it.
			r.clear(p)
			p.epoch, p.lo = epoch, a.seq
			continue
		}
		p.push(heldCommit{c: a.c, size: size})
		r.bytes += size
		if len(p.commits)-p.head > recentMaxCommits {
			r.bytes -= p.shift()
		}
	}
	r.evict(p)
}

func (p *recentPart) hi() int64 { return p.lo + int64(len(p.commits)-p.head) }

func (p *recentPart) push(h heldCommit) {
	if p.head > 0 && len(p.commits) == cap(p.commits) {
		// Reuse the space of the commits shifted out.
		n := copy(p.commits, p.commits[p.head:])
		clear(p.commits[n:])
		p.commits, p.head = p.commits[:n], 0
	}
	p.commits = append(p.commits, h)
	p.bytes += h.size
}

// shift drops the oldest held commit and returns its size.
func (p *recentPart) shift() int64 {
	h := p.commits[p.head]
	p.commits[p.head] = heldCommit{}
	p.head++
	p.lo++
	p.bytes -= h.size
	return h.size
}

// clear empties p, keeping it listed.
func (r *recentLog) clear(p *recentPart) {
	r.bytes -= p.bytes
	p.commits, p.head, p.bytes = nil, 0, 0
}

func (r *recentLog) drop(p *recentPart) {
	r.clear(p)
	r.bytes -= recentPartBytes
	r.lru.Remove(p.el)
	delete(r.parts, p.partition)
}

// evict brings the memory back under the bound: the least recently added
// partitions go first, then the oldest commits of keep.
func (r *recentLog) evict(keep *recentPart) {
	for r.bytes > r.maxBytes {
		if back := r.lru.Back().Value.(*recentPart); back != keep {
			r.drop(back)
			continue
		}
		if keep.head == len(keep.commits) {
			r.drop(keep) // its entry alone is over the bound
			return
		}
		r.bytes -= keep.shift()
	}
}

// forget drops what is held of partition (its log epoch rotated).
func (r *recentLog) forget(partition string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[partition]; p != nil {
		r.drop(p)
	}
}

// window answers w from memory when (w.AfterSeq, w.ThroughSeq] is held
// under epoch, as readCommitWindow would from the log.
func (r *recentLog) window(partition, epoch string, w ports.CommitWindow) ([]commit.Commit, bool) {
	if r == nil || epoch == "" || w.LimitChanges < 1 || len(w.ScopeFilter) == 0 {
		return nil, false // an invalid window gets the log's error
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	p := r.parts[partition]
	if p == nil || p.epoch != epoch || w.AfterSeq < p.lo || w.ThroughSeq > p.hi() {
		return nil, false
	}
	from := p.head + int(w.AfterSeq-p.lo)
	to := p.head + int(w.ThroughSeq-p.lo)
	terms := termsOf(w.ScopeFilter)
	// Counted first, then copied into one backing array for the commits
	// and one for the changes, each commit's a capped slice of it (the
	// log's own stay untouched): a pull of a busy partition spans every
	// client's commits and takes one or two of them, and arrays sized for
	// the span were a fifth of the bytes push-pull allocated.
	n, nc := 0, 0
	for i := from; i < to && nc < w.LimitChanges; i++ {
		if k := matchingChanges(&p.commits[i].c, w.Table, terms); k > 0 {
			n, nc = n+1, nc+k
		}
	}
	if n == 0 {
		return nil, true // as the log answers an empty window
	}
	out := make([]commit.Commit, 0, n)
	arena := make([]commit.Change, 0, nc)
	for i := from; len(out) < n; i++ {
		c := &p.commits[i].c
		first := len(arena)
		for j := range c.Changes {
			ch := &c.Changes[j]
			if ch.Table == w.Table && terms.match(ch.Scopes) {
				arena = append(arena, *ch)
			}
		}
		if len(arena) == first {
			continue
		}
		out = append(out, commit.Commit{Seq: c.Seq, CreatedAtMs: c.CreatedAtMs, ActorID: c.ActorID, Changes: arena[first:len(arena):len(arena)]})
	}
	return out, true
}

// matchingChanges counts c's changes to table that terms match.
func matchingChanges(c *commit.Commit, table string, terms filterTerms) int {
	k := 0
	for j := range c.Changes {
		if ch := &c.Changes[j]; ch.Table == table && terms.match(ch.Scopes) {
			k++
		}
	}
	return k
}

// ReadRecentWindow implements ports.RecentWindowReader.
func (s *Store) ReadRecentWindow(partition, logEpoch string, w ports.CommitWindow) ([]commit.Commit, bool) {
	if w.ThroughSeq <= w.AfterSeq {
		return nil, false
	}
	return s.recent.window(partition, logEpoch, w)
}

var _ ports.RecentWindowReader = (*Store)(nil)
