// Package testcontrol is the conformance test-control plane: it creates
// short-lived test instances, each a complete sync server over its own
// database (a SQLite file, or a PostgreSQL schema with Options.Database)
// with a virtual clock and a grant table, and runs the
// control methods a conformance harness drives them with (grants, clock,
// introspection, retention, faults, backup and restore, validators, blobs
// and presigned blob URLs).
//
// An instance is assembled from the use cases the real server runs
// (app/round, app/push, app/pull, app/segments, app/blobs, app/retention)
// behind the public routes of adapters/httpapi, so its answers are the
// server's answers. It never touches the server's own database, and
// nothing in it runs on a timer: expiry is judged on the virtual clock
// when something is used.
//
// It exists only with syncd serve --test-control-listen, on a loopback
// listener without authentication (see ../wiring/testcontrol.go).
package testcontrol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/adapters/testcontrolhttp"
	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/syncerr"
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
	// MaxInstances caps the live instances (0: DefaultMaxInstances); a
	// create past it is refused with sync.rate_limited until one closes.
	MaxInstances int
	// MaxBytes is the storage the live instances share (0:
	// DefaultMaxBytes). Each instance gets an equal part,
	// MaxBytes/MaxInstances (at least MinInstanceBytes): half caps its
	// database, half its in-memory blobs and segments.
	MaxBytes int64
	// Database, a postgres:// URL, puts every instance in a PostgreSQL
	// schema of its own on that database (named SchemaPrefix…), created
	// with the instance and dropped with it; "" keeps each in a SQLite
	// file in its directory. Start connects.
	Database string
	// DatabaseMaxConns is the most PostgreSQL connections the plane holds
	// (0: DefaultDatabaseMaxConns): its own few, and InstanceConns an
	// instance, which also bounds the live instances.
	DatabaseMaxConns int
}

// Bounds of the plane.
const (
	DefaultMaxInstances = 64
	DefaultMaxBytes     = 1 << 30
	// MinInstanceBytes is the smallest part of MaxBytes an instance may
	// get: half of it, 1 MiB, holds the empty database (about 100 KiB)
	// with room for a test's rows.
	MinInstanceBytes = 2 << 20
)

// Manager owns the test instances.
type Manager struct {
	o    Options
	caps caps // each instance's caps
	mu   sync.Mutex
	// eng keeps the databases; nil on PostgreSQL until Start.
	eng  engine
	next int
	// pending counts the creates under way; they hold their caps already.
	// creates waits for them (Add only while the plane is open).
	pending int
	creates sync.WaitGroup
	insts   map[string]*instance
	closed  bool
}

var _ testcontrolhttp.Plane = (*Manager)(nil)

// New returns a Manager without instances. It refuses bounds that would
// give an instance less than MinInstanceBytes.
func New(o Options) (*Manager, error) {
	if o.MaxInstances == 0 {
		o.MaxInstances = DefaultMaxInstances
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxInstances < 0 || o.MaxBytes < 0 {
		return nil, fmt.Errorf("testcontrol: MaxInstances %d and MaxBytes %d must not be negative", o.MaxInstances, o.MaxBytes)
	}
	if share := o.MaxBytes / int64(o.MaxInstances); share < MinInstanceBytes {
		return nil, fmt.Errorf("testcontrol: MaxBytes %d over MaxInstances %d gives each instance %d bytes, less than %d",
			o.MaxBytes, o.MaxInstances, share, MinInstanceBytes)
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	if o.BaseURL == nil {
		o.BaseURL = func() string { return "" }
	}
	m := &Manager{o: o, caps: capsOf(o.MaxBytes / int64(o.MaxInstances)), insts: map[string]*instance{}}
	if o.Database == "" {
		m.eng = sqliteEngine{}
		return m, nil
	}
	if !strings.HasPrefix(o.Database, "postgres://") && !strings.HasPrefix(o.Database, "postgresql://") {
		return nil, errors.New("testcontrol: Database must be a postgres:// URL")
	}
	if m.o.DatabaseMaxConns == 0 {
		m.o.DatabaseMaxConns = DefaultDatabaseMaxConns
	}
	if m.o.DatabaseMaxConns < MinDatabaseMaxConns {
		return nil, fmt.Errorf("testcontrol: DatabaseMaxConns %d: want at least %d (the plane's own and one instance's)", m.o.DatabaseMaxConns, MinDatabaseMaxConns)
	}
	return m, nil
}

// Start connects the plane to its PostgreSQL database and drops the
// schemas that planes gone before left; with SQLite it does nothing.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.eng != nil || m.o.Database == "" {
		return nil
	}
	if m.closed {
		return errors.New("the test-control plane is shut down")
	}
	eng, err := openPostgres(ctx, m.o.Database, m.o.DatabaseMaxConns, m.o.Log)
	if err != nil {
		return fmt.Errorf("test-control database: %w", err)
	}
	m.eng = eng
	return nil
}

