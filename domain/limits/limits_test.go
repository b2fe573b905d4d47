package limits_test

import (
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestIdentity(t *testing.T) {
	lim := limits.Limits{MaxIDBytes: 8, MaxScopeValueBytes: 4}
	cases := []struct {
		name             string
		actor, partition string
		grant            map[string][]string
		ok               bool
	}{
		{"plain", "alice", "default", map[string][]string{"owner": {"abcd", "*"}}, true},
		{"non-ASCII UTF-8", "zoë", "ü", nil, true},
		{"actor at the limit", "12345678", "p", nil, true},
		{"empty actor", "", "p", nil, false},
		{"empty partition", "alice", "", nil, false},
		{"actor not UTF-8", "al\xffce", "p", nil, false},
		{"partition not UTF-8", "alice", "\xc3", nil, false},
		{"actor too long", "123456789", "p", nil, false},
		{"partition too long", "a", "123456789", nil, false},
		{"actor with a newline", "al\nce", "p", nil, false},
		{"actor with NUL", "al\x00", "p", nil, false},
		{"actor with a C1 control", "a\u0085", "p", nil, false},
		{"grant value not UTF-8", "a", "p", map[string][]string{"owner": {"\xff"}}, false},
		{"grant value too long", "a", "p", map[string][]string{"owner": {"abcde"}}, false},
		{"grant variable not UTF-8", "a", "p", map[string][]string{"\xff": {"x"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := lim.Identity(c.actor, c.partition, c.grant)
			if c.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if syncerr.CodeOf(err) != syncerr.AuthRequired {
				t.Fatalf("got %v, want sync.auth_required", err)
			}
		})
	}
}

func TestRequest(t *testing.T) {
	lim := limits.Limits{MaxIDBytes: 4, MaxScopeValueBytes: 3, MaxScopeValues: 3, MaxSubscriptions: 2}
	sub := func(id string, sc map[string][]string) *ssp2.Subscription {
		return &ssp2.Subscription{ID: id, Table: "tasks", Scopes: ssp2.ScopeListsFromMap(sc)}
	}
	hdr := func(id string) *ssp2.ReqHeader { return &ssp2.ReqHeader{ClientID: id, SchemaVersion: 1} }
	commit := func(id string) *ssp2.PushCommit { return &ssp2.PushCommit{ClientCommitID: id} }
	cases := []struct {
		name    string
		hdr     *ssp2.ReqHeader
		commits []*ssp2.PushCommit
		subs    []*ssp2.Subscription
		want    syncerr.Code // "" accepts
	}{
		{"within every limit", hdr("abcd"), []*ssp2.PushCommit{commit("abcd")},
			[]*ssp2.Subscription{sub("s1", map[string][]string{"a": {"x", "yyy"}, "b": {"z"}}), sub("s2", nil)}, ""},
		{"client id too long", hdr("abcde"), nil, nil, syncerr.InvalidClientID},
		{"client commit id too long", hdr("c"), []*ssp2.PushCommit{commit("k"), commit("abcde")}, nil, syncerr.InvalidRequest},
		{"too many subscriptions", hdr("c"), nil, []*ssp2.Subscription{sub("1", nil), sub("2", nil), sub("3", nil)}, syncerr.InvalidRequest},
		{"subscription id too long", hdr("c"), nil, []*ssp2.Subscription{sub("abcde", nil)}, syncerr.InvalidSubscription},
		{"scope value too long", hdr("c"), nil, []*ssp2.Subscription{sub("s", map[string][]string{"a": {"abcd"}})}, syncerr.InvalidSubscription},
		{"too many values over all variables", hdr("c"), nil,
			[]*ssp2.Subscription{sub("s", map[string][]string{"a": {"1", "2"}, "b": {"3", "4"}})}, syncerr.InvalidSubscription},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := lim.Request(c.hdr, c.commits, c.subs)
			if got := syncerr.CodeOf(err); got != c.want || (c.want == "" && err != nil) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestZeroMeansDefault(t *testing.T) {
	var zero limits.Limits
	if zero.WithDefaults() != limits.Default() {
		t.Fatalf("zero limits: %+v", zero.WithDefaults())
	}
	long := strings.Repeat("x", limits.DefaultMaxIDBytes+1)
	if err := zero.Request(&ssp2.ReqHeader{ClientID: long}, nil, nil); syncerr.CodeOf(err) != syncerr.InvalidClientID {
		t.Fatalf("default id limit: %v", err)
	}
	if err := zero.StoredScope("owner", strings.Repeat("x", limits.DefaultMaxScopeValueBytes+1)); syncerr.CodeOf(err) != syncerr.InvalidRequest {
		t.Fatalf("default stored scope limit: %v", err)
	}
	if err := zero.StoredScope("owner", strings.Repeat("x", limits.DefaultMaxScopeValueBytes)); err != nil {
		t.Fatalf("value at the limit: %v", err)
	}
}
