package push_test

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// notes: id (PK) | workspace_id (scope) | title | body | doc (crdt)
const (
	colID = iota
	colWorkspace
	colTitle
	colBody
	colDoc
)

func notes() *schema.Table {
	return &schema.Table{
		Name: "notes",
		Columns: []schema.Column{
			{Name: "id", Type: schema.TypeString},
			{Name: "workspace_id", Type: schema.TypeString},
			{Name: "title", Type: schema.TypeString, Nullable: true},
			{Name: "body", Type: schema.TypeString, Nullable: true},
			{Name: "doc", Type: schema.TypeCRDT, Nullable: true, CRDTType: "yjs"},
		},
		PrimaryKey: "id",
		PKIndex:    colID,
		Scopes:     []schema.Scope{{Pattern: "ws:{workspace_id}", Prefix: "ws", Variable: "workspace_id"}},
	}
}

func present(cols ...int) []bool {
	p := make([]bool, 5)
	for _, c := range cols {
		p[c] = true
	}
	return p
}

func all() []bool { return present(colID, colWorkspace, colTitle, colBody, colDoc) }

func base(v int64) (int64, bool) { return v, true }

var lww = func() (int64, bool) { return 0, false }

// stored row at version 5: title written at 5, body at 3, doc at 4,
// workspace and id never rewritten.
func stored() *push.Stored {
	return &push.Stored{Version: 5, ColumnVersions: []int64{1, 1, 5, 3, 4}}
}

func allow() error { return nil }
func deny() error  { return syncerr.New(syncerr.Forbidden) }

type checks struct {
	storedAuth, payloadAuth func() error
	scopeChanged            bool
}

func (c checks) build() push.Checks {
	return push.Checks{
		AuthorizeStored:    c.storedAuth,
		AuthorizePayload:   c.payloadAuth,
		ScopeColumnChanged: func(int) bool { return c.scopeChanged },
	}
}

var ok = checks{storedAuth: allow, payloadAuth: allow}

func bitmap(cols ...int) []byte { return push.ColumnBitmap(5, cols) }

