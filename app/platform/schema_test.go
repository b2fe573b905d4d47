package platform

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/examples/todos"
)

// todosAt is the demo IR at version v; nullable columns appended to its
// todos table as name:nullable pairs ("priority:true").
func todosAt(t *testing.T, v int32, appended ...string) []byte {
	t.Helper()
	ir, err := schema.ParseIR(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	ir.SchemaVersion, ir.SchemaVersions = v, []schema.IRSchemaVersion{{Version: v}}
	for _, a := range appended {
		name, nullable, _ := strings.Cut(a, ":")
		n := nullable == "true"
		for i := range ir.Tables {
			if ir.Tables[i].Name == "todos" {
				ir.Tables[i].Columns = append(ir.Tables[i].Columns, schema.IRColumn{Name: name, Type: "integer", Nullable: &n})
			}
		}
	}
	b, err := json.Marshal(ir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadSchemaWindow(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body string
		want       []string
		err        string
	}{
		{name: "lines, relative to the file", body: "# current first\nv3.json\n\n  sub/v2.json  \n/abs/v1.json\n",
			want: []string{filepath.Join(dir, "v3.json"), filepath.Join(dir, "sub/v2.json"), "/abs/v1.json"}},
		{name: "a JSON array", body: ` ["v3.json", "v2.json"] `, want: []string{filepath.Join(dir, "v3.json"), filepath.Join(dir, "v2.json")}},
		{name: "nothing listed", body: "# none\n", err: "lists no IR file"},
		{name: "malformed JSON", body: `["v3.json",`, err: "want a JSON array"},
		{name: "an empty entry", body: `["v3.json", ""]`, err: "entry 2 is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := writeFile(t, dir, "window", []byte(tt.body))
			got, err := ReadSchemaWindow(f)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	}
	if _, err := ReadSchemaWindow(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing window file read")
	}
}

func TestCompileWindow(t *testing.T) {
	dir := t.TempDir()
	v3 := writeFile(t, dir, "v3.json", todosAt(t, 3, "priority:true", "rank:true"))
	v2 := writeFile(t, dir, "v2.json", todosAt(t, 2, "priority:true"))
	v1 := writeFile(t, dir, "v1.json", todosAt(t, 1))
	notNull := writeFile(t, dir, "v3-not-null.json", todosAt(t, 3, "priority:true", "rank:false"))
	window := writeFile(t, dir, "window.txt", []byte("v3.json\nv2.json\nv1.json\n"))

	t.Run("repeated --schema", func(t *testing.T) {
		r := NewReadiness(NewClock())
		srcs, err := SchemaSources(config.Config{Schema: v3, SchemaWindow: config.SchemaWindow{Older: []string{v2, v1}}})
		if err != nil {
			t.Fatal(err)
		}
		w, err := CompileWindow(srcs, r)
		if err != nil || !slices.Equal(w.Versions(), []int32{3, 2, 1}) || r.Window() != w || r.Schema() != w.Current() {
			t.Fatalf("window %v, %v", w, err)
		}
		if st := r.Status(); !slices.Equal(st.SchemaWindow, []int32{3, 2, 1}) || st.SchemaVersion != 3 {
			t.Fatalf("status %+v", st)
		}
	})
	t.Run("a window file", func(t *testing.T) {
		cfg := config.Config{SchemaWindow: config.SchemaWindow{File: window}}
		srcs, err := SchemaSources(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := CompileWindow(srcs, NewReadiness(NewClock()))
		if err != nil || !slices.Equal(w.Versions(), []int32{3, 2, 1}) {
			t.Fatalf("window %v, %v", w, err)
		}
		// The current schema alone (syncd checkpoint, syncd seed).
		cur, err := CompileSchema(NewSchemaSource(cfg), NewReadiness(NewClock()))
		if err != nil || cur.Version != 3 {
			t.Fatalf("current %v, %v", cur, err)
		}
	})
	t.Run("one schema", func(t *testing.T) {
		r := NewReadiness(NewClock())
		srcs, _ := SchemaSources(config.Config{Schema: v2})
		w, err := CompileWindow(srcs, r)
		if err != nil || w.Len() != 1 || r.Status().SchemaWindow != nil {
			t.Fatalf("window %v, %v, status %+v", w, err, r.Status())
		}
	})
	t.Run("an incompatible older version", func(t *testing.T) {
		r := NewReadiness(NewClock())
		srcs, _ := SchemaSources(config.Config{Schema: notNull, SchemaWindow: config.SchemaWindow{Older: []string{v2}}})
		w, err := CompileWindow(srcs, r)
		var we *schema.WindowError
		if w != nil || !errors.As(err, &we) || we.Table != "todos" || we.Column != "rank" || syncerr.CodeOf(err) != syncerr.SchemaInvalid ||
			!strings.Contains(err.Error(), v2) || !strings.Contains(err.Error(), `column "rank"`) {
			t.Fatalf("got %v, %v", w, err)
		}
		if st := r.Status(); st.Phase != PhaseSchemaCompile || st.Error == nil || r.Window() != nil {
			t.Fatalf("status %+v", st)
		}
	})
	t.Run("an unreadable older version", func(t *testing.T) {
		srcs, _ := SchemaSources(config.Config{Schema: v3, SchemaWindow: config.SchemaWindow{Older: []string{filepath.Join(dir, "nope.json")}}})
		if _, err := CompileWindow(srcs, NewReadiness(NewClock())); err == nil || !strings.Contains(err.Error(), "nope.json") {
			t.Fatalf("got %v", err)
		}
	})
}
