package checkpoint

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestGateRefusal(t *testing.T) {
	decl := []Declaration{{Partition: "p1", Name: "proj", SchemaVersion: 2}}
	tests := []struct {
		name    string
		gate    ServeGate
		running int32
		decls   []Declaration
		want    *Refusal
	}{
		{"open", ServeGate{StoredSchemaVersion: 2}, 2, nil, nil},
		{"unset marker is open", ServeGate{}, 1, nil, nil},
		{"older database is open", ServeGate{StoredSchemaVersion: 1}, 2, nil, nil},
		{"newer database", ServeGate{StoredSchemaVersion: 3}, 2, decl, &Refusal{Kind: RefuseSchema, Stored: 3, Running: 2}},
		{"schema wins over checkpoint", ServeGate{StoredSchemaVersion: 3, Pending: []PendingRef{{"p9", "x"}}}, 2, nil, &Refusal{Kind: RefuseSchema, Stored: 3, Running: 2}},
		{"undeclared pending", ServeGate{StoredSchemaVersion: 2, Pending: []PendingRef{{"p1", "proj"}}}, 2, nil, &Refusal{Kind: RefuseCheckpoint, Partition: "p1", Name: "proj"}},
		{"declared pending serves", ServeGate{StoredSchemaVersion: 2, Pending: []PendingRef{{"p1", "proj"}}}, 2, decl, nil},
		{"first undeclared of several", ServeGate{StoredSchemaVersion: 2, Pending: []PendingRef{{"p1", "proj"}, {"p2", "proj"}, {"p3", "x"}}}, 2, decl, &Refusal{Kind: RefuseCheckpoint, Partition: "p2", Name: "proj"}},
		{"same name other partition is not declared", ServeGate{StoredSchemaVersion: 2, Pending: []PendingRef{{"p2", "proj"}}}, 2, decl, &Refusal{Kind: RefuseCheckpoint, Partition: "p2", Name: "proj"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := GateRefusal(tt.gate, tt.running, tt.decls)
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("GateRefusal = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestTokenChanged(t *testing.T) {
	base := ServeGate{StoredSchemaVersion: 2, LogEpoch: "e1"}
	tests := []struct {
		name  string
		after ServeGate
		want  bool
	}{
		{"same", base, false},
		{"pending differs only", ServeGate{StoredSchemaVersion: 2, LogEpoch: "e1", Pending: []PendingRef{{"p", "n"}}}, false},
		{"epoch rotated", ServeGate{StoredSchemaVersion: 2, LogEpoch: "e2"}, true},
		{"schema bumped", ServeGate{StoredSchemaVersion: 3, LogEpoch: "e1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TokenChanged(base, tt.after)
			if (got != nil) != tt.want {
				t.Fatalf("TokenChanged = %+v, want refusal %v", got, tt.want)
			}
			if got != nil && got.Kind != RefuseEpoch {
				t.Fatalf("kind = %q", got.Kind)
			}
		})
	}
}

func TestRefusalErr(t *testing.T) {
	tests := []struct {
		name    string
		r       Refusal
		details string
	}{
		{"checkpoint", Refusal{Kind: RefuseCheckpoint, Partition: "p1", Name: "proj"}, `{"partition":"p1","projection":"proj"}`},
		{"epoch", Refusal{Kind: RefuseEpoch}, `{"logEpochChanged":true}`},
		{"schema", Refusal{Kind: RefuseSchema, Stored: 3, Running: 2}, `{"storedSchemaVersion":3,"runningSchemaVersion":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.r.Err()
			if e.Code != syncerr.SchemaNotReady {
				t.Fatalf("code = %q", e.Code)
			}
			if e.Message != "server schema is not ready for this request" {
				t.Fatalf("message = %q", e.Message)
			}
			if string(e.Details) != tt.details {
				t.Fatalf("details = %s, want %s", e.Details, tt.details)
			}
			ent := e.Entry()
			if !ent.Retryable || ent.HTTPStatus != 503 {
				t.Fatalf("catalog entry %+v", ent)
			}
		})
	}
}

func TestIncompleteError(t *testing.T) {
	if c := syncerr.CodeOf(IncompleteError(PendingRef{"p", "n"})); c != syncerr.StorageCheckpointIncomplete {
		t.Fatalf("code = %q", c)
	}
}
