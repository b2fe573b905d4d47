// Package operations is the remote operation use case (REMOTE.md): POST
// <mount>/operations runs registered, server-authoritative queries and
// commands by name. The host registers them, in Go (Query, Command) or,
// for the stock binary, queries in a JSON file of declarative queries
// against the synced tables (LoadQueryFile); no request text ever
// becomes SQL, and commands commit through the ordinary push pipeline.
package operations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/schema"
)

// Access is how a registered query is authorized (REMOTE.md §2.1).
type Access uint8

// Query access modes.
const (
	// AccessScoped (the default) answers only rows the caller could pull:
	// the caller's resolved scopes restrict the rows, and an equality
	// filter on a scope column whose value the grant does not admit is
	// operation.forbidden.
	AccessScoped Access = iota
	// AccessPrivileged asks the query's Authorize callback; the rows are
	// not restricted by scopes (still within the caller's partition).
	AccessPrivileged
)

// AuthContext is who calls an operation.
type AuthContext struct {
	ActorID   string
	Partition string
	ClientID  string
}

// Params are a request's bound parameters by name, typed by the column
// each is compared with: string, int64, float64 or bool.
type Params map[string]any

// Query is a registered query.
type Query struct {
	Spec   opdomain.QuerySpec
	Access Access
	// Authorize decides a privileged query (required for one, unused for a
	// scoped one): false is operation.forbidden, an error
	// operation.execution_failed.
	Authorize func(ctx context.Context, who AuthContext, p Params) (bool, error)
	// Name is a second handle for in-process callers (QueryInTx): a
	// generated descriptor's name, whose operation id carries the hash of
	// its document. Requests use the id only. Optional.
	Name string
}

// registered is a query compiled against the running schema.
type registered struct {
	plan *opdomain.Plan
	q    Query
}

// Registry holds the registered operations of one schema version.
type Registry struct {
	queries  map[string]*registered
	commands map[string]*registeredCommand
	names    map[string]*registered // Query.Name
}

