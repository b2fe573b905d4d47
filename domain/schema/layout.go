package schema

import (
	"encoding/json"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// MarshalLayouts renders the schema's layouts as the JSON object storage
// persists: table name → [{name, type, nullable}], tables in schema order.
func (s *Schema) MarshalLayouts() ([]byte, error) {
	var buf []byte
	buf = append(buf, '{')
	for i, t := range s.Tables {
		if i > 0 {
			buf = append(buf, ',')
		}
		k, err := json.Marshal(t.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(t.Layout())
		if err != nil {
			return nil, err
		}
		buf = append(buf, k...)
		buf = append(buf, ':')
		buf = append(buf, v...)
	}
	return append(buf, '}'), nil
}

// ParseLayouts decodes persisted layouts. Empty input means none stored.
func ParseLayouts(data []byte) (map[string]Layout, error) {
	out := map[string]Layout{}
	if len(data) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	if out == nil { // JSON null
		out = map[string]Layout{}
	}
	return out, nil
}

// CheckStoredLayouts compares persisted layouts with the running schema
// (same-version storage readiness, SPEC §2.4). Every configured table's
// columns must match the stored ones position by position in name, type
// and nullability, and no stored table may be missing from the schema.
// A refusal is sync.storage.stored_layout_mismatch with details
// {table, column} (column omitted for a stored table the schema lacks).
func (s *Schema) CheckStoredLayouts(stored map[string]Layout) error {
	for _, t := range s.Tables {
		want := t.Layout()
		got := stored[t.Name]
		n := max(len(want), len(got))
		for i := range n {
			if i < len(want) && i < len(got) && want[i] == got[i] {
				continue
			}
			col := ""
			switch {
			case i < len(want):
				col = want[i].Name
			case i < len(got):
				col = got[i].Name
			}
			return syncerr.Newf(syncerr.StorageStoredLayoutMismatch,
				"table %q column %q differs from the stored layout", t.Name, col).
				WithDetails(map[string]string{"table": t.Name, "column": col})
		}
	}
	for _, t := range sortedKeys(stored) {
		if s.Table(t) == nil {
			return syncerr.Newf(syncerr.StorageStoredLayoutMismatch,
				"stored table %q is not in the schema", t).
				WithDetails(map[string]string{"table": t})
		}
	}
	return nil
}
