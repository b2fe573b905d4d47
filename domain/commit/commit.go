// Package commit holds the log's vocabulary: commits, changes, stored rows
// and column versions (SPEC §2.1–§2.3).
package commit

// Op is a change or operation kind; the values are the wire enum (SPEC §4.5, §6.1).
type Op uint8

// Operation kinds.
const (
	OpUpsert Op = 1
	OpDelete Op = 2
)

// String renders the wire enum name.
func (o Op) String() string {
	switch o {
	case OpUpsert:
		return "upsert"
	case OpDelete:
		return "delete"
	}
	return "unknown"
}

// Change is one row change of a commit as the log stores and serves it.
type Change struct {
	Table string
	RowID string
	Op    Op
	// RowVersion is the row's server_version after an upsert; 0 for deletes.
	RowVersion int64
	// Scopes are the change's stored scopes: variable → single value
	// (upsert: the row after the write; delete: the row before removal).
	Scopes map[string]string
	// Row is the full-row codec payload of an upsert; nil for deletes.
	Row []byte
}

// Commit is one committed, sequenced unit of the partition log.
type Commit struct {
	Seq            int64
	CreatedAtMs    int64
	ActorID        string
	ClientID       string
	ClientCommitID string
	Changes        []Change
}

// Row is a current row of a synced table as storage holds it.
type Row struct {
	RowID string
	// Version is the row's server_version (≥ 1).
	Version int64
	Scopes  map[string]string
	// Payload is the verbatim full-row codec encoding (the serve path reads only this).
	Payload []byte
	// ColumnVersions is the encoded per-column version vector (see
	// EncodeColumnVersions); nil means every column is at Version.
	ColumnVersions []byte
}
