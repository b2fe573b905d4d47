package syncerr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// spec is SPEC §10.2 (wire version 3) with the HTTP statuses of the
// reference catalog, then the host codes this server adds.
var spec = []struct {
	code     syncerr.Code
	category syncerr.Category
	retry    bool
	action   syncerr.Action
	status   int
	surface  syncerr.Surface
}{
	{"operation.unknown", "not-found", false, "regenerateClient", 404, "request"},
	{"operation.forbidden", "forbidden", false, "checkPermissions", 403, "request"},
	{"operation.invalid_request", "invalid-request", false, "fixRequest", 400, "request"},
	{"operation.result_too_large", "invalid-request", false, "fixRequest", 400, "request"},
	{"operation.storage_unsupported", "internal", false, "inspectServer", 500, "request"},
	{"operation.query_failed", "internal", false, "inspectServer", 500, "request"},
	{"operation.execution_failed", "internal", false, "inspectServer", 500, "request"},
	{"sync.auth_required", "auth-required", true, "refreshAuth", 401, "request"},
	{"sync.auth_lease_required", "auth-required", true, "refreshAuth", 401, "request"},
	{"sync.auth_lease_revoked", "auth-required", true, "refreshAuth", 401, "request"},
	{"sync.forbidden", "forbidden", false, "checkPermissions", 403, "request"},
	{"sync.invalid_request", "invalid-request", false, "fixRequest", 400, "request"},
	{"sync.invalid_client_id", "invalid-request", false, "resetClientId", 400, "request"},
	{"sync.invalid_subscription", "invalid-request", false, "fixRequest", 400, "request"},
	{"sync.empty_commit", "invalid-request", false, "fixRequest", 400, "request"},
	{"sync.unknown_table", "schema-mismatch", false, "regenerateClient", 400, "request"},
	{"sync.row_missing", "not-found", false, "forceResync", 404, "request"},
	{"sync.row_deleted", "not-found", false, "fixRequest", 404, "result"},
	{"sync.version_conflict", "conflict", false, "resolveConflict", 409, "result"},
	{"sync.constraint_violation", "invalid-request", false, "fixRequest", 400, "request"},
	{"sync.reference_violation", "invalid-request", false, "fixRequest", 400, "result"},
	{"sync.missing_scopes", "internal", false, "inspectServer", 500, "request"},
	{"sync.crdt_merge_failed", "internal", false, "inspectServer", 500, "result"},
	{"sync.idempotency_cache_miss", "internal", true, "retryLater", 500, "request"},
	{"sync.internal_error", "internal", true, "retryLater", 500, "request"},
	{"sync.storage_stale_read", "internal", false, "inspectServer", 500, "request"},
	{"sync.schema_not_ready", "internal", true, "retryLater", 503, "request"},
	{"sync.too_many_operations", "invalid-request", false, "splitBatch", 400, "request"},
	{"sync.not_found", "not-found", false, "forceResync", 404, "request"},
	{"sync.segment_expired", "not-found", true, "retryLater", 404, "request"},
	{"sync.cursor_expired", "reset-required", false, "rebootstrap", 409, "sub_start"},
	{"sync.scope_revoked", "scope-revoked", false, "checkPermissions", 403, "sub_start"},
	{"sync.rate_limited", "rate-limited", true, "retryLater", 429, "request"},
	{"sync.schema_mismatch", "schema-mismatch", false, "regenerateClient", 400, "request"},
	{"sync.client_schema_unsupported", "schema-mismatch", false, "upgradeClient", 400, "request"},
	// The wire-1/2 catalog's code for wire-1 requests after an epoch rotation.
	{"sync.client_wire_unsupported", "schema-mismatch", false, "upgradeClient", 400, "request"},
	{"sync.websocket_connection_limit", "rate-limited", true, "retryLater", 429, "request"},
	{"blob.not_found", "not-found", false, "fixRequest", 404, "request"},
	{"blob.forbidden", "forbidden", false, "checkPermissions", 403, "request"},
	{"blob.hash_mismatch", "invalid-request", false, "fixRequest", 400, "request"},
	{"blob.too_large", "invalid-request", false, "fixRequest", 413, "request"},
}

