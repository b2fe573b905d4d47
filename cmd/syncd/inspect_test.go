package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2/vectortest"
)

// TestInspectRendersEveryV3Vector runs every valid v3 .bin through
// "syncd inspect" and compares the output with its .json (deep-equal and
// byte-identical), and expects exit status 1 for every invalid .bin.
func TestInspectRendersEveryV3Vector(t *testing.T) {
	dir := vectortest.Dir(t, "v3")
	for _, kind := range []string{"request", "response", "segment", "push"} {
		m, ok := vectortest.Load(t, dir, kind)
		if !ok {
			t.Fatalf("missing %s vectors", kind)
		}
		var extra []string
		if kind == "push" {
			extra = []string{"--table", "notes", "--schema", filepath.Join(m.Dir, "manifest.json")}
		}
		for _, c := range m.Cases {
			t.Run(kind+"/"+c.Name, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := runInspect(append(extra, filepath.Join(m.Dir, c.Bin)), nil, &stdout, &stderr)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr.String())
				}
				want := m.Read(t, c.JSON)
				if err := vectortest.EqualJSON(stdout.Bytes(), want); err != nil {
					t.Fatalf("%v\n%s", err, stdout.String())
				}
				if !bytes.Equal(stdout.Bytes(), want) {
					t.Errorf("output is not byte-identical to %s", c.JSON)
				}
			})
		}
		for _, c := range m.Invalid {
			t.Run(kind+"/invalid/"+c.Name, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				bin := m.Read(t, c.Bin)
				code := runInspect(append(extra, "-"), bytes.NewReader(bin), &stdout, &stderr)
				if code != 1 {
					t.Fatalf("exit %d, want 1 (stdout %q)", code, stdout.String())
				}
				if !strings.HasPrefix(stderr.String(), c.Error+": ") {
					t.Fatalf("stderr %q does not start with %s", stderr.String(), c.Error)
				}
				if stdout.Len() != 0 {
					t.Fatalf("wrote to stdout on failure")
				}
			})
		}
	}
}

func TestInspectDecodesPushPayloadAgainstSchemaIR(t *testing.T) {
	dir := vectortest.Dir(t, "v3")
	m, _ := vectortest.Load(t, dir, "push")
	type col struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Nullable bool   `json:"nullable"`
		CRDTType string `json:"crdtType,omitempty"`
	}
	cols := make([]col, len(m.Columns))
	for i, c := range m.Columns {
		cols[i] = col{Name: c.Name, Type: c.Type, Nullable: c.Nullable}
		if c.Type == "crdt" {
			cols[i].CRDTType = "yjs-doc"
		}
	}
	ir := map[string]any{
		"irVersion": 1, "schemaVersion": 1,
		"schemaVersions": []any{map[string]any{"version": 1, "migrations": []string{"0001"}}},
		"tables": []any{map[string]any{
			"name": "notes", "primaryKey": "id", "columns": cols,
			"scopes": []any{map[string]any{"pattern": "note:{id}", "variable": "id", "column": "id"}},
		}},
		"subscriptions": []any{},
	}
	data, _ := json.Marshal(ir)
	path := filepath.Join(t.TempDir(), "notes.ir.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c := m.Cases[0]
	var stdout, stderr bytes.Buffer
	if code := runInspect([]string{"--table", "notes", "--schema", path, filepath.Join(m.Dir, c.Bin)}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if err := vectortest.EqualJSON(stdout.Bytes(), m.Read(t, c.JSON)); err != nil {
		t.Fatal(err)
	}
	if code := runInspect([]string{"--table", "nope", "--schema", path, "-"}, strings.NewReader(""), &stdout, &stderr); code != 2 {
		t.Fatalf("unknown table: exit %d", code)
	}
}

func TestInspectUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"two-files":            {"a", "b"},
		"table-without-schema": {"--table", "x"},
		"missing-file":         {filepath.Join(t.TempDir(), "absent.bin")},
		"unknown-flag":         {"--nope"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runInspect(args, strings.NewReader(""), &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d", code)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := runInspect(nil, strings.NewReader("hello"), &stdout, &stderr); code != 1 || !strings.HasPrefix(stderr.String(), "sync.invalid_request: ") {
		t.Fatalf("unrecognized input: exit %d, %q", code, stderr.String())
	}
}
