package ssp2

import (
	"encoding/binary"
	"reflect"

	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/wire"
)

// frameWriter encodes one frame payload, checking every value the wire
// cannot carry (an encoder error, never a silently different message).
type frameWriter struct {
	wire.Writer
	err error
}

func (w *frameWriter) fail(format string, args ...any) {
	if w.err == nil {
		w.err = wire.Errorf(format, args...)
	}
}

func (w *frameWriter) str(s, what string) {
	if err := wire.CheckStr(s, what); err != nil && w.err == nil {
		w.err = err
	}
	w.Str(s)
}

func (w *frameWriter) nonEmpty(s, what string) {
	if s == "" {
		w.fail("%s must be non-empty", what)
	}
	w.str(s, what)
}

func (w *frameWriter) i64(v int64, what string) {
	if err := wire.CheckI64(v, what); err != nil && w.err == nil {
		w.err = err
	}
	w.I64(v)
}

func (w *frameWriter) bytes(b []byte, what string) {
	if uint64(len(b)) > 0xffffffff {
		w.fail("%s is longer than a u32 length prefix allows", what)
	}
	w.Bytes(b)
}

func (w *frameWriter) json(s, what string) {
	if !canonjson.ValidString(s) {
		w.fail("%s is not a valid JSON document", what)
	}
	w.str(s, what)
}

func (w *frameWriter) optStr(o Optional[string], what string) {
	w.Opt(o.Present)
	if o.Present {
		w.str(o.Value, what)
	}
}

func (w *frameWriter) optJSON(o Optional[string], what string) {
	w.Opt(o.Present)
	if o.Present {
		w.json(o.Value, what)
	}
}

func (w *frameWriter) optI64(o Optional[int64], what string) {
	w.Opt(o.Present)
	if o.Present {
		w.i64(o.Value, what)
	}
}

func (w *frameWriter) optI32(o Optional[int32]) {
	w.Opt(o.Present)
	if o.Present {
		w.I32(o.Value)
	}
}

func (w *frameWriter) count(n int, what string) {
	if uint64(n) > 0xffffffff {
		w.fail("too many %s", what)
	}
	w.U32(uint32(n))
}

func (w *frameWriter) scopeLists(s ScopeLists, what string) {
	w.count(len(s), what)
	for i, e := range s {
		if i > 0 {
			if err := wire.KeyAfter(s[i-1].Key, e.Key, false); err != nil && w.err == nil {
				w.err = err
			}
		}
		w.str(e.Key, what+" key")
		w.count(len(e.Values), what+" values")
		for _, v := range e.Values {
			w.str(v, what+" value")
		}
	}
}

func (w *frameWriter) storedScopes(s StoredScopes) {
	w.count(len(s), "scopes")
	for i, e := range s {
		if i > 0 {
			if err := wire.KeyAfter(s[i-1].Key, e.Key, false); err != nil && w.err == nil {
				w.err = err
			}
		}
		w.str(e.Key, "scope key")
		w.str(e.Value, "scope value")
	}
}

// AppendFrame appends one whole frame (type, length, payload) of a message
// of kind at version to dst, checking the frame's layout but not the
// message grammar (Encoder and Encode check that).
func AppendFrame(dst []byte, kind Kind, version uint16, f Frame) ([]byte, error) {
	return appendFrame(dst, kind, version, f)
}

func appendFrame(dst []byte, kind Kind, version uint16, f Frame) ([]byte, error) {
	ft, err := checkFrameKind(kind, f)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	w := frameWriter{Writer: wire.Writer{B: append(dst, uint8(ft), 0, 0, 0, 0)}}
	w.payload(version, f)
	if w.err != nil {
		return dst[:start], prefix(w.err, ft)
	}
	n := len(w.B) - start - 5
	if uint64(n) > 0xffffffff {
		return dst[:start], wire.Errorf("%s frame payload exceeds a u32 length", ft)
	}
	binary.LittleEndian.PutUint32(w.B[start+1:], uint32(n))
	return w.B, nil
}

// checkFrameKind returns the type byte for f in a message of kind, refusing
// frames of the other kind and unknown frames under a registered type.
func checkFrameKind(kind Kind, f Frame) (FrameType, error) {
	if f == nil {
		return 0, wire.Errorf("nil frame")
	}
	if v := reflect.ValueOf(f); v.Kind() == reflect.Pointer && v.IsNil() {
		return 0, wire.Errorf("nil %T frame", f)
	}
	if u, ok := f.(*Unknown); ok {
		if u.Type == TypeEnd || u.Type.Registered() {
			return 0, wire.Errorf("refusing to encode an unknown frame under registered frame type 0x%02x (%s)", uint8(u.Type), u.Type)
		}
		return u.Type, nil
	}
	ft := f.FrameType()
	if ft.KindOf() != kind {
		return 0, wire.Errorf("%s frame cannot appear in a %s message", ft, kind)
	}
	return ft, nil
}

