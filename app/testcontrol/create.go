package testcontrol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/syncd-dev/syncd/domain/schema"
)

// unsupported names a create option or a method this build cannot honour
// (testcontrolhttp answers 422 or 501 with it).
type unsupported struct{ what string }

func (u *unsupported) Error() string       { return "unsupported: " + u.what }
func (u *unsupported) Unsupported() string { return u.what }

// Defaults of a test instance: those of the reference conformance driver.
const (
	DefaultMaxOperations    = 500
	DefaultInlineMaxBytes   = 256 << 10
	DefaultSignedURLSeconds = 900
)

// spec is a parsed create body.
type spec struct {
	schema    *schema.Schema
	partition string
	nowMs     int64
	// maxOperations, inlineMaxBytes (negative: never inline), segmentTTL.
	maxOperations  int
	inlineMaxBytes int
	segmentTTL     time.Duration
	// signedURLs is set by the signedUrls option; signedURLSeconds is its TTL.
	signedURLs       bool
	signedURLSeconds int64
	// maxDeltaBytes is the realtime delta cap (0: the hub's default).
	maxDeltaBytes int
	// maxPresenceBytes is the presence document cap (0: the hub's default).
	maxPresenceBytes int
	// leaseTTL turns §7.3 auth leases on (0: off).
	leaseTTL time.Duration
}

// parseCreate reads a create body. An option it cannot honour is
// *unsupported naming the option's path; it is never ignored.
func parseCreate(body []byte) (spec, error) {
	var top map[string]json.RawMessage
	if err := strictDecode(body, &top); err != nil {
		return spec{}, fmt.Errorf("create body: %w", err)
	}
	s := spec{maxOperations: DefaultMaxOperations, inlineMaxBytes: DefaultInlineMaxBytes, signedURLSeconds: DefaultSignedURLSeconds}
	for _, k := range sortedKeys(top) {
		v := top[k]
		var err error
		switch k {
		case "schema":
			s.schema, err = parseSchema(v)
		case "partition":
			err = json.Unmarshal(v, &s.partition)
		case "nowMs":
			err = json.Unmarshal(v, &s.nowMs)
		case "limits":
			err = s.parseLimits(v)
		case "signedUrls":
			err = s.parseSignedURLs(v)
		case "leases":
			err = s.parseLeases(v)
		default: // anything newer
			if isNull(v) {
				continue
			}
			return spec{}, &unsupported{k}
		}
		if err != nil {
			return spec{}, fmt.Errorf("create option %s: %w", k, err)
		}
	}
	switch {
	case s.schema == nil:
		return spec{}, fmt.Errorf("create: schema is required")
	case s.partition == "":
		return spec{}, fmt.Errorf("create: partition is required")
	}
	return s, nil
}

func (s *spec) parseLimits(v json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := strictDecode(v, &m); err != nil {
		return err
	}
	for _, k := range sortedKeys(m) {
		if isNull(m[k]) {
			continue
		}
		var n int64
		if err := json.Unmarshal(m[k], &n); err != nil || n < 0 {
			return fmt.Errorf("%s: want a non-negative integer", k)
		}
		switch k {
		case "maxOperationsPerRequest":
			if n == 0 {
				return fmt.Errorf("%s: want at least 1", k)
			}
			s.maxOperations = int(n)
		case "inlineSegmentMaxBytes":
			s.inlineMaxBytes = int(n)
			if n == 0 {
				s.inlineMaxBytes = -1 // never inline
			}
		case "segmentTtlMs":
			s.segmentTTL = time.Duration(n) * time.Millisecond
			if n == 0 {
				s.segmentTTL = time.Millisecond // born expired; 0 would mean the default
			}
		case "maxDeltaBytes":
			if n == 0 {
				return fmt.Errorf("%s: want at least 1", k)
			}
			s.maxDeltaBytes = int(n)
		case "maxPresenceBytes":
			if n == 0 {
				return fmt.Errorf("%s: want at least 1", k)
			}
			s.maxPresenceBytes = int(n)
		default:
			return &unsupported{"limits." + k}
		}
	}
	return nil
}

