package segments

import (
	"container/list"
	"sync"

	"github.com/syncd-dev/syncd/ports"
)

// DefaultInlineCacheBytes bounds the in-process cache of inline pages.
const DefaultInlineCacheBytes = 32 << 20

// pageCache keeps recently built inline pages by publication key, so a
// bootstrap storm of clients taking inline rows builds each page once per
// process (stored pages are shared through the segment store instead).
// Least recently used pages go first; entries also expire with the
// segment TTL.
type pageCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List
	items map[ports.SegmentKey]*list.Element
}

type cachedPage struct {
	key       ports.SegmentKey
	b         []byte
	next      string
	expiresMs int64
}

func newPageCache(max int64) *pageCache {
	if max <= 0 {
		return nil
	}
	return &pageCache{max: max, ll: list.New(), items: map[ports.SegmentKey]*list.Element{}}
}

func (c *pageCache) get(k ports.SegmentKey, nowMs int64) (*cachedPage, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return nil, false
	}
	p := el.Value.(*cachedPage)
	if p.expiresMs <= nowMs {
		c.remove(el)
		return nil, false
	}
	c.ll.MoveToFront(el)
	return p, true
}

// put stores a copy of b.
func (c *pageCache) put(k ports.SegmentKey, b []byte, next string, expiresMs int64) {
	if c == nil || int64(len(b)) > c.max/4 {
		return
	}
	p := &cachedPage{key: k, b: append([]byte(nil), b...), next: next, expiresMs: expiresMs}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.remove(el)
	}
	c.items[k] = c.ll.PushFront(p)
	c.size += int64(len(p.b))
	for c.size > c.max {
		c.remove(c.ll.Back())
	}
}

func (c *pageCache) remove(el *list.Element) {
	p := el.Value.(*cachedPage)
	c.ll.Remove(el)
	delete(c.items, p.key)
	c.size -= int64(len(p.b))
}
