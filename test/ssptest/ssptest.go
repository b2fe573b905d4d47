// Package ssptest builds SSP2 sync requests and reads responses for tests:
// a small two-table schema (projects scoped by owner, tasks scoped by
// project with a unique (project_id, title) index and a blob_ref column),
// sparse and full row payloads, push commits and request envelopes.
package ssptest

import (
	_ "embed"
	"encoding/json"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

//go:embed schema.json
var schemaIR []byte

// IR returns the test schema IR document.
func IR() []byte { return append([]byte(nil), schemaIR...) }

// Schema compiles the test schema.
func Schema(t testing.TB) *schema.Schema {
	t.Helper()
	s, err := schema.Load(schemaIR)
	if err != nil {
		t.Fatalf("test schema: %v", err)
	}
	return s
}

// Cols names column values of one row.
type Cols map[string]rowcodec.Value

func values(t testing.TB, tbl *schema.Table, c Cols) []rowcodec.Value {
	t.Helper()
	vals := make([]rowcodec.Value, len(tbl.Columns))
	for name, v := range c {
		i := tbl.ColumnIndex(name)
		if i < 0 {
			t.Fatalf("table %s has no column %q", tbl.Name, name)
		}
		vals[i] = v
	}
	return vals
}

// Sparse encodes the named columns of a row as a wire-3 sparse payload.
func Sparse(t testing.TB, tbl *schema.Table, c Cols) []byte {
	t.Helper()
	b, err := rowcodec.New(tbl).AppendSparse(nil, values(t, tbl, c))
	if err != nil {
		t.Fatalf("sparse row: %v", err)
	}
	return b
}

// Full encodes a whole row (every column named) as a full-row payload.
func Full(t testing.TB, tbl *schema.Table, c Cols) []byte {
	t.Helper()
	b, err := rowcodec.New(tbl).AppendRow(nil, values(t, tbl, c))
	if err != nil {
		t.Fatalf("full row: %v", err)
	}
	return b
}

// DecodeRow decodes a full row into column name → value.
func DecodeRow(t testing.TB, tbl *schema.Table, b []byte) Cols {
	t.Helper()
	vals, err := rowcodec.New(tbl).DecodeRow(b, nil)
	if err != nil {
		t.Fatalf("decode row: %v", err)
	}
	out := Cols{}
	for i, c := range tbl.Columns {
		out[c.Name] = vals[i]
	}
	return out
}

// Upsert is an upsert operation; base < 0 leaves baseVersion absent.
func Upsert(table, rowID string, payload []byte, base int64) ssp2.PushOperation {
	op := ssp2.PushOperation{Table: table, RowID: rowID, Op: ssp2.OpUpsert, Payload: payload}
	if base >= 0 {
		op.BaseVersion = ssp2.Some(base)
	}
	return op
}

// Delete is a delete operation.
func Delete(table, rowID string) ssp2.PushOperation {
	return ssp2.PushOperation{Table: table, RowID: rowID, Op: ssp2.OpDelete}
}

// Commit is a PUSH_COMMIT frame.
func Commit(id string, ops ...ssp2.PushOperation) *ssp2.PushCommit {
	return &ssp2.PushCommit{ClientCommitID: id, Operations: ops}
}

// Req describes a request envelope.
type Req struct {
	Wire          uint16 // 0 → 3
	ClientID      string
	SchemaVersion int32
	// Epoch is the logEpoch; NoEpoch leaves it absent (a wire-1 header
	// has none).
	Epoch   string
	NoEpoch bool
	Commits []*ssp2.PushCommit
	// Pull adds a PULL_HEADER (and one subscription when SubTable is set).
	Pull     bool
	SubTable string
}

// Encode renders the request envelope.
func (r Req) Encode(t testing.TB) []byte {
	t.Helper()
	wire := r.Wire
	if wire == 0 {
		wire = 3
	}
	h := &ssp2.ReqHeader{ClientID: r.ClientID, SchemaVersion: r.SchemaVersion}
	if !r.NoEpoch && wire >= 2 {
		h.LogEpoch = ssp2.Some(r.Epoch)
	}
	m := &ssp2.Message{WireVersion: wire, Kind: ssp2.KindRequest, Frames: []ssp2.Frame{h}}
	for _, c := range r.Commits {
		m.Frames = append(m.Frames, c)
	}
	if r.Pull {
		m.Frames = append(m.Frames, &ssp2.PullHeader{LimitCommits: 100, LimitSnapshotRows: 100,
			MaxSnapshotPages: 1, Accept: ssp2.AcceptInlineRows | ssp2.AcceptExternalRows})
		if r.SubTable != "" {
			m.Frames = append(m.Frames, &ssp2.Subscription{ID: "s1", Table: r.SubTable, Cursor: -1})
		}
	}
	b, err := ssp2.Encode(m)
	if err != nil {
		t.Fatalf("encode request: %v", err)
	}
	return b
}

// Resp is a decoded response.
type Resp struct {
	Msg     *ssp2.Message
	Header  *ssp2.RespHeader
	Results []*ssp2.PushResult
	Details map[string]*ssp2.PushResultDetails
	Error   *ssp2.Error
	// Lease is the LEASE frame (SPEC §7.3.2), nil when none.
	Lease *ssp2.Lease
}

// DecodeResponse decodes a response envelope of any known wire version.
func DecodeResponse(t testing.TB, b []byte) Resp {
	t.Helper()
	m, err := ssp2.Decode(b)
	if err != nil {
		t.Fatalf("decode response: %v", err)
	}
	return Split(m)
}

// Split sorts a response message's frames.
func Split(m *ssp2.Message) Resp {
	r := Resp{Msg: m, Details: map[string]*ssp2.PushResultDetails{}}
	for _, f := range m.Frames {
		switch f := f.(type) {
		case *ssp2.RespHeader:
			r.Header = f
		case *ssp2.PushResult:
			r.Results = append(r.Results, f)
		case *ssp2.PushResultDetails:
			r.Details[f.ClientCommitID] = f
		case *ssp2.Error:
			r.Error = f
		case *ssp2.Lease:
			r.Lease = f
		}
	}
	return r
}

// MaxMerger is a test CRDT merger for crdtType "test-max": the merged state
// is the larger of the two byte strings (commutative, associative and
// idempotent, like a real merger must be).
type MaxMerger struct{}

// Type is the crdtType it merges.
func (MaxMerger) Type() string { return "test-max" }

// Merge returns the larger state.
func (MaxMerger) Merge(stored, incoming []byte) ([]byte, error) {
	if string(stored) > string(incoming) {
		return append([]byte(nil), stored...), nil
	}
	return append([]byte(nil), incoming...), nil
}

// IRAt is the test schema's IR renumbered to schema version v (its
// tables unchanged): an older or newer client's generated schema.
func IRAt(t testing.TB, v int32) []byte {
	t.Helper()
	ir, err := schema.ParseIR(schemaIR)
	if err != nil {
		t.Fatal(err)
	}
	ir.SchemaVersion, ir.SchemaVersions = v, []schema.IRSchemaVersion{{Version: v}}
	return marshalIR(t, ir)
}

// NextIR is the schema version after the test schema's (3), as a bump
// that keeps version 2 servable makes it (SPEC §9): tasks appends the
// nullable integer column priority, and the new table labels (id,
// project_id, name nullable) is scoped by project.
func NextIR(t testing.TB) []byte {
	t.Helper()
	ir, err := schema.ParseIR(schemaIR)
	if err != nil {
		t.Fatal(err)
	}
	ir.SchemaVersion = 3
	ir.SchemaVersions = append(ir.SchemaVersions, schema.IRSchemaVersion{Version: 3, Migrations: []string{"0003_priority_labels"}})
	yes, no := true, false
	for i := range ir.Tables {
		if ir.Tables[i].Name == "tasks" {
			ir.Tables[i].Columns = append(ir.Tables[i].Columns, schema.IRColumn{Name: "priority", Type: "integer", Nullable: &yes})
		}
	}
	ir.Tables = append(ir.Tables, schema.IRTable{Name: "labels", PrimaryKey: "id",
		Columns: []schema.IRColumn{{Name: "id", Type: "string", Nullable: &no}, {Name: "project_id", Type: "string", Nullable: &no},
			{Name: "name", Type: "string", Nullable: &yes}},
		Scopes: []schema.IRScope{{Pattern: "project:{project_id}", Variable: "project_id", Column: "project_id"}}})
	return marshalIR(t, ir)
}

// Window compiles the window [NextIR, the test schema]: current version
// 3, older version 2.
func Window(t testing.TB) *schema.Window {
	t.Helper()
	cur, err := schema.Load(NextIR(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := schema.NewWindow(cur, Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func marshalIR(t testing.TB, ir *schema.IR) []byte {
	t.Helper()
	b, err := json.Marshal(ir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
