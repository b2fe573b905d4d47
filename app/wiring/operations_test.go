package wiring

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/operations"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// TestOperationsRegistryFromTheFileAndTheHost: --operations and the
// host's queries make one registry; a query that does not compile, an
// unreadable file or an id registered twice stops the start.
func TestOperationsRegistryFromTheFileAndTheHost(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"queries": [{"id": "tasks.all", "table": "tasks", "maxRows": 5}]}`)
	host := operations.Query{Spec: opdomain.QuerySpec{ID: "tasks.host", Table: "tasks", MaxRows: 1}}
	tests := []struct {
		name    string
		file    string
		host    []operations.Query
		want    int
		wantErr string
	}{
		{"file and host queries", good, []operations.Query{host}, 2, ""},
		{"no file", "", []operations.Query{host}, 1, ""},
		{"a missing file", filepath.Join(dir, "nope.json"), nil, 0, "operations file"},
		{"a query on an unknown table", write("bad.json", `{"queries": [{"id": "q", "table": "nope", "maxRows": 5}]}`), nil, 0, "unknown table"},
		{"an unknown field", write("typo.json", `{"queries": [{"id": "q", "table": "tasks", "maxRows": 5, "limit": 5}]}`), nil, 0, "unknown field"},
		{"an id in the file and the host", good, []operations.Query{{Spec: opdomain.QuerySpec{ID: "tasks.all", Table: "tasks", MaxRows: 1}}}, 0, "registered twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := NewOperationsRegistry(OperationsRegistryParams{Config: config.Config{Operations: tt.file}, Schema: ssptest.Schema(t), Queries: tt.host})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || reg.Len() != tt.want {
				t.Fatalf("registry of %d, %v", reg.Len(), err)
			}
		})
	}
}