func TestUpsertOnExistingRow(t *testing.T) {
	tests := []struct {
		name    string
		present []bool
		base    func() (int64, bool)
		checks  checks
		want    push.Decision
		code    syncerr.Code
	}{
		{
			name: "1. authorize against the stored row: denial is sync.forbidden", present: present(colID, colTitle),
			base: lww, checks: checks{storedAuth: deny, payloadAuth: allow}, code: syncerr.Forbidden,
		},
		{
			name: "2. a present scope column that differs is sync.invalid_request", present: present(colID, colWorkspace, colTitle),
			base: lww, checks: checks{storedAuth: allow, payloadAuth: allow, scopeChanged: true}, code: syncerr.InvalidRequest,
		},
		{
			name: "2. a present scope column equal to the stored value applies as a no-op", present: present(colID, colWorkspace, colTitle),
			base: lww, checks: ok,
			want: push.Decision{Action: push.ActionUpdate, Version: 6, ColumnVersions: []int64{1, 6, 6, 3, 4}},
		},
		{
			name: "3. baseVersion above server_version is sync.invalid_request", present: present(colID, colTitle),
			base: func() (int64, bool) { return base(6) }, checks: ok, code: syncerr.InvalidRequest,
		},
		{
			name:    "4. baseVersion 0 on an existing row is a lost-insert conflict marking every present non-crdt non-PK column",
			present: all(), base: func() (int64, bool) { return base(0) }, checks: ok,
			want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap(colWorkspace, colTitle, colBody)},
		},
		{
			name: "4. lost-insert conflict with only the PK present still conflicts, marking nothing", present: present(colID),
			base: func() (int64, bool) { return base(0) }, checks: ok,
			want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap()},
		},
		{
			name: "5. conflict marks exactly the present columns written after baseVersion", present: present(colID, colTitle, colBody),
			base: func() (int64, bool) { return base(4) }, checks: ok,
			want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap(colTitle)},
		},
		{
			name: "5. a stale absent column does not conflict: apply", present: present(colID, colBody),
			base: func() (int64, bool) { return base(3) }, checks: ok,
			want: push.Decision{Action: push.ActionUpdate, Version: 6, ColumnVersions: []int64{1, 1, 5, 6, 4}},
		},
		{
			name: "5. crdt columns are excluded from the comparison and merge on apply", present: present(colID, colDoc),
			base: func() (int64, bool) { return base(2) }, checks: ok,
			want: push.Decision{Action: push.ActionUpdate, Version: 6, ColumnVersions: []int64{1, 1, 5, 3, 6}},
		},
		{
			name: "5. baseVersion equal to server_version applies", present: present(colID, colTitle, colBody),
			base: func() (int64, bool) { return base(5) }, checks: ok,
			want: push.Decision{Action: push.ActionUpdate, Version: 6, ColumnVersions: []int64{1, 1, 6, 6, 4}},
		},
		{
			name: "6. no baseVersion: last-write-wins per column", present: present(colID, colTitle),
			base: lww, checks: ok,
			want: push.Decision{Action: push.ActionUpdate, Version: 6, ColumnVersions: []int64{1, 1, 6, 3, 4}},
		},
		{
			name: "negative baseVersion is sync.invalid_request", present: present(colID, colTitle),
			base: func() (int64, bool) { return base(-1) }, checks: ok, code: syncerr.InvalidRequest,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bv, has := tc.base()
			u := push.Upsert{Table: notes(), Present: tc.present, BaseVersion: bv, HasBaseVersion: has}
			got, err := push.DecideUpsert(u, push.Target{Stored: stored()}, tc.checks.build())
			if syncerr.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %q", err, tc.code)
			}
			if tc.code == "" && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decision = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPrimaryKeyNeverMarks covers a legacy row (no column-version blob:
// every column, the PK included, at the row version).
func TestPrimaryKeyNeverMarks(t *testing.T) {
	legacy := &push.Stored{Version: 5, ColumnVersions: []int64{5, 5, 5, 5, 5}}
	u := push.Upsert{Table: notes(), Present: present(colID, colTitle), BaseVersion: 2, HasBaseVersion: true}
	got, err := push.DecideUpsert(u, push.Target{Stored: legacy}, ok.build())
	if err != nil {
		t.Fatal(err)
	}
	if got.Action != push.ActionConflict || !bytes.Equal(got.ConflictColumns, bitmap(colTitle)) {
		t.Fatalf("decision = %+v", got)
	}
	// And apply never bumps the PK's version.
	u.HasBaseVersion = false
	got, _ = push.DecideUpsert(u, push.Target{Stored: legacy}, ok.build())
	if got.ColumnVersions[colID] != 5 || got.ColumnVersions[colTitle] != 6 {
		t.Fatalf("versions = %v", got.ColumnVersions)
	}
}

func TestLostInsertReauthorizesWinner(t *testing.T) {
	calls := 0
	c := push.Checks{
		AuthorizeStored: func() error {
			calls++
			if calls > 1 {
				return syncerr.New(syncerr.Forbidden)
			}
			return nil
		},
		AuthorizePayload:   allow,
		ScopeColumnChanged: func(int) bool { return false },
	}
	u := push.Upsert{Table: notes(), Present: all(), BaseVersion: 0, HasBaseVersion: true}
	_, err := push.DecideUpsert(u, push.Target{Stored: stored()}, c)
	if syncerr.CodeOf(err) != syncerr.Forbidden {
		t.Fatalf("err = %v: a conflict record must never leak a row the actor may not see", err)
	}
}

func TestUpsertOnAbsentRow(t *testing.T) {
	ones := []int64{1, 1, 1, 1, 1}
	tests := []struct {
		name       string
		present    []bool
		base       func() (int64, bool)
		tombstoned bool
		checks     checks
		want       push.Decision
		code       syncerr.Code
	}{
		{
			name: "baseVersion 0: insert at version 1 (explicit intent recreates)", present: all(),
			base: func() (int64, bool) { return base(0) }, checks: ok,
			want: push.Decision{Action: push.ActionInsert, Version: 1, ColumnVersions: ones},
		},
		{
			name: "baseVersion 0 over a tombstone: insert and clear the tombstone", present: all(), tombstoned: true,
			base: func() (int64, bool) { return base(0) }, checks: ok,
			want: push.Decision{Action: push.ActionInsert, Version: 1, ColumnVersions: ones, ClearTombstone: true},
		},
		{
			name: "baseVersion > 0: sync.row_missing", present: all(),
			base: func() (int64, bool) { return base(3) }, checks: ok, code: syncerr.RowMissing,
		},
		{
			name: "baseVersion > 0 with a tombstone: still sync.row_missing", present: all(), tombstoned: true,
			base: func() (int64, bool) { return base(3) }, checks: ok, code: syncerr.RowMissing,
		},
		{
			name: "baseVersion > 0: payload authorization first, so absence is not disclosed", present: all(),
			base: func() (int64, bool) { return base(3) }, checks: checks{storedAuth: allow, payloadAuth: deny}, code: syncerr.Forbidden,
		},
		{
			name: "absent baseVersion with a live tombstone: sync.row_deleted (delete beats unversioned upsert)", present: all(),
			tombstoned: true, base: lww, checks: ok, code: syncerr.RowDeleted,
		},
		{
			name: "absent baseVersion, no tombstone, every column present: insert", present: all(),
			base: lww, checks: ok,
			want: push.Decision{Action: push.ActionInsert, Version: 1, ColumnVersions: ones},
		},
		{
			name: "absent baseVersion, no tombstone, partial payload: sync.row_missing", present: present(colID, colWorkspace, colTitle),
			base: lww, checks: ok, code: syncerr.RowMissing,
		},
		{
			name: "insert authorizes the payload: denial is sync.forbidden", present: all(),
			base: lww, checks: checks{storedAuth: allow, payloadAuth: deny}, code: syncerr.Forbidden,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bv, has := tc.base()
			u := push.Upsert{Table: notes(), Present: tc.present, BaseVersion: bv, HasBaseVersion: has}
			got, err := push.DecideUpsert(u, push.Target{Tombstoned: tc.tombstoned}, tc.checks.build())
			if syncerr.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %q", err, tc.code)
			}
			if tc.code == "" && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decision = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name   string
		target push.Target
		auth   func() error
		want   push.Action
		code   syncerr.Code
	}{
		{"absent row: applied, no authorization, no change", push.Target{}, deny, push.ActionDeleteAbsent, ""},
		{"absent tombstoned row: still applied", push.Target{Tombstoned: true}, deny, push.ActionDeleteAbsent, ""},
		{"existing row: authorized against the stored row, then deleted", push.Target{Stored: stored()}, allow, push.ActionDelete, ""},
		{"existing row: denial is sync.forbidden", push.Target{Stored: stored()}, deny, 0, syncerr.Forbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := push.DecideDelete(tc.target, tc.auth)
			if syncerr.CodeOf(err) != tc.code || got.Action != tc.want {
				t.Fatalf("got %v, %v; want %v, %q", got.Action, err, tc.want, tc.code)
			}
		})
	}
}

