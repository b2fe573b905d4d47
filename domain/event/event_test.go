package event_test

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/event"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// fields records what an event encodes.
type fields map[string]any

func (f fields) put(k string, v any) {
	if _, dup := f[k]; dup {
		panic("field " + k + " written twice")
	}
	f[k] = v
}
func (f fields) AddString(k, v string)                 { f.put(k, v) }
func (f fields) AddInt64(k string, v int64)            { f.put(k, v) }
func (f fields) AddBool(k string, v bool)              { f.put(k, v) }
func (f fields) AddDuration(k string, v time.Duration) { f.put(k, v) }

func encode(e event.Event) fields {
	f := fields{}
	e.EncodeFields(f)
	return f
}

var who = event.Who{Partition: "p1", ActorID: "alice", ClientID: "c1"}

// One value of every type of the catalog, with the fields a host keys on.
var catalog = []struct {
	ev   event.Event
	kind event.Kind
	want fields
}{
	{event.RequestHandled{Who: who, Transport: event.TransportHTTP, Code: "sync.forbidden", Duration: time.Millisecond},
		event.KindRequestHandled, fields{"partition": "p1", "actor_id": "alice", "client_id": "c1", "transport": "http", "code": "sync.forbidden", "duration": time.Millisecond}},
	{event.PushApplied{Who: who, ClientCommitID: "cc1", CommitSeq: 7, Operations: 2, Changes: 2},
		event.KindPushApplied, fields{"client_commit_id": "cc1", "commit_seq": int64(7), "operations": int64(2), "replay": false}},
	{event.PushRejected{Who: who, ClientCommitID: "cc2", OpIndex: 1, Code: "sync.forbidden"},
		event.KindPushRejected, fields{"client_commit_id": "cc2", "op_index": int64(1), "code": "sync.forbidden"}},
	{event.PushConflicted{Who: who, ClientCommitID: "cc3", ServerVersion: 4},
		event.KindPushConflicted, fields{"client_commit_id": "cc3", "server_version": int64(4)}},
	{event.PullServed{Who: who, Subscriptions: 3, Bootstrap: 1, Incremental: 2, Bytes: 99},
		event.KindPullServed, fields{"subscriptions": int64(3), "bootstrap": int64(1), "incremental": int64(2), "bytes": int64(99)}},
	{event.ScopeResolutionFailed{Who: who, Operation: event.OperationSync, Outage: true, Code: "sync.auth_lease_required"},
		event.KindScopeResolutionFailed, fields{"operation": "sync", "outage": true, "code": "sync.auth_lease_required"}},
	{event.SegmentDownloaded{Partition: "p1", SegmentID: "s1", Signed: true, Bytes: 10},
		event.KindSegmentDownloaded, fields{"partition": "p1", "segment_id": "s1", "signed": true, "bytes": int64(10)}},
	{event.BlobSwept{Partition: "p1", Claimed: 2, Deleted: 1},
		event.KindBlobSwept, fields{"partition": "p1", "claimed": int64(2), "deleted": int64(1)}},
	{event.ReactionTransitioned{Partition: "p1", ReactionType: "mail", IdempotencyKey: "k", Attempt: 1, To: event.ReactionRetrying, RetryAtMs: 5},
		event.KindReactionTransitioned, fields{"reaction_type": "mail", "idempotency_key": "k", "to": "retrying", "retry_at_ms": int64(5)}},
	{event.RealtimeConnected{Who: who, SessionID: "s"},
		event.KindRealtimeConnected, fields{"session_id": "s", "client_id": "c1"}},
	{event.RealtimeDisconnected{Who: who, SessionID: "s", CloseCode: 1001},
		event.KindRealtimeDisconnected, fields{"session_id": "s", "close_code": int64(1001)}},
	{event.PruneCompleted{Partition: "p1", PreviousHorizonSeq: 1, HorizonSeq: 9, RemovedCommits: 8},
		event.KindPruneCompleted, fields{"previous_horizon_seq": int64(1), "horizon_seq": int64(9), "removed_commits": int64(8)}},
	{event.CheckpointProgressOf(checkpoint.Checkpoint{Partition: "p1", Name: "proj", SchemaVersion: 3, State: checkpoint.StateBackfilling, Watermark: 40, ObservedRows: 12}, 100, time.Second),
		event.KindCheckpointProgress, fields{"checkpoint": "proj", "schema_version": int64(3), "state": "backfilling", "watermark": int64(40), "target_seq": int64(100), "observed_rows": int64(12), "elapsed": time.Second}},
}

func TestEveryKindHasOneTypeWithItsFields(t *testing.T) {
	seen := map[event.Kind]bool{}
	for _, c := range catalog {
		t.Run(string(c.kind), func(t *testing.T) {
			if c.ev.Kind() != c.kind {
				t.Fatalf("%T: kind %q, want %q", c.ev, c.ev.Kind(), c.kind)
			}
			got := encode(c.ev)
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %v (%T), want %v", k, got[k], got[k], v)
				}
			}
		})
		if seen[c.kind] {
			t.Fatalf("two catalog entries for %q", c.kind)
		}
		seen[c.kind] = true
	}
	for _, k := range event.Kinds() {
		if !seen[k] {
			t.Errorf("kind %q has no catalog entry in this test", k)
		}
	}
	if len(seen) != len(event.Kinds()) {
		t.Errorf("the test covers %d kinds, the catalog lists %d", len(seen), len(event.Kinds()))
	}
}

// Keys are stable snake_case, and no event can carry a payload: no key
// names one.
func TestFieldKeysAreSnakeCaseAndNeverPayloads(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	kind := regexp.MustCompile(`^[a-z]+\.[a-z_]+$`)
	for _, c := range catalog {
		if !kind.MatchString(string(c.kind)) {
			t.Errorf("kind %q is not <area>.<snake_case>", c.kind)
		}
		for k := range encode(c.ev) {
			if !snake.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", c.kind, k)
			}
			for _, bad := range []string{"payload", "row", "message", "scopes", "error"} {
				if k == bad {
					t.Errorf("%s: key %q would carry data or engine text", c.kind, k)
				}
			}
		}
	}
}

func TestCodeOfReportsOnlyCatalogCodes(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"catalog", syncerr.New(syncerr.Forbidden), "sync.forbidden"},
		{"wrapped catalog", fmt.Errorf("push: %w", syncerr.New(syncerr.RateLimited)), "sync.rate_limited"},
		{"engine text", errors.New(`pq: relation "secret_table" does not exist`), "sync.internal_error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := event.CodeOf(c.err); got != c.want {
				t.Fatalf("CodeOf = %q, want %q", got, c.want)
			}
		})
	}
}
