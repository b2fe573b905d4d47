package config_test

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
)

// TestCalloutSettings: a backend is called only by a callback that needs
// it and every such callback needs one; a non-loopback backend without
// signing keys is refused unless explicitly allowed (as --auth dev on a
// public address is); each refusal names the flag that resolves it.
func TestCalloutSettings(t *testing.T) {
	schema := []string{"--schema", "x.json"}
	with := func(args ...string) []string { return append(append([]string{}, schema...), args...) }
	tests := []struct {
		name    string
		args    []string
		wantErr []string // fragments of the error; nil: accepted
	}{
		{"auth callout on loopback", with("--auth", "callout", "--callout-url", "http://127.0.0.1:9000/hooks"), nil},
		{"auth callout on localhost", with("--auth", "callout", "--callout-url", "http://localhost:9000"), nil},
		{"auth callout on IPv6 loopback", with("--auth", "callout", "--callout-url", "http://[::1]:9000"), nil},
		{"scopes callout beside dev auth", []string{"--scopes", "callout", "--callout-url", "http://127.0.0.1:9000"}, nil},
		{"scopes callout beside jwt", with("--auth", "jwt", "--jwt-algorithm", "HS256", "--jwt-key-file", "/k",
			"--scopes", "callout", "--callout-url", "https://auth.internal", "--callout-key-file", "/ck"), nil},
		{"validators only", []string{"--callout-validate-tables", "projects,tasks", "--callout-validate-commits", "--callout-url", "http://127.0.0.1:1"}, nil},
		{"commands only", []string{"--callout-commands", "tasks.complete, tasks.archive", "--callout-url", "http://127.0.0.1:1"}, nil},
		{"reactions only", []string{"--callout-reactions", "project.welcome,mail/send", "--callout-url", "http://127.0.0.1:1"}, nil},
		{"signed public backend", with("--auth", "callout", "--callout-url", "https://auth.example.com/syncd", "--callout-key-file", "/k"), nil},
		{"unsigned public backend allowed", with("--auth", "callout", "--callout-url", "http://10.0.0.7:8080", "--allow-insecure-callout"), nil},

		{"unsigned public backend", with("--auth", "callout", "--callout-url", "https://auth.example.com"),
			[]string{"--callout-url auth.example.com", "--callout-key-file", "--allow-insecure-callout"}},
		{"a host name is not loopback", with("--auth", "callout", "--callout-url", "http://backend:8080"), []string{"--callout-key-file"}},
		{"auth callout without a backend", with("--auth", "callout"), []string{"--auth callout", "--callout-url"}},
		{"scopes callout without a backend", []string{"--scopes", "callout"}, []string{"--scopes callout", "--callout-url"}},
		{"validators without a backend", []string{"--callout-validate-tables", "t", "--callout-validate-commits"},
			[]string{"--callout-validate-tables", "--callout-validate-commits", "--callout-url"}},
		{"commands and reactions without a backend", []string{"--callout-commands", "c", "--callout-reactions", "r"},
			[]string{"--callout-commands, --callout-reactions needs --callout-url"}},
		{"a command listed twice", []string{"--callout-url", "http://127.0.0.1:1", "--callout-commands", "a,b,a"}, []string{`--callout-commands: "a" is listed twice`}},
		{"a reaction type that is none", []string{"--callout-url", "http://127.0.0.1:1", "--callout-reactions", "ok,1st"},
			[]string{`--callout-reactions: "1st" is not a reaction type`}},
		{"zero command timeout", []string{"--callout-url", "http://127.0.0.1:1", "--callout-commands", "c", "--callout-command-timeout", "0s"}, []string{"--callout-command-timeout"}},
		{"zero reaction timeout", []string{"--callout-url", "http://127.0.0.1:1", "--callout-reactions", "r", "--callout-reaction-timeout", "0s"}, []string{"--callout-reaction-timeout"}},
		{"a backend nothing calls", []string{"--callout-url", "http://127.0.0.1:1"}, []string{"nothing calls it"}},
		{"key file without a backend", []string{"--callout-key-file", "/k", "--allow-insecure-callout"}, []string{"--callout-key-file, --allow-insecure-callout", "only used with --callout-url"}},
		{"insecure with a key file", with("--auth", "callout", "--callout-url", "http://127.0.0.1:1", "--callout-key-file", "/k", "--allow-insecure-callout"),
			[]string{"--allow-insecure-callout only applies without --callout-key-file"}},
		{"forwarded headers without callout auth", []string{"--scopes", "callout", "--callout-url", "http://127.0.0.1:1", "--callout-forward-headers", "X-Tenant"},
			[]string{"--callout-forward-headers", "--auth callout"}},
		{"a forwarded header that is no name", with("--auth", "callout", "--callout-url", "http://127.0.0.1:1", "--callout-forward-headers", "X-Tenant, bad header"),
			[]string{`"bad header" is not a header name`}},
		{"not http", with("--auth", "callout", "--callout-url", "ftp://127.0.0.1"), []string{"want an http(s) URL"}},
		{"credentials in the URL", with("--auth", "callout", "--callout-url", "http://u:secret@127.0.0.1"), []string{"no user info"}},
		{"a query in the URL", with("--auth", "callout", "--callout-url", "http://127.0.0.1/?token=1"), []string{"no user info, query"}},
		{"zero timeout", with("--auth", "callout", "--callout-url", "http://127.0.0.1", "--callout-timeout", "0s"), []string{"--callout-timeout"}},
		{"zero validate timeout", with("--auth", "callout", "--callout-url", "http://127.0.0.1", "--callout-validate-timeout", "0s"), []string{"--callout-validate-timeout"}},
		{"negative ttl", with("--auth", "callout", "--callout-url", "http://127.0.0.1", "--callout-scopes-ttl", "-1s"), []string{"--callout-scopes-ttl"}},
		{"no concurrency", with("--auth", "callout", "--callout-url", "http://127.0.0.1", "--callout-max-concurrency", "0"), []string{"--callout-max-concurrency"}},
		{"no answer bytes", with("--auth", "callout", "--callout-url", "http://127.0.0.1", "--callout-max-response-bytes", "0"), []string{"--callout-max-response-bytes"}},
		{"an unknown scope source", []string{"--scopes", "claims"}, []string{`--scopes "claims"`, "auth, callout or rules"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantLoad(t, tt.args, tt.wantErr) })
	}
}