func (w *frameWriter) payload(version uint16, f Frame) {
	switch x := f.(type) {
	case *ReqHeader:
		w.nonEmpty(x.ClientID, "REQ_HEADER.clientId")
		if x.SchemaVersion < 1 {
			w.fail("REQ_HEADER.schemaVersion must be >= 1")
		}
		w.I32(x.SchemaVersion)
		if version >= 2 {
			if x.LogEpoch.Present && x.LogEpoch.Value == "" {
				w.fail("REQ_HEADER.logEpoch must be non-empty")
			}
			w.optStr(x.LogEpoch, "REQ_HEADER.logEpoch")
		} else if x.LogEpoch.Present {
			w.fail("REQ_HEADER.logEpoch needs wire version 2 or later")
		}
	case *PushCommit:
		w.nonEmpty(x.ClientCommitID, "PUSH_COMMIT.clientCommitId")
		if len(x.Operations) == 0 {
			w.fail("PUSH_COMMIT must carry at least one operation")
		}
		w.count(len(x.Operations), "operations")
		for i := range x.Operations {
			o := &x.Operations[i]
			w.str(o.Table, "operation table")
			w.str(o.RowID, "operation rowId")
			switch o.Op {
			case OpUpsert:
			case OpDelete:
				if o.Payload != nil {
					w.fail("operation %d: delete must not carry a payload", i)
				}
			default:
				w.fail("operation %d: invalid op %d", i, o.Op)
			}
			w.U8(uint8(o.Op))
			w.optI64(o.BaseVersion, "operation baseVersion")
			w.Opt(o.Op == OpUpsert)
			if o.Op == OpUpsert {
				w.bytes(o.Payload, "operation payload")
			}
		}
	case *PullHeader:
		if x.Accept&0xf0 != 0 {
			w.fail("PULL_HEADER.accept bits 4-7 must be zero")
		}
		w.I32(x.LimitCommits)
		w.I32(x.LimitSnapshotRows)
		w.I32(x.MaxSnapshotPages)
		w.U8(x.Accept)
	case *Subscription:
		w.str(x.ID, "SUBSCRIPTION.id")
		w.str(x.Table, "SUBSCRIPTION.table")
		w.scopeLists(x.Scopes, "SUBSCRIPTION.scopes")
		w.optJSON(x.Params, "SUBSCRIPTION.params")
		w.i64(x.Cursor, "SUBSCRIPTION.cursor")
		w.optJSON(x.BootstrapState, "SUBSCRIPTION.bootstrapState")
	case *RespHeader:
		w.optI32(x.RequiredSchemaVersion)
		w.optI32(x.LatestSchemaVersion)
		if version >= 2 {
			w.nonEmpty(x.LogEpoch, "RESP_HEADER.logEpoch")
			w.Bool(x.ResetRequired)
		} else if x.LogEpoch != "" || x.ResetRequired {
			w.fail("RESP_HEADER epoch fields need wire version 2 or later")
		}
	case *Lease:
		w.nonEmpty(x.LeaseID, "LEASE.leaseId")
		w.i64(x.ExpiresAtMs, "LEASE.expiresAtMs")
	case *PushResult:
		w.str(x.ClientCommitID, "PUSH_RESULT.clientCommitId")
		if x.Status < PushApplied || x.Status > PushRejected {
			w.fail("invalid push result status %d", x.Status)
		}
		w.U8(uint8(x.Status))
		if x.Status == PushRejected && x.CommitSeq != 0 {
			w.fail("rejected PUSH_RESULT must not carry a commitSeq")
		}
		w.Opt(x.Status != PushRejected)
		if x.Status != PushRejected {
			w.i64(x.CommitSeq, "PUSH_RESULT.commitSeq")
		}
		w.count(len(x.Results), "results")
		for i := range x.Results {
			res := &x.Results[i]
			w.I32(res.OpIndex)
			w.U8(uint8(res.Status))
			switch res.Status {
			case OpApplied:
			case OpConflict:
				w.str(res.Code, "conflict code")
				w.str(res.Message, "conflict message")
				w.i64(res.ServerVersion, "conflict serverVersion")
				w.bytes(res.ServerRow, "conflict serverRow")
				if version >= 3 {
					w.bytes(res.ConflictColumns, "conflict conflictColumns")
				} else if res.ConflictColumns != nil {
					w.fail("conflictColumns needs wire version 3")
				}
			case OpError:
				w.str(res.Code, "error code")
				w.str(res.Message, "error message")
				w.Bool(res.Retryable)
			default:
				w.fail("result %d: invalid status %d", i, res.Status)
			}
		}
	case *PushResultDetails:
		w.nonEmpty(x.ClientCommitID, "PUSH_RESULT_DETAILS.clientCommitId")
		if len(x.Entries) == 0 {
			w.fail("PUSH_RESULT_DETAILS must carry at least one entry")
		}
		w.count(len(x.Entries), "entries")
		for i, e := range x.Entries {
			if e.OpIndex < 0 {
				w.fail("PUSH_RESULT_DETAILS.opIndex must be non-negative")
			}
			for _, p := range x.Entries[:i] {
				if p.OpIndex == e.OpIndex {
					w.fail("PUSH_RESULT_DETAILS.opIndex must be unique")
				}
			}
			w.I32(e.OpIndex)
			if e.Raw != "" {
				if _, err := ParseRejectionDetails([]byte(e.Raw)); err != nil && w.err == nil {
					w.err = err
				}
				w.str(e.Raw, "detailsJson")
				continue
			}
			d, err := e.Details.Normalize()
			if err != nil && w.err == nil {
				w.err = err
			}
			w.Bytes(d.appendJSON(nil))
		}
	case *SubStart:
		w.str(x.ID, "SUB_START.id")
		if x.Status < SubActive || x.Status > SubReset {
			w.fail("invalid SUB_START status %d", x.Status)
		}
		w.U8(uint8(x.Status))
		w.str(x.ReasonCode, "SUB_START.reasonCode")
		w.scopeLists(x.EffectiveScopes, "SUB_START.effectiveScopes")
		w.Bool(x.Bootstrap)
	case *Commit:
		w.i64(x.CommitSeq, "COMMIT.commitSeq")
		w.i64(x.CreatedAtMs, "COMMIT.createdAtMs")
		w.str(x.ActorID, "COMMIT.actorId")
		w.count(len(x.Tables), "tables")
		for _, t := range x.Tables {
			w.str(t, "COMMIT.tables")
		}
		w.count(len(x.Changes), "changes")
		for i := range x.Changes {
			ch := &x.Changes[i]
			if int(ch.TableIndex) >= len(x.Tables) {
				w.fail("change %d: tableIndex %d out of range", i, ch.TableIndex)
			}
			w.U16(ch.TableIndex)
			w.str(ch.RowID, "change rowId")
			switch ch.Op {
			case OpUpsert:
			case OpDelete:
				if ch.Row != nil || ch.RowVersion != 0 {
					w.fail("change %d: delete must not carry rowVersion or row", i)
				}
			default:
				w.fail("change %d: invalid op %d", i, ch.Op)
			}
			w.U8(uint8(ch.Op))
			w.Opt(ch.Op == OpUpsert)
			if ch.Op == OpUpsert {
				w.i64(ch.RowVersion, "change rowVersion")
			}
			w.storedScopes(ch.Scopes)
			w.Opt(ch.Op == OpUpsert)
			if ch.Op == OpUpsert {
				w.bytes(ch.Row, "change row")
			}
		}
	case *SegmentRef:
		w.str(x.SegmentID, "SEGMENT_REF.segmentId")
		if x.MediaType != MediaRows && x.MediaType != MediaSQLite {
			w.fail("invalid SEGMENT_REF mediaType %d", x.MediaType)
		}
		w.U8(uint8(x.MediaType))
		w.str(x.Table, "SEGMENT_REF.table")
		w.i64(x.ByteLength, "SEGMENT_REF.byteLength")
		w.i64(x.RowCount, "SEGMENT_REF.rowCount")
		w.i64(x.AsOfCommitSeq, "SEGMENT_REF.asOfCommitSeq")
		w.str(x.ScopeDigest, "SEGMENT_REF.scopeDigest")
		w.optStr(x.RowCursor, "SEGMENT_REF.rowCursor")
		w.optStr(x.NextRowCursor, "SEGMENT_REF.nextRowCursor")
		if x.URL.Present != x.URLExpiresAtMs.Present {
			w.fail("SEGMENT_REF.urlExpiresAtMs must be present iff url is")
		}
		w.optStr(x.URL, "SEGMENT_REF.url")
		w.optI64(x.URLExpiresAtMs, "SEGMENT_REF.urlExpiresAtMs")
	case *SegmentInline:
		if err := rowcodec.ValidateSegment(x.Payload); err != nil && w.err == nil {
			w.err = err
		}
		w.Raw(x.Payload)
	case *SubEnd:
		w.i64(x.NextCursor, "SUB_END.nextCursor")
		w.optJSON(x.BootstrapState, "SUB_END.bootstrapState")
	case *Error:
		w.str(x.Code, "ERROR.code")
		w.str(x.Message, "ERROR.message")
		w.str(x.Category, "ERROR.category")
		w.Bool(x.Retryable)
		w.str(x.RecommendedAction, "ERROR.recommendedAction")
		w.optJSON(x.Details, "ERROR.details")
	case *Unknown:
		w.Raw(x.Payload)
	default:
		w.fail("unsupported frame type %T", f)
	}
}
