package httpapi

import (
	"bytes"
	"container/list"
	"io"
	"sync"
)

// DefaultSegmentCacheBytes bounds the compressed segment bodies a
// Transport keeps.
const DefaultSegmentCacheBytes = 32 << 20

// segmentBodies keeps compressed segment bodies by content address and
// encoding. A segment never changes under its address, so a bootstrap
// storm compresses each one once per encoding instead of once per
// download; every download is still authorized before the cache is read,
// and the stored object stays uncompressed (SPEC §5.8). Least recently
// used bodies go first; a compressed body larger than a quarter of the
// bound is not kept, and a segment past maxWholeSegment is not compressed
// whole (it streams through the encoder as it is read).
type segmentBodies struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List
	items map[bodyKey]*list.Element
}

type bodyKey struct {
	id  string
	enc Encoding
}

type cachedBody struct {
	key  bodyKey
	body []byte
}

func newSegmentBodies(max int64) *segmentBodies {
	if max <= 0 {
		return nil
	}
	return &segmentBodies{max: max, ll: list.New(), items: map[bodyKey]*list.Element{}}
}

// maxWholeSegment is the largest segment compressed whole in memory (and
// so possibly kept); past it the first bytes should not wait for the last.
const maxWholeSegment = 64 << 20

// fits reports whether a segment of size uncompressed bytes is compressed
// whole, to be kept if its body is small enough.
func (c *segmentBodies) fits(size int64) bool { return c != nil && size <= maxWholeSegment }

func (c *segmentBodies) get(id string, enc Encoding) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[bodyKey{id, enc}]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cachedBody).body, true
}

func (c *segmentBodies) put(id string, enc Encoding, body []byte) {
	if c == nil || int64(len(body)) > c.max/4 {
		return
	}
	k := bodyKey{id, enc}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.ll.PushFront(&cachedBody{key: k, body: body})
	c.size += int64(len(body))
	for c.size > c.max {
		el := c.ll.Back()
		b := el.Value.(*cachedBody)
		c.ll.Remove(el)
		delete(c.items, b.key)
		c.size -= int64(len(b.body))
	}
}

// encodeAll compresses all of r with enc (gzip or zstd) into memory.
func (t *Transport) encodeAll(enc Encoding, r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	switch enc {
	case EncodingGzip:
		gz, err := t.gzipWriter(&buf)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(gz, r)
		if cerr := gz.Close(); err == nil {
			err = cerr
		}
		gz.Reset(io.Discard)
		t.gzipPool.Put(gz)
		return buf.Bytes(), err
	default:
		zs, err := t.zstdWriter(&buf)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(zs, r)
		if cerr := zs.Close(); err == nil {
			err = cerr
		}
		zs.Reset(nil)
		t.zstdPool.Put(zs)
		return buf.Bytes(), err
	}
}