func TestMalformedInputs(t *testing.T) {
	tests := []struct {
		name   string
		u      push.Upsert
		target push.Target
		code   syncerr.Code
	}{
		{"no table", push.Upsert{Present: all()}, push.Target{}, syncerr.InternalError},
		{"presence set of the wrong length", push.Upsert{Table: notes(), Present: []bool{true}}, push.Target{}, syncerr.InternalError},
		{"missing primary key", push.Upsert{Table: notes(), Present: present(colTitle)}, push.Target{}, syncerr.InvalidRequest},
		{"column versions of the wrong length", push.Upsert{Table: notes(), Present: all()},
			push.Target{Stored: &push.Stored{Version: 2, ColumnVersions: []int64{1}}}, syncerr.InternalError},
		{"stored version 0", push.Upsert{Table: notes(), Present: all()},
			push.Target{Stored: &push.Stored{Version: 0, ColumnVersions: make([]int64, 5)}}, syncerr.InternalError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := push.DecideUpsert(tc.u, tc.target, ok.build())
			if syncerr.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want %q", err, tc.code)
			}
		})
	}
	// Unwired checks fail closed.
	u := push.Upsert{Table: notes(), Present: all()}
	if _, err := push.DecideUpsert(u, push.Target{Stored: stored()}, push.Checks{}); err == nil {
		t.Fatal("unwired checks passed")
	}
	if _, err := push.DecideDelete(push.Target{Stored: stored()}, nil); err == nil {
		t.Fatal("unwired delete authorization passed")
	}
}

func TestColumnBitmap(t *testing.T) {
	tests := []struct {
		n    int
		cols []int
		want []byte
	}{
		{0, nil, []byte{}},
		{5, []int{0, 4}, []byte{0x11}},
		{9, []int{8}, []byte{0x00, 0x01}},
		{16, []int{1, 15}, []byte{0x02, 0x80}},
		{3, []int{-1, 3, 2}, []byte{0x04}},
	}
	for _, tc := range tests {
		if got := push.ColumnBitmap(tc.n, tc.cols); !bytes.Equal(got, tc.want) {
			t.Errorf("ColumnBitmap(%d, %v) = %x, want %x", tc.n, tc.cols, got, tc.want)
		}
	}
}

