package push_test

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestCheckClientID(t *testing.T) {
	tests := []struct {
		name       string
		clientID   string
		boundActor string
		bound      bool
		code       syncerr.Code
	}{
		{"new client id", "device-1", "", false, ""},
		{"client id bound to the same actor", "device-1", "alice", true, ""},
		{"client id bound to another actor in the partition", "device-1", "bob", true, syncerr.InvalidClientID},
		{"reserved server-command prefix", `["remote-command","alice","c1"]`, "", false, syncerr.InvalidClientID},
		{"prefix lookalike without the comma is a client id like any other", `["remote-command"]`, "", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := syncerr.CodeOf(push.CheckClientID(tc.clientID, "alice", tc.boundActor, tc.bound)); got != tc.code {
				t.Fatalf("code = %q, want %q", got, tc.code)
			}
		})
	}
}

func TestCheckOperationCap(t *testing.T) {
	tests := []struct {
		name  string
		ops   []int
		limit int
		code  syncerr.Code
	}{
		{"no pushes", nil, 0, ""},
		{"exactly the default cap across commits", []int{250, 250}, 0, ""},
		{"one past the default cap across commits", []int{250, 251}, 0, syncerr.TooManyOperations},
		{"configured cap", []int{2, 2}, 3, syncerr.TooManyOperations},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := syncerr.CodeOf(push.CheckOperationCap(tc.ops, tc.limit)); got != tc.code {
				t.Fatalf("code = %q, want %q", got, tc.code)
			}
		})
	}
}

func TestAdmitEpoch(t *testing.T) {
	tests := []struct {
		name      string
		requested string
		has       bool
		want      push.EpochAdmission
	}{
		{"matching epoch proceeds", "e1", true, push.EpochMatch},
		{"absent epoch is acquisition", "", false, push.EpochAcquire},
		{"different epoch is a discontinuity", "e0", true, push.EpochMismatch},
		{"an empty epoch is still a different value", "", true, push.EpochMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := push.AdmitEpoch(tc.requested, tc.has, "e1")
			if got != tc.want || got.ResetRequired() != (tc.want != push.EpochMatch) {
				t.Fatalf("AdmitEpoch = %v, want %v", got, tc.want)
			}
		})
	}
}
