// Package ssp2 is the SSP2 envelope codec (SPEC §1.2–§1.7, §4–§7 frame
// layouts) for wire versions 1, 2 and 3: typed frames, request and
// response messages, the frame grammar, streaming frame-by-frame encoding
// and decoding with size limits, whole-message helpers, and the §11
// canonical JSON debug rendering used by the golden vectors.
//
// Which wire versions a server admits is policy: the codec decodes every
// version it has a layout for and reports it on the Message (or through
// Decoder.Header); DecodeOptions.Versions narrows the set.
package ssp2

import (
	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/wire"
)

// Envelope constants (§1.2).
const (
	Magic      = "SSP2"
	HeaderSize = 8
	// WireVersion is the newest wire version this codec writes.
	WireVersion uint16 = 3
)

// KnownVersions lists every wire version with a frame layout here.
var KnownVersions = []uint16{1, 2, 3}

// Kind is the message kind byte.
type Kind uint8

// Message kinds.
const (
	KindRequest  Kind = 0x01
	KindResponse Kind = 0x02
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindResponse:
		return "response"
	}
	return "unknown"
}

// FrameType is a frame registry id (§1.2).
type FrameType uint8

// Frame registry.
const (
	TypeEnd               FrameType = 0x00
	TypeReqHeader         FrameType = 0x01
	TypePushCommit        FrameType = 0x02
	TypePullHeader        FrameType = 0x03
	TypeSubscription      FrameType = 0x04
	TypeRespHeader        FrameType = 0x10
	TypePushResult        FrameType = 0x11
	TypeSubStart          FrameType = 0x12
	TypeCommit            FrameType = 0x13
	TypeSegmentRef        FrameType = 0x14
	TypeSegmentInline     FrameType = 0x15
	TypeSubEnd            FrameType = 0x16
	TypeLease             FrameType = 0x19
	TypePushResultDetails FrameType = 0x1B
	TypeError             FrameType = 0x1F
)

var frameNames = map[FrameType]string{
	TypeEnd: "END", TypeReqHeader: "REQ_HEADER", TypePushCommit: "PUSH_COMMIT", TypePullHeader: "PULL_HEADER",
	TypeSubscription: "SUBSCRIPTION", TypeRespHeader: "RESP_HEADER", TypePushResult: "PUSH_RESULT",
	TypeSubStart: "SUB_START", TypeCommit: "COMMIT", TypeSegmentRef: "SEGMENT_REF",
	TypeSegmentInline: "SEGMENT_INLINE", TypeSubEnd: "SUB_END", TypeLease: "LEASE",
	TypePushResultDetails: "PUSH_RESULT_DETAILS", TypeError: "ERROR",
}

func (t FrameType) String() string {
	if n, ok := frameNames[t]; ok {
		return n
	}
	return "UNKNOWN"
}

// Registered reports whether t has a layout in wire versions 1–3.
func (t FrameType) Registered() bool { _, ok := frameNames[t]; return ok }

// KindOf returns the message kind a registered frame type belongs to
// (0 for END and unregistered types).
func (t FrameType) KindOf() Kind {
	switch {
	case t >= TypeReqHeader && t <= TypeSubscription:
		return KindRequest
	case t.Registered() && t >= TypeRespHeader:
		return KindResponse
	}
	return 0
}

// Frame is one decoded or to-be-encoded frame: one of the pointer types
// below (*ReqHeader, *PushCommit, …, *Unknown).
type Frame interface {
	FrameType() FrameType
}

// Optional is a semantically nullable field (an opt() on the wire).
type Optional[T any] struct {
	Value   T
	Present bool
}

// Some returns a present Optional.
func Some[T any](v T) Optional[T] { return Optional[T]{Value: v, Present: true} }

// Op is a push operation or change op byte: the log's own enum.
type Op = commit.Op

// Ops.
const (
	OpUpsert = commit.OpUpsert
	OpDelete = commit.OpDelete
)

// PushStatus is a PUSH_RESULT status.
type PushStatus uint8

// Push statuses.
const (
	PushApplied  PushStatus = 1
	PushCached   PushStatus = 2
	PushRejected PushStatus = 3
)

func (s PushStatus) String() string {
	switch s {
	case PushApplied:
		return "applied"
	case PushCached:
		return "cached"
	case PushRejected:
		return "rejected"
	}
	return "unknown"
}

// OpStatus is a push result record status.
type OpStatus uint8

// Result record statuses.
const (
	OpApplied  OpStatus = 1
	OpConflict OpStatus = 2
	OpError    OpStatus = 3
)

func (s OpStatus) String() string {
	switch s {
	case OpApplied:
		return "applied"
	case OpConflict:
		return "conflict"
	case OpError:
		return "error"
	}
	return "unknown"
}

