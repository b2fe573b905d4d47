package ssp2

import (
	"github.com/syncd-dev/syncd/domain/canonjson"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/domain/wire"
)

// frameReader decodes one frame payload. Strings are cut from one string
// copy of the payload (one allocation per frame); byte fields alias the
// payload; a COMMIT's parts come from the message's frameArena.
type frameReader struct {
	wire.Reader
	a *frameArena
}

// frameArena backs the COMMIT frames of one message: a catch-up response
// carries a thousand small commits, and carving their structs and slices
// from shared chunks spares four allocations per commit. Every slice
// handed out is capped, so appending to one never reaches a neighbour;
// the chunks live as long as any frame of the message does.
type frameArena struct {
	commits []Commit
	tables  []string
	changes []Change
	scopes  []ScopeValue
	chunk   int // the next chunk's length in elements
}

const (
	frameArenaFirst = 8
	frameArenaMax   = 512
)

// grow returns the next chunk length for a request of n elements.
func (a *frameArena) grow(n int) int {
	a.chunk = min(max(2*a.chunk, frameArenaFirst), frameArenaMax)
	return max(a.chunk, n)
}

func (a *frameArena) commit() *Commit { return &carve(a, &a.commits, 1)[0] }

func (a *frameArena) tableNames(n int) []string { return carve(a, &a.tables, n) }

func (a *frameArena) changeList(n int) []Change { return carve(a, &a.changes, n) }

// carve hands out n elements of the chunk *buf, capped, starting a new
// chunk when this one lacks room; the old chunk stays with the frames that
// hold parts of it.
func carve[T any](a *frameArena, buf *[]T, n int) []T {
	if cap(*buf)-len(*buf) < n {
		*buf = make([]T, 0, a.grow(n))
	}
	i := len(*buf)
	*buf = (*buf)[:i+n]
	return (*buf)[i : i+n : i+n]
}

// scopeRoom makes room for n more scope entries in one chunk, so that
// storedScopes can append them contiguously.
func (a *frameArena) scopeRoom(n int) {
	if cap(a.scopes)-len(a.scopes) < n {
		a.scopes = make([]ScopeValue, 0, a.grow(n))
	}
}

func (r *frameReader) str() (string, error) { return r.Str() }

func (r *frameReader) nonEmpty(field string) (string, error) {
	s, err := r.Str()
	if err == nil && s == "" {
		err = wire.Errorf("%s must be non-empty", field)
	}
	return s, err
}

func (r *frameReader) optStr() (Optional[string], error) {
	ok, err := r.Opt()
	if err != nil || !ok {
		return Optional[string]{}, err
	}
	s, err := r.Str()
	return Optional[string]{Value: s, Present: true}, err
}

func (r *frameReader) optI64() (Optional[int64], error) {
	ok, err := r.Opt()
	if err != nil || !ok {
		return Optional[int64]{}, err
	}
	v, err := r.I64()
	return Optional[int64]{Value: v, Present: true}, err
}

func (r *frameReader) optI32() (Optional[int32], error) {
	ok, err := r.Opt()
	if err != nil || !ok {
		return Optional[int32]{}, err
	}
	v, err := r.I32()
	return Optional[int32]{Value: v, Present: true}, err
}

func (r *frameReader) count(minSize int, what string) (int, error) {
	return r.Count(minSize, what)
}

func (r *frameReader) scopeLists() (ScopeLists, error) {
	n, err := r.count(8, "scope map")
	if err != nil || n == 0 {
		return ScopeLists{}, err
	}
	out := make(ScopeLists, n)
	for i := range out {
		k, err := r.Str()
		if err != nil {
			return nil, err
		}
		if i > 0 {
			if err := wire.KeyAfter(out[i-1].Key, k, false); err != nil {
				return nil, err
			}
		}
		m, err := r.count(4, "scope value list")
		if err != nil {
			return nil, err
		}
		vals := make([]string, m)
		for j := range vals {
			if vals[j], err = r.Str(); err != nil {
				return nil, err
			}
		}
		out[i] = ScopeList{Key: k, Values: vals}
	}
	return out, nil
}

