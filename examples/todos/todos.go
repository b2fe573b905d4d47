// Package todos is the demo schema a bare `syncd serve` runs with: a small
// todos app of lists (scoped by owner) and todos (scoped by list). The IR
// file beside this one is embedded in the binary.
package todos

import (
	_ "embed"
)

//go:embed todos.ir.json
var ir []byte

// Name is how logs and docs refer to the demo schema.
const Name = "examples/todos/todos.ir.json"

// IR returns a copy of the demo schema IR document.
func IR() []byte { return append([]byte(nil), ir...) }
