package pull_test

import (
	"context"
	"testing"
	"unicode/utf8"

	"github.com/syncd-dev/syncd/app/pull"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// Arbitrary pull headers and subscriptions (cursor, resume token, scope
// values, limits) never panic, and a refusal is a client-error catalog
// code, never an internal error (strings are well-formed UTF-8: the wire
// decoder refuses anything else).
func FuzzPull(f *testing.F) {
	f.Add(int32(0), int32(0), int32(0), uint8(1), "s", "projects", "alice", int64(-1), `{"asOfCommitSeq":1,"tables":["projects"],"tableIndex":0,"rowCursor":"a-001"}`, true)
	f.Add(int32(-5), int32(1), int32(1), uint8(2), "s", "projects", "*", int64(0), ``, false)
	f.Add(int32(1), int32(1<<30), int32(-1), uint8(15), "", "tasks", "", int64(1<<62), `{"asOfCommitSeq":-1}`, true)
	f.Fuzz(func(t *testing.T, lc, lr, mp int32, accept uint8, id, table, owner string, cursor int64, token string, hasToken bool) {
		for _, s := range []string{id, table, owner, token} {
			if !utf8.ValidString(s) {
				return // the wire decoder refuses these before a pull
			}
		}
		e := newEnv(t, nil)
		e.seed("alice", "a", 5)
		h := ssp2.PullHeader{LimitCommits: lc, LimitSnapshotRows: lr, MaxSnapshotPages: mp, Accept: accept}
		sub := &ssp2.Subscription{ID: id, Table: table, Scopes: ssp2.ScopeListsFromMap(map[string][]string{"owner": {owner}}), Cursor: cursor}
		if hasToken {
			sub.BootstrapState = ssp2.Some(token)
		}
		subs := []*ssp2.Subscription{sub}
		if err := pull.Validate(e.sch, &h, subs); err != nil {
			if syncerr.CodeOf(err) == syncerr.InternalError {
				t.Fatalf("validate: %v", err)
			}
			return
		}
		r := pull.Request{Partition: part, ActorID: "alice", ClientID: "c1", WireVersion: 3, LogEpoch: e.epoch, Schema: e.sch,
			Header: &h, Subscriptions: subs, Scopes: scopes.Granted(aliceGrant)}
		sp := e.svc.NewSpool()
		defer sp.Close()
		err := e.svc.Pull(context.Background(), r, sp)
		if err != nil && accept&(ssp2.AcceptInlineRows|ssp2.AcceptExternalRows) != 0 {
			t.Fatalf("pull: %v", err)
		}
	})
}
