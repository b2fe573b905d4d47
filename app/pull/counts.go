package pull

import "sync"

// windowCounts remembers the last far-behind count taken per partition,
// log epoch and table, so that the responses of a catch-up, and the other
// clients catching up over the same log, do not count the same changes
// again. A count is an upper bound for any window inside the one counted:
// committed commits never change and pruning only removes changes, and a
// restored log is served under a new epoch. A window reaching past the
// counted one adds the count of the part past it.
type windowCounts struct {
	mu sync.Mutex
	m  map[countKey]countedWindow
}

type countKey struct{ partition, epoch, table string }

// countedWindow: at most n changes to the table in (after, through] (a
// count, or a count plus the count of an extension past it).
type countedWindow struct {
	after, through int64
	n              int
}

// maxCountedWindows bounds the memory: past it the memo starts afresh.
const maxCountedWindows = 4096

// covering returns a count whose window starts at or before after.
func (c *windowCounts) covering(k countKey, after int64) (countedWindow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.m[k]
	return w, ok && w.after <= after
}

// note keeps a count, replacing the partition's previous one.
func (c *windowCounts) note(k countKey, w countedWindow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCountedWindows {
		c.m = make(map[countKey]countedWindow)
	}
	c.m[k] = w
}