// commitScopes reads a change's stored scopes, a map str → str, into the
// message arena, so a message's changes share a few backing arrays.
func (r *frameReader) commitScopes() (StoredScopes, error) {
	n, err := r.count(8, "scope map")
	if err != nil {
		return nil, err
	}
	r.a.scopeRoom(n)
	a := &r.a.scopes
	start := len(*a)
	for i := range n {
		k, err := r.Str()
		if err != nil {
			return nil, err
		}
		if i > 0 {
			if err := wire.KeyAfter((*a)[len(*a)-1].Key, k, false); err != nil {
				return nil, err
			}
		}
		v, err := r.Str()
		if err != nil {
			return nil, err
		}
		*a = append(*a, ScopeValue{Key: k, Value: v})
	}
	return StoredScopes((*a)[start:len(*a):len(*a)]), nil
}

func op(b uint8, what string) (Op, error) {
	if b != uint8(OpUpsert) && b != uint8(OpDelete) {
		return 0, wire.Errorf("invalid %s op byte %d", what, b)
	}
	return Op(b), nil
}

// decodeFrame decodes one frame payload for a message of kind and version.
func decodeFrame(kind Kind, version uint16, ft FrameType, payload []byte, a *frameArena) (Frame, error) {
	if ft.KindOf() == 0 {
		return &Unknown{Type: ft, Payload: payload}, nil
	}
	if ft.KindOf() != kind {
		return nil, wire.Errorf("%s frame type 0x%02x (%s) is illegal in a %s message", ft.KindOf(), uint8(ft), ft, kind)
	}
	r := &frameReader{Reader: wire.NewReader(payload), a: a}
	if ft != TypeSegmentInline {
		r.SetString(string(payload))
	}
	var f Frame
	var err error
	switch ft {
	case TypeReqHeader:
		f, err = r.reqHeader(version)
	case TypePushCommit:
		f, err = r.pushCommit()
	case TypePullHeader:
		f, err = r.pullHeader()
	case TypeSubscription:
		f, err = r.subscription()
	case TypeRespHeader:
		f, err = r.respHeader(version)
	case TypeLease:
		f, err = r.lease()
	case TypePushResult:
		f, err = r.pushResult(version)
	case TypePushResultDetails:
		f, err = r.pushResultDetails()
	case TypeSubStart:
		f, err = r.subStart()
	case TypeCommit:
		f, err = r.commit()
	case TypeSegmentRef:
		f, err = r.segmentRef()
	case TypeSegmentInline:
		if err = rowcodec.ValidateSegment(payload); err != nil {
			err = syncerr.Newf(syncerr.InvalidRequest, "SEGMENT_INLINE payload is not a rows segment: %s", reason(err))
		}
		f = &SegmentInline{Payload: payload}
		r.Reset(nil)
	case TypeSubEnd:
		f, err = r.subEnd()
	case TypeError:
		f, err = r.errorFrame()
	}
	if err != nil {
		return nil, prefix(err, ft)
	}
	if r.Remaining() != 0 { // the name is built only for the error
		return nil, r.Done(ft.String() + " frame payload")
	}
	return f, nil
}

func reason(err error) string {
	if e, ok := err.(*syncerr.Error); ok && e.Reason != "" {
		return e.Reason
	}
	return err.Error()
}

// prefix adds the frame name to a decode error's internal reason.
func prefix(err error, ft FrameType) error {
	if e, ok := err.(*syncerr.Error); ok {
		c := *e
		c.Reason = ft.String() + ": " + e.Reason
		return &c
	}
	return err
}

func (r *frameReader) reqHeader(version uint16) (*ReqHeader, error) {
	h := &ReqHeader{}
	var err error
	if h.ClientID, err = r.nonEmpty("REQ_HEADER.clientId"); err != nil {
		return nil, err
	}
	if h.SchemaVersion, err = r.I32(); err != nil {
		return nil, err
	}
	if h.SchemaVersion < 1 {
		return nil, wire.Errorf("REQ_HEADER.schemaVersion must be >= 1, got %d", h.SchemaVersion)
	}
	if version >= 2 {
		if h.LogEpoch, err = r.optStr(); err != nil {
			return nil, err
		}
		if h.LogEpoch.Present && h.LogEpoch.Value == "" {
			return nil, wire.Errorf("REQ_HEADER.logEpoch must be non-empty")
		}
	}
	return h, nil
}