// TestUpsertRulesPerWireVersion: the same operation on the same stored
// row, answered by each wire version's rule. Where the generations agree
// the outcomes are equal; they differ in exactly two places: a scope
// column on update (wire 3 refuses a change, wire 2 strips every scope
// column and applies the rest) and a baseVersion above the server version
// (wire 3 sync.invalid_request, wire 2 a conflict). Wire 1 gets wire 2's
// answer everywhere.
func TestUpsertRulesPerWireVersion(t *testing.T) {
	type outcome struct {
		want push.Decision
		code syncerr.Code
	}
	tests := []struct {
		name         string
		present      []bool
		base         func() (int64, bool)
		checks       checks
		wire2, wire3 outcome
	}{
		{
			name: "a changed scope column, no baseVersion", present: all(), base: lww,
			checks: checks{storedAuth: allow, payloadAuth: allow, scopeChanged: true},
			wire2: outcome{want: push.Decision{Action: push.ActionUpdate, Version: 6,
				ColumnVersions: []int64{1, 1, 6, 6, 6}, Stripped: []int{colWorkspace}}},
			wire3: outcome{code: syncerr.InvalidRequest},
		},
		{
			name: "a changed scope column with a current baseVersion", present: all(),
			base:   func() (int64, bool) { return base(5) },
			checks: checks{storedAuth: allow, payloadAuth: allow, scopeChanged: true},
			wire2: outcome{want: push.Decision{Action: push.ActionUpdate, Version: 6,
				ColumnVersions: []int64{1, 1, 6, 6, 6}, Stripped: []int{colWorkspace}}},
			wire3: outcome{code: syncerr.InvalidRequest},
		},
		{
			name:    "an unchanged scope column: wire 2 strips it too (its version stays), wire 3 writes it",
			present: all(), base: lww, checks: ok,
			wire2: outcome{want: push.Decision{Action: push.ActionUpdate, Version: 6,
				ColumnVersions: []int64{1, 1, 6, 6, 6}, Stripped: []int{colWorkspace}}},
			wire3: outcome{want: push.Decision{Action: push.ActionUpdate, Version: 6,
				ColumnVersions: []int64{1, 6, 6, 6, 6}}},
		},
		{
			name:    "a changed scope column on a stale baseVersion: the conflict comes first on wire 2",
			present: all(), base: func() (int64, bool) { return base(4) },
			checks: checks{storedAuth: allow, payloadAuth: allow, scopeChanged: true},
			wire2:  outcome{want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap(colTitle)}},
			wire3:  outcome{code: syncerr.InvalidRequest},
		},
		{
			name: "a changed scope column the actor may not write: sync.forbidden on both", present: all(), base: lww,
			checks: checks{storedAuth: deny, payloadAuth: allow, scopeChanged: true},
			wire2:  outcome{code: syncerr.Forbidden},
			wire3:  outcome{code: syncerr.Forbidden},
		},
		{
			name: "baseVersion above the server version", present: all(),
			base: func() (int64, bool) { return base(7) }, checks: ok,
			wire2: outcome{want: push.Decision{Action: push.ActionConflict, Version: 5,
				ConflictColumns: bitmap(colTitle, colBody)}},
			wire3: outcome{code: syncerr.InvalidRequest},
		},
		{
			name: "baseVersion above the server version, only the primary key and title", present: present(colID, colTitle),
			base: func() (int64, bool) { return base(6) }, checks: ok,
			wire2: outcome{want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap(colTitle)}},
			wire3: outcome{code: syncerr.InvalidRequest},
		},
		{
			name: "baseVersion above the server version the actor may not write: sync.forbidden on both", present: all(),
			base: func() (int64, bool) { return base(7) }, checks: checks{storedAuth: deny, payloadAuth: allow},
			wire2: outcome{code: syncerr.Forbidden},
			wire3: outcome{code: syncerr.Forbidden},
		},
		{
			name: "baseVersion equal to the server version applies on both", present: present(colID, colTitle),
			base: func() (int64, bool) { return base(5) }, checks: ok,
			wire2: outcome{want: push.Decision{Action: push.ActionUpdate, Version: 6, ColumnVersions: []int64{1, 1, 6, 3, 4}}},
			wire3: outcome{want: push.Decision{Action: push.ActionUpdate, Version: 6, ColumnVersions: []int64{1, 1, 6, 3, 4}}},
		},
		{
			name: "a stale baseVersion conflicts per column on both", present: present(colID, colTitle, colBody),
			base: func() (int64, bool) { return base(4) }, checks: ok,
			wire2: outcome{want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap(colTitle)}},
			wire3: outcome{want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap(colTitle)}},
		},
		{
			name: "baseVersion 0 on an existing row is a conflict on both; wire 2 marks no stripped column", present: all(),
			base: func() (int64, bool) { return base(0) }, checks: ok,
			wire2: outcome{want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap(colTitle, colBody)}},
			wire3: outcome{want: push.Decision{Action: push.ActionConflict, Version: 5, ConflictColumns: bitmap(colWorkspace, colTitle, colBody)}},
		},
	}
	for _, tc := range tests {
		for _, w := range []struct {
			version uint16
			want    outcome
		}{{1, tc.wire2}, {2, tc.wire2}, {3, tc.wire3}} {
			t.Run(fmt.Sprintf("wire %d/%s", w.version, tc.name), func(t *testing.T) {
				bv, has := tc.base()
				u := push.Upsert{Table: notes(), Present: tc.present, BaseVersion: bv, HasBaseVersion: has, WireVersion: w.version}
				in := append([]bool(nil), tc.present...)
				got, err := push.DecideUpsert(u, push.Target{Stored: stored()}, tc.checks.build())
				if syncerr.CodeOf(err) != w.want.code {
					t.Fatalf("err = %v, want code %q", err, w.want.code)
				}
				if w.want.code == "" && !reflect.DeepEqual(got, w.want.want) {
					t.Fatalf("decision = %+v, want %+v", got, w.want.want)
				}
				if !reflect.DeepEqual(u.Present, in) {
					t.Fatalf("the caller's presence set changed: %v, was %v", u.Present, in)
				}
			})
		}
	}
}

