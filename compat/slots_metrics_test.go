package compat

import (
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestSlotMetrics checks the instruments: acquisitions by result, the wait
// histogram, reschedules, and per-group gauges only for the listed groups.
func TestSlotMetrics(t *testing.T) {
	t.Parallel()
	url := slotMigratedDB(t, legacy.SingleTable)
	l := legacy.SingleTable.Layout
	pool := slotTestPool(t, url, 2)
	ctx := t.Context()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s, err := NewSlots(Pgx(pool), l, SlotsOptions{MeterProvider: mp, GaugeGroups: []string{"Watched", "Idle"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRescheduler(Pgx(pool), l, RescheduleOptions{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (id, job_type, status) VALUES (1, 'Watched', 'running')`); err != nil {
		t.Fatal(err)
	}
	slotMustAcquire(t, s, "Watched", 2, "a", time.Minute)
	slotMustAcquire(t, s, "Watched", 2, "b", time.Minute)
	slotMustBeBusy(t, s, "Watched", 2, "1")
	if _, err := r.Reschedule(ctx, "Watched", RowID(1)); err != nil {
		t.Fatal(err)
	}
	slotMustAcquire(t, s, "Unwatched::k", 1, "c", time.Minute)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			vals := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					v, _ := p.Attributes.Value("result")
					vals[v.AsString()] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					v, _ := p.Attributes.Value("group")
					vals[v.AsString()] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					vals["count"] = float64(p.Count)
				}
			}
			got[m.Name] = vals
		}
	}
	want := map[string]map[string]float64{
		"compat.slots.acquisitions": {"acquired": 3, "busy": 1},
		"compat.slots.wait":         {"count": 3},
		"compat.reschedules":        {"": 1},
		"compat.slots.active":       {"Watched": 2, "Idle": 0},
		"compat.slots.limit":        {"Watched": 2},
	}
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Errorf("%s: %v, want %v", name, g, w)
			continue
		}
		for k, v := range w {
			if g[k] != v {
				t.Errorf("%s[%s] = %v, want %v", name, k, g[k], v)
			}
		}
	}

	// After Close the gauges are gone; the counters stay.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	rm = metricdata.ResourceMetrics{}
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && len(g.DataPoints) > 0 {
				t.Errorf("after Close, %s still reports %d points", m.Name, len(g.DataPoints))
			}
		}
	}
}