func (r *frameReader) pushCommit() (*PushCommit, error) {
	c := &PushCommit{}
	var err error
	if c.ClientCommitID, err = r.nonEmpty("PUSH_COMMIT.clientCommitId"); err != nil {
		return nil, err
	}
	n, err := r.count(11, "operation")
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, syncerr.Newf(syncerr.EmptyCommit, "PUSH_COMMIT %q carries no operations", c.ClientCommitID)
	}
	c.Operations = make([]PushOperation, n)
	for i := range c.Operations {
		o := &c.Operations[i]
		if o.Table, err = r.str(); err != nil {
			return nil, err
		}
		if o.RowID, err = r.str(); err != nil {
			return nil, err
		}
		b, err := r.U8()
		if err != nil {
			return nil, err
		}
		if o.Op, err = op(b, "operation"); err != nil {
			return nil, err
		}
		if o.BaseVersion, err = r.optI64(); err != nil {
			return nil, err
		}
		has, err := r.Opt()
		if err != nil {
			return nil, err
		}
		if has {
			if o.Payload, err = r.Bytes(); err != nil {
				return nil, err
			}
		}
		if o.Op == OpUpsert && !has {
			return nil, wire.Errorf("operation %d: upsert requires a payload", i)
		}
		if o.Op == OpDelete && has {
			return nil, wire.Errorf("operation %d: delete must not carry a payload", i)
		}
	}
	return c, nil
}

func (r *frameReader) pullHeader() (*PullHeader, error) {
	h := &PullHeader{}
	var err error
	if h.LimitCommits, err = r.I32(); err != nil {
		return nil, err
	}
	if h.LimitSnapshotRows, err = r.I32(); err != nil {
		return nil, err
	}
	if h.MaxSnapshotPages, err = r.I32(); err != nil {
		return nil, err
	}
	if h.Accept, err = r.U8(); err != nil {
		return nil, err
	}
	if h.Accept&0xf0 != 0 {
		return nil, wire.Errorf("PULL_HEADER.accept bits 4-7 must be zero, got 0x%02x", h.Accept)
	}
	return h, nil
}

func (r *frameReader) subscription() (*Subscription, error) {
	s := &Subscription{}
	var err error
	if s.ID, err = r.str(); err != nil {
		return nil, err
	}
	if s.Table, err = r.str(); err != nil {
		return nil, err
	}
	if s.Scopes, err = r.scopeLists(); err != nil {
		return nil, err
	}
	if s.Params, err = r.optJSONStr("SUBSCRIPTION.params"); err != nil {
		return nil, err
	}
	if s.Cursor, err = r.I64(); err != nil {
		return nil, err
	}
	if s.BootstrapState, err = r.optJSONStr("SUBSCRIPTION.bootstrapState"); err != nil {
		return nil, err
	}
	return s, nil
}

// optJSONStr reads opt(json) as a string cut from the frame's backing
// string.
func (r *frameReader) optJSONStr(field string) (Optional[string], error) {
	o, err := r.optStr()
	if err != nil || !o.Present {
		return o, err
	}
	if !canonjson.ValidString(o.Value) {
		return Optional[string]{}, wire.Errorf("%s is not a valid JSON document", field)
	}
	return o, nil
}

