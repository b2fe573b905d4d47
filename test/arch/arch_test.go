package arch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/test/arch"
)

// TestFixtureGraphFails proves the checker catches each kind of violation:
// the fixture graph breaks every rule once or more, next to allowed imports.
func TestFixtureGraphFails(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "violations.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	pkgs, err := arch.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	got := arch.Check("example.com/m", pkgs)
	want := []arch.Violation{
		{Package: "example.com/m/adapters/httpapi", Import: "go.uber.org/fx/fxtest", Rule: arch.RuleFx},
		{Package: "example.com/m/adapters/storage", Import: "example.com/m/app", Rule: arch.RuleAdaptersApp},
		{Package: "example.com/m/adapters/storage", Import: "go.uber.org/fx", Rule: arch.RuleFx},
		{Package: "example.com/m/app", Rule: arch.RuleAppRoot, File: "module.go"},
		{Package: "example.com/m/app", Rule: arch.RuleAppRoot, File: "readiness.go"},
		{Package: "example.com/m/app", Import: "example.com/m/cmd/syncd", Rule: arch.RuleCmd},
		{Package: "example.com/m/app/blobs", Import: "example.com/m/adapters/httpapi", Rule: arch.RuleAppAdapters},
		{Package: "example.com/m/app/realtime", Import: "go.uber.org/fx/fxtest", Rule: arch.RuleFx},
		{Package: "example.com/m/domain/a", Import: "example.com/m/ports", Rule: arch.RuleDomain},
		{Package: "example.com/m/domain/a", Import: "github.com/stretchr/testify/require", Rule: arch.RuleDomain},
		{Package: "example.com/m/domain/a", Import: "github.com/uptrace/bun", Rule: arch.RuleDomain},
		{Package: "example.com/m/domain/b", Import: "go.uber.org/zap", Rule: arch.RuleDomain},
		{Package: "example.com/m/examples/lib", Import: "go.uber.org/fx", Rule: arch.RuleFx},
		{Package: "example.com/m/ports", Import: "example.com/m/adapters/storage", Rule: arch.RulePorts},
		{Package: "example.com/m/test/contract", Import: "go.uber.org/fx", Rule: arch.RuleFx},
		{Package: "example.com/m/test/harness", Import: "go.uber.org/dig", Rule: arch.RuleFx},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("violations:")
		for _, v := range got {
			t.Errorf("  got  %s", v)
		}
		for _, v := range want {
			t.Errorf("  want %s", v)
		}
	}
}

