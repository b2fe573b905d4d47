package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestPruneCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "syncd.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
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
	err = st.Push(ctx, "p", ports.PushOptions{WriterVersion: sch.Version}, func(tx ports.PushTx) error {
		for i := range 1200 {
			id := fmt.Sprintf("r%d", i)
			if _, err := tx.AppendCommit(ctx, ports.NewCommit{CreatedAtMs: time.Now().UnixMilli(), ActorID: "a", ClientID: "c", ClientCommitID: id,
				Changes: []commit.Change{{Table: "projects", RowID: id, Op: commit.OpDelete, Scopes: map[string]string{"owner": "o"}}}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"prune", "--database", path}, nil, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `partition "p": horizon 0 -> 200, removed 200 commits`) {
		t.Fatalf("output %q", out.String())
	}
	if code := run([]string{"prune", "--database", "sqlite:"}, nil, nil, &out, &errOut); code == 0 {
		t.Fatal("bad database accepted")
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if code := run([]string{"prune", "--database", missing}, nil, nil, &out, &errOut); code == 0 {
		t.Fatal("missing database accepted")
	}
}
