// Package event is the catalog of operational events a host can observe:
// one Go type per kind, each a plain value with a stable kind name and the
// fields an operator needs (partition, actor, client id, commit seq,
// counts, durations, catalog error codes). Events never carry row
// payloads, scope values or an engine's error text, so a hook may ship
// them anywhere without leaking data.
//
// The types are pure values: the use cases build them and hand them to a
// ports.EventSink; app/events delivers them to the host's hooks and the
// log.
package event

import (
	"time"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Kind is an event's stable name ("push.applied"). Kinds are part of the
// host API: they are never renamed, only added.
type Kind string

// The catalog's kinds.
const (
	KindRequestHandled        Kind = "request.handled"
	KindPushApplied           Kind = "push.applied"
	KindPushRejected          Kind = "push.rejected"
	KindPushConflicted        Kind = "push.conflicted"
	KindPullServed            Kind = "pull.served"
	KindScopeResolutionFailed Kind = "scope.resolution_failed"
	KindSegmentDownloaded     Kind = "segment.downloaded"
	KindBlobSwept             Kind = "blob.swept"
	KindReactionTransitioned  Kind = "reaction.transitioned"
	KindRealtimeConnected     Kind = "realtime.connected"
	KindRealtimeDisconnected  Kind = "realtime.disconnected"
	KindPruneCompleted        Kind = "prune.completed"
	KindCheckpointProgress    Kind = "checkpoint.progress"
)

// Kinds lists every kind of the catalog, in the order above.
func Kinds() []Kind {
	return []Kind{
		KindRequestHandled, KindPushApplied, KindPushRejected, KindPushConflicted,
		KindPullServed, KindScopeResolutionFailed, KindSegmentDownloaded, KindBlobSwept,
		KindReactionTransitioned, KindRealtimeConnected, KindRealtimeDisconnected,
		KindPruneCompleted, KindCheckpointProgress,
	}
}

// FieldEncoder receives an event's fields as snake_case keys. Its method
// set is a subset of zapcore.ObjectEncoder's, so a zap encoder renders an
// event directly; a host can implement it to map events onto its own
// telemetry without a type switch.
type FieldEncoder interface {
	AddString(key, value string)
	AddInt64(key string, value int64)
	AddBool(key string, value bool)
	AddDuration(key string, value time.Duration)
}

// Event is one occurrence. Every type of the catalog implements it with a
// value receiver.
type Event interface {
	Kind() Kind
	// EncodeFields writes the event's fields (never its kind) to enc.
	EncodeFields(enc FieldEncoder)
}

// Transport names the binding a request arrived on.
type Transport string

// Transports.
const (
	TransportHTTP     Transport = "http"
	TransportRealtime Transport = "realtime"
)

// CodeOf is the catalog code an event reports for err: "" for nil, the
// error's own catalog code, or sync.internal_error for anything that has
// none (its text stays out of events, as it stays off the wire).
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	if c := syncerr.CodeOf(err); c != "" && syncerr.Known(c) {
		return string(c)
	}
	return string(syncerr.InternalError)
}

// addNonEmpty adds a string field only when it is set.
func addNonEmpty(enc FieldEncoder, key, value string) {
	if value != "" {
		enc.AddString(key, value)
	}
}

// Who identifies the caller of a request-scoped event.
type Who struct {
	Partition string
	ActorID   string
	ClientID  string
}

func (w Who) encode(enc FieldEncoder) {
	enc.AddString("partition", w.Partition)
	addNonEmpty(enc, "actor_id", w.ActorID)
	addNonEmpty(enc, "client_id", w.ClientID)
}

// RequestHandled is one sync request answered (POST /sync or a socket
// round, SPEC §1, §8.7): Code is "" when it was answered with frames, the
// catalog code of its request-level refusal otherwise.
type RequestHandled struct {
	Who
	Transport     Transport
	WireVersion   int64
	Commits       int64
	Subscriptions int64
	Code          string
	Duration      time.Duration
}

// Kind implements Event.
func (RequestHandled) Kind() Kind { return KindRequestHandled }

