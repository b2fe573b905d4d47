package commit

import (
	"errors"
	"fmt"
	"sort"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// ErrCorruptColumnVersions marks a _sync_column_versions blob that no
// writer produces: truncated or overlong varints, a version at or below 1,
// ordinals out of ascending order, or values out of range. Errors returned
// by DecodeColumnVersions and ExpandColumnVersions wrap it.
var ErrCorruptColumnVersions = errors.New("corrupt _sync_column_versions blob")

// maxOrdinal bounds a decoded column ordinal; no table has more columns.
const maxOrdinal = 1 << 20

// ColumnVersion is one stored (ordinal, version) pair: the column at
// declaration position Ordinal was last written at row version Version.
type ColumnVersion struct {
	Ordinal int
	Version int64
}

// EncodeColumnVersions renders per-column versions, indexed by column
// ordinal, as the _sync_column_versions blob (SPEC §2.2): LEB128
// (ordinal, version) pairs in ascending ordinal order for the columns whose
// version exceeds 1. It returns nil when no column exceeds 1, which storage
// keeps as NULL.
func EncodeColumnVersions(versions []int64) []byte {
	var out []byte
	for ord, v := range versions {
		if v <= 1 {
			continue
		}
		out = appendUvarint(out, uint64(ord))
		out = appendUvarint(out, uint64(v))
	}
	return out
}

// EncodeRowColumnVersions is the blob to store for a row at rowVersion
// with versions: EncodeColumnVersions, but never nil above version 1. A
// row whose columns are all at 1 past its insert (an upsert that presented
// only the primary key) stores an empty blob, since no blob at all (NULL)
// reads as a row stored before column versions existed, every column at
// rowVersion (SPEC §2.2), and would turn its next versioned write into a
// conflict on columns nobody wrote.
func EncodeRowColumnVersions(versions []int64, rowVersion int64) []byte {
	out := EncodeColumnVersions(versions)
	if out == nil && rowVersion > 1 {
		return []byte{}
	}
	return out
}

// EncodeColumnVersionPairs is EncodeColumnVersions over sparse pairs; the
// pairs may come in any order, must not repeat an ordinal, and pairs with a
// version at or below 1 are skipped.
func EncodeColumnVersionPairs(pairs []ColumnVersion) ([]byte, error) {
	sorted := append([]ColumnVersion(nil), pairs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Ordinal < sorted[j].Ordinal })
	var out []byte
	for i, p := range sorted {
		if p.Ordinal < 0 || p.Ordinal > maxOrdinal {
			return nil, fmt.Errorf("column ordinal %d out of range", p.Ordinal)
		}
		if i > 0 && sorted[i-1].Ordinal == p.Ordinal {
			return nil, fmt.Errorf("column ordinal %d repeated", p.Ordinal)
		}
		if p.Version <= 1 {
			continue
		}
		out = appendUvarint(out, uint64(p.Ordinal))
		out = appendUvarint(out, uint64(p.Version))
	}
	return out, nil
}

// DecodeColumnVersions parses a _sync_column_versions blob into its pairs,
// ascending by ordinal. A nil or empty blob yields no pairs. Anything a
// writer never produces is corruption (ErrCorruptColumnVersions, carried by
// a sync.internal_error).
func DecodeColumnVersions(blob []byte) ([]ColumnVersion, error) {
	var out []ColumnVersion
	for off := 0; off < len(blob); {
		ord, n, err := readUvarint(blob[off:])
		if err != nil {
			return nil, corrupt("ordinal at byte %d: %v", off, err)
		}
		off += n
		ver, n, err := readUvarint(blob[off:])
		if err != nil {
			return nil, corrupt("version at byte %d: %v", off, err)
		}
		off += n
		if ord > maxOrdinal {
			return nil, corrupt("ordinal %d out of range", ord)
		}
		if ver > 1<<63-1 {
			return nil, corrupt("version %d out of range", ver)
		}
		if ver <= 1 {
			return nil, corrupt("ordinal %d stored at version %d; only versions above 1 are stored", ord, ver)
		}
		if len(out) > 0 && int(ord) <= out[len(out)-1].Ordinal {
			return nil, corrupt("ordinal %d after ordinal %d; ordinals ascend", ord, out[len(out)-1].Ordinal)
		}
		out = append(out, ColumnVersion{Ordinal: int(ord), Version: int64(ver)})
	}
	return out, nil
}

// ExpandColumnVersions returns the version of every column of a row with
// columnCount columns at rowVersion. A nil blob is a row stored before
// column versions existed: every column is at rowVersion. Otherwise columns
// absent from the blob are at 1. An ordinal beyond the table or a version
// above rowVersion is corruption.
func ExpandColumnVersions(blob []byte, columnCount int, rowVersion int64) ([]int64, error) {
	out := make([]int64, columnCount)
	if blob == nil {
		for i := range out {
			out[i] = rowVersion
		}
		return out, nil
	}
	pairs, err := DecodeColumnVersions(blob)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = 1
	}
	for _, p := range pairs {
		if p.Ordinal >= columnCount {
			return nil, corrupt("ordinal %d beyond the table's %d columns", p.Ordinal, columnCount)
		}
		if p.Version > rowVersion {
			return nil, corrupt("ordinal %d at version %d above the row version %d", p.Ordinal, p.Version, rowVersion)
		}
		out[p.Ordinal] = p.Version
	}
	return out, nil
}

func corrupt(format string, args ...any) error {
	e := syncerr.Wrap(syncerr.InternalError, ErrCorruptColumnVersions)
	e.Reason = ErrCorruptColumnVersions.Error() + ": " + fmt.Sprintf(format, args...)
	return e
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

var (
	errTruncated = errors.New("truncated varint")
	errOverlong  = errors.New("overlong varint")
)

// readUvarint reads one canonical unsigned LEB128 value (at most 64 bits,
// no redundant trailing zero groups).
func readUvarint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b); i++ {
		if i == 10 {
			return 0, 0, errOverlong
		}
		c := b[i]
		if i == 9 && c > 1 {
			return 0, 0, errOverlong
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, 0, errOverlong
			}
			return v, i + 1, nil
		}
	}
	return 0, 0, errTruncated
}
