package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// SupportedIRVersion is the schema IR format version this package reads.
const SupportedIRVersion = 1

// IR is the schema IR document the Syncular CLI writes (syncular.ir.json).
// It is the raw, unvalidated input of Compile.
type IR struct {
	IRVersion      int               `json:"irVersion"`
	SchemaVersion  int32             `json:"schemaVersion"`
	SchemaVersions []IRSchemaVersion `json:"schemaVersions"`
	Tables         []IRTable         `json:"tables"`
	Subscriptions  []IRSubscription  `json:"subscriptions"`
	Extensions     json.RawMessage   `json:"extensions,omitempty"`
}

// IRSchemaVersion is one declared schema version and its migrations.
type IRSchemaVersion struct {
	Version    int32    `json:"version"`
	Migrations []string `json:"migrations"`
}

// IRTable is one synced table of the IR.
type IRTable struct {
	Name        string          `json:"name"`
	PrimaryKey  string          `json:"primaryKey"`
	Columns     []IRColumn      `json:"columns"`
	Scopes      []IRScope       `json:"scopes"`
	Indexes     []IRIndex       `json:"indexes,omitempty"`
	References  []IRReference   `json:"references,omitempty"`
	Materialize *bool           `json:"materialize,omitempty"`
	Extensions  json.RawMessage `json:"extensions,omitempty"`
}

// IRColumn is one column of an IR table. Nullable is a pointer so a missing
// field is told apart from false.
type IRColumn struct {
	Name         string `json:"name"`
	Type         string `json:"type"`
	Nullable     *bool  `json:"nullable"`
	CRDTType     string `json:"crdtType,omitempty"`
	Encrypted    bool   `json:"encrypted,omitempty"`
	DeclaredType string `json:"declaredType,omitempty"`
}

// IRScope is a scope declaration: in JSON either the string
// "prefix:{variable}" or an object {pattern, variable?, column?}.
type IRScope struct {
	Pattern  string `json:"pattern"`
	Variable string `json:"variable,omitempty"`
	Column   string `json:"column,omitempty"`
}

// UnmarshalJSON accepts both scope forms.
func (s *IRScope) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var p string
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		*s = IRScope{Pattern: p}
		return nil
	}
	type plain IRScope
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = IRScope(p)
	return nil
}

// IRIndex is a declared secondary index.
type IRIndex struct {
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
	Unique  bool     `json:"unique,omitempty"`
}

// IRReference is a declared parent reference (SPEC §6.11).
type IRReference struct {
	Column      string `json:"column"`
	ParentTable string `json:"parentTable"`
	OnDelete    string `json:"onDelete,omitempty"`
}

// IRSubscription is a named subscription template.
type IRSubscription struct {
	Name   string                `json:"name"`
	Table  string                `json:"table"`
	Scopes []IRSubscriptionScope `json:"scopes"`
}

// IRSubscriptionScope is one variable of a subscription template.
type IRSubscriptionScope struct {
	Variable string                `json:"variable"`
	Values   []IRSubscriptionValue `json:"values"`
}

// IRSubscriptionValue is a parameter reference or a literal.
type IRSubscriptionValue struct {
	Kind  string          `json:"kind"`
	Name  string          `json:"name,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// ParseIR decodes an IR document. Malformed JSON is a *CompileError with
// reason ReasonMalformedIR.
func ParseIR(data []byte) (*IR, error) {
	var ir IR
	if err := json.Unmarshal(data, &ir); err != nil {
		return nil, &CompileError{Reason: ReasonMalformedIR, Detail: err.Error()}
	}
	return &ir, nil
}

// Load parses and compiles an IR document.
func Load(data []byte) (*Schema, error) {
	ir, err := ParseIR(data)
	if err != nil {
		return nil, err
	}
	return Compile(ir)
}

// LoadFile reads, parses and compiles the IR file at path.
func LoadFile(path string) (*Schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("schema: read %s: %w", path, err)
	}
	s, err := Load(data)
	if err != nil {
		return nil, fmt.Errorf("schema: %s: %w", path, err)
	}
	return s, nil
}

// literalString renders a subscription literal: JSON strings unquoted,
// anything else in its JSON text.
func literalString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