// EncodeFields implements Event.
func (e RequestHandled) EncodeFields(enc FieldEncoder) {
	e.encode(enc)
	enc.AddString("transport", string(e.Transport))
	enc.AddInt64("wire_version", e.WireVersion)
	enc.AddInt64("commits", e.Commits)
	enc.AddInt64("subscriptions", e.Subscriptions)
	addNonEmpty(enc, "code", e.Code)
	enc.AddDuration("duration", e.Duration)
}

// PushApplied is a commit answered applied (SPEC §6.3). Replay is set
// when the answer came from the idempotency record (cached, §2.3): the
// commit was applied by an earlier delivery.
type PushApplied struct {
	Who
	ClientCommitID string
	CommitSeq      int64
	Operations     int64
	// Changes counts the changes appended to the log (0 on a replay).
	Changes int64
	Replay  bool
}

// Kind implements Event.
func (PushApplied) Kind() Kind { return KindPushApplied }

// EncodeFields implements Event.
func (e PushApplied) EncodeFields(enc FieldEncoder) {
	e.encode(enc)
	enc.AddString("client_commit_id", e.ClientCommitID)
	enc.AddInt64("commit_seq", e.CommitSeq)
	enc.AddInt64("operations", e.Operations)
	enc.AddInt64("changes", e.Changes)
	enc.AddBool("replay", e.Replay)
}

// PushRejected is a commit answered rejected: Code and OpIndex are its
// terminating record's (SPEC §6.3).
type PushRejected struct {
	Who
	ClientCommitID string
	Operations     int64
	OpIndex        int64
	Code           string
	Retryable      bool
	Replay         bool
}

// Kind implements Event.
func (PushRejected) Kind() Kind { return KindPushRejected }

// EncodeFields implements Event.
func (e PushRejected) EncodeFields(enc FieldEncoder) {
	e.encode(enc)
	enc.AddString("client_commit_id", e.ClientCommitID)
	enc.AddInt64("operations", e.Operations)
	enc.AddInt64("op_index", e.OpIndex)
	enc.AddString("code", e.Code)
	enc.AddBool("retryable", e.Retryable)
	enc.AddBool("replay", e.Replay)
}

// PushConflicted is a commit rejected by a conflict (SPEC §6.2): OpIndex
// is the conflicting operation, ServerVersion the row's current version.
type PushConflicted struct {
	Who
	ClientCommitID string
	Operations     int64
	OpIndex        int64
	Code           string
	ServerVersion  int64
	Replay         bool
}

// Kind implements Event.
func (PushConflicted) Kind() Kind { return KindPushConflicted }

// EncodeFields implements Event.
func (e PushConflicted) EncodeFields(enc FieldEncoder) {
	e.encode(enc)
	enc.AddString("client_commit_id", e.ClientCommitID)
	enc.AddInt64("operations", e.Operations)
	enc.AddInt64("op_index", e.OpIndex)
	addNonEmpty(enc, "code", e.Code)
	enc.AddInt64("server_version", e.ServerVersion)
	enc.AddBool("replay", e.Replay)
}

// PullServed is a pull answered (SPEC §4): its sections by kind and the
// encoded size of the sections. It is emitted once the response passed
// the read-verify and the client record was written.
type PullServed struct {
	Who
	Subscriptions int64
	Incremental   int64
	Bootstrap     int64
	Reset         int64
	Revoked       int64
	// Commits counts the COMMIT frames of incremental sections.
	Commits  int64
	Bytes    int64
	Duration time.Duration
}

// Kind implements Event.
func (PullServed) Kind() Kind { return KindPullServed }

// EncodeFields implements Event.
func (e PullServed) EncodeFields(enc FieldEncoder) {
	e.encode(enc)
	enc.AddInt64("subscriptions", e.Subscriptions)
	enc.AddInt64("incremental", e.Incremental)
	enc.AddInt64("bootstrap", e.Bootstrap)
	enc.AddInt64("reset", e.Reset)
	enc.AddInt64("revoked", e.Revoked)
	enc.AddInt64("commits", e.Commits)
	enc.AddInt64("bytes", e.Bytes)
	enc.AddDuration("duration", e.Duration)
}

// Resolution operations: which use case resolved scopes.
const (
	OperationSync    = "sync"
	OperationSegment = "segment"
)