// TestUnversionedUpsertOverTombstonePerWireVersion: wire 3's delete
// precedence (sync.row_deleted) has no wire-1/2 counterpart: their
// unversioned upsert of an absent row is an insert, tombstone or not.
func TestUnversionedUpsertOverTombstonePerWireVersion(t *testing.T) {
	ones := []int64{1, 1, 1, 1, 1}
	for _, version := range []uint16{1, 2} {
		u := push.Upsert{Table: notes(), Present: all(), WireVersion: version}
		got, err := push.DecideUpsert(u, push.Target{Tombstoned: true}, ok.build())
		want := push.Decision{Action: push.ActionInsert, Version: 1, ColumnVersions: ones, ClearTombstone: true}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("wire %d: %+v, %v; want %+v", version, got, err, want)
		}
		if _, err := push.DecideUpsert(u, push.Target{Tombstoned: true}, checks{storedAuth: allow, payloadAuth: deny}.build()); syncerr.CodeOf(err) != syncerr.Forbidden {
			t.Fatalf("wire %d insert over a tombstone without the scope: %v", version, err)
		}
	}
	u := push.Upsert{Table: notes(), Present: all(), WireVersion: 3}
	if _, err := push.DecideUpsert(u, push.Target{Tombstoned: true}, ok.build()); syncerr.CodeOf(err) != syncerr.RowDeleted {
		t.Fatalf("wire 3: %v, want sync.row_deleted", err)
	}
}

// TestUpsertOnAbsentRowSameOnEveryWire: an insert has no stored scope
// to keep, so wires 1 and 2 authorize and write the payload's scope
// exactly as wire 3 does.
func TestUpsertOnAbsentRowSameOnEveryWire(t *testing.T) {
	for _, version := range []uint16{1, 2, 3} {
		u := push.Upsert{Table: notes(), Present: all(), WireVersion: version}
		got, err := push.DecideUpsert(u, push.Target{}, checks{storedAuth: allow, payloadAuth: deny}.build())
		if syncerr.CodeOf(err) != syncerr.Forbidden {
			t.Fatalf("wire %d: err = %v, want sync.forbidden", version, err)
		}
		got, err = push.DecideUpsert(u, push.Target{}, ok.build())
		if err != nil || got.Action != push.ActionInsert || got.Stripped != nil {
			t.Fatalf("wire %d: decision = %+v, %v", version, got, err)
		}
	}
}
