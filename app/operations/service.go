package operations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/domain/limits"
	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/push"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Store is what the use case reads outside the query itself.
type Store interface {
	TouchPartition(ctx context.Context, partition string, nowMs int64) (string, error)
	ClientBinding(ctx context.Context, partition, clientID string) (actorID string, ok bool, err error)
	ReadServeGate(ctx context.Context, partition string, running int32) (checkpoint.ServeGate, error)
}

// Options configure a Service.
type Options struct {
	Store Store
	// Querier runs the queries; nil answers every query
	// operation.storage_unsupported.
	Querier  ports.AuthoritativeQuerier
	Resolver ports.ScopeResolver
	Schema   *schema.Schema
	Registry *Registry
	// Pusher commits commands; nil answers every command
	// operation.storage_unsupported.
	Pusher CommandPusher
	// Declarations are the checkpoints this process declared: the serve
	// gate lets a declared pending checkpoint pass (SPEC C.5).
	Declarations []checkpoint.Declaration
	// Limits bound the request's ids (MaxIDBytes each: the client id, the
	// operation id and a command's request id), so the command identity
	// built from them fits every index that keys on it.
	Limits limits.Limits
	Now    func() time.Time
	Log    *zap.Logger
}

// Service runs registered operations.
type Service struct {
	o      Options
	codecs map[string]*rowcodec.Codec
}

// New validates opts and builds the service.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Resolver == nil || o.Schema == nil || o.Now == nil {
		return nil, errors.New("operations: Options.Store, Resolver, Schema and Now are required")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	s := &Service{o: o, codecs: map[string]*rowcodec.Codec{}}
	for _, t := range o.Schema.Tables {
		s.codecs[t.Name] = rowcodec.New(t)
	}
	return s, nil
}

// Handle answers one POST <mount>/operations body for an authenticated
// caller. The answer is always an encoded response (REMOTE.md §5): the
// success shape, or kind "error" with the failure's catalog code.
func (s *Service) Handle(ctx context.Context, id ports.Identity, body []byte) (resp []byte, code syncerr.Code) {
	out, err := s.handle(ctx, id, body)
	if err != nil {
		pub := syncerr.Public(err)
		if pub.Code == syncerr.InternalError || pub.Entry().Category == syncerr.CategoryInternal {
			s.o.Log.Warn("remote operation failed", zap.String("partition", id.Partition),
				zap.String("actor_id", id.ActorID), zap.String("request_id", ports.RequestID(ctx)), zap.Error(err))
		}
		return opdomain.EncodeError(err), pub.Code
	}
	return out, ""
}

func (s *Service) handle(ctx context.Context, id ports.Identity, body []byte) ([]byte, error) {
	// 1. Decode the envelope (REMOTE.md §4, §5).
	req, err := opdomain.DecodeRequest(body)
	if err != nil {
		return nil, err
	}
	lim := s.o.Limits.WithDefaults()
	if len(req.ClientID) > lim.MaxIDBytes {
		return nil, syncerr.Newf(syncerr.InvalidClientID, "client id of %d bytes is longer than %d", len(req.ClientID), lim.MaxIDBytes)
	}
	if len(req.OperationID) > lim.MaxIDBytes || len(req.RequestID) > lim.MaxIDBytes {
		return nil, syncerr.Newf(syncerr.OperationInvalid, "operation or request id longer than %d bytes", lim.MaxIDBytes)
	}
	// 2. The partition is registered on first use, as /sync does.
	if _, err := s.o.Store.TouchPartition(ctx, id.Partition, s.o.Now().UnixMilli()); err != nil {
		return nil, fmt.Errorf("touch partition: %w", err)
	}
	// 3. The client id: the reserved command namespace and another actor's
	// binding are sync.invalid_client_id (REMOTE.md §1). A query does
	// not bind the id.
	bound, ok, err := s.o.Store.ClientBinding(ctx, id.Partition, req.ClientID)
	if err != nil {
		return nil, fmt.Errorf("read client binding: %w", err)
	}
	if err := push.CheckClientID(req.ClientID, id.ActorID, bound, ok); err != nil {
		return nil, err
	}
	// 4. The operation, of the kind asked for.
	if req.Kind == opdomain.KindCommand {
		if c := s.o.Registry.command(req.OperationID); c != nil {
			return s.runCommand(ctx, id, req, c)
		}
	} else if q := s.o.Registry.query(req.OperationID); q != nil {
		res, err := s.runQuery(ctx, id, req.ClientID, req.Params, q)
		if err != nil {
			return nil, err
		}
		return opdomain.EncodeQueryResult(res)
	}
	return nil, syncerr.Newf(syncerr.OperationUnknown, "no %s operation %q", req.Kind, req.OperationID)
}