// ScopeResolutionFailed is a scope resolver that did not answer scopes
// (SPEC §3.2): a failure, answered fail closed, or an outage (Outage),
// served from the client's auth lease (Leased, §7.3.3) or refused. Code
// is the catalog code the caller was refused with ("" when the request
// went on: fail closed, with every write forbidden and every subscription
// revoked, or on its lease).
type ScopeResolutionFailed struct {
	Who
	Operation string
	Outage    bool
	Leased    bool
	Code      string
}

// Kind implements Event.
func (ScopeResolutionFailed) Kind() Kind { return KindScopeResolutionFailed }

// EncodeFields implements Event.
func (e ScopeResolutionFailed) EncodeFields(enc FieldEncoder) {
	e.encode(enc)
	enc.AddString("operation", e.Operation)
	enc.AddBool("outage", e.Outage)
	enc.AddBool("leased", e.Leased)
	addNonEmpty(enc, "code", e.Code)
}

// SegmentDownloaded is a segment download answered (SPEC §5.5): Signed
// for a signed-URL grant, NotModified for a 304, Encoding the body's
// content coding, Bytes what was written (compressed size when encoded).
// Code is set when the bytes could not be read.
type SegmentDownloaded struct {
	Partition   string
	ActorID     string
	SegmentID   string
	Signed      bool
	NotModified bool
	Encoding    string
	Bytes       int64
	Code        string
	Duration    time.Duration
}

// Kind implements Event.
func (SegmentDownloaded) Kind() Kind { return KindSegmentDownloaded }

// EncodeFields implements Event.
func (e SegmentDownloaded) EncodeFields(enc FieldEncoder) {
	enc.AddString("partition", e.Partition)
	addNonEmpty(enc, "actor_id", e.ActorID)
	enc.AddString("segment_id", e.SegmentID)
	enc.AddBool("signed", e.Signed)
	enc.AddBool("not_modified", e.NotModified)
	addNonEmpty(enc, "encoding", e.Encoding)
	enc.AddInt64("bytes", e.Bytes)
	addNonEmpty(enc, "code", e.Code)
	enc.AddDuration("duration", e.Duration)
}

// BlobSwept is one partition's collection by the blob GC (the orphan
// sweep) that found something or failed (SPEC §5.9.2): blobs claimed as
// unreferenced, and deleted.
type BlobSwept struct {
	Partition string
	Claimed   int64
	Deleted   int64
	Code      string
	Duration  time.Duration
}

// Kind implements Event.
func (BlobSwept) Kind() Kind { return KindBlobSwept }

// EncodeFields implements Event.
func (e BlobSwept) EncodeFields(enc FieldEncoder) {
	enc.AddString("partition", e.Partition)
	enc.AddInt64("claimed", e.Claimed)
	enc.AddInt64("deleted", e.Deleted)
	addNonEmpty(enc, "code", e.Code)
	enc.AddDuration("duration", e.Duration)
}

// ReactionState is where a delivered reaction went (SPEC §6.9).
type ReactionState string

// Reaction transitions after a delivery attempt.
const (
	ReactionCompleted    ReactionState = "completed"
	ReactionRetrying     ReactionState = "retrying"
	ReactionDeadLettered ReactionState = "dead_lettered"
	// ReactionLeaseLost: completed after the lease was lost; another
	// worker may run it again.
	ReactionLeaseLost ReactionState = "lease_lost"
)

// ReactionTransitioned is a durable reaction's move after a delivery
// attempt: completed, scheduled for a retry at RetryAtMs, dead-lettered,
// or completed after its lease was lost. Code is the failure code.
type ReactionTransitioned struct {
	Partition      string
	ReactionType   string
	IdempotencyKey string
	Attempt        int64
	MaxAttempts    int64
	To             ReactionState
	Code           string
	RetryAtMs      int64
	Duration       time.Duration
}

// Kind implements Event.
func (ReactionTransitioned) Kind() Kind { return KindReactionTransitioned }

