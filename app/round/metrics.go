package round

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/domain/schema"
)

// Defaults of SchemaClients.
const (
	// DefaultClientsWindow is how long a client counts for the schema
	// version of its last round.
	DefaultClientsWindow = 15 * time.Minute
	// DefaultMaxClients bounds the clients remembered; past it new ones
	// are not counted until old ones expire (the gauge is then a lower
	// bound).
	DefaultMaxClients = 1 << 18
)

// Unserved labels the clients whose schema version the window does not
// serve (they get the floor).
const Unserved = "unserved"

// SchemaClients is the syncd_clients_by_schema_version gauge: the
// distinct clients (partition and client id) whose last round, over POST
// /sync or a socket, within the window named each schema version. It is
// what an operator watches fall to zero before shortening the served
// window (SPEC §9). Versions outside the served window share the label
// Unserved, so a client cannot grow the label set. A nil *SchemaClients
// records nothing.
type SchemaClients struct {
	window time.Duration
	max    int
	now    func() time.Time
	served func() *schema.Window
	desc   *prometheus.Desc

	mu   sync.RWMutex
	seen map[clientKey]*seenClient
}

type clientKey struct{ partition, clientID string }

// seenClient is updated in place under the read lock.
type seenClient struct {
	version atomic.Int32
	atMs    atomic.Int64
}

// SchemaClientsOptions configure SchemaClients.
type SchemaClientsOptions struct {
	// Window is how long a client counts after its last round (0 →
	// DefaultClientsWindow); MaxClients bounds the clients remembered
	// (0 → DefaultMaxClients).
	Window     time.Duration
	MaxClients int
	// Served is the served schema window (required).
	Served func() *schema.Window
	Now    func() time.Time
}

// NewSchemaClients registers the gauge on reg.
func NewSchemaClients(reg prometheus.Registerer, o SchemaClientsOptions) (*SchemaClients, error) {
	if o.Window <= 0 {
		o.Window = DefaultClientsWindow
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &SchemaClients{window: o.Window, max: o.MaxClients, now: o.Now, served: o.Served, seen: map[clientKey]*seenClient{},
		desc: prometheus.NewDesc("syncd_clients_by_schema_version",
			"Distinct clients (partition and client id) whose last sync round in the past "+o.Window.String()+
				" named each schema version; unserved: versions outside the served window (they get the schema floor).",
			[]string{"schema_version"}, nil)}
	if reg != nil {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Observe notes a round of client at schema version v.
func (c *SchemaClients) Observe(partition, clientID string, v int32, at time.Time) {
	if c == nil {
		return
	}
	k := clientKey{partition, clientID}
	ms := at.UnixMilli()
	c.mu.RLock()
	s := c.seen[k]
	c.mu.RUnlock()
	if s == nil {
		c.mu.Lock()
		if s = c.seen[k]; s == nil {
			if len(c.seen) >= c.max {
				c.mu.Unlock()
				return
			}
			s = &seenClient{}
			// Copies: a decoded id may share the request body's memory.
			c.seen[clientKey{strings.Clone(partition), strings.Clone(clientID)}] = s
		}
		c.mu.Unlock()
	}
	s.version.Store(v)
	s.atMs.Store(ms)
}

// Describe implements prometheus.Collector.
func (c *SchemaClients) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: it counts the clients seen
// within the window, forgets the others, and reports every served
// version (0 when none) and Unserved.
func (c *SchemaClients) Collect(ch chan<- prometheus.Metric) {
	counts := c.Counts()
	for label, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), label)
	}
}

// Counts returns the clients seen within the window by label (every
// served version and Unserved present), forgetting those seen before it.
func (c *SchemaClients) Counts() map[string]int {
	out := map[string]int{Unserved: 0}
	w := c.served()
	if w != nil {
		for _, v := range w.Versions() {
			out[strconv.Itoa(int(v))] = 0
		}
	}
	cutoff := c.now().Add(-c.window).UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.seen {
		if s.atMs.Load() < cutoff {
			delete(c.seen, k)
			continue
		}
		v := s.version.Load()
		if w == nil || w.View(v) == nil {
			out[Unserved]++
			continue
		}
		out[strconv.Itoa(int(v))]++
	}
	return out
}
