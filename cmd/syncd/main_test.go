package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		env    []string
		code   int
		stdout string
		stderr string
	}{
		{"no command", nil, nil, 2, "", "Usage:"},
		{"help", []string{"help"}, nil, 0, "syncd serve [flags]", ""},
		{"unknown", []string{"bogus"}, nil, 2, "", `unknown command "bogus"`},
		{"version", []string{"version"}, nil, 0, "syncd dev", ""},
		{"serve help", []string{"serve", "--help"}, nil, 0, "SYNCD_ADMIN_LISTEN", ""},
		{"serve bad flag", []string{"serve", "--listen", "nope"}, nil, 2, "", "want host:port"},
		{"dev auth exposed", []string{"serve", "--listen", "0.0.0.0:8787"}, nil, 2, "", "--allow-insecure-dev-auth"},
		{"open admin listener", []string{"serve", "--admin-listen", "0.0.0.0:8788"}, nil, 2, "", "--admin-token-file"},
		{"print config", []string{"serve", "--print-config", "--database", "postgres://u:hunter2@h/db", "--mount", "/x"},
			[]string{"SYNCD_DEV=true"}, 0, `database: "postgres://u:xxxxx@h/db"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, tt.env, strings.NewReader(""), &out, &errOut)
			if code != tt.code || !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errOut.String(), tt.stderr) {
				t.Fatalf("code %d\nstdout %s\nstderr %s", code, out.String(), errOut.String())
			}
			if strings.Contains(out.String(), "hunter2") {
				t.Fatal("credentials printed")
			}
		})
	}
}
