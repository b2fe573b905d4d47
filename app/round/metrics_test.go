package round_test

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/syncd-dev/syncd/app/round"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestClientsBySchemaVersion(t *testing.T) {
	w := ssptest.Window(t)
	now := time.UnixMilli(1_700_000_000_000)
	reg := prometheus.NewRegistry()
	c, err := round.NewSchemaClients(reg, round.SchemaClientsOptions{Window: time.Minute, MaxClients: 5,
		Served: func() *schema.Window { return w }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	want := func(step string, counts map[string]int) {
		t.Helper()
		if got := c.Counts(); !maps.Equal(got, counts) {
			t.Fatalf("%s: counts %v, want %v", step, got, counts)
		}
	}
	want("nobody yet", map[string]int{"3": 0, "2": 0, round.Unserved: 0})

	c.Observe("p1", "a", 2, now)
	c.Observe("p1", "a", 2, now) // the same client again
	c.Observe("p2", "a", 2, now) // another partition's client a
	c.Observe("p1", "b", 3, now)
	c.Observe("p1", "c", 1, now)
	c.Observe("p1", "d", 7, now.Add(-30*time.Second))
	want("a mix", map[string]int{"3": 1, "2": 2, round.Unserved: 2})

	c.Observe("p1", "e", 3, now) // past MaxClients: not counted
	c.Observe("p1", "a", 3, now) // a upgraded
	want("an upgrade", map[string]int{"3": 2, "2": 1, round.Unserved: 2})

	now = now.Add(45 * time.Second) // d's round is past the window
	want("d expired", map[string]int{"3": 2, "2": 1, round.Unserved: 1})
	c.Observe("p1", "e", 3, now) // room again
	want("e counted", map[string]int{"3": 3, "2": 1, round.Unserved: 1})

	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "syncd_clients_by_schema_version" {
		t.Fatalf("gathered %v, %v", mfs, err)
	}
	got := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	if !maps.Equal(got, map[string]float64{"2": 1, "3": 3, round.Unserved: 1}) {
		t.Fatalf("exposed %v", got)
	}
}

// A round counts its client under its schema version, a floored round
// as unserved.
func TestRoundsAreCounted(t *testing.T) {
	w := ssptest.Window(t)
	c, err := round.NewSchemaClients(nil, round.SchemaClientsOptions{Served: func() *schema.Window { return w },
		Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }})
	if err != nil {
		t.Fatal(err)
	}
	e := newWindowEnv(t, func(o *round.Options) { o.Clients = c })
	for _, r := range []struct {
		client string
		v      int32
	}{{"old", 2}, {"new", 3}, {"gone", 1}} {
		e.Must(e.at(r.client, r.v, ssptest.Commit("k-"+r.client, ssptest.Delete("tasks", "a"))))
	}
	if got := c.Counts(); !maps.Equal(got, map[string]int{"3": 1, "2": 1, round.Unserved: 1}) {
		t.Fatalf("counts %v", got)
	}
}