var hostSpec = []struct {
	code    syncerr.Code
	retry   bool
	status  int
	exposed bool
}{
	{"sync.storage.stored_layout_mismatch", false, 500, false},
	{"sync.storage.physical_layout_mismatch", false, 500, false},
	{"sync.storage.checkpoint_incomplete", true, 503, false},
	{"sync.storage.checkpoint_not_declared", false, 500, false},
	{"sync.storage.checkpoint_fence_missing", false, 500, false},
	{"sync.backfill.unregistered", false, 500, false},
	{"sync.backfill.invalid_spec", false, 500, false},
	{"sync.backfill.incomplete", true, 503, false},
	{"sync.backfill.activation_stale", true, 503, false},
	{"sync.storage.writer_fence_rejected", true, 503, false},
	{"sync.storage.prune_epoch_mismatch", true, 500, false},
	{"sync.storage.partition_unregistered", false, 500, false},
	{"sync.storage.invalid_prune_cursor", false, 500, false},
	{"sync.storage.scan_requires_scope", false, 500, false},
	{"sync.storage.invalid_limit", false, 500, false},
	{"sync.storage.index_not_found", false, 500, false},
	{"sync.storage.index_value_count_mismatch", false, 500, false},
	{"sync.storage.transaction_query_unsupported", false, 500, false},
	{"sync.storage.schema_too_new", true, 503, false},
	{"sync.schema.invalid", false, 500, false},
}

func TestCatalogMatchesSpec(t *testing.T) {
	if got, want := len(syncerr.Entries()), len(spec)+len(hostSpec); got != want {
		t.Fatalf("catalog has %d entries, spec lists %d", got, want)
	}
	for _, tt := range spec {
		t.Run(string(tt.code), func(t *testing.T) {
			if !syncerr.Known(tt.code) {
				t.Fatal("missing from catalog")
			}
			e := syncerr.Lookup(tt.code)
			if e.Category != tt.category || e.Retryable != tt.retry || e.RecommendedAction != tt.action {
				t.Fatalf("got %s/%v/%s, want %s/%v/%s", e.Category, e.Retryable, e.RecommendedAction, tt.category, tt.retry, tt.action)
			}
			if !e.Wire || !e.Exposed || e.Surface != tt.surface || e.Message == "" {
				t.Fatalf("wire/exposed/surface/message: %+v", e)
			}
			if got := syncerr.New(tt.code).HTTPStatus(); got != tt.status {
				t.Fatalf("HTTPStatus = %d, want %d", got, tt.status)
			}
			checkRendering(t, syncerr.New(tt.code), tt.code)
		})
	}
	for _, tt := range hostSpec {
		t.Run(string(tt.code), func(t *testing.T) {
			if !syncerr.Known(tt.code) {
				t.Fatal("missing from catalog")
			}
			e := syncerr.Lookup(tt.code)
			if e.Wire || e.Exposed != tt.exposed || e.Surface != syncerr.SurfaceHost || e.Message == "" {
				t.Fatalf("host entry: %+v", e)
			}
			if e.Retryable != tt.retry || e.HTTPStatus != tt.status || e.Category != syncerr.CategoryInternal {
				t.Fatalf("got %v/%d/%s", e.Retryable, e.HTTPStatus, e.Category)
			}
			if !strings.HasPrefix(string(tt.code), "sync.") {
				t.Fatal("host codes live under sync.")
			}
			want := tt.code
			if !tt.exposed {
				want = syncerr.InternalError
			}
			checkRendering(t, syncerr.Public(syncerr.New(tt.code)), want)
		})
	}
}

func checkRendering(t *testing.T, e *syncerr.Error, code syncerr.Code) {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	ent := syncerr.Lookup(code)
	if m["code"] != string(code) || m["category"] != string(ent.Category) || m["retryable"] != ent.Retryable ||
		m["recommendedAction"] != string(ent.RecommendedAction) || m["message"] != ent.Message {
		t.Fatalf("rendering %s", b)
	}
	if _, ok := m["details"]; ok || len(m) != 5 {
		t.Fatalf("unexpected fields: %s", b)
	}
}