// NewRegistry compiles every query against s and registers the commands.
// Ids must be non-empty and distinct across both kinds; a privileged
// query needs Authorize, a command Authorize and Run. A query's Name must
// be distinct from every id and other name.
func NewRegistry(s *schema.Schema, queries []Query, commands []Command) (*Registry, error) {
	r := &Registry{queries: map[string]*registered{}, commands: map[string]*registeredCommand{}, names: map[string]*registered{}}
	var errs []error
	for _, c := range commands {
		switch {
		case c.ID == "":
			errs = append(errs, errors.New("remote command: empty id"))
		case r.commands[c.ID] != nil:
			errs = append(errs, fmt.Errorf("remote command %q: registered twice", c.ID))
		case c.Authorize == nil || c.Run == nil:
			errs = append(errs, fmt.Errorf("remote command %q: Authorize and Run are required", c.ID))
		default:
			r.commands[c.ID] = &registeredCommand{c: c}
		}
	}
	for _, q := range queries {
		p, err := opdomain.Compile(s, q.Spec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := r.queries[p.ID()]; dup || r.commands[p.ID()] != nil {
			errs = append(errs, fmt.Errorf("remote query %q: registered twice", p.ID()))
			continue
		}
		if q.Access == AccessPrivileged && q.Authorize == nil {
			errs = append(errs, fmt.Errorf("remote query %q: a privileged query needs Authorize", p.ID()))
			continue
		}
		if q.Access != AccessScoped && q.Access != AccessPrivileged {
			errs = append(errs, fmt.Errorf("remote query %q: unknown access %d", p.ID(), q.Access))
			continue
		}
		r.queries[p.ID()] = &registered{plan: p, q: q}
		if q.Name != "" {
			if r.names[q.Name] != nil {
				errs = append(errs, fmt.Errorf("remote query %q: name %q registered twice", p.ID(), q.Name))
				continue
			}
			r.names[q.Name] = r.queries[p.ID()]
		}
	}
	for n := range r.names {
		if r.queries[n] != nil || r.commands[n] != nil {
			errs = append(errs, fmt.Errorf("remote query name %q is another operation's id", n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// Len returns the number of registered operations.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.queries) + len(r.commands)
}

// Descriptors returns "name=id" for every query registered under a
// Name, sorted: the ids a reference client sends for its descriptors.
func (r *Registry) Descriptors() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.names))
	for n, reg := range r.names {
		out = append(out, n+"="+reg.plan.ID())
	}
	slices.Sort(out)
	return out
}

func (r *Registry) query(id string) *registered {
	if r == nil {
		return nil
	}
	return r.queries[id]
}

func (r *Registry) command(id string) *registeredCommand {
	if r == nil {
		return nil
	}
	return r.commands[id]
}

// QueryFile is the declarative form the stock binary reads (--operations):
//
//	{"queries": [{"id": "tasks.open", "table": "tasks",
//	  "columns": ["id", "title"],
//	  "filters": [{"column": "project_id", "op": "eq", "param": "projectId"}],
//	  "orderBy": [{"column": "title", "desc": false}],
//	  "maxRows": 100}],
//	 "descriptors": {"file": "syncular.queries.ir.json",
//	  "register": [{"name": "tasksInProject", "maxRows": 500}]}}
//
// Every query of a file is scoped: it answers only rows the caller could
// pull. Privileged queries need Go (an Authorize callback).
type QueryFile struct {
	Queries []FileQuery `json:"queries"`
	// Descriptors registers named queries of upstream typegen's
	// analyzed-query document (see LoadDescriptors).
	Descriptors *FileDescriptors `json:"descriptors,omitempty"`
}

// FileQuery is one query of a QueryFile.
type FileQuery struct {
	ID      string       `json:"id"`
	Table   string       `json:"table"`
	Columns []string     `json:"columns,omitempty"`
	Filters []FileFilter `json:"filters,omitempty"`
	OrderBy []FileOrder  `json:"orderBy,omitempty"`
	MaxRows int          `json:"maxRows"`
}

// FileFilter is one filter of a FileQuery.
type FileFilter struct {
	Column string `json:"column"`
	Op     string `json:"op"`
	Param  string `json:"param"`
}

// FileOrder is one sort key of a FileQuery.
type FileOrder struct {
	Column string `json:"column"`
	Desc   bool   `json:"desc,omitempty"`
}

// ParseQueryFile decodes a query file strictly: unknown fields, trailing
// data and a file with neither a queries list nor a descriptors section
// are refused.
func ParseQueryFile(data []byte) (QueryFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f QueryFile
	if err := dec.Decode(&f); err != nil {
		return QueryFile{}, err
	}
	if dec.More() {
		return QueryFile{}, errors.New("trailing data")
	}
	if f.Queries == nil && f.Descriptors == nil {
		return QueryFile{}, errors.New(`no "queries" list and no "descriptors"`)
	}
	return f, nil
}

// ScopedQueries returns the file's queries, each scoped.
func (f QueryFile) ScopedQueries() []Query {
	out := make([]Query, len(f.Queries))
	for i, fq := range f.Queries {
		spec := opdomain.QuerySpec{ID: fq.ID, Table: fq.Table, Columns: fq.Columns, MaxRows: fq.MaxRows}
		for _, ff := range fq.Filters {
			spec.Filters = append(spec.Filters, opdomain.Filter{Column: ff.Column, Op: opdomain.Op(ff.Op), Param: ff.Param})
		}
		for _, fo := range fq.OrderBy {
			spec.OrderBy = append(spec.OrderBy, opdomain.Order{Column: fo.Column, Desc: fo.Desc})
		}
		out[i] = Query{Spec: spec, Access: AccessScoped}
	}
	return out
}

// LoadQueryFile reads a query file: its queries, and the descriptors it
// registers from a typegen document (a relative path is read beside the
// file), checked against s so a failure names both files and the query.
func LoadQueryFile(path string, s *schema.Schema) ([]Query, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("operations file: %w", err)
	}
	f, err := ParseQueryFile(data)
	if err != nil {
		return nil, fmt.Errorf("operations file %s: %w", path, err)
	}
	qs := f.ScopedQueries()
	if d := f.Descriptors; d != nil {
		file := d.File
		if file != "" && !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(path), file)
		}
		dq, err := LoadDescriptors(file, d.Register, s)
		if err != nil {
			return nil, fmt.Errorf("operations file %s: %w", path, err)
		}
		qs = append(qs, dq...)
	}
	return qs, nil
}