// runQuery runs a registered query for a caller (steps 5–11; the HTTP
// request and a live watch share them).
func (s *Service) runQuery(ctx context.Context, id ports.Identity, clientID string, rawParams opdomain.Value, reg *registered) (opdomain.QueryResult, error) {
	fail := func(err error) (opdomain.QueryResult, error) { return opdomain.QueryResult{}, err }
	plan, t := reg.plan, reg.plan.Table()
	// 5. Parameters, typed by their columns.
	conds, err := plan.Bind(rawParams)
	if err != nil {
		return fail(err)
	}
	params := Params{}
	for _, f := range plan.Params() {
		for i, flt := range reg.q.Spec.Filters {
			if flt.Param == f {
				params[f] = conds[i].Value
			}
		}
	}
	who := AuthContext{ActorID: id.ActorID, Partition: id.Partition, ClientID: clientID}
	// 6. Authorization (REMOTE.md §2.1).
	q := ports.AuthoritativeQuery{Table: t.Name, Where: conds, OrderBy: plan.OrderBy(),
		Limit: plan.FetchLimit(), RunningVersion: s.o.Schema.Version}
	switch reg.q.Access {
	case AccessPrivileged:
		allowed, err := reg.q.Authorize(ctx, who, params)
		if err != nil {
			return fail(syncerr.Wrap(syncerr.OperationExecFailed, err))
		}
		if !allowed {
			return fail(syncerr.Newf(syncerr.OperationForbidden, "authorize refused query %q", plan.ID()))
		}
	default:
		grant, err := s.resolve(ctx, who)
		if err != nil {
			return fail(err)
		}
		if q.ScopeFilter, err = scopeFilter(t, grant, conds); err != nil {
			return fail(err)
		}
	}
	if s.o.Querier == nil {
		return fail(syncerr.Newf(syncerr.OperationStorage, "storage runs no authoritative queries"))
	}
	// 7. The serve gate (SPEC C.7: registered queries refuse while it is
	// closed), read before the query as a pull's request entry does.
	before, err := s.o.Store.ReadServeGate(ctx, id.Partition, s.o.Schema.Version)
	if err != nil {
		return fail(fmt.Errorf("read serve gate: %w", err))
	}
	if r := checkpoint.GateRefusal(before, s.o.Schema.Version, s.o.Declarations); r != nil {
		return fail(r.Err())
	}
	// 8. The query: rows, max seq and gate from one snapshot.
	res, err := s.o.Querier.QueryAuthoritative(ctx, id.Partition, q)
	if err != nil {
		if ctx.Err() != nil {
			return fail(err)
		}
		return fail(syncerr.Wrap(syncerr.OperationQueryFailed, err))
	}
	// 9. Read-verify with the pull's rule: the gate the rows were read
	// under must be open, and its token unchanged since the request began.
	if r := checkpoint.GateRefusal(res.Gate, s.o.Schema.Version, s.o.Declarations); r != nil {
		return fail(r.Err())
	}
	if r := checkpoint.TokenChanged(before, res.Gate); r != nil {
		return fail(r.Err())
	}
	// 10. The cap: one row past it fails the whole query, never a partial
	// result (REMOTE.md §2).
	if len(res.Rows) > plan.MaxRows() {
		return fail(syncerr.Newf(syncerr.OperationResultTooLarge, "query %q has more than %d rows", plan.ID(), plan.MaxRows()))
	}
	// 11. Rows normalized to the declared column types.
	out := opdomain.QueryResult{OperationID: plan.ID(), MaxCommitSeq: res.MaxCommitSeq, Rows: make([]opdomain.Row, len(res.Rows))}
	codec := s.codecs[t.Name]
	var cells []rowcodec.Value
	plain := make([]any, len(t.Columns))
	for i, r := range res.Rows {
		if cells, err = codec.DecodeRow(r.Payload, cells); err != nil {
			return fail(syncerr.Wrap(syncerr.OperationQueryFailed, fmt.Errorf("row %q: %w", r.RowID, err)))
		}
		for k := range plain {
			plain[k] = cells[k].Plain()
		}
		if out.Rows[i], err = plan.Row(plain); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// resolve asks the host resolver for the caller's grant. An outage or a
// failure is operation.forbidden: a scoped query fails closed and needs
// live scopes (REMOTE.md §2.1); a catalog error the resolver chose passes.
func (s *Service) resolve(ctx context.Context, who AuthContext) (scopes.Allowed, error) {
	grant, err := s.o.Resolver.ResolveScopes(ctx, ports.ScopeRequest{Partition: who.Partition, ActorID: who.ActorID, ClientID: who.ClientID})
	if err == nil {
		return grant, nil
	}
	var se *syncerr.Error
	if !errors.Is(err, ports.ErrResolverOutage) && errors.As(err, &se) {
		return nil, err
	}
	return nil, syncerr.Wrap(syncerr.OperationForbidden, err).WithMessage("live scope authorization is unavailable for this query")
}

// scopeFilter is the scoped query's row restriction: per scope variable
// of the table the granted values, none when the grant holds the
// wildcard, and an empty list (no row) when it holds nothing. An
// equality filter on a scope column asks for one value: the grant must
// admit it, else the query is operation.forbidden rather than an empty
// answer the caller might take for "no such rows".
func scopeFilter(t *schema.Table, grant scopes.Allowed, conds []opdomain.Condition) (map[string][]string, error) {
	filter := map[string][]string{}
	for _, sc := range t.Scopes {
		col := scopes.Column(sc)
		for _, c := range conds {
			if c.Column != col || c.Op != opdomain.OpEq {
				continue
			}
			v, ok := scopes.RenderValue(c.Value)
			if !ok || !grant.Allows(sc.Variable, v) {
				return nil, syncerr.Newf(syncerr.OperationForbidden, "scope %q value is not granted", sc.Variable)
			}
		}
		values, held := grant[sc.Variable]
		switch {
		case !held:
			filter[sc.Variable] = []string{}
		case containsWildcard(values):
		default:
			filter[sc.Variable] = values
		}
	}
	return filter, nil
}

func containsWildcard(values []string) bool {
	for _, v := range values {
		if v == scopes.Wildcard {
			return true
		}
	}
	return false
}
