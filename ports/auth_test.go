package ports_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/ports"
)

func TestIdentityContext(t *testing.T) {
	if _, ok := ports.IdentityFrom(context.Background()); ok {
		t.Fatal("identity found on an empty context")
	}
	id := ports.Identity{ActorID: "a", Partition: "p", Scopes: scopes.Allowed{"w": {"*"}}}
	got, ok := ports.IdentityFrom(ports.WithIdentity(context.Background(), id))
	if !ok || !reflect.DeepEqual(got, id) {
		t.Fatalf("IdentityFrom = %+v, %v", got, ok)
	}
}