func (s *spec) parseSignedURLs(v json.RawMessage) error {
	if isNull(v) {
		return nil
	}
	var m map[string]json.RawMessage
	if err := strictDecode(v, &m); err != nil {
		return err
	}
	s.signedURLs = true
	for _, k := range sortedKeys(m) {
		switch k {
		case "ttlSeconds":
			if err := json.Unmarshal(m[k], &s.signedURLSeconds); err != nil || s.signedURLSeconds < 0 {
				return fmt.Errorf("ttlSeconds: want a non-negative integer")
			}
		default:
			return &unsupported{"signedUrls." + k}
		}
	}
	return nil
}

func (s *spec) parseLeases(v json.RawMessage) error {
	if isNull(v) {
		return nil
	}
	var m map[string]json.RawMessage
	if err := strictDecode(v, &m); err != nil {
		return err
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "ttlMs":
			var n int64
			if err := json.Unmarshal(m[k], &n); err != nil || n < 1 {
				return fmt.Errorf("ttlMs: want a positive integer")
			}
			s.leaseTTL = time.Duration(n) * time.Millisecond
		default:
			return &unsupported{"leases." + k}
		}
	}
	if s.leaseTTL == 0 {
		return fmt.Errorf("ttlMs is required")
	}
	return nil
}

// driverSchema is the harness's compact schema form.
type driverSchema struct {
	Version int32 `json:"version"`
	Tables  []struct {
		Name       string `json:"name"`
		PrimaryKey string `json:"primaryKey"`
		Columns    []struct {
			Name         string `json:"name"`
			Type         string `json:"type"`
			Nullable     bool   `json:"nullable"`
			CRDTType     string `json:"crdtType"`
			Encrypted    bool   `json:"encrypted"`
			DeclaredType string `json:"declaredType"`
		} `json:"columns"`
		Scopes []struct {
			Pattern string `json:"pattern"`
			Column  string `json:"column"`
		} `json:"scopes"`
	} `json:"tables"`
}

// DefaultCRDTType is the merger a crdt column names when the schema omits it.
const DefaultCRDTType = "yjs-doc"

// parseSchema compiles {"ir": <IR>} or a driver schema.
func parseSchema(v json.RawMessage) (*schema.Schema, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(v, &probe); err != nil {
		return nil, err
	}
	if ir, ok := probe["ir"]; ok {
		parsed, err := schema.ParseIR(ir)
		if err != nil {
			return nil, err
		}
		return schema.Compile(parsed)
	}
	var ds driverSchema
	if err := json.Unmarshal(v, &ds); err != nil {
		return nil, err
	}
	return schema.Compile(driverSchemaIR(ds))
}

// driverSchemaIR converts a driver schema to the IR it abbreviates: one
// declared version, each scope's column defaulting to its variable.
func driverSchemaIR(ds driverSchema) *schema.IR {
	ir := &schema.IR{IRVersion: 1, SchemaVersion: ds.Version,
		SchemaVersions: []schema.IRSchemaVersion{{Version: ds.Version, Migrations: []string{}}}}
	for _, t := range ds.Tables {
		it := schema.IRTable{Name: t.Name, PrimaryKey: t.PrimaryKey}
		for _, c := range t.Columns {
			nullable := c.Nullable
			ic := schema.IRColumn{Name: c.Name, Type: c.Type, Nullable: &nullable,
				CRDTType: c.CRDTType, Encrypted: c.Encrypted, DeclaredType: c.DeclaredType}
			if c.Type == "crdt" && ic.CRDTType == "" {
				ic.CRDTType = DefaultCRDTType
			}
			it.Columns = append(it.Columns, ic)
		}
		for _, sc := range t.Scopes {
			is := schema.IRScope{Pattern: sc.Pattern, Column: sc.Column}
			if _, variable, ok := schema.ParseScopePattern(sc.Pattern); ok && is.Column == "" {
				is.Column = variable
			}
			it.Scopes = append(it.Scopes, is)
		}
		ir.Tables = append(ir.Tables, it)
	}
	return ir
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
