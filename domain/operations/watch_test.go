package operations_test

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestDecodeWatchMessage(t *testing.T) {
	kindW := `["kind",{"t":"string","v":"watch"}]`
	kindU := `["kind",{"t":"string","v":"unwatch"}]`
	wid := `["watchId",{"t":"string","v":"w1"}]`
	m, err := operations.DecodeWatchMessage([]byte(obj(rev1, kindW, wid, client, opID, noParam)))
	if err != nil || m.Kind != operations.KindWatch || m.WatchID != "w1" || m.ClientID != "c1" || m.OperationID != "tasks.byOwner" || m.Params.Kind() != operations.KindNull {
		t.Fatalf("watch: %+v %v", m, err)
	}
	m, err = operations.DecodeWatchMessage([]byte(obj(rev1, kindU, wid)))
	if err != nil || m.Kind != operations.KindUnwatch || m.WatchID != "w1" {
		t.Fatalf("unwatch: %+v %v", m, err)
	}
	for name, body := range map[string]string{
		"revision 2":           obj(`["revision",{"t":"number","v":2}]`, kindU, wid),
		"unknown kind":         obj(rev1, `["kind",{"t":"string","v":"snapshot"}]`, wid),
		"no watchId":           obj(rev1, kindU),
		"empty watchId":        obj(rev1, kindU, `["watchId",{"t":"string","v":""}]`),
		"watch without op":     obj(rev1, kindW, wid, client, noParam),
		"watch without client": obj(rev1, kindW, wid, opID, noParam),
		"watch without params": obj(rev1, kindW, wid, client, opID),
		"not a value":          `[]`,
	} {
		if _, err := operations.DecodeWatchMessage([]byte(body)); syncerr.CodeOf(err) != syncerr.OperationInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestEncodeWatchMessages(t *testing.T) {
	got, err := operations.EncodeSnapshot("w1", operations.QueryResult{OperationID: "q",
		Rows: []operations.Row{{{Key: "id", Value: str("a")}}}, MaxCommitSeq: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := obj(rev1, `["kind",{"t":"string","v":"snapshot"}]`, `["watchId",{"t":"string","v":"w1"}]`,
		`["operationId",{"t":"string","v":"q"}]`, `["rows",{"t":"array","v":[`+obj(`["id",{"t":"string","v":"a"}]`)+`]}]`,
		`["maxCommitSeq",{"t":"number","v":4}]`)
	if string(got) != want {
		t.Fatalf("snapshot\n got %s\nwant %s", got, want)
	}
	want = obj(rev1, `["kind",{"t":"string","v":"watch_error"}]`, `["watchId",{"t":"string","v":"w1"}]`,
		`["code",{"t":"string","v":"operation.unknown"}]`, `["message",{"t":"string","v":"unknown operation"}]`,
		`["retryable",{"t":"boolean","v":false}]`)
	if got := operations.EncodeWatchError("w1", syncerr.New(syncerr.OperationUnknown)); string(got) != want {
		t.Fatalf("watch_error\n got %s\nwant %s", got, want)
	}
}
