// Package testcontrol is the conformance test-control plane: it creates
// short-lived test instances, each a complete sync server over its own
// SQLite database with a virtual clock and a grant table, and runs the
// control methods a conformance harness drives them with (grants, clock,
// introspection, retention, faults, backup and restore, validators, blobs
// and presigned blob URLs).
//
// An instance is assembled from the use cases the real server runs
// (app/syncsvc, app/pull, app/segments, app/blobs, app/retention) behind the public
// routes of adapters/httpapi, so its answers are the server's answers. It
// never touches the server's own database, and nothing in it runs on a
// timer: expiry is judged on the virtual clock when something is used.
//
// It exists only with syncd serve --test-control-listen, on a loopback
// listener without authentication (see ../testcontrolfx.go).
package testcontrol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/testcontrolhttp"
)

// Options configure a Manager.
type Options struct {
	// Dir is where instance directories are created ("" is the system
	// temporary directory).
	Dir string
	// BaseURL returns the listener's URL ("http://127.0.0.1:47100"); the
	// instances mint signed URLs under it. It is called at create time.
	BaseURL func() string
	// HTTP fetches minted URLs for fetchSegmentUrl (nil: a default client).
	HTTP *http.Client
	Log  *zap.Logger
}

// Manager owns the test instances.
type Manager struct {
	o      Options
	mu     sync.Mutex
	next   int
	insts  map[string]*instance
	closed bool
}

var _ testcontrolhttp.Plane = (*Manager)(nil)

// New returns a Manager without instances.
func New(o Options) *Manager {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	if o.BaseURL == nil {
		o.BaseURL = func() string { return "" }
	}
	return &Manager{o: o, insts: map[string]*instance{}}
}

// Capabilities are the optional catalog capabilities this build honours,
// the methods it implements, and the admitted wire versions.
func (m *Manager) Capabilities() testcontrolhttp.Capabilities {
	return testcontrolhttp.Capabilities{
		Capabilities: []string{"backup-restore", "idempotency-fault", "signed-urls", "blobs", "blob-presign", "leases", "validators", "commit-validators", "crdt"},
		Methods:      methodNames(),
		WireVersions: []int{2, 3},
	}
}

// Create builds an instance and returns its id once it serves.
func (m *Manager) Create(ctx context.Context, body []byte) (string, error) {
	s, err := parseCreate(body)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return "", errors.New("the test-control plane is shutting down")
	}
	m.next++
	id := "t" + strconv.Itoa(m.next)
	m.mu.Unlock()
	inst, err := newInstance(ctx, id, m.o.BaseURL()+"/i/"+id, m.o.Dir, s, m.o.Log.With(zap.String("test_instance", id)))
	if err != nil {
		return "", fmt.Errorf("create instance: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		_ = inst.close()
		return "", errors.New("the test-control plane is shutting down")
	}
	m.insts[id] = inst
	return id, nil
}

func (m *Manager) get(id string) (*instance, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	inst, ok := m.insts[id]
	return inst, ok
}

// Instance returns the instance's sync API routes.
func (m *Manager) Instance(id string) (http.Handler, bool) {
	inst, ok := m.get(id)
	if !ok {
		return nil, false
	}
	return inst, true
}

// Call runs a control method.
func (m *Manager) Call(ctx context.Context, id, method string, args []json.RawMessage) (any, error) {
	inst, ok := m.get(id)
	if !ok {
		return nil, testcontrolhttp.ErrNoInstance
	}
	fn, ok := methods[method]
	if !ok {
		return nil, &unsupported{method}
	}
	return fn(ctx, &call{m: m, in: inst, args: args})
}

// Close closes an instance and deletes its storage; unknown ids are fine.
func (m *Manager) Close(_ context.Context, id string) error {
	m.mu.Lock()
	inst, ok := m.insts[id]
	delete(m.insts, id)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	return inst.close()
}

// Shutdown closes every instance and refuses new ones.
func (m *Manager) Shutdown() error {
	m.mu.Lock()
	m.closed = true
	insts := m.insts
	m.insts = map[string]*instance{}
	m.mu.Unlock()
	var errs []error
	for _, inst := range insts {
		errs = append(errs, inst.close())
	}
	return errors.Join(errs...)
}

// Len reports the open instances.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.insts)
}