// SubStatus is a SUB_START status.
type SubStatus uint8

// Subscription statuses.
const (
	SubActive  SubStatus = 1
	SubRevoked SubStatus = 2
	SubReset   SubStatus = 3
)

func (s SubStatus) String() string {
	switch s {
	case SubActive:
		return "active"
	case SubRevoked:
		return "revoked"
	case SubReset:
		return "reset"
	}
	return "unknown"
}

// MediaType is a SEGMENT_REF media type.
type MediaType uint8

// Segment media types.
const (
	MediaRows   MediaType = 1
	MediaSQLite MediaType = 2
)

func (m MediaType) String() string {
	switch m {
	case MediaRows:
		return "rows"
	case MediaSQLite:
		return "sqlite"
	}
	return "unknown"
}

// Accept bits of PULL_HEADER (§4.2).
const (
	AcceptInlineRows   uint8 = 1 << 0
	AcceptExternalRows uint8 = 1 << 1
	AcceptSQLite       uint8 = 1 << 2
	AcceptSignedURLs   uint8 = 1 << 3
)

// ScopeList is one entry of a map str → list(str).
type ScopeList struct {
	Key    string
	Values []string
}

// ScopeLists is a canonical map str → list(str): keys unique and in
// ascending UTF-16 code-unit order (the order the wire requires).
type ScopeLists []ScopeList

// ScopeListsFromMap builds canonical ScopeLists from a Go map.
func ScopeListsFromMap(m map[string][]string) ScopeLists {
	out := make(ScopeLists, 0, len(m))
	for k, v := range m {
		out = append(out, ScopeList{Key: k, Values: v})
	}
	sortKeys(out, func(e ScopeList) string { return e.Key })
	return out
}

// Map returns the entries as a Go map.
func (s ScopeLists) Map() map[string][]string {
	m := make(map[string][]string, len(s))
	for _, e := range s {
		m[e.Key] = e.Values
	}
	return m
}

// Get returns the values of key.
func (s ScopeLists) Get(key string) ([]string, bool) {
	for _, e := range s {
		if e.Key == key {
			return e.Values, true
		}
	}
	return nil, false
}

// Digest returns the §3.5 scope digest of the map.
func (s ScopeLists) Digest() string { return canonjson.ScopeDigest(s.Map()) }

// ScopeValue is one entry of a map str → str.
type ScopeValue struct {
	Key   string
	Value string
}

// StoredScopes is a canonical map str → str (a change's stored scopes).
type StoredScopes []ScopeValue

// StoredScopesFromMap builds canonical StoredScopes from a Go map.
func StoredScopesFromMap(m map[string]string) StoredScopes {
	out := make(StoredScopes, 0, len(m))
	for k, v := range m {
		out = append(out, ScopeValue{Key: k, Value: v})
	}
	sortKeys(out, func(e ScopeValue) string { return e.Key })
	return out
}

// Get returns the value of key.
func (s StoredScopes) Get(key string) (string, bool) {
	for _, e := range s {
		if e.Key == key {
			return e.Value, true
		}
	}
	return "", false
}

