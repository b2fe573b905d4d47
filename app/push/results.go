package push

import (
	"bytes"
	"encoding/base64"
	"errors"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Push results are persisted as a small wire-3 SSP2 response message:
// RESP_HEADER (a fixed placeholder epoch), PUSH_RESULT, the optional
// PUSH_RESULT_DETAILS, END. The codec is canonical, so decoding and
// re-encoding a stored result reproduces its frames byte for byte, and a
// replay answers exactly what the first delivery answered. The record is
// one JSON string (a prefix and the standard base64 of the message), so
// engines that keep push results in a JSON column hold it unchanged.

const storedEpoch = "stored-result"

type outcome struct {
	result  *ssp2.PushResult
	details *ssp2.PushResultDetails
	// replayed: answered from an idempotency record (or its cache miss);
	// changes: the changes this delivery appended. Neither is stored.
	replayed bool
	changes  int
}

func encodeStored(o outcome) ([]byte, error) {
	m := &ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse,
		Frames: []ssp2.Frame{&ssp2.RespHeader{LogEpoch: storedEpoch}, o.result}}
	if o.details != nil {
		m.Frames = append(m.Frames, o.details)
	}
	b, err := ssp2.Encode(m)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(storedPrefix)+base64.StdEncoding.EncodedLen(len(b))+1)
	copy(out, storedPrefix)
	base64.StdEncoding.Encode(out[len(storedPrefix):], b)
	out[len(out)-1] = '"'
	return out, nil
}

const storedPrefix = `"ssp2:`

var errCorruptResult = errors.New("stored push result is unreadable")

func decodeStored(b []byte, clientCommitID string) (outcome, error) {
	b = bytes.TrimSpace(b)
	if len(b) < len(storedPrefix)+1 || !bytes.HasPrefix(b, []byte(storedPrefix)) || b[len(b)-1] != '"' {
		return outcome{}, errCorruptResult
	}
	raw, err := base64.StdEncoding.DecodeString(string(b[len(storedPrefix) : len(b)-1]))
	if err != nil {
		return outcome{}, errCorruptResult
	}
	m, err := ssp2.DecodeWith(raw, ssp2.DecodeOptions{Versions: []uint16{3}})
	if err != nil {
		return outcome{}, errCorruptResult
	}
	var o outcome
	for _, f := range m.Frames {
		switch f := f.(type) {
		case *ssp2.PushResult:
			o.result = f
		case *ssp2.PushResultDetails:
			o.details = f
		}
	}
	if o.result == nil || o.result.ClientCommitID != clientCommitID {
		return outcome{}, errCorruptResult
	}
	return o, nil
}

// replay is the answer to a stored result (SPEC §2.3): applied comes back
// as cached, rejected as itself; an unreadable record is the
// non-persisted idempotency cache miss.
func replay(b []byte, clientCommitID string) outcome {
	o, err := decodeStored(b, clientCommitID)
	if err != nil {
		o = cacheMiss(clientCommitID)
	} else if o.result.Status == ssp2.PushApplied {
		o.result.Status = ssp2.PushCached
	}
	o.replayed = true
	return o
}

func cacheMiss(clientCommitID string) outcome {
	e := syncerr.Lookup(syncerr.IdempotencyCacheMiss)
	return outcome{result: &ssp2.PushResult{
		ClientCommitID: clientCommitID,
		Status:         ssp2.PushRejected,
		Results: []ssp2.OpResult{{
			OpIndex: 0, Status: ssp2.OpError,
			Code: string(e.Code), Message: e.Message, Retryable: true,
		}},
	}}
}

// forWire adapts a result to the request's wire version: before wire 3 a
// conflict record has no conflictColumns.
func (o outcome) forWire(version uint16) outcome {
	if version >= 3 {
		return o
	}
	for i := range o.result.Results {
		o.result.Results[i].ConflictColumns = nil
	}
	return o
}
