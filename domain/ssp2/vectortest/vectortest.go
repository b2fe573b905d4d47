// Package vectortest locates and loads the shared golden vectors for tests:
// $SYNCD_VECTORS_DIR when set, else ../shared/vectors beside the module
// root (the directory holding go.mod, found by walking up).
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
	if d := os.Getenv("SYNCD_VECTORS_DIR"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "vectors")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Dir returns the directory of one generation ("v3" or "v2"), skipping the
// test loudly when it is missing.
func Dir(t testing.TB, generation string) string {
	t.Helper()
	root := Root()
	dir := filepath.Join(root, generation)
	if root == "" {
		t.Skip("SKIPPING: golden vectors not found (set SYNCD_VECTORS_DIR or provide ../shared/vectors)")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Skipf("SKIPPING: golden vectors directory %s is missing", dir)
	}
	return dir
}

// Load reads a kind's manifest from a generation directory; ok is false
// when the kind does not exist there.
func Load(t testing.TB, genDir, kind string) (m *Manifest, ok bool) {
	t.Helper()
	path := filepath.Join(genDir, kind, "manifest.json")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
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
