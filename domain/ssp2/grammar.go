package ssp2

import (
	"github.com/syncd-dev/syncd/domain/wire"
)

// grammar checks the frame sequence of §1.5 (requests) and §1.6
// (responses) one frame at a time; the streaming encoder and decoder and
// the whole-message helpers share it.
type grammar struct {
	kind   Kind
	frames int

	// request
	pushes  int
	hasPull bool

	// response
	inSub, sawSub, sawLease, sawBody bool
	subCommits, subSegments          bool
	errorSeen                        bool
	lastPush                         *PushResult
	lastPushHasDetails               bool
}

func newGrammar(kind Kind) grammar { return grammar{kind: kind} }

// next admits one frame.
func (g *grammar) next(f Frame) error {
	g.frames++
	_, unknown := f.(*Unknown)
	if g.frames == 1 {
		want := TypeReqHeader
		if g.kind == KindResponse {
			want = TypeRespHeader
		}
		if unknown || f.FrameType() != want {
			return wire.Errorf("%s must start with a %s frame", g.kind, want)
		}
		return nil
	}
	if g.kind == KindRequest {
		return g.request(f, unknown)
	}
	return g.response(f, unknown)
}

func (g *grammar) request(f Frame, unknown bool) error {
	if unknown {
		return nil
	}
	switch f.FrameType() {
	case TypeReqHeader:
		return wire.Errorf("duplicate REQ_HEADER frame")
	case TypePushCommit:
		if g.hasPull {
			return wire.Errorf("PUSH_COMMIT frame after PULL_HEADER")
		}
		g.pushes++
	case TypePullHeader:
		if g.hasPull {
			return wire.Errorf("duplicate PULL_HEADER frame")
		}
		g.hasPull = true
	case TypeSubscription:
		if !g.hasPull {
			return wire.Errorf("SUBSCRIPTION frame without a PULL_HEADER")
		}
	}
	return nil
}

func (g *grammar) response(f Frame, unknown bool) error {
	if g.errorSeen {
		return wire.Errorf("frame after ERROR (the next frame must be END)")
	}
	if unknown {
		g.sawBody = true
		return nil
	}
	switch x := f.(type) {
	case *RespHeader:
		return wire.Errorf("duplicate RESP_HEADER frame")
	case *Lease:
		if g.sawLease {
			return wire.Errorf("duplicate LEASE frame")
		}
		if g.sawBody {
			return wire.Errorf("LEASE frame must immediately follow RESP_HEADER")
		}
		g.sawLease = true
	case *PushResult:
		if g.sawSub {
			return wire.Errorf("PUSH_RESULT frame after SUB_START")
		}
		g.lastPush, g.lastPushHasDetails, g.sawBody = x, false, true
	case *PushResultDetails:
		if g.sawSub {
			return wire.Errorf("PUSH_RESULT_DETAILS frame after SUB_START")
		}
		if g.lastPush == nil {
			return wire.Errorf("PUSH_RESULT_DETAILS without a preceding PUSH_RESULT")
		}
		if g.lastPushHasDetails {
			return wire.Errorf("duplicate PUSH_RESULT_DETAILS companion")
		}
		if g.lastPush.ClientCommitID != x.ClientCommitID || g.lastPush.Status != PushRejected {
			return wire.Errorf("PUSH_RESULT_DETAILS does not match its rejected PUSH_RESULT")
		}
		for _, e := range x.Entries {
			found := false
			for _, r := range g.lastPush.Results {
				if r.Status == OpError && r.OpIndex == e.OpIndex {
					found = true
					break
				}
			}
			if !found {
				return wire.Errorf("PUSH_RESULT_DETAILS entry %d does not match an error result", e.OpIndex)
			}
		}
		g.lastPushHasDetails, g.sawBody = true, true
	case *SubStart:
		if g.inSub {
			return wire.Errorf("nested SUB_START frame")
		}
		g.inSub, g.sawSub, g.sawBody = true, true, true
		g.subCommits, g.subSegments = false, false
	case *Commit:
		if !g.inSub {
			return wire.Errorf("COMMIT frame outside a subscription")
		}
		if g.subSegments {
			return wire.Errorf("COMMIT and segment frames must not both appear for one subscription")
		}
		g.subCommits = true
	case *SegmentRef, *SegmentInline:
		if !g.inSub {
			return wire.Errorf("segment frame outside a subscription")
		}
		if g.subCommits {
			return wire.Errorf("COMMIT and segment frames must not both appear for one subscription")
		}
		g.subSegments = true
	case *SubEnd:
		if !g.inSub {
			return wire.Errorf("SUB_END frame without an open SUB_START")
		}
		g.inSub = false
	case *Error:
		g.errorSeen, g.sawBody = true, true
	}
	return nil
}

// end checks the sequence at END.
func (g *grammar) end() error {
	if g.frames == 0 {
		return wire.Errorf("%s has no header frame", g.kind)
	}
	if g.kind == KindRequest {
		if g.pushes == 0 && !g.hasPull {
			return wire.Errorf("request must contain PUSH_COMMIT or PULL_HEADER frames")
		}
		return nil
	}
	if g.inSub && !g.errorSeen {
		return wire.Errorf("subscription not terminated by SUB_END")
	}
	return nil
}
