package schema_test

import (
	"encoding/json"
	"testing"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

func TestLayoutsRoundTrip(t *testing.T) {
	s, err := schema.Compile(base(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.MarshalLayouts()
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:13]) != `{"projects":[` {
		t.Fatalf("tables not in schema order: %s", b)
	}
	stored, err := schema.ParseLayouts(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckStoredLayouts(stored); err != nil {
		t.Fatalf("own layouts refused: %v", err)
	}
	if none, err := schema.ParseLayouts(nil); err != nil || len(none) != 0 {
		t.Fatalf("empty: %v %v", none, err)
	}
	if _, err := schema.ParseLayouts([]byte(`[`)); err == nil {
		t.Fatal("malformed accepted")
	}
}

func TestCheckStoredLayouts(t *testing.T) {
	s, err := schema.Compile(base(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(map[string]schema.Layout)
		want   map[string]string
	}{
		{"type changed", func(m map[string]schema.Layout) { m["tasks"][3].Type = "integer" }, map[string]string{"table": "tasks", "column": "done"}},
		{"nullability changed", func(m map[string]schema.Layout) { m["tasks"][1].Nullable = true }, map[string]string{"table": "tasks", "column": "project_id"}},
		{"renamed", func(m map[string]schema.Layout) { m["projects"][1].Name = "org" }, map[string]string{"table": "projects", "column": "org_id"}},
		{"stored has extra column", func(m map[string]schema.Layout) {
			m["projects"] = append(m["projects"], schema.LayoutColumn{Name: "extra", Type: "string"})
		}, map[string]string{"table": "projects", "column": "extra"}},
		{"stored lacks column", func(m map[string]schema.Layout) { m["tasks"] = m["tasks"][:8] }, map[string]string{"table": "tasks", "column": "doc"}},
		{"stored lacks table", func(m map[string]schema.Layout) { delete(m, "projects") }, map[string]string{"table": "projects", "column": "id"}},
		{"stored has retired table", func(m map[string]schema.Layout) { m["old"] = schema.Layout{{Name: "id", Type: "string"}} }, map[string]string{"table": "old"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := s.Layouts()
			tt.mutate(stored)
			err := s.CheckStoredLayouts(stored)
			if syncerr.CodeOf(err) != syncerr.StorageStoredLayoutMismatch {
				t.Fatalf("err = %v", err)
			}
			var got map[string]string
			_ = json.Unmarshal(err.(*syncerr.Error).Details, &got)
			if len(got) != len(tt.want) || got["table"] != tt.want["table"] || got["column"] != tt.want["column"] {
				t.Fatalf("details = %v, want %v", got, tt.want)
			}
		})
	}
}
