package yjs

// The reference's rich-text hygiene: after a remote change to a text that
// holds formatting, it deletes format items that have become redundant (a
// second format of the same key between two characters, a format that
// restates the attribute in force). The deletions land in the merged
// state, so they are reproduced here exactly, including the narrow reach
// of the whole-text pass (it only ever cleans the formats before the first
// character).

type orderedTypes struct {
	list []*ytype
	set  map[*ytype]struct{}
}

func (o *orderedTypes) add(t *ytype) {
	if o.set == nil {
		o.set = map[*ytype]struct{}{}
	}
	if _, ok := o.set[t]; !ok {
		o.set[t] = struct{}{}
		o.list = append(o.list, t)
	}
}

func (o *orderedTypes) has(t *ytype) bool { _, ok := o.set[t]; return ok }

func (d *doc) cleanupFormatting(t *transaction) error {
	var full orderedTypes
	for _, cc := range t.after {
		before := t.before[cc.client]
		if cc.clock == before {
			continue
		}
		// The reference passes the end clock as the length, so the walk
		// runs to the end of the client's structs.
		err := d.iterateStructs(t, d.store[cc.client], before, cc.clock, func(s *block) error {
			if !isDeleted(s) {
				if _, ok := s.content.(*contentFormat); ok {
					full.add(s.parent.t)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return d.transact(true, func(tt *transaction) error {
		err := d.iterateDeletedStructs(t, &t.ds, func(s *block) error {
			if s.kind != kindItem {
				return nil
			}
			p := s.parent.t
			if !p.hasFormatting || full.has(p) {
				return nil
			}
			if _, ok := s.content.(*contentFormat); ok {
				full.add(p)
				return nil
			}
			return d.cleanupContextlessFormattingGap(tt, s)
		})
		if err != nil {
			return err
		}
		for _, ty := range full.list {
			if err := d.cleanupTextFormatting(tt, ty); err != nil {
				return err
			}
		}
		return nil
	})
}

func (d *doc) iterateDeletedStructs(t *transaction, ds *deleteSet, f func(*block) error) error {
	for _, client := range ds.order {
		l := d.store[client]
		if l == nil || len(l.s) == 0 {
			continue
		}
		state := l.s[len(l.s)-1].end()
		for _, del := range ds.m[client] {
			if del.clock >= state {
				break
			}
			if err := d.iterateStructs(t, l, del.clock, del.len, f); err != nil {
				return err
			}
		}
	}
	return nil
}

func updateAttributes(attrs map[string]any, f *contentFormat) {
	if f.v == nil {
		delete(attrs, f.key)
	} else {
		attrs[f.key] = f.v
	}
}

func attr(attrs map[string]any, k string) any {
	if v, ok := attrs[k]; ok {
		return v
	}
	return nil
}

func copyAttrs(a map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	return out
}

func (d *doc) cleanupTextFormatting(t *transaction, ty *ytype) error {
	start, end := ty.start, ty.start
	startAttrs := map[string]any{}
	curr := copyAttrs(startAttrs)
	for end != nil {
		if err := d.lim.step(1); err != nil {
			return err
		}
		if !end.deleted {
			if f, ok := end.content.(*contentFormat); ok {
				updateAttributes(curr, f)
			} else {
				if err := d.cleanupFormattingGap(t, start, end, startAttrs, curr); err != nil {
					return err
				}
				startAttrs = copyAttrs(curr)
				start = end
			}
		}
		end = end.right
	}
	return nil
}

func (d *doc) cleanupFormattingGap(t *transaction, start, curr *block, startAttrs, currAttrs map[string]any) error {
	end := start
	endFormats := map[string]*contentFormat{}
	for end != nil && (!end.countable || end.deleted) {
		if !end.deleted {
			if f, ok := end.content.(*contentFormat); ok {
				endFormats[f.key] = f
			}
		}
		end = end.right
	}
	reachedCurr := false
	for start != end {
		if err := d.lim.step(1); err != nil {
			return err
		}
		if curr == start {
			reachedCurr = true
		}
		if !start.deleted {
			if f, ok := start.content.(*contentFormat); ok {
				startVal := attr(startAttrs, f.key)
				if endFormats[f.key] != f || strictEqual(startVal, f.v) {
					if err := d.deleteItem(t, start); err != nil {
						return err
					}
					if !reachedCurr && strictEqual(attr(currAttrs, f.key), f.v) && !strictEqual(startVal, f.v) {
						if startVal == nil {
							delete(currAttrs, f.key)
						} else {
							currAttrs[f.key] = startVal
						}
					}
				}
				if !reachedCurr && !start.deleted {
					updateAttributes(currAttrs, f)
				}
			}
		}
		start = start.right
	}
	return nil
}

func (d *doc) cleanupContextlessFormattingGap(t *transaction, it *block) error {
	for it != nil && it.right != nil && (it.right.deleted || !it.right.countable) {
		it = it.right
	}
	seen := map[string]struct{}{}
	for it != nil && (it.deleted || !it.countable) {
		if err := d.lim.step(1); err != nil {
			return err
		}
		if !it.deleted {
			if f, ok := it.content.(*contentFormat); ok {
				if _, dup := seen[f.key]; dup {
					if err := d.deleteItem(t, it); err != nil {
						return err
					}
				} else {
					seen[f.key] = struct{}{}
				}
			}
		}
		it = it.left
	}
	return nil
}