func TestCalloutDefaultsAndLists(t *testing.T) {
	c := config.Default()
	k := c.Callout
	if c.Scopes != config.ScopesAuth || k.URL != "" || k.Timeout != 2*time.Second || k.ValidateTimeout != 200*time.Millisecond ||
		k.ScopesTTL != 30*time.Second || k.MaxConcurrency != 64 || k.MaxResponseBytes != 1<<20 ||
		k.CommandTimeout != 500*time.Millisecond || k.ReactionTimeout != 10*time.Second {
		t.Fatalf("defaults %+v, scopes %q", k, c.Scopes)
	}
	res, err := config.Load([]string{"--auth", "callout", "--callout-url", "http://127.0.0.1:9", "--callout-validate-tables", " projects, tasks ,",
		"--callout-forward-headers", "X-Tenant,X-Device", "--callout-commands", "tasks.complete,", "--callout-reactions", " a, b"},
		[]string{"SYNCD_CALLOUT_SCOPES_TTL=1m"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	k = res.Config.Callout
	if !reflect.DeepEqual(k.ValidatedTables(), []string{"projects", "tasks"}) || !reflect.DeepEqual(k.ForwardedHeaders(), []string{"X-Tenant", "X-Device"}) ||
		k.ScopesTTL != time.Minute || !reflect.DeepEqual(k.CommandNames(), []string{"tasks.complete"}) || !reflect.DeepEqual(k.ReactionTypes(), []string{"a", "b"}) {
		t.Fatalf("lists %v, %v, %v, %v, ttl %s", k.ValidatedTables(), k.ForwardedHeaders(), k.CommandNames(), k.ReactionTypes(), k.ScopesTTL)
	}
}
