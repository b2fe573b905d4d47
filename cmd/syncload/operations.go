package main

import (
	"context"
	"errors"
	"strconv"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// querier is a virtual client that calls registered queries: the HTTP
// client, or the socket one (its queries still go over POST /operations).
type querier interface {
	Query(ctx context.Context, operationID string, params operations.Value) (*client.QueryResult, error)
}

// seedChunk bounds the upserts of one seeding commit, well under the
// server's per-request operation cap.
const seedChunk = 100

// operationsScenario runs a registered query: each client seeds
// --rows-per-client rows into its own project, then calls --operation
// with its project as --operation-param, over and over, each answer
// checked (every seeded row, from a snapshot holding the client's last
// acknowledged commit). With --write-every N every Nth step is a push of
// --ops upserts over the same rows instead, so queries run beside writes.
func operationsScenario() *scenario {
	return &scenario{
		name: "operations",
		about: "each client seeds --rows-per-client rows of its project, then calls the registered query --operation (POST /operations) " +
			"with its project as --operation-param, every answer checked; --write-every N mixes in a push every Nth step; " +
			"the server needs --operations FILE (bench/operations.json for the tasks fixture)",
		kinds: []string{"query", "push", "seed", "pull"},
		prepare: func(_ context.Context, e *env) error {
			e.note("operation", e.o.operation)
			e.note("rowsPerQuery", e.o.rowsPerClient)
			return nil
		},
		init: func(ctx context.Context, e *env, v *vu) error {
			if err := initEpoch(ctx, e, v); err != nil {
				return err
			}
			if v.state != nil {
				return nil // seeded before a failed step: the rows are there
			}
			if err := e.seedOwn(ctx, v); err != nil {
				return err
			}
			v.state = true
			return nil
		},
		step: func(ctx context.Context, e *env, v *vu) error {
			v.n++
			if e.o.writeEvery > 0 && v.n%int64(e.o.writeEvery) == 0 {
				return e.pushRound(ctx, v, e.project(v.idx), e.o.rowsPerClient)
			}
			return e.queryRound(ctx, v)
		},
	}
}

// seedOwn upserts rows project-r0 … r(N-1) of the client's project, the
// ids pushRound cycles over, in commits of up to seedChunk upserts.
func (e *env) seedOwn(ctx context.Context, v *vu) error {
	project := e.project(v.idx)
	for from := 0; from < e.o.rowsPerClient; from += seedChunk {
		err := e.timed(ctx, "seed", func() (int, int, error) {
			n := min(seedChunk, e.o.rowsPerClient-from)
			ops := make([]ssp2.PushOperation, n)
			for j := range ops {
				id := project + "-r" + strconv.Itoa(from+j)
				op, err := v.c.Upsert(e.fx.table.Name, id, e.fx.row(id, project, int64(from+j)), -1)
				if err != nil {
					return 0, 0, err
				}
				ops[j] = op
			}
			v.c.Queue(ops...)
			res, err := v.c.Push(ctx)
			if err != nil {
				return 0, n, err
			}
			seqs, err := checkPushes(res, 1)
			if err == nil {
				v.lastSeq = seqs[0]
			}
			return 0, n, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// queryRound is one timed call of the registered query for the client's
// project; the answer must hold exactly the client's rows, read from a
// snapshot at or past its last acknowledged commit.
func (e *env) queryRound(ctx context.Context, v *vu) error {
	q, ok := v.c.(querier)
	if !ok {
		return errors.New("operations needs a client that calls queries")
	}
	value, err := operations.String(e.project(v.idx))
	if err != nil {
		return err
	}
	params, err := operations.Object(operations.Field{Key: e.o.operationParam, Value: value})
	if err != nil {
		return err
	}
	return e.timed(ctx, "query", func() (int, int, error) {
		res, err := q.Query(ctx, e.o.operation, params)
		d := v.delta()
		if err != nil {
			return int(d.ResponseBodyBytes), 0, err
		}
		switch {
		case len(res.Rows) != e.o.rowsPerClient:
			err = protoErr("loader.query_rows", "%s answered %d rows, the project holds %d", e.o.operation, len(res.Rows), e.o.rowsPerClient)
		case res.MaxCommitSeq < v.lastSeq:
			err = protoErr("loader.query_stale", "%s read at commit %d, before the client's commit %d", e.o.operation, res.MaxCommitSeq, v.lastSeq)
		}
		return int(d.ResponseBodyBytes), len(res.Rows), err
	})
}
