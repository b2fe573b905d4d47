package syncerr

// Recommended actions (SPEC §10.1).
const (
	ActionFixRequest       Action = "fixRequest"
	ActionRefreshAuth      Action = "refreshAuth"
	ActionCheckPermissions Action = "checkPermissions"
	ActionResetClientID    Action = "resetClientId"
	ActionRegenerateClient Action = "regenerateClient"
	ActionForceResync      Action = "forceResync"
	ActionResolveConflict  Action = "resolveConflict"
	ActionInspectServer    Action = "inspectServer"
	ActionRetryLater       Action = "retryLater"
	ActionSplitBatch       Action = "splitBatch"
	ActionRebootstrap      Action = "rebootstrap"
	ActionUpgradeClient    Action = "upgradeClient"
)

func wire(code Code, cat Category, retry bool, act Action, status int, msg string) Entry {
	return Entry{Code: code, Category: cat, Retryable: retry, RecommendedAction: act, HTTPStatus: status,
		Wire: true, Exposed: true, Surface: SurfaceRequest, Message: msg}
}

// resultOnly marks a wire code that only appears inside a push operation
// result (§6.3); its HTTPStatus is what a request-level use would answer.
func resultOnly(e Entry) Entry { e.Surface = SurfaceResult; return e }

// subStartOnly marks a wire code delivered only as a SUB_START reason.
func subStartOnly(e Entry) Entry { e.Surface = SurfaceSubStart; return e }

func host(code Code, cat Category, retry bool, act Action, status int, msg string) Entry {
	return Entry{Code: code, Category: cat, Retryable: retry, RecommendedAction: act, HTTPStatus: status, Message: msg}
}

