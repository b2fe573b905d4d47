// Package arch checks the layering rules of ARCHITECTURE.md against an
// import graph:
//
//   - domain/ imports only the standard library and other domain/ packages;
//   - ports/ imports only the standard library, domain/ and ports/;
//   - adapters/ and app/ import ports/ and domain/ (and libraries), never
//     cmd/; adapters/ never import app/;
//   - the use cases under app/ never import adapters/: only the
//     composition roots do (the app package itself, app/testcontrol, and
//     app/wiring and app/platform); test files of a use case may, since a
//     unit test assembles what it tests;
//   - only the assembly imports fx (go.uber.org/fx, go.uber.org/dig): the
//     app package itself, app/wiring and app/platform, cmd/, programs
//     (main packages) under examples/ that embed the server, and test
//     files under test/ that assemble the whole server graph; a use case
//     under app/ never does, not even in its tests;
//   - nothing imports cmd/;
//   - the app package itself holds only the embedding face: app.go
//     (Options, Run) and hooks.go (what a host plugs in); the graph is in
//     app/wiring and the plumbing in app/platform.
//
// Test files of domain/ and ports/ may also import the test/ helpers.
package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
)

// Package is one node of the import graph, as `go list -json` prints it.
type Package struct {
	ImportPath   string
	Name         string   `json:",omitempty"`
	Imports      []string `json:",omitempty"`
	TestImports  []string `json:",omitempty"`
	XTestImports []string `json:",omitempty"`
	// GoFiles are the package's non-test source files (names only).
	GoFiles []string `json:",omitempty"`
}

// Violation is one import, or one source file, that breaks a rule.
type Violation struct {
	Package string `json:"package"`
	Import  string `json:"import,omitempty"`
	Rule    string `json:"rule"`
	// File is set instead of Import when a file is out of place.
	File string `json:"file,omitempty"`
}

func (v Violation) String() string {
	if v.File != "" {
		return v.Package + " holds " + v.File + ": " + v.Rule
	}
	return v.Package + " imports " + v.Import + ": " + v.Rule
}

// Rule texts.
const (
	RuleDomain      = "domain/ imports only the standard library and domain/"
	RulePorts       = "ports/ imports only the standard library, domain/ and ports/"
	RuleAdaptersApp = "adapters/ never import app/"
	RuleAppAdapters = "app/ use cases never import adapters/; only the composition roots do"
	RuleFx          = "only the assembly imports fx: app, app/wiring, app/platform, cmd/, example programs, test files under test/"
	RuleCmd         = "nothing imports cmd/"
	RuleAppRoot     = "the app package holds only the embedding face (app.go, hooks.go); the graph goes in app/wiring, plumbing in app/platform"
)

// appRootFiles are the only source files of the app package.
var appRootFiles = map[string]bool{"app.go": true, "hooks.go": true}

// Check returns every violation in pkgs, a graph of module's packages,
// sorted by package then import.
func Check(module string, pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		layer := layerOf(module, p.ImportPath)
		if layer == "" {
			continue // not a package of this module
		}
		check := func(imp string, test bool) {
			if r := rule(module, p.ImportPath, layer, p.Name == "main", imp, test); r != "" {
				out = append(out, Violation{Package: p.ImportPath, Import: imp, Rule: r})
			}
		}
		for _, imp := range p.Imports {
			check(imp, false)
		}
		if p.ImportPath == module+"/app" {
			for _, f := range p.GoFiles {
				if !appRootFiles[f] {
					out = append(out, Violation{Package: p.ImportPath, File: f, Rule: RuleAppRoot})
				}
			}
		}
		for _, imp := range append(append([]string(nil), p.TestImports...), p.XTestImports...) {
			if imp == p.ImportPath {
				continue // an external test importing its own package
			}
			check(imp, true)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Package != out[j].Package {
			return out[i].Package < out[j].Package
		}
		if out[i].Import != out[j].Import {
			return out[i].Import < out[j].Import
		}
		return out[i].File < out[j].File
	})
	return dedupe(out)
}

func dedupe(vs []Violation) []Violation {
	out := vs[:0]
	for i, v := range vs {
		if i > 0 && v == vs[i-1] {
			continue
		}
		out = append(out, v)
	}
	return out
}

// layerOf returns the top-level directory of a module package ("domain",
// "ports", "adapters", "app", "cmd", "test", ...), or "" outside module.
func layerOf(module, path string) string {
	rest, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		if path == module {
			return "."
		}
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func isFx(path string) bool {
	for _, p := range []string{"go.uber.org/fx", "go.uber.org/dig"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// fxAllowed reports whether a package may import fx: the assembly (the
// app package, app/wiring, app/platform), cmd/, programs under examples/,
// and test files under test/.
func fxAllowed(module, path, layer string, isMain, test bool) bool {
	switch layer {
	case "app":
		switch strings.TrimPrefix(path, module) {
		case "/app", "/app/wiring", "/app/platform":
			return true
		}
		return false
	case "cmd":
		return true
	case "examples":
		return isMain
	case "test":
		return test
	}
	return false
}

// appRoot reports whether path, a package under app/, is a composition
// root: it assembles adapters into the server or a test instance, so it
// may import them. Every other package under app/ is a use case and sees
// the outside only through ports/.
func appRoot(module, path string) bool {
	switch strings.TrimPrefix(path, module) {
	case "/app", "/app/testcontrol", "/app/wiring", "/app/platform":
		return true
	}
	return false
}

func rule(module, path, layer string, isMain bool, imp string, test bool) string {
	target := layerOf(module, imp)
	switch {
	case target == "cmd":
		return RuleCmd
	case isFx(imp) && !fxAllowed(module, path, layer, isMain, test):
		return RuleFx
	}
	allowed := func(layers ...string) bool {
		if target == "" && isStd(imp) {
			return true
		}
		for _, l := range layers {
			if target == l {
				return true
			}
		}
		return test && target == "test"
	}
	switch layer {
	case "domain":
		if !allowed("domain") {
			return RuleDomain
		}
	case "ports":
		if !allowed("domain", "ports") {
			return RulePorts
		}
	case "adapters":
		if target == "app" {
			return RuleAdaptersApp
		}
	case "app":
		if target == "adapters" && !test && !appRoot(module, path) {
			return RuleAppAdapters
		}
	}
	return ""
}

// Load lists the packages of the module rooted at dir with `go list`.
// Packages that fail to compile are still listed (-e).
func Load(goCmd, dir string) (module string, pkgs []Package, err error) {
	modOut, err := run(goCmd, dir, "list", "-m")
	if err != nil {
		return "", nil, err
	}
	module = strings.TrimSpace(string(modOut))
	out, err := run(goCmd, dir, "list", "-e", "-json=ImportPath,Name,Imports,TestImports,XTestImports,GoFiles", "./...")
	if err != nil {
		return "", nil, err
	}
	pkgs, err = Decode(bytes.NewReader(out))
	return module, pkgs, err
}

// Decode reads a stream of `go list -json` objects.
func Decode(r io.Reader) ([]Package, error) {
	dec := json.NewDecoder(r)
	var pkgs []Package
	for {
		var p Package
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

func run(goCmd, dir string, args ...string) ([]byte, error) {
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
