// Package vectortest locates and loads the shared material tests read
// from outside the repository: the golden vectors ($SYNCD_VECTORS_DIR when
// set, else vectors/ in the shared directory) and the schema fixtures (the
// shared directory: $SYNCD_SHARED_DIR, else ../shared beside the module
// root, the directory holding go.mod, found by walking up).
//
// Missing material skips the tests that need it, loudly, unless
// SYNCD_REQUIRE_SHARED=1 (CI sets it): then it fails them, so a build
// without ../shared cannot report every package ok. A vector set with
// fewer cases than it is known to hold fails whatever the setting.
package vectortest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/canonjson"
)

// Environment variables read by this package.
const (
	EnvSharedDir  = "SYNCD_SHARED_DIR"
	EnvVectorsDir = "SYNCD_VECTORS_DIR"
	EnvRequire    = "SYNCD_REQUIRE_SHARED"
)

// minimum is every vector set's known size (valid and invalid cases) by
// generation and kind: a set that shrinks, or a kind that disappears, is
// a broken copy of the vectors, not fewer tests to run.
var minimum = map[string]map[string][2]int{
	"v3": {"request": {5, 7}, "response": {14, 1}, "segment": {2, 4}, "push": {2, 4}, "realtime": {4, 4}},
	"v2": {"request": {5, 7}, "response": {14, 1}, "segment": {2, 4}, "realtime": {4, 4}},
}

// Missing reports shared material the test needs and cannot find: it
// skips t with a loud message, or fails it under SYNCD_REQUIRE_SHARED=1.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "\n*** SHARED MATERIAL MISSING: " + fmt.Sprintf(format, args...) + " ***\n" +
		"*** Provide ../shared beside the repository, or set " + EnvSharedDir + " / " + EnvVectorsDir + ". ***"
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(msg + "\n*** " + EnvRequire + "=1: the shared material is required. ***")
	}
	t.Skip(msg)
}

// SharedDir returns the shared directory, or "" when no module root is
// found.
func SharedDir() string {
	if d := os.Getenv(EnvSharedDir); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Fixture returns the path of a file under the shared directory
// (fixtures/tasks.ir.json), reporting it Missing when it is not there.
func Fixture(t testing.TB, rel string) string {
	t.Helper()
	root := SharedDir()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if _, err := os.Stat(p); root == "" || err != nil {
		Missing(t, "fixture %s not found", p)
	}
	return p
}

// Case is one valid manifest entry.
type Case struct {
	Name   string `json:"name"`
	Bin    string `json:"bin"`
	JSON   string `json:"json"`
	Covers string `json:"covers"`
}

// Invalid is one invalid manifest entry.
type Invalid struct {
	Name   string `json:"name"`
	Bin    string `json:"bin"`
	JSON   string `json:"json"`
	Error  string `json:"error"`
	Covers string `json:"covers"`
}

// Column is a push manifest column.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// Manifest is a kind folder's manifest.json.
type Manifest struct {
	Kind       string    `json:"kind"`
	Columns    []Column  `json:"columns"`
	PrimaryKey string    `json:"primaryKey"`
	Cases      []Case    `json:"cases"`
	Invalid    []Invalid `json:"invalid"`
	Dir        string    `json:"-"`
}

// Root returns the vectors root directory, or "" when it cannot be found.
func Root() string {
	if d := os.Getenv(EnvVectorsDir); d != "" {
		return d
	}
	if d := SharedDir(); d != "" {
		return filepath.Join(d, "vectors")
	}
	return ""
}

// Dir returns the directory of one generation ("v3" or "v2"), reporting
// it Missing when it is not there.
func Dir(t testing.TB, generation string) string {
	t.Helper()
	root := Root()
	if root == "" {
		Missing(t, "golden vectors not found")
	}
	dir := filepath.Join(root, generation)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		Missing(t, "golden vectors directory %s not found", dir)
	}
	return dir
}

// Load reads a kind's manifest from a generation directory; ok is false
// when the kind does not exist in that generation. A kind the generation
// is known to hold is reported Missing when absent, and fails the test
// when it holds fewer cases than it is known to.
func Load(t testing.TB, genDir, kind string) (m *Manifest, ok bool) {
	t.Helper()
	gen := filepath.Base(genDir)
	least, known := minimum[gen][kind]
	path := filepath.Join(genDir, kind, "manifest.json")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		if known {
			Missing(t, "%s vectors of %s not found (%s)", kind, gen, path)
		}
		return nil, false
	}
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	m = &Manifest{}
	if err := json.Unmarshal(data, m); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	m.Dir = filepath.Join(genDir, kind)
	if known && (len(m.Cases) < least[0] || len(m.Invalid) < least[1]) {
		t.Fatalf("%s: %d valid and %d invalid cases, the %s %s set holds at least %d and %d: an incomplete copy of the vectors",
			path, len(m.Cases), len(m.Invalid), gen, kind, least[0], least[1])
	}
	return m, true
}

// Read reads a file relative to the manifest's directory.
func (m *Manifest) Read(t testing.TB, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(m.Dir, rel))
	if err != nil {
		t.Fatalf("read vector: %v", err)
	}
	return data
}

// Files returns every .bin file (valid and invalid) under the generation
// directories that exist, for fuzz seeding.
func Files(kinds ...string) [][]byte {
	root := Root()
	if root == "" {
		return nil
	}
	var out [][]byte
	for _, gen := range []string{"v3", "v2"} {
		for _, kind := range kinds {
			for _, pattern := range []string{"*.bin", "invalid/*.bin"} {
				matches, _ := filepath.Glob(filepath.Join(root, gen, kind, pattern))
				for _, p := range matches {
					if b, err := os.ReadFile(p); err == nil {
						out = append(out, b)
					}
				}
			}
		}
	}
	return out
}

// EqualJSON parses both documents and compares them as JSON values (key
// order ignored); it returns a description of the first difference.
func EqualJSON(got, want []byte) error {
	g, err := canonjson.Parse(got)
	if err != nil {
		return fmt.Errorf("rendering is not JSON: %v", err)
	}
	w, err := canonjson.Parse(want)
	if err != nil {
		return fmt.Errorf("expected file is not JSON: %v", err)
	}
	return diff("$", g, w)
}

func diff(path string, g, w canonjson.Value) error {
	switch wv := w.(type) {
	case *canonjson.Object:
		gv, ok := g.(*canonjson.Object)
		if !ok {
			return fmt.Errorf("%s: got %T, want object", path, g)
		}
		for _, k := range wv.Keys() {
			gx, ok := gv.Get(k)
			if !ok {
				return fmt.Errorf("%s: missing key %q", path, k)
			}
			wx, _ := wv.Get(k)
			if err := diff(path+"."+k, gx, wx); err != nil {
				return err
			}
		}
		for _, k := range gv.Keys() {
			if !wv.Has(k) {
				return fmt.Errorf("%s: unexpected key %q", path, k)
			}
		}
		return nil
	case []canonjson.Value:
		gv, ok := g.([]canonjson.Value)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: got %v, want array of %d", path, g, len(wv))
		}
		for i := range wv {
			if err := diff(fmt.Sprintf("%s[%d]", path, i), gv[i], wv[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Errorf("%s: got %#v, want %#v", path, g, w)
	}
	return nil
}
