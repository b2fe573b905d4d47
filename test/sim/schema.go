package sim

import (
	"errors"
	"slices"
	"strings"

	"github.com/syncd-dev/syncd/domain/schema"
)

// schemaIR is the simulated application: workspaces (the one scope
// variable, ws) holding folders, documents in folders (deleting a folder
// cascades to its documents), notes on documents (deleting a document
// sets their reference to NULL) and pins on folders (a pinned folder
// cannot be deleted). Documents carry a CRDT column merged by setMerger.
const schemaIR = `{
  "irVersion": 1, "schemaVersion": 1,
  "schemaVersions": [{ "version": 1, "migrations": ["0001_sim"] }],
  "tables": [
    { "name": "folders", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false },
                   { "name": "name", "type": "string", "nullable": false }, { "name": "color", "type": "string", "nullable": true } ],
      "scopes": ["ws:{ws}"] },
    { "name": "docs", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false },
                   { "name": "folder_id", "type": "string", "nullable": true }, { "name": "title", "type": "string", "nullable": false },
                   { "name": "body", "type": "string", "nullable": true }, { "name": "rank", "type": "integer", "nullable": true },
                   { "name": "tags", "type": "crdt", "nullable": true, "crdtType": "sim-set" } ],
      "scopes": ["ws:{ws}"],
      "indexes": [ { "name": "docs_folder", "columns": ["folder_id"] } ],
      "references": [ { "column": "folder_id", "parentTable": "folders", "onDelete": "cascade" } ] },
    { "name": "notes", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false },
                   { "name": "doc_id", "type": "string", "nullable": true }, { "name": "text", "type": "string", "nullable": false } ],
      "scopes": ["ws:{ws}"],
      "indexes": [ { "name": "notes_doc", "columns": ["doc_id"] } ],
      "references": [ { "column": "doc_id", "parentTable": "docs", "onDelete": "set_null" } ] },
    { "name": "pins", "primaryKey": "id",
      "columns": [ { "name": "id", "type": "string", "nullable": false }, { "name": "ws", "type": "string", "nullable": false },
                   { "name": "folder_id", "type": "string", "nullable": false }, { "name": "label", "type": "string", "nullable": false } ],
      "scopes": ["ws:{ws}"],
      "indexes": [ { "name": "pins_folder", "columns": ["folder_id"] } ],
      "references": [ { "column": "folder_id", "parentTable": "folders", "onDelete": "restrict" } ] }
  ],
  "subscriptions": []
}`

// IR returns the simulated application's schema IR.
func IR() []byte { return []byte(schemaIR) }

// loadSchema compiles the simulated schema.
func loadSchema() (*schema.Schema, error) { return schema.Load([]byte(schemaIR)) }

// tableNames are the simulated tables, parents first.
var tableNames = []string{"folders", "docs", "notes", "pins"}

// setMerger is the simulation's CRDT merger (crdtType "sim-set"): a state
// is a sorted, comma-separated set of tokens and a merge is the union, so
// it is commutative, associative and idempotent as SPEC §5.10.2 asks.
type setMerger struct{}

func (setMerger) Type() string { return "sim-set" }

func (setMerger) Merge(stored, incoming []byte) ([]byte, error) {
	a, err := parseSet(stored)
	if err != nil {
		return nil, err
	}
	b, err := parseSet(incoming)
	if err != nil {
		return nil, err
	}
	return []byte(formatSet(unionSet(a, b))), nil
}

var errBadSet = errors.New("sim-set: malformed state")

func parseSet(b []byte) ([]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	out := strings.Split(string(b), ",")
	for _, t := range out {
		if t == "" {
			return nil, errBadSet
		}
	}
	return out, nil
}

func unionSet(a, b []string) []string {
	out := append(append([]string(nil), a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func formatSet(s []string) string { return strings.Join(s, ",") }
