package ssp2

import (
	"encoding/base64"

	"github.com/syncd-dev/syncd/domain/canonjson"
)

// Render returns the §11 canonical JSON rendering of m as a JSON value.
func Render(m *Message) canonjson.Value {
	frames := make([]canonjson.Value, len(m.Frames))
	for i, f := range m.Frames {
		frames[i] = RenderFrame(m.WireVersion, f)
	}
	return canonjson.NewObject(4).
		Set("magic", Magic).
		Set("wireVersion", int64(m.WireVersion)).
		Set("msgKind", m.Kind.String()).
		Set("frames", frames)
}

// RenderJSON renders m the way the golden vectors store it: 2-space
// indentation and a trailing newline.
func RenderJSON(m *Message) []byte {
	return append(canonjson.Marshal(Render(m), "  "), '\n')
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func parsed(raw string) canonjson.Value {
	v, err := canonjson.ParseString(raw)
	if err != nil {
		return raw
	}
	return v
}

func scopeLists(s ScopeLists) *canonjson.Object {
	o := canonjson.NewObject(len(s))
	for _, e := range s {
		vals := make([]canonjson.Value, len(e.Values))
		for i, v := range e.Values {
			vals[i] = v
		}
		o.Set(e.Key, vals)
	}
	return o
}

func storedScopes(s StoredScopes) *canonjson.Object {
	o := canonjson.NewObject(len(s))
	for _, e := range s {
		o.Set(e.Key, e.Value)
	}
	return o
}

// RenderFrame renders one frame (§11.1): fields in field-table order,
// absent options omitted, binary as base64, enums by name, json embedded.
func RenderFrame(version uint16, f Frame) canonjson.Value {
	o := canonjson.NewObject(12)
	switch x := f.(type) {
	case *ReqHeader:
		o.Set("type", "REQ_HEADER").Set("clientId", x.ClientID).Set("schemaVersion", x.SchemaVersion)
		if x.LogEpoch.Present {
			o.Set("logEpoch", x.LogEpoch.Value)
		}
	case *PushCommit:
		ops := make([]canonjson.Value, len(x.Operations))
		for i, op := range x.Operations {
			e := canonjson.NewObject(5).Set("table", op.Table).Set("rowId", op.RowID).Set("op", op.Op.String())
			if op.BaseVersion.Present {
				e.Set("baseVersion", op.BaseVersion.Value)
			}
			if op.Op == OpUpsert {
				e.Set("payload", b64(op.Payload))
			}
			ops[i] = e
		}
		o.Set("type", "PUSH_COMMIT").Set("clientCommitId", x.ClientCommitID).Set("operations", ops)
	case *PullHeader:
		o.Set("type", "PULL_HEADER").Set("limitCommits", x.LimitCommits).Set("limitSnapshotRows", x.LimitSnapshotRows).
			Set("maxSnapshotPages", x.MaxSnapshotPages).Set("accept", x.Accept)
	case *Subscription:
		o.Set("type", "SUBSCRIPTION").Set("id", x.ID).Set("table", x.Table).Set("scopes", scopeLists(x.Scopes))
		if x.Params.Present {
			o.Set("params", parsed(x.Params.Value))
		}
		o.Set("cursor", x.Cursor)
		if x.BootstrapState.Present {
			o.Set("bootstrapState", parsed(x.BootstrapState.Value))
		}
	case *RespHeader:
		o.Set("type", "RESP_HEADER")
		if x.RequiredSchemaVersion.Present {
			o.Set("requiredSchemaVersion", x.RequiredSchemaVersion.Value)
		}
		if x.LatestSchemaVersion.Present {
			o.Set("latestSchemaVersion", x.LatestSchemaVersion.Value)
		}
		if version >= 2 {
			o.Set("logEpoch", x.LogEpoch).Set("resetRequired", x.ResetRequired)
		}
	case *Lease:
		o.Set("type", "LEASE").Set("leaseId", x.LeaseID).Set("expiresAtMs", x.ExpiresAtMs)
	case *PushResult:
		o.Set("type", "PUSH_RESULT").Set("clientCommitId", x.ClientCommitID).Set("status", x.Status.String())
		if x.Status != PushRejected {
			o.Set("commitSeq", x.CommitSeq)
		}
		results := make([]canonjson.Value, len(x.Results))
		for i, r := range x.Results {
			e := canonjson.NewObject(7).Set("opIndex", r.OpIndex).Set("status", r.Status.String())
			switch r.Status {
			case OpConflict:
				e.Set("code", r.Code).Set("message", r.Message).Set("serverVersion", r.ServerVersion).Set("serverRow", b64(r.ServerRow))
				if version >= 3 {
					e.Set("conflictColumns", b64(r.ConflictColumns))
				}
			case OpError:
				e.Set("code", r.Code).Set("message", r.Message).Set("retryable", r.Retryable)
			}
			results[i] = e
		}
		o.Set("results", results)
	case *PushResultDetails:
		entries := make([]canonjson.Value, len(x.Entries))
		for i, e := range x.Entries {
			d := e.Details
			if n, err := d.Normalize(); err == nil {
				d = n
			}
			entries[i] = canonjson.NewObject(2).Set("opIndex", e.OpIndex).Set("details", d.jsonValue())
		}
		o.Set("type", "PUSH_RESULT_DETAILS").Set("clientCommitId", x.ClientCommitID).Set("entries", entries)
	case *SubStart:
		o.Set("type", "SUB_START").Set("id", x.ID).Set("status", x.Status.String()).Set("reasonCode", x.ReasonCode).
			Set("effectiveScopes", scopeLists(x.EffectiveScopes)).Set("bootstrap", x.Bootstrap)
	case *Commit:
		tables := make([]canonjson.Value, len(x.Tables))
		for i, t := range x.Tables {
			tables[i] = t
		}
		changes := make([]canonjson.Value, len(x.Changes))
		for i, c := range x.Changes {
			e := canonjson.NewObject(6).Set("tableIndex", c.TableIndex).Set("rowId", c.RowID).Set("op", c.Op.String())
			if c.Op == OpUpsert {
				e.Set("rowVersion", c.RowVersion)
			}
			e.Set("scopes", storedScopes(c.Scopes))
			if c.Op == OpUpsert {
				e.Set("row", b64(c.Row))
			}
			changes[i] = e
		}
		o.Set("type", "COMMIT").Set("commitSeq", x.CommitSeq).Set("createdAtMs", x.CreatedAtMs).Set("actorId", x.ActorID).
			Set("tables", tables).Set("changes", changes)
	case *SegmentRef:
		o.Set("type", "SEGMENT_REF").Set("segmentId", x.SegmentID).Set("mediaType", x.MediaType.String()).Set("table", x.Table).
			Set("byteLength", x.ByteLength).Set("rowCount", x.RowCount).Set("asOfCommitSeq", x.AsOfCommitSeq).Set("scopeDigest", x.ScopeDigest)
		if x.RowCursor.Present {
			o.Set("rowCursor", x.RowCursor.Value)
		}
		if x.NextRowCursor.Present {
			o.Set("nextRowCursor", x.NextRowCursor.Value)
		}
		if x.URL.Present {
			o.Set("url", x.URL.Value)
		}
		if x.URLExpiresAtMs.Present {
			o.Set("urlExpiresAtMs", x.URLExpiresAtMs.Value)
		}
	case *SegmentInline:
		o.Set("type", "SEGMENT_INLINE").Set("payload", b64(x.Payload))
	case *SubEnd:
		o.Set("type", "SUB_END").Set("nextCursor", x.NextCursor)
		if x.BootstrapState.Present {
			o.Set("bootstrapState", parsed(x.BootstrapState.Value))
		}
	case *Error:
		o.Set("type", "ERROR").Set("code", x.Code).Set("message", x.Message).Set("category", x.Category).
			Set("retryable", x.Retryable).Set("recommendedAction", x.RecommendedAction)
		if x.Details.Present {
			o.Set("details", parsed(x.Details.Value))
		}
	case *Unknown:
		o.Set("type", "UNKNOWN").Set("frameType", int64(x.Type)).Set("payload", b64(x.Payload))
	}
	return o
}
