package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBackupAndEpochUsage(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	tests := []struct {
		name     string
		args     []string
		code     int
		inStderr string
	}{
		{"backup needs --out", []string{"backup", "--database", missing}, 2, "--out FILE is required"},
		{"backup of PostgreSQL names its tools", []string{"backup", "--database", "postgres://u@h/db", "--out", filepath.Join(dir, "x")}, 2, "pg_dump"},
		{"backup of a missing database", []string{"backup", "--database", missing, "--out", filepath.Join(dir, "x")}, 1, "missing.db"},
		{"epoch without rotate", []string{"epoch"}, 2, "syncd epoch rotate"},
		{"rotate needs a partition or --all", []string{"epoch", "rotate", "--database", missing}, 2, "--partition P"},
		{"rotate takes one or the other", []string{"epoch", "rotate", "--database", missing, "--all", "--partition", "p"}, 2, "not both"},
		{"rotate never creates a database", []string{"epoch", "rotate", "--database", missing, "--all"}, 1, "missing.db"},
		{"backup help", []string{"backup", "--help"}, 0, "epoch rotate --all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, nil, nil, &out, &errb); code != tt.code || !strings.Contains(errb.String(), tt.inStderr) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, errb.String(), tt.inStderr)
			}
		})
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a command created the missing database")
	}
}
