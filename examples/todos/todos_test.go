package todos_test

import (
	"testing"

	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/examples/todos"
)

func TestDemoSchemaCompiles(t *testing.T) {
	s, err := schema.Load(todos.IR())
	if err != nil {
		t.Fatal(err)
	}
	if s.Table("todos") == nil || s.Table("lists") == nil || s.Version != 1 {
		t.Fatalf("unexpected demo schema: %+v", s)
	}
}
