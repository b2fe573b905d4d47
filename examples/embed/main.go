// Command embed is a Go program that embeds syncd and supplies its own
// identity and business rules through fx:
//
//   - an Authenticator that trusts a bearer token naming the user (a
//     stand-in for the host's real session check) and a ScopeResolver that
//     grants each user their own lists;
//   - a RowValidator on todos that reads the todo's list through the
//     transaction-bound query, so it sees lists written earlier in the same
//     commit, and refuses todos on someone else's list.
//
// It serves the embedded todos demo schema from a SQLite file:
//
//	go run ./examples/embed -database /tmp/embed.db
//	curl -s http://127.0.0.1:8787/sync -H 'Authorization: Bearer alice' ...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/storage/sqlite"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func main() {
	database := flag.String("database", "embed.db", "SQLite file")
	listen := flag.String("listen", config.DefaultListen, "host:port of the sync API")
	flag.Parse()
	log, err := zap.NewDevelopment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg := Config(*listen, "127.0.0.1:0")
	os.Exit(app.Run(cfg, app.ReadBuildInfo("embed"), log, Options(*database)))
}

// Config is the server configuration of this program: the demo schema,
// with identity supplied by the host (--auth host).
func Config(listen, admin string) config.Config {
	cfg := config.Default()
	cfg.Listen, cfg.AdminListen = listen, admin
	cfg.Auth = config.AuthHost
	return cfg
}

// Options are the host's additions to the server graph.
func Options(database string) fx.Option {
	return fx.Options(
		// Storage: one SQLite file, also the schema store of the readiness phases.
		fx.Provide(func(lc fx.Lifecycle) (ports.Storage, error) {
			st, err := sqlite.Open(context.Background(), sqlite.Options{Path: database})
			if err != nil {
				return nil, err
			}
			lc.Append(fx.StopHook(st.Close))
			return st, nil
		}),
		fx.Provide(func(s ports.Storage) ports.SchemaStore { return s }),
		// Identity: replace the (empty) configured ports with the host's.
		fx.Decorate(func(ports.Authenticator) ports.Authenticator { return bearerAuth{} }),
		fx.Decorate(func(ports.ScopeResolver) ports.ScopeResolver { return ownListsResolver{} }),
		// Business rules.
		app.ProvideRowValidator(newListOwnerValidator),
	)
}

// bearerAuth maps "Authorization: Bearer <user>" to the user. A real host
// verifies its session or token here.
type bearerAuth struct{}

func (bearerAuth) Authenticate(r *http.Request) (ports.Identity, error) {
	user, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || user == "" {
		return ports.Identity{}, syncerr.New(syncerr.AuthRequired)
	}
	return ports.Identity{ActorID: user, Partition: "default"}, nil
}

// ownListsResolver lets a user write lists they own and todos of any list;
// the validator below narrows todos to the user's own lists.
type ownListsResolver struct{}

func (ownListsResolver) ResolveScopes(_ context.Context, req ports.ScopeRequest) (scopes.Allowed, error) {
	return scopes.Allowed{"owner_id": {req.ActorID}, "list_id": {scopes.Wildcard}}, nil
}

// listOwnerValidator refuses a todo whose list is missing or owned by
// someone else. It reads the list through v.Tx, the push transaction's own
// connection, so a list created earlier in the same commit counts.
type listOwnerValidator struct{}

func newListOwnerValidator() listOwnerValidator { return listOwnerValidator{} }

func (listOwnerValidator) Table() string { return "todos" }

func (listOwnerValidator) ValidateRow(ctx context.Context, v ports.RowValidation) error {
	if v.Row == nil { // deletes need no check
		return nil
	}
	listID, _ := v.Row["list_id"].(string)
	lists, err := v.Tx.Query(ctx, ports.RowLookup{Table: "lists", Equals: map[string]any{"id": listID}, Limit: 1})
	if err != nil {
		return err
	}
	if len(lists) == 1 && lists[0].Values["owner_id"] == v.ActorID {
		return nil
	}
	rej, err := ports.NewValidationRejection("todos.list_not_owned", "the list does not exist or belongs to someone else",
		&ssp2.RejectionDetails{FieldPaths: []string{"list_id"}, Reason: "list_not_owned"})
	if err != nil {
		return errors.Join(errors.New("building the rejection"), err)
	}
	return rej
}
