package yjs

import "errors"

// Limits bound the work of one merge, so a hostile update costs bounded
// memory and time. The zero value means DefaultLimits.
type Limits struct {
	// MaxUpdateBytes bounds each input update.
	MaxUpdateBytes int
	// MaxStructs bounds the structs decoded over the whole merge (both
	// inputs and every re-read of pending structs); each costs about 200
	// bytes of memory.
	MaxStructs int
	// MaxClock bounds every clock and length an update names.
	MaxClock uint64
	// MaxWork bounds the integration steps (list walks while resolving
	// concurrent inserts, splits, merges), which adversarial updates can
	// make quadratic.
	MaxWork int64
	// MaxTypeDepth bounds the nesting of shared types.
	MaxTypeDepth int
}

// DefaultLimits admit documents of tens of megabytes (a 1 MB text
// document of typical edits holds about 100,000 structs) while keeping a
// hostile merge below about half a gigabyte.
var DefaultLimits = Limits{
	MaxUpdateBytes: 64 << 20,
	MaxStructs:     2 << 20,
	MaxClock:       1 << 40,
	MaxWork:        200_000_000,
	MaxTypeDepth:   512,
}

// maxValueDepth bounds the nesting of Any and JSON values.
const maxValueDepth = 512

var (
	errTooManyStructs = errors.New("yjs: too many structs")
	errClockRange     = errors.New("yjs: clock out of range")
	errTooMuchWork    = errors.New("yjs: merge exceeds its work bound")
	errTypeDepth      = errors.New("yjs: shared types nested too deeply")
)

type budget struct {
	lim     Limits
	structs int
	work    int64
}

func newBudget(l Limits) *budget {
	d := DefaultLimits
	if l.MaxUpdateBytes > 0 {
		d.MaxUpdateBytes = l.MaxUpdateBytes
	}
	if l.MaxStructs > 0 {
		d.MaxStructs = l.MaxStructs
	}
	if l.MaxClock > 0 {
		d.MaxClock = l.MaxClock
	}
	if l.MaxWork > 0 {
		d.MaxWork = l.MaxWork
	}
	if l.MaxTypeDepth > 0 {
		d.MaxTypeDepth = l.MaxTypeDepth
	}
	return &budget{lim: d}
}

func (b *budget) clock(c uint64) error {
	if c > b.lim.MaxClock {
		return errClockRange
	}
	return nil
}

func (b *budget) addStruct() error { return b.addStructs(1) }

func (b *budget) addStructs(n int) error {
	if n > b.lim.MaxStructs-b.structs {
		return errTooManyStructs
	}
	b.structs += n
	return nil
}

func (b *budget) step(n int64) error {
	b.work += n
	if b.work > b.lim.MaxWork {
		return errTooMuchWork
	}
	return nil
}