func TestCodesAreUnique(t *testing.T) {
	seen := map[syncerr.Code]bool{}
	for _, e := range syncerr.Entries() {
		if seen[e.Code] {
			t.Fatalf("duplicate %s", e.Code)
		}
		seen[e.Code] = true
	}
}

func TestRenderingWithDetails(t *testing.T) {
	tests := []struct {
		name string
		err  *syncerr.Error
		want string
	}{
		{"details object", syncerr.New(syncerr.SchemaNotReady).WithDetails(map[string]any{"partition": "p", "projection": "x"}),
			`{"code":"sync.schema_not_ready","message":"server schema is not ready for this request","category":"internal","retryable":true,"recommendedAction":"retryLater","details":{"partition":"p","projection":"x"}}`},
		{"message override", syncerr.New(syncerr.InvalidRequest).WithMessage("bad content type"),
			`{"code":"sync.invalid_request","message":"bad content type","category":"invalid-request","retryable":false,"recommendedAction":"fixRequest"}`},
		{"non-object details dropped", syncerr.New(syncerr.NotFound).WithDetails([]int{1}),
			`{"code":"sync.not_found","message":"not found","category":"not-found","retryable":false,"recommendedAction":"forceResync"}`},
		{"reason never rendered", syncerr.Newf(syncerr.Forbidden, "secret %d", 42),
			`{"code":"sync.forbidden","message":"forbidden","category":"forbidden","retryable":false,"recommendedAction":"checkPermissions"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.err)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("got  %s\nwant %s", b, tt.want)
			}
		})
	}
}

func TestPublic(t *testing.T) {
	cause := errors.New("disk on fire")
	wrapped := fmt.Errorf("push: %w", syncerr.New(syncerr.Forbidden))
	tests := []struct {
		name string
		in   error
		want syncerr.Code
	}{
		{"nil", nil, ""},
		{"plain error", cause, syncerr.InternalError},
		{"wrapped wire code", wrapped, syncerr.Forbidden},
		{"host code", syncerr.Wrap(syncerr.StorageInvalidLimit, cause), syncerr.InternalError},
		{"unknown code", &syncerr.Error{Code: "x.y"}, syncerr.InternalError},
		{"former exposed host code", &syncerr.Error{Code: "sync.not_implemented"}, syncerr.InternalError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := syncerr.Public(tt.in)
			if tt.want == "" {
				if got != nil {
					t.Fatalf("got %v", got)
				}
				return
			}
			if got.Code != tt.want {
				t.Fatalf("code = %s", got.Code)
			}
			if b, _ := json.Marshal(got); strings.Contains(string(b), "fire") {
				t.Fatalf("internal text leaked: %s", b)
			}
			if tt.in != nil && !errors.Is(got, tt.in) && got.Code == syncerr.InternalError && tt.name != "unknown code" {
				t.Fatal("cause not kept for logs")
			}
		})
	}
}

func TestErrorHelpers(t *testing.T) {
	cause := errors.New("boom")
	e := syncerr.Wrap(syncerr.InternalError, cause)
	if !errors.Is(e, cause) || syncerr.CodeOf(fmt.Errorf("x: %w", e)) != syncerr.InternalError {
		t.Fatal("wrap/unwrap")
	}
	if syncerr.CodeOf(cause) != "" || syncerr.CodeOf(nil) != "" {
		t.Fatal("CodeOf on plain error")
	}
	if got := syncerr.Newf(syncerr.NotFound, "segment %s", "s1").Error(); got != "sync.not_found: segment s1" {
		t.Fatalf("Error() = %q", got)
	}
	if got := syncerr.New(syncerr.NotFound).Error(); got != "sync.not_found: not found" {
		t.Fatalf("Error() = %q", got)
	}
	if syncerr.Lookup("nope").Code != syncerr.InternalError {
		t.Fatal("unknown lookup")
	}
}

// SPEC §0, §10.1 and §10.3: the catalog is closed. No host code may reach a
// client verbatim (sync.* is reserved for the protocol), so every exposed
// code is a wire code; anything else renders as sync.internal_error.
func TestOnlyWireCodesAreExposed(t *testing.T) {
	for _, e := range syncerr.Entries() {
		if e.Exposed && !e.Wire {
			t.Errorf("%s is exposed to clients but is not a §10.2 catalog code", e.Code)
		}
	}
}