func sortKeys[E any](s []E, key func(E) string) {
	// Insertion sort: scope maps are tiny.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && wire.CompareUTF16(key(s[j]), key(s[j-1])) < 0; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// ReqHeader is REQ_HEADER (§1.5). LogEpoch exists from wire version 2.
type ReqHeader struct {
	ClientID      string
	SchemaVersion int32
	LogEpoch      Optional[string]
}

// PushOperation is one PUSH_COMMIT operation (§6.1). Payload is present
// exactly for upserts (a sparse row at wire 3, a full row before).
type PushOperation struct {
	Table       string
	RowID       string
	Op          Op
	BaseVersion Optional[int64]
	Payload     []byte
}

// PushCommit is PUSH_COMMIT (§6.1).
type PushCommit struct {
	ClientCommitID string
	Operations     []PushOperation
}

// PullHeader is PULL_HEADER (§4.2).
type PullHeader struct {
	LimitCommits      int32
	LimitSnapshotRows int32
	MaxSnapshotPages  int32
	Accept            uint8
}

// Subscription is SUBSCRIPTION (§4.3). Params and BootstrapState hold raw
// JSON documents, preserved byte for byte.
type Subscription struct {
	ID             string
	Table          string
	Scopes         ScopeLists
	Params         Optional[string]
	Cursor         int64
	BootstrapState Optional[string]
}

// RespHeader is RESP_HEADER (§1.6). LogEpoch and ResetRequired exist from
// wire version 2.
type RespHeader struct {
	RequiredSchemaVersion Optional[int32]
	LatestSchemaVersion   Optional[int32]
	LogEpoch              string
	ResetRequired         bool
}

// ForWire returns the header as wire version v carries it: a wire-1
// header ends after the schema versions, so its epoch fields are dropped
// (a wire-1 client validates no epoch; §2.1 of the wire-1/2 SPEC).
func (h *RespHeader) ForWire(v uint16) *RespHeader {
	if v >= 2 {
		return h
	}
	c := *h
	c.LogEpoch, c.ResetRequired = "", false
	return &c
}

// Lease is LEASE (§7.3.2).
type Lease struct {
	LeaseID     string
	ExpiresAtMs int64
}

// OpResult is one PUSH_RESULT result record: applied, conflict (Code,
// Message, ServerVersion, ServerRow, and at wire 3 ConflictColumns) or
// error (Code, Message, Retryable).
type OpResult struct {
	OpIndex         int32
	Status          OpStatus
	Code            string
	Message         string
	ServerVersion   int64
	ServerRow       []byte
	ConflictColumns []byte
	Retryable       bool
}

// PushResult is PUSH_RESULT (§6.3). CommitSeq is on the wire exactly when
// Status is applied or cached.
type PushResult struct {
	ClientCommitID string
	Status         PushStatus
	CommitSeq      int64
	Results        []OpResult
}

// DetailEntry is one PUSH_RESULT_DETAILS entry. Raw keeps the decoded
// detailsJson text so re-encoding is byte-exact; when Raw is empty the
// encoder writes the normalized Details.
type DetailEntry struct {
	OpIndex int32
	Details RejectionDetails
	Raw     string
}

// PushResultDetails is PUSH_RESULT_DETAILS (§6.3.1).
type PushResultDetails struct {
	ClientCommitID string
	Entries        []DetailEntry
}

// SubStart is SUB_START (§4.4).
type SubStart struct {
	ID              string
	Status          SubStatus
	ReasonCode      string
	EffectiveScopes ScopeLists
	Bootstrap       bool
}

// Change is one COMMIT change record (§4.5). RowVersion and Row are on the
// wire exactly for upserts.
type Change struct {
	TableIndex uint16
	RowID      string
	Op         Op
	RowVersion int64
	Scopes     StoredScopes
	Row        []byte
}

// Commit is COMMIT (§4.5).
type Commit struct {
	CommitSeq   int64
	CreatedAtMs int64
	ActorID     string
	Tables      []string
	Changes     []Change
}

// SegmentRef is SEGMENT_REF (§5.4).
type SegmentRef struct {
	SegmentID      string
	MediaType      MediaType
	Table          string
	ByteLength     int64
	RowCount       int64
	AsOfCommitSeq  int64
	ScopeDigest    string
	RowCursor      Optional[string]
	NextRowCursor  Optional[string]
	URL            Optional[string]
	URLExpiresAtMs Optional[int64]
}

// SegmentInline is SEGMENT_INLINE (§5.7): one complete SSG2 rows segment.
type SegmentInline struct {
	Payload []byte
}

// SubEnd is SUB_END (§4.4).
type SubEnd struct {
	NextCursor     int64
	BootstrapState Optional[string]
}

// Error is ERROR (§1.6). Details holds a raw JSON document.
type Error struct {
	Code              string
	Message           string
	Category          string
	Retryable         bool
	RecommendedAction string
	Details           Optional[string]
}

// Unknown is a frame type with no layout, kept byte-exact for re-encoding.
type Unknown struct {
	Type    FrameType
	Payload []byte
}

// FrameType implementations.
func (*ReqHeader) FrameType() FrameType         { return TypeReqHeader }
func (*PushCommit) FrameType() FrameType        { return TypePushCommit }
func (*PullHeader) FrameType() FrameType        { return TypePullHeader }
func (*Subscription) FrameType() FrameType      { return TypeSubscription }
func (*RespHeader) FrameType() FrameType        { return TypeRespHeader }
func (*Lease) FrameType() FrameType             { return TypeLease }
func (*PushResult) FrameType() FrameType        { return TypePushResult }
func (*PushResultDetails) FrameType() FrameType { return TypePushResultDetails }
func (*SubStart) FrameType() FrameType          { return TypeSubStart }
func (*Commit) FrameType() FrameType            { return TypeCommit }
func (*SegmentRef) FrameType() FrameType        { return TypeSegmentRef }
func (*SegmentInline) FrameType() FrameType     { return TypeSegmentInline }
func (*SubEnd) FrameType() FrameType            { return TypeSubEnd }
func (*Error) FrameType() FrameType             { return TypeError }
func (u *Unknown) FrameType() FrameType         { return u.Type }
