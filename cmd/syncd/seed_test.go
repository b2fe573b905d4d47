package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSeedCommand(t *testing.T) {
	ir := filepath.Join(t.TempDir(), "tasks.ir.json")
	if err := os.WriteFile(ir, []byte(`{"irVersion":1,"schemaVersion":1,"schemaVersions":[{"version":1,"migrations":["0001"]}],
"tables":[{"name":"tasks","primaryKey":"id","columns":[
 {"name":"id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},
 {"name":"done","type":"boolean","nullable":false}],
 "scopes":[{"pattern":"project:{project_id}","variable":"project_id","column":"project_id"}],"extensions":{}}],
"subscriptions":[],"extensions":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "seed.db")
	for _, portable := range []string{"--portable=false", "--portable"} {
		var out, errb bytes.Buffer
		code := run([]string{"seed", "--schema", ir, "--database", db, "--rows", "250", "--batch", "100", "--value", "v" + portable, portable}, nil, nil, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "seeded 250 rows of tasks") || !strings.Contains(out.String(), "3 commits") {
			t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"seed", "--schema", ir, "--database", db, "--rows", "1", "--value", "v--portable"}, nil, nil, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "exist already") {
		t.Fatalf("reseed: exit %d: %s", code, errb.String())
	}
	if code := run([]string{"seed", "--bogus"}, nil, nil, &out, &errb); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
}

// Bare, seed fills what a bare serve serves: the demo's lists.
func TestSeedBareFillsTheDemo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	var out, errb bytes.Buffer
	if code := run([]string{"seed", "--database", db, "--rows", "50"}, nil, nil, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "seeded 50 rows of lists (storm)") {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
}