func TestRulesOneByOne(t *testing.T) {
	tests := []struct {
		name string
		pkg  arch.Package
		bad  bool
	}{
		{"domain std", arch.Package{ImportPath: "m/domain/x", Imports: []string{"encoding/json", "m/domain/y"}}, false},
		{"domain third party", arch.Package{ImportPath: "m/domain/x", Imports: []string{"github.com/a/b"}}, true},
		{"domain imports examples", arch.Package{ImportPath: "m/domain/x", Imports: []string{"m/examples/todos"}}, true},
		{"domain test helper", arch.Package{ImportPath: "m/domain/x", TestImports: []string{"m/test/testenv"}}, false},
		{"domain non-test imports test helper", arch.Package{ImportPath: "m/domain/x", Imports: []string{"m/test/testenv"}}, true},
		{"ports imports domain", arch.Package{ImportPath: "m/ports", Imports: []string{"m/domain/schema", "net/http"}}, false},
		{"ports imports zap", arch.Package{ImportPath: "m/ports", Imports: []string{"go.uber.org/zap"}}, true},
		{"adapter imports adapter", arch.Package{ImportPath: "m/adapters/a", Imports: []string{"m/adapters/b", "m/ports"}}, false},
		{"adapter imports dig", arch.Package{ImportPath: "m/adapters/a", Imports: []string{"go.uber.org/dig"}}, true},
		{"app imports fx", arch.Package{ImportPath: "m/app", Imports: []string{"go.uber.org/fx", "m/adapters/a"}}, false},
		{"use case imports adapter", arch.Package{ImportPath: "m/app/blobs", Imports: []string{"m/adapters/httpapi"}}, true},
		{"use case test files import adapters", arch.Package{ImportPath: "m/app/blobs", TestImports: []string{"m/adapters/storage/memory"}, XTestImports: []string{"m/adapters/clock"}}, false},
		{"use case imports ports", arch.Package{ImportPath: "m/app/blobs", Imports: []string{"m/ports", "m/domain/syncerr"}}, false},
		{"app root imports adapter", arch.Package{ImportPath: "m/app", Imports: []string{"m/adapters/storage/sqlite"}}, false},
		{"testcontrol assembles adapters", arch.Package{ImportPath: "m/app/testcontrol", Imports: []string{"m/adapters/storage/sqlite"}}, false},
		{"wiring assembles adapters", arch.Package{ImportPath: "m/app/wiring", Imports: []string{"m/adapters/httpapi"}}, false},
		{"platform assembles adapters", arch.Package{ImportPath: "m/app/platform", Imports: []string{"m/adapters/clock"}}, false},
		{"root-like name", arch.Package{ImportPath: "m/app/platformx", Imports: []string{"m/adapters/clock"}}, true},
		{"below a root", arch.Package{ImportPath: "m/app/testcontrol/sub", Imports: []string{"m/adapters/clock"}}, true},
		{"cmd imports fx", arch.Package{ImportPath: "m/cmd/syncd", Imports: []string{"go.uber.org/fx/fxevent"}}, false},
		{"wiring imports fx", arch.Package{ImportPath: "m/app/wiring", Imports: []string{"go.uber.org/fx"}}, false},
		{"platform imports fx", arch.Package{ImportPath: "m/app/platform", Imports: []string{"go.uber.org/dig"}}, false},
		{"use case imports fx", arch.Package{ImportPath: "m/app/realtime", Imports: []string{"go.uber.org/fx"}}, true},
		{"use case test files import fxtest", arch.Package{ImportPath: "m/app/realtime", XTestImports: []string{"go.uber.org/fx/fxtest"}}, true},
		{"testcontrol imports fx", arch.Package{ImportPath: "m/app/testcontrol", Imports: []string{"go.uber.org/fx"}}, true},
		{"test imports cmd", arch.Package{ImportPath: "m/test/e2e", XTestImports: []string{"m/cmd/syncd"}}, true},
		{"fx-like name", arch.Package{ImportPath: "m/domain/x", Imports: []string{"go.uber.org/fxx"}}, true},
		{"example program imports fx", arch.Package{ImportPath: "m/examples/embed", Name: "main", Imports: []string{"go.uber.org/fx"}}, false},
		{"example library imports fx", arch.Package{ImportPath: "m/examples/todos", Name: "todos", Imports: []string{"go.uber.org/fx"}}, true},
		{"e2e test files import fx", arch.Package{ImportPath: "m/test/e2e", Name: "e2e", XTestImports: []string{"go.uber.org/fx/fxtest"}}, false},
		{"test helper imports fx", arch.Package{ImportPath: "m/test/pgtest", Name: "pgtest", Imports: []string{"go.uber.org/fx"}}, true},
		{"app root holds the embedding face", arch.Package{ImportPath: "m/app", GoFiles: []string{"app.go", "hooks.go"}}, false},
		{"app root holds plumbing", arch.Package{ImportPath: "m/app", GoFiles: []string{"app.go", "hooks.go", "metrics.go"}}, true},
		{"wiring holds many files", arch.Package{ImportPath: "m/app/wiring", GoFiles: []string{"core.go", "blobs.go"}}, false},
		{"adapter test files import fxtest", arch.Package{ImportPath: "m/adapters/a", Name: "a", TestImports: []string{"go.uber.org/fx/fxtest"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := arch.Check("m", []arch.Package{tt.pkg})
			if (len(got) > 0) != tt.bad {
				t.Fatalf("violations %v, want bad=%v", got, tt.bad)
			}
		})
	}
}

// TestRepositoryLayering runs the checker on this repository.
func TestRepositoryLayering(t *testing.T) {
	// go test puts its own GOROOT/bin first on PATH.
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	module, pkgs, err := arch.Load(goCmd, filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if module != "github.com/syncd-dev/syncd" || len(pkgs) < 5 {
		t.Fatalf("module %q with %d packages", module, len(pkgs))
	}
	for _, v := range arch.Check(module, pkgs) {
		t.Errorf("layering violation: %s", v)
	}
}