// entries is the whole catalog, in SPEC §10.2 order then host codes.
var entries = []Entry{
	wire(OperationUnknown, CategoryNotFound, false, ActionRegenerateClient, 404, "unknown operation"),
	wire(OperationForbidden, CategoryForbidden, false, ActionCheckPermissions, 403, "operation forbidden"),
	wire(OperationInvalid, CategoryInvalidRequest, false, ActionFixRequest, 400, "invalid operation request"),
	wire(OperationResultTooLarge, CategoryInvalidRequest, false, ActionFixRequest, 400, "operation result too large"),
	wire(OperationStorage, CategoryInternal, false, ActionInspectServer, 500, "operation storage unsupported"),
	wire(OperationQueryFailed, CategoryInternal, false, ActionInspectServer, 500, "operation query failed"),
	wire(OperationExecFailed, CategoryInternal, false, ActionInspectServer, 500, "operation execution failed"),
	wire(AuthRequired, CategoryAuthRequired, true, ActionRefreshAuth, 401, "authentication required"),
	wire(AuthLeaseRequired, CategoryAuthRequired, true, ActionRefreshAuth, 401, "auth lease required"),
	wire(AuthLeaseRevoked, CategoryAuthRequired, true, ActionRefreshAuth, 401, "auth lease revoked"),
	wire(Forbidden, CategoryForbidden, false, ActionCheckPermissions, 403, "forbidden"),
	wire(InvalidRequest, CategoryInvalidRequest, false, ActionFixRequest, 400, "invalid request"),
	wire(InvalidClientID, CategoryInvalidRequest, false, ActionResetClientID, 400, "invalid client id"),
	wire(InvalidSubscription, CategoryInvalidRequest, false, ActionFixRequest, 400, "invalid subscription"),
	wire(EmptyCommit, CategoryInvalidRequest, false, ActionFixRequest, 400, "commit has no operations"),
	wire(UnknownTable, CategorySchemaMismatch, false, ActionRegenerateClient, 400, "unknown table"),
	wire(RowMissing, CategoryNotFound, false, ActionForceResync, 404, "row missing"),
	resultOnly(wire(RowDeleted, CategoryNotFound, false, ActionFixRequest, 404, "row deleted")),
	resultOnly(wire(VersionConflict, CategoryConflict, false, ActionResolveConflict, 409, "version conflict")),
	wire(ConstraintViolation, CategoryInvalidRequest, false, ActionFixRequest, 400, "constraint violation"),
	resultOnly(wire(ReferenceViolation, CategoryInvalidRequest, false, ActionFixRequest, 400, "reference violation")),
	wire(MissingScopes, CategoryInternal, false, ActionInspectServer, 500, "change has no stored scopes"),
	resultOnly(wire(CRDTMergeFailed, CategoryInternal, false, ActionInspectServer, 500, "CRDT merger failed")),
	wire(IdempotencyCacheMiss, CategoryInternal, true, ActionRetryLater, 500, "idempotency cache miss"),
	wire(InternalError, CategoryInternal, true, ActionRetryLater, 500, "internal server error"),
	wire(StorageStaleRead, CategoryInternal, false, ActionInspectServer, 500, "sync storage read is older than a commit of this request; disable query caching and replica reads for sync storage"),
	wire(SchemaNotReady, CategoryInternal, true, ActionRetryLater, 503, "server schema is not ready for this request"),
	wire(TooManyOperations, CategoryInvalidRequest, false, ActionSplitBatch, 400, "too many operations"),
	wire(NotFound, CategoryNotFound, false, ActionForceResync, 404, "not found"),
	wire(SegmentExpired, CategoryNotFound, true, ActionRetryLater, 404, "segment expired"),
	subStartOnly(wire(CursorExpired, CategoryResetRequired, false, ActionRebootstrap, 0, "cursor expired")),
	subStartOnly(wire(ScopeRevoked, CategoryScopeRevoked, false, ActionCheckPermissions, 0, "scope revoked")),
	wire(RateLimited, CategoryRateLimited, true, ActionRetryLater, 429, "rate limited"),
	wire(SchemaMismatch, CategorySchemaMismatch, false, ActionRegenerateClient, 400, "schema mismatch"),
	wire(ClientSchemaUnsupported, CategorySchemaMismatch, false, ActionUpgradeClient, 400, "client schema unsupported"),
	wire(ClientWireUnsupported, CategorySchemaMismatch, false, ActionUpgradeClient, 400, "client wire version unsupported"),
	wire(WebsocketLimit, CategoryRateLimited, true, ActionRetryLater, 429, "websocket connection limit"),
	wire(BlobNotFound, CategoryNotFound, false, ActionFixRequest, 404, "blob not found"),
	wire(BlobForbidden, CategoryForbidden, false, ActionCheckPermissions, 403, "blob forbidden"),
	wire(BlobHashMismatch, CategoryInvalidRequest, false, ActionFixRequest, 400, "blob hash mismatch"),
	wire(BlobTooLarge, CategoryInvalidRequest, false, ActionFixRequest, 413, "blob too large"),

	host(StorageStoredLayoutMismatch, CategoryInternal, false, ActionInspectServer, 500, "stored table layout differs from the running schema"),
	host(StoragePhysicalLayoutMismatch, CategoryInternal, false, ActionInspectServer, 500, "database table layout differs from the storage layout"),
	host(StorageCheckpointIncomplete, CategoryInternal, true, ActionRetryLater, 503, "a backfill checkpoint for the running schema version is not activated"),
	host(StorageCheckpointNotDeclared, CategoryInternal, false, ActionInspectServer, 500, "checkpoint not declared"),
	host(StorageCheckpointFenceMissing, CategoryInternal, false, ActionInspectServer, 500, "checkpoint activation needs the writer fence"),
	host(BackfillUnregistered, CategoryInternal, false, ActionInspectServer, 500, "no backfill is registered for the checkpoint"),
	host(BackfillInvalidSpec, CategoryInternal, false, ActionInspectServer, 500, "invalid backfill specification"),
	host(BackfillIncomplete, CategoryInternal, true, ActionRetryLater, 503, "the checkpoint's backfill has not completed its full pass"),
	host(BackfillActivationStale, CategoryInternal, true, ActionRetryLater, 503, "the checkpoint's activation kept going stale"),
	host(StorageWriterFenceRejected, CategoryInternal, true, ActionRetryLater, 503, "writer fence rejected the commit"),
	host(StoragePruneEpochMismatch, CategoryInternal, true, ActionRetryLater, 500, "prune epoch mismatch"),
	host(StoragePartitionUnregistered, CategoryInternal, false, ActionInspectServer, 500, "partition unregistered"),
	host(StorageInvalidPruneCursor, CategoryInternal, false, ActionInspectServer, 500, "invalid prune cursor"),
	host(StorageScanRequiresScope, CategoryInternal, false, ActionInspectServer, 500, "row scan requires a scope filter"),
	host(StorageInvalidLimit, CategoryInternal, false, ActionInspectServer, 500, "invalid limit"),
	host(StorageIndexNotFound, CategoryInternal, false, ActionInspectServer, 500, "index not found"),
	host(StorageIndexValueCount, CategoryInternal, false, ActionInspectServer, 500, "index value count mismatch"),
	host(StorageTxQueryUnsupported, CategoryInternal, false, ActionInspectServer, 500, "transaction query unsupported"),
	host(StorageSchemaTooNew, CategoryInternal, true, ActionRetryLater, 503, "database schema is newer than this build"),
	host(SchemaInvalid, CategoryInternal, false, ActionInspectServer, 500, "schema IR is invalid"),
}

var byCode = func() map[Code]Entry {
	m := make(map[Code]Entry, len(entries))
	for _, e := range entries {
		m[e.Code] = e
	}
	return m
}()

// Lookup returns the catalog row of code. An unknown code maps to the
// internal-error row so nothing uncatalogued reaches a client.
func Lookup(code Code) Entry {
	if e, ok := byCode[code]; ok {
		return e
	}
	return byCode[InternalError]
}

// Known reports whether code is in the catalog.
func Known(code Code) bool {
	_, ok := byCode[code]
	return ok
}

// Entries returns a copy of the whole catalog.
func Entries() []Entry { return append([]Entry(nil), entries...) }
