package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
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

func TestBlobsSweepCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testBlobsSweep(t, tc.database(t)) })
	}
}

// testBlobsSweep: an old orphan in the database store goes, an old blob a
// row references and a young orphan stay.
func testBlobsSweep(t *testing.T, database string) {
	ctx := context.Background()
	cfg := config.Config{Database: database, Blobs: config.DefaultBlobs()}
	st, err := wiring.OpenStorage(ctx, cfg, platform.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	sch := ssptest.Schema(t)
	if err := st.EnsureSchema(ctx, sch, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TouchPartition(ctx, "p", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	store, err := wiring.OpenBlobStore(ctx, cfg, st, platform.NewClock(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour).UnixMilli()
	put := func(body string, at int64) string {
		b := []byte(body)
		u := ports.BlobUpload{Partition: "p", BlobID: contentaddr.Of(b), ByteLength: int64(len(b)), MaxBytes: 1 << 20, CreatedAtMs: at}
		if _, _, err := store.Put(ctx, u, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		return u.BlobID
	}
	orphan, kept, young := put("old orphan", old), put("old, referenced", old), put("young orphan", time.Now().UnixMilli())
	if err := st.Push(ctx, "p", ports.PushOptions{WriterVersion: sch.Version}, func(tx ports.PushTx) error {
		return tx.SetBlobRefs(ctx, "tasks", "t1", []string{kept})
	}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"blobs", "sweep", "--database", database}, nil, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), `partition "p": deleted 1 of 1 orphan blobs`) {
		t.Fatalf("stdout %q", out.String())
	}
	st, err = wiring.OpenStorage(ctx, cfg, platform.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	store, err = wiring.OpenBlobStore(ctx, cfg, st, platform.NewClock(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{orphan: false, kept: true, young: true} {
		if _, ok, err := store.Stat(ctx, "p", id); err != nil || ok != want {
			t.Fatalf("blob %s stored %v %v, want %v", id, ok, err, want)
		}
	}
}

func TestBlobsSweepWithoutAStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "syncd.db")
	st, err := wiring.OpenStorage(context.Background(), config.Config{Database: db}, platform.NewClock())
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"blobs", "sweep", "--database", db, "--blob-store", "none"}, nil, nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no blobs to sweep") {
		t.Fatalf("--blob-store none: exit %d, stderr %q", code, errOut.String())
	}
}
