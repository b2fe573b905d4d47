package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
)

func TestBlobsCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "syncd.db")
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{name: "no subcommand", args: []string{"blobs"}, code: 2, wantErr: "Usage: syncd blobs sweep"},
		{name: "unknown subcommand", args: []string{"blobs", "list"}, code: 2, wantErr: "Usage: syncd blobs sweep"},
		{name: "help", args: []string{"blobs", "sweep", "--help"}, code: 0, wantOut: "--blob-orphan-grace"},
		{name: "bad flag", args: []string{"blobs", "sweep", "--blob-orphan-grace", "1"}, code: 2, wantErr: "syncd blobs sweep:"},
		{name: "missing database", args: []string{"blobs", "sweep", "--database", db}, code: 1, wantErr: "database:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tc.args, nil, nil, &out, &errOut); code != tc.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(errOut.String(), tc.wantErr) {
				t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
			}
		})
	}
}

func TestBlobsSweepNeedsADurableStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "syncd.db")
	st, err := app.OpenStorage(context.Background(), config.Config{Database: db}, app.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	for _, tc := range []struct {
		store, wantErr string
	}{
		{"none", "no blobs to sweep"},
		{"db", "only the server sweeps them"},
	} {
		var out, errOut bytes.Buffer
		if code := run([]string{"blobs", "sweep", "--database", db, "--blob-store", tc.store}, nil, nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.wantErr) {
			t.Fatalf("--blob-store %s: exit %d, stderr %q", tc.store, code, errOut.String())
		}
	}
}
