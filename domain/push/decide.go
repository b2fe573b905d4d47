// Package push holds the per-operation write rules of wire version 3
// (SPEC §6.2, §3.4 rule 5): what an upsert or a delete does to the row it
// targets, decided from column positions, the payload's presence set, the
// stored row's versions and a few checks the caller supplies. It needs no
// row values: value comparisons and authorization arrive as callbacks, so
// the push pipeline runs them in exactly the order the spec fixes.
//
// A wire-1 or wire-2 request is answered by the rule of its generation
// where it and wire 3 differ (see Upsert.WireVersion); everywhere else
// one rule set serves all three.
package push

import (
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Action is what the pipeline does with an operation.
type Action uint8

// Operation outcomes.
const (
	// ActionUpdate applies the upsert onto the existing row: write the
	// present non-crdt columns, merge the present crdt columns, keep the
	// absent ones, store Version and ColumnVersions.
	ActionUpdate Action = iota + 1
	// ActionInsert inserts the row at version 1 and clears its tombstone.
	ActionInsert
	// ActionConflict answers a sync.version_conflict record; the commit
	// rolls back.
	ActionConflict
	// ActionDelete deletes the existing row and records a tombstone.
	ActionDelete
	// ActionDeleteAbsent is a delete of an absent row: applied, no
	// change, no tombstone, no authorization, no validator.
	ActionDeleteAbsent
)

// String names the action.
func (a Action) String() string {
	switch a {
	case ActionUpdate:
		return "update"
	case ActionInsert:
		return "insert"
	case ActionConflict:
		return "conflict"
	case ActionDelete:
		return "delete"
	case ActionDeleteAbsent:
		return "delete-absent"
	}
	return "unknown"
}

// Upsert is the shape of one upsert operation.
type Upsert struct {
	Table *schema.Table
	// Present is the payload's presence set, one entry per column in
	// declaration order (the sparse-row presence bitmap, SPEC §2.4).
	Present []bool
	// BaseVersion is the operation's optimistic-concurrency token when
	// HasBaseVersion; absent means last-write-wins.
	BaseVersion    int64
	HasBaseVersion bool
	// WireVersion is the request's wire version. 1 or 2 selects the
	// wire-1/2 rule where that generation and wire 3 differ (the wire-2
	// SPEC §3.4 rule 5, §6.2; wire 2 only added the log epoch to wire 1's
	// headers, so the two share their write rules): scope columns are
	// stripped from an update instead of refused, a baseVersion above the
	// server version is a conflict instead of sync.invalid_request, and an
	// unversioned upsert over a tombstone inserts (wires 1 and 2 have no
	// tombstones and no sync.row_deleted in their catalog; their
	// unversioned upsert of an absent row is an insert). Any other value
	// (0 included) is wire 3.
	WireVersion uint16
}

// wire2 reports the wire-1/2 rule.
func (u Upsert) wire2() bool { return u.WireVersion == 1 || u.WireVersion == 2 }

// Stored is the version state of the row an operation targets.
type Stored struct {
	// Version is the row's server_version (≥ 1).
	Version int64
	// ColumnVersions is the version of every column in declaration order
	// (commit.ExpandColumnVersions).
	ColumnVersions []int64
}

// Target is what storage holds for the operation's row.
type Target struct {
	// Stored is the current row; nil when the row is absent.
	Stored *Stored
	// Tombstoned reports a live tombstone for an absent row (a delete
	// inside the pruning horizon, SPEC §2.2).
	Tombstoned bool
}

// Checks are the value-level steps the caller performs when a rule asks
// for them. Each returns nil to pass; an error rejects the operation.
type Checks struct {
	// AuthorizeStored authorizes the stored row's scopes (SPEC §3.4 steps
	// 2–4); typically scopes.AuthorizeWrite on the stored scopes.
	AuthorizeStored func() error
	// AuthorizePayload authorizes the pushed payload plus primary key of
	// an insert (SPEC §3.4 step 2).
	AuthorizePayload func() error
	// ScopeColumnChanged reports whether the payload's value of a present
	// scope column differs from the stored value (SPEC §3.4 rule 5).
	ScopeColumnChanged func(column int) bool
}

// Decision is the outcome of one operation.
type Decision struct {
	Action Action
	// Version is the row's server_version after ActionUpdate or
	// ActionInsert; for ActionConflict, the current server version.
	Version int64
	// ColumnVersions are the per-column versions to store after
	// ActionUpdate or ActionInsert.
	ColumnVersions []int64
	// ConflictColumns is the conflict evidence of ActionConflict: a
	// bitmap in the presence-bitmap layout (SPEC §6.3).
	ConflictColumns []byte
	// ClearTombstone is set on an insert over a tombstoned row.
	ClearTombstone bool
	// Stripped lists the present scope columns a wire-2 update does not
	// write (the wire-2 SPEC §3.4 rule 5): the stored values stay, with their
	// column versions. Nil on wire 3, where a changed scope column is an
	// error instead.
	Stripped []int
}

// DecideUpsert applies the SPEC §6.2 rules to an upsert. A non-nil error
// is the operation's terminating error record: a *syncerr.Error such as
// sync.forbidden, sync.invalid_request, sync.row_missing or
// sync.row_deleted (or whatever a check returned).
func DecideUpsert(u Upsert, t Target, c Checks) (Decision, error) {
	tbl := u.Table
	if err := checkShape(u, t); err != nil {
		return Decision{}, err
	}
	if u.HasBaseVersion && u.BaseVersion < 0 {
		return Decision{}, syncerr.Newf(syncerr.InvalidRequest, "baseVersion %d is negative", u.BaseVersion)
	}
	if t.Stored == nil {
		return decideAbsent(u, t, c)
	}
	s := t.Stored

	// 1. Authorize against the stored row, never the payload.
	if err := call(c.AuthorizeStored); err != nil {
		return Decision{}, err
	}
	// 2. Scope columns are immutable on update. Wire 3 refuses a change;
	// wire 2 strips every scope column from the update set, changed or
	// not, and applies the rest.
	var stripped []int
	present := u.Present
	for _, sc := range tbl.Scopes {
		col := columnIndex(tbl, scopes.Column(sc))
		if col < 0 || !present[col] {
			continue
		}
		if u.wire2() {
			if len(stripped) == 0 {
				present = append([]bool(nil), u.Present...)
			}
			present[col] = false
			stripped = append(stripped, col)
			continue
		}
		if c.ScopeColumnChanged == nil {
			return Decision{}, syncerr.Newf(syncerr.InternalError, "push: scope column check not configured")
		}
		if c.ScopeColumnChanged(col) {
			return Decision{}, syncerr.Newf(syncerr.InvalidRequest,
				"table %q: scope column %q cannot change on update", tbl.Name, tbl.Columns[col].Name)
		}
	}
	if u.HasBaseVersion {
		// 3. A client cannot hold a version the server never issued. Wire
		// 3 calls it a bad request; wire 2 knows only equal or not, so it
		// is a conflict there, answered with the current version and row.
		if u.BaseVersion > s.Version {
			if u.wire2() {
				return conflict(tbl, s, present, func(int) bool { return true }), nil
			}
			return Decision{}, syncerr.Newf(syncerr.InvalidRequest,
				"baseVersion %d is above the server version %d", u.BaseVersion, s.Version)
		}
		// 4. Lost-insert race: disclose the winner only to an actor
		// authorized for it.
		if u.BaseVersion == 0 {
			if err := call(c.AuthorizeStored); err != nil {
				return Decision{}, err
			}
			return conflict(tbl, s, present, func(int) bool { return true }), nil
		}
		// 5. Per-column detection.
		stale := func(col int) bool { return s.ColumnVersions[col] > u.BaseVersion }
		if d := conflict(tbl, s, present, stale); hasAny(d.ConflictColumns) {
			return d, nil
		}
	}
	// 6. Apply.
	next := s.Version + 1
	versions := append([]int64(nil), s.ColumnVersions...)
	for col, p := range present {
		if p && col != tbl.PKIndex {
			versions[col] = next
		}
	}
	return Decision{Action: ActionUpdate, Version: next, ColumnVersions: versions, Stripped: stripped}, nil
}

// decideAbsent is the absent-row table of SPEC §6.2.
func decideAbsent(u Upsert, t Target, c Checks) (Decision, error) {
	tbl := u.Table
	switch {
	case u.HasBaseVersion && u.BaseVersion > 0:
		// Authorize first so absence is not disclosed to an actor
		// without the scope.
		if err := call(c.AuthorizePayload); err != nil {
			return Decision{}, err
		}
		return Decision{}, syncerr.Newf(syncerr.RowMissing,
			"table %q: baseVersion %d targets an absent row", tbl.Name, u.BaseVersion)
	case !u.HasBaseVersion && t.Tombstoned && !u.wire2():
		return Decision{}, syncerr.Newf(syncerr.RowDeleted,
			"table %q: unversioned upsert of a deleted row", tbl.Name)
	}
	// An insert requires every column: a partial payload names an update
	// and there is nothing to update.
	for col, present := range u.Present {
		if !present {
			return Decision{}, syncerr.Newf(syncerr.RowMissing,
				"table %q: partial payload (column %q absent) targets an absent row", tbl.Name, tbl.Columns[col].Name)
		}
	}
	if err := call(c.AuthorizePayload); err != nil {
		return Decision{}, err
	}
	versions := make([]int64, len(tbl.Columns))
	for i := range versions {
		versions[i] = 1
	}
	return Decision{Action: ActionInsert, Version: 1, ColumnVersions: versions, ClearTombstone: t.Tombstoned}, nil
}

// DecideDelete applies the SPEC §6.2 delete rule: no version check; an
// absent row is applied without authorization or change; an existing row
// is authorized against its stored scopes, then deleted and tombstoned.
func DecideDelete(t Target, authorizeStored func() error) (Decision, error) {
	if t.Stored == nil {
		return Decision{Action: ActionDeleteAbsent}, nil
	}
	if err := call(authorizeStored); err != nil {
		return Decision{}, err
	}
	return Decision{Action: ActionDelete}, nil
}

// conflict builds a conflict decision marking the present, non-crdt,
// non-primary-key columns for which mark holds.
func conflict(tbl *schema.Table, s *Stored, present []bool, mark func(col int) bool) Decision {
	marked := make([]int, 0, len(present))
	for col, p := range present {
		if !p || col == tbl.PKIndex || tbl.Columns[col].Type == schema.TypeCRDT {
			continue
		}
		if mark(col) {
			marked = append(marked, col)
		}
	}
	return Decision{Action: ActionConflict, Version: s.Version, ConflictColumns: ColumnBitmap(len(tbl.Columns), marked)}
}

// ColumnBitmap renders a set of column positions in the presence-bitmap
// layout (SPEC §2.4): ceil(n/8) bytes, bit i set for column i, LSB-first
// within each byte. Positions outside [0, n) are ignored.
func ColumnBitmap(n int, columns []int) []byte {
	b := make([]byte, (n+7)/8)
	for _, c := range columns {
		if c >= 0 && c < n {
			b[c/8] |= 1 << (c % 8)
		}
	}
	return b
}

func hasAny(bitmap []byte) bool {
	for _, b := range bitmap {
		if b != 0 {
			return true
		}
	}
	return false
}

func call(check func() error) error {
	if check == nil {
		// A rule that needs a check the caller did not wire fails closed.
		return syncerr.Newf(syncerr.InternalError, "push: authorization check not configured")
	}
	return check()
}

func columnIndex(t *schema.Table, name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// checkShape rejects inputs no decoder or storage produces; they are
// server bugs, answered as sync.internal_error.
func checkShape(u Upsert, t Target) error {
	if u.Table == nil {
		return syncerr.Newf(syncerr.InternalError, "push: upsert without a table")
	}
	n := len(u.Table.Columns)
	if len(u.Present) != n {
		return syncerr.Newf(syncerr.InternalError, "push: table %q: presence set has %d entries for %d columns", u.Table.Name, len(u.Present), n)
	}
	if u.Table.PKIndex < 0 || u.Table.PKIndex >= n {
		return syncerr.Newf(syncerr.InternalError, "push: table %q: primary key position %d out of range", u.Table.Name, u.Table.PKIndex)
	}
	if !u.Present[u.Table.PKIndex] {
		return syncerr.Newf(syncerr.InvalidRequest, "table %q: payload lacks the primary key", u.Table.Name)
	}
	if s := t.Stored; s != nil {
		if len(s.ColumnVersions) != n {
			return syncerr.Newf(syncerr.InternalError, "push: table %q: %d column versions for %d columns", u.Table.Name, len(s.ColumnVersions), n)
		}
		if s.Version < 1 {
			return syncerr.Newf(syncerr.InternalError, "push: table %q: stored server_version %d", u.Table.Name, s.Version)
		}
	}
	return nil
}
