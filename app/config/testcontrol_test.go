package config_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/config"
)

// The test-control plane has no authentication: it starts only on a
// loopback literal, and is absent unless asked for.
func TestTestControlListenIsLoopbackOnly(t *testing.T) {
	tests := []struct {
		listen string
		ok     bool
	}{
		{"127.0.0.1:47100", true},
		{"[::1]:47100", true},
		{"localhost:47100", true},
		{"LOCALHOST:47100", true},
		{"0.0.0.0:47100", false},
		{":47100", false},
		{"127.0.0.2:47100", false}, // loopback, but not the literal the plane takes
		{"192.0.2.7:47100", false},
		{"sync.internal:47100", false},
		{"127.0.0.1", false},
		{"127.0.0.1:8787", false}, // the sync listener's own address
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			_, err := config.Load([]string{"--test-control-listen", tt.listen}, nil, &bytes.Buffer{})
			if tt.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tt.ok && (err == nil || !strings.Contains(err.Error(), "--test-control-listen")) {
				t.Fatalf("accepted or unnamed: %v", err)
			}
		})
	}
	if _, err := config.Load(nil, []string{"SYNCD_TEST_CONTROL_LISTEN=0.0.0.0:1"}, &bytes.Buffer{}); err == nil {
		t.Fatal("SYNCD_TEST_CONTROL_LISTEN on every interface accepted")
	}
	res, err := config.Load(nil, nil, &bytes.Buffer{})
	if err != nil || res.Config.TestControlListen != "" {
		t.Fatalf("default: %q %v, want off", res.Config.TestControlListen, err)
	}
}

// The plane's instances are bounded in count and in the storage they
// share; a bound that leaves an instance too little to start is refused.
func TestTestControlInstanceBounds(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" accepted
	}{
		{nil, ""},
		{[]string{"--test-control-max-instances", "8", "--test-control-max-bytes", "16777216"}, ""},
		{[]string{"--test-control-max-instances", "1", "--test-control-max-bytes", "2097152"}, ""},
		{[]string{"--test-control-max-instances", "0"}, "--test-control-max-instances 0: must be positive"},
		{[]string{"--test-control-max-instances", "-3"}, "--test-control-max-instances -3: must be positive"},
		{[]string{"--test-control-max-bytes", "0"}, "leaves each instance less than"},
		{[]string{"--test-control-max-instances", "2", "--test-control-max-bytes", "2097152"}, "leaves each instance less than"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			res, err := config.Load(append([]string{"--test-control-listen", "127.0.0.1:0"}, tt.args...), nil, &bytes.Buffer{})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v (config %+v), want %q", err, res.Config.TestControlMaxInstances, tt.want)
			}
		})
	}
	res, err := config.Load(nil, nil, &bytes.Buffer{})
	if err != nil || res.Config.TestControlMaxInstances != 64 || res.Config.TestControlMaxBytes != 1<<30 {
		t.Fatalf("defaults: %d instances, %d bytes, %v; want 64 and 1 GiB", res.Config.TestControlMaxInstances, res.Config.TestControlMaxBytes, err)
	}
}

// --test-control-database takes only a postgres:// URL, only with the
// plane on, and never prints its password.
func TestTestControlDatabase(t *testing.T) {
	const pg = "postgres://syncd:hunter2@127.0.0.1:5432/test?sslmode=disable"
	tests := []struct {
		name string
		args []string
		want string // "" accepted
	}{
		{"postgres", []string{"--test-control-listen", "127.0.0.1:0", "--test-control-database", pg}, ""},
		{"postgresql scheme", []string{"--test-control-listen", "127.0.0.1:0", "--test-control-database", "postgresql://h/db"}, ""},
		{"a SQLite path", []string{"--test-control-listen", "127.0.0.1:0", "--test-control-database", "/tmp/x.db"}, "want a postgres:// URL"},
		{"another scheme", []string{"--test-control-listen", "127.0.0.1:0", "--test-control-database", "mysql://u:hunter2@h/db"}, "want a postgres:// URL"},
		{"without the plane", []string{"--test-control-database", pg}, "--test-control-database needs --test-control-listen"},
		{"budget below one instance", []string{"--test-control-listen", "127.0.0.1:0", "--test-control-database", pg,
			"--test-control-database-max-conns", "6"}, "--test-control-database-max-conns 6: want at least 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			res, err := config.Load(tt.args, nil, &out)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("got %v (config %q), want %q without the password", err, res.Config.TestControlDatabase, tt.want)
			}
		})
	}
	res, err := config.Load([]string{"--test-control-listen", "127.0.0.1:0"}, []string{"SYNCD_TEST_CONTROL_DATABASE=" + pg}, &bytes.Buffer{})
	if err != nil || res.Config.TestControlDatabase != pg || res.Config.TestControlDatabaseMaxConns != 64 {
		t.Fatalf("from the environment: %q, %d conns, %v", res.Config.TestControlDatabase, res.Config.TestControlDatabaseMaxConns, err)
	}
	var printed bytes.Buffer
	res.Config.Print(&printed)
	if !strings.Contains(printed.String(), `test-control-database: "postgres://syncd:xxxxx@`) || strings.Contains(printed.String(), "hunter2") {
		t.Fatalf("printed config:\n%s", printed.String())
	}
}
