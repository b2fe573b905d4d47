package operations

import (
	"errors"
	"fmt"
	"os"

	opdomain "github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/schema"
)

// FileDescriptors is the descriptors section of a query file: upstream
// typegen's analyzed-query document (output.queryIr in syncular.json,
// conventionally syncular.queries.ir.json) and the named queries to
// register from it, each with its row cap, as a reference server's
// registerRemoteQuery(descriptor, {maxRows}) calls do.
type FileDescriptors struct {
	File     string             `json:"file"`
	Register []FileRegistration `json:"register"`
}

// FileRegistration registers one named query of the document.
type FileRegistration struct {
	Name    string `json:"name"`
	MaxRows int    `json:"maxRows"`
}

// LoadDescriptors reads the analyzed-query document at path and returns
// each registered named query as a scoped Query under the id its
// generated descriptor carries ("sha256:<document hash>/<name>", what a
// reference client sends), with the name as its Name for QueryInTx.
// Each is stated against s and compiled here, so a query outside the
// supported subset, or generated against another schema, fails with the
// document and the query named. Queries the document holds but the
// registration does not name are not read.
func LoadDescriptors(path string, register []FileRegistration, s *schema.Schema) ([]Query, error) {
	if path == "" {
		return nil, errors.New(`descriptors: no "file"`)
	}
	if len(register) == 0 {
		return nil, fmt.Errorf("descriptors %s: no query to register", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("descriptors: %w", err)
	}
	ir, err := opdomain.ParseQueryIR(data)
	if err != nil {
		return nil, fmt.Errorf("descriptors %s: %w", path, err)
	}
	var errs []error
	out := make([]Query, 0, len(register))
	seen := map[string]bool{}
	for _, r := range register {
		fail := func(err error) { errs = append(errs, fmt.Errorf("descriptors %s: query %q: %w", path, r.Name, err)) }
		d, ok := ir.Descriptor(r.Name)
		switch {
		case seen[r.Name]:
			fail(errors.New("registered twice"))
			continue
		case !ok:
			fail(errors.New("the document has no query of that name"))
			continue
		}
		seen[r.Name] = true
		spec, err := d.Spec(s, ir.ID(r.Name), r.MaxRows)
		if err != nil {
			fail(fmt.Errorf("%s: %w", d.File, err))
			continue
		}
		if _, err := opdomain.Compile(s, spec); err != nil {
			fail(err)
			continue
		}
		out = append(out, Query{Spec: spec, Access: AccessScoped, Name: r.Name})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
