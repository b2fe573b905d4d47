package schema

import (
	"strings"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Reason is the stable machine-readable kind of a schema compile refusal.
type Reason string

// Compile refusal reasons (SPEC §2.4, §3.1 and the IR format).
const (
	ReasonMalformedIR           Reason = "malformed_ir"
	ReasonUnsupportedIRVersion  Reason = "unsupported_ir_version"
	ReasonInvalidSchemaVersion  Reason = "invalid_schema_version"
	ReasonUndeclaredVersion     Reason = "schema_version_not_declared"
	ReasonDuplicateVersion      Reason = "duplicate_schema_version"
	ReasonNoTables              Reason = "no_tables"
	ReasonInvalidName           Reason = "invalid_name"
	ReasonReservedName          Reason = "reserved_name"
	ReasonDuplicateTable        Reason = "duplicate_table"
	ReasonNoColumns             Reason = "no_columns"
	ReasonDuplicateColumn       Reason = "duplicate_column"
	ReasonUnknownColumnType     Reason = "unknown_column_type"
	ReasonMissingNullable       Reason = "missing_nullable"
	ReasonMissingCRDTType       Reason = "missing_crdt_type"
	ReasonEncryptedNotBytes     Reason = "encrypted_not_bytes"
	ReasonUnknownDeclaredType   Reason = "unknown_declared_type"
	ReasonMissingPrimaryKey     Reason = "missing_primary_key"
	ReasonUnknownPrimaryKey     Reason = "unknown_primary_key"
	ReasonPrimaryKeyType        Reason = "primary_key_type_not_eligible"
	ReasonPrimaryKeyNullable    Reason = "primary_key_nullable"
	ReasonNoScopes              Reason = "no_scopes"
	ReasonInvalidScopePattern   Reason = "invalid_scope_pattern"
	ReasonScopeVariableMismatch Reason = "scope_variable_mismatch"
	ReasonUnknownScopeColumn    Reason = "unknown_scope_column"
	ReasonEncryptedScopeColumn  Reason = "encrypted_scope_column"
	ReasonDuplicateScopeVar     Reason = "duplicate_scope_variable"
	ReasonInvalidIndex          Reason = "invalid_index"
	ReasonDuplicateIndex        Reason = "duplicate_index"
	ReasonUnknownIndexColumn    Reason = "unknown_index_column"
	ReasonUnknownRefColumn      Reason = "unknown_reference_column"
	ReasonUnknownRefTable       Reason = "unknown_reference_table"
	ReasonInvalidOnDelete       Reason = "invalid_on_delete"
	ReasonSetNullNotNullable    Reason = "set_null_on_non_nullable"
	ReasonInvalidSubscription   Reason = "invalid_subscription"
	ReasonDuplicateSubscription Reason = "duplicate_subscription"
	ReasonUnknownSubTable       Reason = "unknown_subscription_table"
	ReasonUnknownSubVariable    Reason = "unknown_subscription_variable"
	ReasonInvalidSubValue       Reason = "invalid_subscription_value"
)

// CompileError is a schema IR refusal. Table and Column locate it when one
// applies; Reason is stable; Detail explains it for operators.
//
// It unwraps to a *syncerr.Error with code sync.schema.invalid whose
// details carry table, column and reason, so syncerr.CodeOf works on it.
type CompileError struct {
	Table  string
	Column string
	Reason Reason
	Detail string
}

func (e *CompileError) Error() string {
	var b strings.Builder
	b.WriteString("schema invalid")
	where(&b, e.Table, e.Column, e.Reason, e.Detail)
	return b.String()
}

// Unwrap returns the catalog form of the refusal.
func (e *CompileError) Unwrap() error { return refusal(nil, e.Table, e.Column, e.Reason) }

// where appends the table, column, reason and detail of a refusal.
func where(b *strings.Builder, table, column string, r Reason, detail string) {
	if table != "" {
		b.WriteString(": table ")
		b.WriteString(quote(table))
	}
	if column != "" {
		b.WriteString(" column ")
		b.WriteString(quote(column))
	}
	b.WriteString(": ")
	b.WriteString(string(r))
	if detail != "" {
		b.WriteString(": ")
		b.WriteString(detail)
	}
}

// refusal is a refusal's catalog form: sync.schema.invalid with the
// reason, the table and column where there are, and the details given.
func refusal(d map[string]string, table, column string, r Reason) error {
	if d == nil {
		d = map[string]string{}
	}
	d["reason"] = string(r)
	if table != "" {
		d["table"] = table
	}
	if column != "" {
		d["column"] = column
	}
	se := syncerr.New(syncerr.SchemaInvalid).WithDetails(d)
	se.Reason = string(r)
	return se
}

func quote(s string) string { return `"` + s + `"` }