// maxLive is the most instances open at once: MaxInstances, or fewer when
// the engine holds fewer. The caller holds m.mu.
func (m *Manager) maxLive() int {
	if n := m.eng.maxInstances(); n > 0 && n < m.o.MaxInstances {
		return n
	}
	return m.o.MaxInstances
}

// Capabilities are the optional catalog capabilities this build honours,
// the methods it implements, and the admitted wire versions: every one a
// server can admit, since an instance serves the widest window (the
// catalog of the 0.15 window writes wires 1 and 2).
func (m *Manager) Capabilities() testcontrolhttp.Capabilities {
	var wires []int
	for v := round.LowestMinWireVersion; v <= round.MaxWireVersion; v++ {
		wires = append(wires, int(v))
	}
	return testcontrolhttp.Capabilities{
		Capabilities: []string{"backup-restore", "idempotency-fault", "signed-urls", "blobs", "blob-presign", "leases", "validators", "commit-validators", "crdt"},
		Methods:      methodNames(),
		WireVersions: wires,
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
	if m.eng == nil {
		m.mu.Unlock()
		return "", errors.New("the test-control plane has not started: its database is not open")
	}
	if err := m.admit(); err != nil {
		m.mu.Unlock()
		return "", err
	}
	m.pending++
	m.creates.Add(1)
	defer m.creates.Done()
	m.next++
	id := "t" + strconv.Itoa(m.next)
	eng := m.eng
	m.mu.Unlock()
	inst, err := newInstance(ctx, id, m.o.BaseURL()+"/i/"+id, m.o.Dir, eng, s, m.caps, m.o.Log.With(zap.String("test_instance", id)))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending--
	if err != nil {
		return "", fmt.Errorf("create instance: %w", err)
	}
	if m.closed {
		_ = inst.close()
		return "", errors.New("the test-control plane is shutting down")
	}
	m.insts[id] = inst
	return id, nil
}

// admit refuses a create past maxLive; the caller holds m.mu. That also
// bounds the storage: every instance is capped at an equal part of
// MaxBytes, so MaxInstances of them never hold more than MaxBytes.
func (m *Manager) admit() error {
	max := m.maxLive()
	if live := len(m.insts) + m.pending; live >= max {
		why := "--test-control-max-instances"
		if max < m.o.MaxInstances {
			why = fmt.Sprintf("--test-control-database-max-conns %d, %d connections an instance", m.o.DatabaseMaxConns, InstanceConns)
		}
		return syncerr.Newf(syncerr.RateLimited, "test-control: %d live instances", live).WithMessage(fmt.Sprintf(
			"the test-control plane holds its maximum of %d instances (%s); close one first", max, why))
	}
	return nil
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

// Shutdown closes every instance, then the engine (on PostgreSQL it drops
// what is left of the plane's schemas), and refuses new instances.
// Idempotent.
func (m *Manager) Shutdown() error {
	m.mu.Lock()
	m.closed = true
	insts := m.insts
	m.insts = map[string]*instance{}
	eng := m.eng
	m.eng = nil // a second Shutdown has nothing to close
	m.mu.Unlock()
	var errs []error
	for _, inst := range insts {
		errs = append(errs, inst.close())
	}
	// A create under way when the plane closed closes its own instance,
	// before the engine goes.
	m.creates.Wait()
	if eng != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs = append(errs, eng.close(ctx))
	}
	return errors.Join(errs...)
}

// Len reports the open instances.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.insts)
}