// EncodeFields implements Event.
func (e ReactionTransitioned) EncodeFields(enc FieldEncoder) {
	enc.AddString("partition", e.Partition)
	enc.AddString("reaction_type", e.ReactionType)
	enc.AddString("idempotency_key", e.IdempotencyKey)
	enc.AddInt64("attempt", e.Attempt)
	enc.AddInt64("max_attempts", e.MaxAttempts)
	enc.AddString("to", string(e.To))
	addNonEmpty(enc, "code", e.Code)
	if e.RetryAtMs != 0 {
		enc.AddInt64("retry_at_ms", e.RetryAtMs)
	}
	enc.AddDuration("duration", e.Duration)
}

// RealtimeConnected is a realtime socket upgraded and greeted (SPEC §8.1).
type RealtimeConnected struct {
	Who
	SessionID string
}

// Kind implements Event.
func (RealtimeConnected) Kind() Kind { return KindRealtimeConnected }

// EncodeFields implements Event.
func (e RealtimeConnected) EncodeFields(enc FieldEncoder) {
	e.encode(enc)
	enc.AddString("session_id", e.SessionID)
}

// RealtimeDisconnected is a realtime socket's end: CloseCode is the code
// the server closed it with (1000 when the client left first).
type RealtimeDisconnected struct {
	Who
	SessionID string
	CloseCode int64
	Duration  time.Duration
}

// Kind implements Event.
func (RealtimeDisconnected) Kind() Kind { return KindRealtimeDisconnected }

// EncodeFields implements Event.
func (e RealtimeDisconnected) EncodeFields(enc FieldEncoder) {
	e.encode(enc)
	enc.AddString("session_id", e.SessionID)
	enc.AddInt64("close_code", e.CloseCode)
	enc.AddDuration("duration", e.Duration)
}

// PruneCompleted is one partition's retention pass (SPEC §4.6): the
// horizon before and after and the commits removed; Lag is how far the
// slowest active client is behind the newest commit.
type PruneCompleted struct {
	Partition          string
	PreviousHorizonSeq int64
	HorizonSeq         int64
	RemovedCommits     int64
	Lag                int64
	Duration           time.Duration
}

// Kind implements Event.
func (PruneCompleted) Kind() Kind { return KindPruneCompleted }

// EncodeFields implements Event.
func (e PruneCompleted) EncodeFields(enc FieldEncoder) {
	enc.AddString("partition", e.Partition)
	enc.AddInt64("previous_horizon_seq", e.PreviousHorizonSeq)
	enc.AddInt64("horizon_seq", e.HorizonSeq)
	enc.AddInt64("removed_commits", e.RemovedCommits)
	enc.AddInt64("lag", e.Lag)
	enc.AddDuration("duration", e.Duration)
}

// CheckpointProgress is a backfill checkpoint's progress (SPEC §2.4,
// 0.24 safe upgrades): its state, the source watermark reached, the rows
// observed so far and, when known, the seq the backfill must reach.
type CheckpointProgress struct {
	Partition     string
	Name          string
	SchemaVersion int64
	State         string
	Watermark     int64
	TargetSeq     int64
	ObservedRows  int64
	Elapsed       time.Duration
}

// Kind implements Event.
func (CheckpointProgress) Kind() Kind { return KindCheckpointProgress }

// EncodeFields implements Event.
func (e CheckpointProgress) EncodeFields(enc FieldEncoder) {
	enc.AddString("partition", e.Partition)
	enc.AddString("checkpoint", e.Name)
	enc.AddInt64("schema_version", e.SchemaVersion)
	enc.AddString("state", e.State)
	enc.AddInt64("watermark", e.Watermark)
	if e.TargetSeq != 0 {
		enc.AddInt64("target_seq", e.TargetSeq)
	}
	enc.AddInt64("observed_rows", e.ObservedRows)
	enc.AddDuration("elapsed", e.Elapsed)
}

// CheckpointProgressOf is the progress event of a stored checkpoint row:
// what a backfill runner reports after each batch it wrote (targetSeq is
// the source seq it backfills through, 0 when unknown).
func CheckpointProgressOf(cp checkpoint.Checkpoint, targetSeq int64, elapsed time.Duration) CheckpointProgress {
	return CheckpointProgress{
		Partition: cp.Partition, Name: cp.Name, SchemaVersion: int64(cp.SchemaVersion),
		State: string(cp.State), Watermark: cp.Watermark, TargetSeq: targetSeq,
		ObservedRows: cp.ObservedRows, Elapsed: elapsed,
	}
}
