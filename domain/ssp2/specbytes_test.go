package ssp2_test

import (
	"bytes"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// SPEC §6.3 and §6.3.1: a rejected PUSH_RESULT and its
// PUSH_RESULT_DETAILS companion, byte for byte as the field tables lay
// them out, with the details JSON normalized (canonical member order,
// references as an object of sorted keys).
func TestPushResultDetailsBytesFollowTheSpec(t *testing.T) {
	m := &ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{
		&ssp2.RespHeader{LogEpoch: "e"},
		&ssp2.PushResult{ClientCommitID: "c1", Status: ssp2.PushRejected, Results: []ssp2.OpResult{{OpIndex: 2, Status: ssp2.OpError, Code: "app.bad", Message: "no"}}},
		&ssp2.PushResultDetails{ClientCommitID: "c1", Entries: []ssp2.DetailEntry{{OpIndex: 2, Details: ssp2.RejectionDetails{
			FieldPaths: []string{"title", "meta.tags"}, Reason: "too_long", RequiredAction: "edit_fields",
			References: []ssp2.ScopeValue{{Key: "task_id", Value: "t1"}, {Key: "project_id", Value: "p1"}},
		}}}},
	}}
	want := ssptest.Response(3).
		// RESP_HEADER: requiredSchemaVersion, latestSchemaVersion absent;
		// logEpoch; resetRequired false.
		Frame(0x10, new(ssptest.Bytes).Absent().Absent().Str("e").U8(0)).
		// PUSH_RESULT: clientCommitId, status 3 (rejected), commitSeq
		// absent, one result: opIndex, status 3 (error), code, message,
		// retryable false.
		Frame(0x11, new(ssptest.Bytes).Str("c1").U8(3).Absent().U32(1).I32(2).U8(3).Str("app.bad").Str("no").U8(0)).
		// PUSH_RESULT_DETAILS: clientCommitId, one entry: opIndex,
		// detailsJson.
		Frame(0x1B, new(ssptest.Bytes).Str("c1").U32(1).I32(2).
			Str(`{"fieldPaths":["title","meta.tags"],"reason":"too_long","requiredAction":"edit_fields","references":{"project_id":"p1","task_id":"t1"}}`)).
		End().B
	got, err := ssp2.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nthe spec's layout\n%x", got, want)
	}
	dec, err := ssp2.Decode(want)
	if err != nil {
		t.Fatalf("the spec's bytes do not decode: %v", err)
	}
	d, ok := dec.Frames[2].(*ssp2.PushResultDetails)
	if !ok || d.ClientCommitID != "c1" || len(d.Entries) != 1 || d.Entries[0].OpIndex != 2 || d.Entries[0].Details.Reason != "too_long" ||
		len(d.Entries[0].Details.References) != 2 {
		t.Fatalf("decoded details %+v", dec.Frames[2])
	}
}