func (r *frameReader) respHeader(version uint16) (*RespHeader, error) {
	h := &RespHeader{}
	var err error
	if h.RequiredSchemaVersion, err = r.optI32(); err != nil {
		return nil, err
	}
	if h.LatestSchemaVersion, err = r.optI32(); err != nil {
		return nil, err
	}
	if version >= 2 {
		if h.LogEpoch, err = r.nonEmpty("RESP_HEADER.logEpoch"); err != nil {
			return nil, err
		}
		if h.ResetRequired, err = r.Bool(); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (r *frameReader) lease() (*Lease, error) {
	l := &Lease{}
	var err error
	if l.LeaseID, err = r.nonEmpty("LEASE.leaseId"); err != nil {
		return nil, err
	}
	if l.ExpiresAtMs, err = r.I64(); err != nil {
		return nil, err
	}
	return l, nil
}

func (r *frameReader) pushResult(version uint16) (*PushResult, error) {
	p := &PushResult{}
	var err error
	if p.ClientCommitID, err = r.str(); err != nil {
		return nil, err
	}
	b, err := r.U8()
	if err != nil {
		return nil, err
	}
	if b < 1 || b > 3 {
		return nil, wire.Errorf("invalid push result status byte %d", b)
	}
	p.Status = PushStatus(b)
	seq, err := r.optI64()
	if err != nil {
		return nil, err
	}
	if p.Status == PushRejected && seq.Present {
		return nil, wire.Errorf("rejected PUSH_RESULT must not carry a commitSeq")
	}
	if p.Status != PushRejected && !seq.Present {
		return nil, wire.Errorf("%s PUSH_RESULT requires a commitSeq", p.Status)
	}
	p.CommitSeq = seq.Value
	n, err := r.count(5, "result")
	if err != nil {
		return nil, err
	}
	p.Results = make([]OpResult, n)
	for i := range p.Results {
		res := &p.Results[i]
		if res.OpIndex, err = r.I32(); err != nil {
			return nil, err
		}
		sb, err := r.U8()
		if err != nil {
			return nil, err
		}
		res.Status = OpStatus(sb)
		switch res.Status {
		case OpApplied:
		case OpConflict:
			if res.Code, err = r.str(); err != nil {
				return nil, err
			}
			if res.Message, err = r.str(); err != nil {
				return nil, err
			}
			if res.ServerVersion, err = r.I64(); err != nil {
				return nil, err
			}
			if res.ServerRow, err = r.Bytes(); err != nil {
				return nil, err
			}
			if version >= 3 {
				if res.ConflictColumns, err = r.Bytes(); err != nil {
					return nil, err
				}
			}
		case OpError:
			if res.Code, err = r.str(); err != nil {
				return nil, err
			}
			if res.Message, err = r.str(); err != nil {
				return nil, err
			}
			if res.Retryable, err = r.Bool(); err != nil {
				return nil, err
			}
		default:
			return nil, wire.Errorf("invalid push result record status byte %d", sb)
		}
	}
	return p, nil
}

func (r *frameReader) pushResultDetails() (*PushResultDetails, error) {
	d := &PushResultDetails{}
	var err error
	if d.ClientCommitID, err = r.nonEmpty("PUSH_RESULT_DETAILS.clientCommitId"); err != nil {
		return nil, err
	}
	n, err := r.count(8, "details entry")
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, wire.Errorf("PUSH_RESULT_DETAILS must carry at least one entry")
	}
	d.Entries = make([]DetailEntry, n)
	for i := range d.Entries {
		e := &d.Entries[i]
		if e.OpIndex, err = r.I32(); err != nil {
			return nil, err
		}
		if e.OpIndex < 0 {
			return nil, wire.Errorf("opIndex values must be unique and non-negative")
		}
		for _, prev := range d.Entries[:i] {
			if prev.OpIndex == e.OpIndex {
				return nil, wire.Errorf("opIndex values must be unique and non-negative")
			}
		}
		if e.Raw, err = r.str(); err != nil {
			return nil, err
		}
		if e.Details, err = ParseRejectionDetails([]byte(e.Raw)); err != nil {
			return nil, wire.Errorf("invalid details: %s", reason(err))
		}
	}
	return d, nil
}

func (r *frameReader) subStart() (*SubStart, error) {
	s := &SubStart{}
	var err error
	if s.ID, err = r.str(); err != nil {
		return nil, err
	}
	b, err := r.U8()
	if err != nil {
		return nil, err
	}
	if b < 1 || b > 3 {
		return nil, wire.Errorf("invalid SUB_START status byte %d", b)
	}
	s.Status = SubStatus(b)
	if s.ReasonCode, err = r.str(); err != nil {
		return nil, err
	}
	if s.EffectiveScopes, err = r.scopeLists(); err != nil {
		return nil, err
	}
	if s.Bootstrap, err = r.Bool(); err != nil {
		return nil, err
	}
	return s, nil
}

func (r *frameReader) commit() (*Commit, error) {
	c := r.a.commit()
	var err error
	if c.CommitSeq, err = r.I64(); err != nil {
		return nil, err
	}
	if c.CreatedAtMs, err = r.I64(); err != nil {
		return nil, err
	}
	if c.ActorID, err = r.str(); err != nil {
		return nil, err
	}
	nt, err := r.count(4, "table")
	if err != nil {
		return nil, err
	}
	c.Tables = r.a.tableNames(nt)
	for i := range c.Tables {
		if c.Tables[i], err = r.str(); err != nil {
			return nil, err
		}
	}
	nc, err := r.count(13, "change")
	if err != nil {
		return nil, err
	}
	c.Changes = r.a.changeList(nc)
	for i := range c.Changes {
		ch := &c.Changes[i]
		if ch.TableIndex, err = r.U16(); err != nil {
			return nil, err
		}
		if int(ch.TableIndex) >= nt {
			return nil, wire.Errorf("change tableIndex %d out of range (%d tables)", ch.TableIndex, nt)
		}
		if ch.RowID, err = r.str(); err != nil {
			return nil, err
		}
		b, err := r.U8()
		if err != nil {
			return nil, err
		}
		if ch.Op, err = op(b, "change"); err != nil {
			return nil, err
		}
		rv, err := r.optI64()
		if err != nil {
			return nil, err
		}
		ch.RowVersion = rv.Value
		if ch.Scopes, err = r.commitScopes(); err != nil {
			return nil, err
		}
		has, err := r.Opt()
		if err != nil {
			return nil, err
		}
		if has {
			if ch.Row, err = r.Bytes(); err != nil {
				return nil, err
			}
		}
		if ch.Op == OpUpsert && (!rv.Present || !has) {
			return nil, wire.Errorf("change %d: upsert requires rowVersion and row", i)
		}
		if ch.Op == OpDelete && (rv.Present || has) {
			return nil, wire.Errorf("change %d: delete must not carry rowVersion or row", i)
		}
	}
	return c, nil
}

func (r *frameReader) segmentRef() (*SegmentRef, error) {
	s := &SegmentRef{}
	var err error
	if s.SegmentID, err = r.str(); err != nil {
		return nil, err
	}
	b, err := r.U8()
	if err != nil {
		return nil, err
	}
	if b != uint8(MediaRows) && b != uint8(MediaSQLite) {
		return nil, wire.Errorf("invalid SEGMENT_REF mediaType byte %d", b)
	}
	s.MediaType = MediaType(b)
	if s.Table, err = r.str(); err != nil {
		return nil, err
	}
	if s.ByteLength, err = r.I64(); err != nil {
		return nil, err
	}
	if s.RowCount, err = r.I64(); err != nil {
		return nil, err
	}
	if s.AsOfCommitSeq, err = r.I64(); err != nil {
		return nil, err
	}
	if s.ScopeDigest, err = r.str(); err != nil {
		return nil, err
	}
	if s.RowCursor, err = r.optStr(); err != nil {
		return nil, err
	}
	if s.NextRowCursor, err = r.optStr(); err != nil {
		return nil, err
	}
	if s.URL, err = r.optStr(); err != nil {
		return nil, err
	}
	if s.URLExpiresAtMs, err = r.optI64(); err != nil {
		return nil, err
	}
	if s.URL.Present != s.URLExpiresAtMs.Present {
		return nil, wire.Errorf("SEGMENT_REF.urlExpiresAtMs must be present iff url is")
	}
	return s, nil
}

func (r *frameReader) subEnd() (*SubEnd, error) {
	s := &SubEnd{}
	var err error
	if s.NextCursor, err = r.I64(); err != nil {
		return nil, err
	}
	if s.BootstrapState, err = r.optJSONStr("SUB_END.bootstrapState"); err != nil {
		return nil, err
	}
	return s, nil
}

func (r *frameReader) errorFrame() (*Error, error) {
	e := &Error{}
	var err error
	if e.Code, err = r.str(); err != nil {
		return nil, err
	}
	if e.Message, err = r.str(); err != nil {
		return nil, err
	}
	if e.Category, err = r.str(); err != nil {
		return nil, err
	}
	if e.Retryable, err = r.Bool(); err != nil {
		return nil, err
	}
	if e.RecommendedAction, err = r.str(); err != nil {
		return nil, err
	}
	if e.Details, err = r.optJSONStr("ERROR.details"); err != nil {
		return nil, err
	}
	return e, nil
}
