package compat

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// slotMetrics holds the slot instruments. Attributes are bounded: result
// has two values, and the per-group gauges only report the configured
// groups.
type slotMetrics struct {
	acquisitions metric.Int64Counter
	wait         metric.Float64Histogram
	// gauges is the per-group gauges' callback, nil without GaugeGroups.
	gauges metric.Registration
}

var (
	resultAcquired = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "acquired")))
	resultBusy     = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "busy")))
)

// slotWaitBounds are compat.slots.wait's bucket boundaries, in seconds: a
// busy job comes back every few seconds, and a starving one waits minutes
// to hours.
var slotWaitBounds = []float64{0, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200}

func newSlotMetrics(mp metric.MeterProvider, s *Slots, gaugeGroups []string) (slotMetrics, error) {
	meter := mp.Meter(instrumentationName)
	var m slotMetrics
	var err error
	if m.acquisitions, err = meter.Int64Counter("compat.slots.acquisitions",
		metric.WithDescription("Slot acquisition attempts, by result (acquired, busy)."),
		metric.WithUnit("{acquisition}")); err != nil {
		return m, fmt.Errorf("slot metrics: %w", err)
	}
	if m.wait, err = meter.Float64Histogram("compat.slots.wait",
		metric.WithDescription("Time a job waited for its slot, from its first busy reschedule to the acquisition (0 when it got a slot at once)."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(slotWaitBounds...)); err != nil {
		return m, fmt.Errorf("slot metrics: %w", err)
	}
	if len(gaugeGroups) == 0 {
		return m, nil
	}
	active, err := meter.Int64ObservableGauge("compat.slots.active",
		metric.WithDescription("Unexpired slot leases of a group (only the groups listed in SlotsOptions.GaugeGroups)."),
		metric.WithUnit("{slot}"))
	if err != nil {
		return m, fmt.Errorf("slot metrics: %w", err)
	}
	limit, err := meter.Int64ObservableGauge("compat.slots.limit",
		metric.WithDescription("Effective limit of a group: the override, else the limit its holders asked for (only the groups listed in SlotsOptions.GaugeGroups)."),
		metric.WithUnit("{slot}"))
	if err != nil {
		return m, fmt.Errorf("slot metrics: %w", err)
	}
	groups := append([]string(nil), gaugeGroups...)
	m.gauges, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		sts, err := s.status(ctx, groups)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, st := range sts {
			seen[st.Group] = true
			attrs := metric.WithAttributes(attrGroup(st.Group))
			o.ObserveInt64(active, int64(st.Active), attrs)
			if st.HasLimit {
				o.ObserveInt64(limit, int64(st.Limit), attrs)
			}
		}
		for _, g := range groups {
			if !seen[g] {
				o.ObserveInt64(active, 0, metric.WithAttributes(attrGroup(g)))
			}
		}
		return nil
	}, active, limit)
	if err != nil {
		return m, fmt.Errorf("slot metrics: %w", err)
	}
	return m, nil
}

func (m slotMetrics) acquisition(ctx context.Context, result string) {
	if result == "acquired" {
		m.acquisitions.Add(ctx, 1, resultAcquired)
		return
	}
	m.acquisitions.Add(ctx, 1, resultBusy)
}

func (m slotMetrics) waited(ctx context.Context, d time.Duration) {
	m.wait.Record(ctx, d.Seconds())
}

// Close stops the per-group gauges (SlotsOptions.GaugeGroups): the meter
// provider no longer queries the slot table for them. Acquire, Release and
// the rest keep working. Close is safe to call more than once and without
// gauges.
func (s *Slots) Close() error {
	if s.metrics.gauges == nil {
		return nil
	}
	err := s.metrics.gauges.Unregister()
	s.metrics.gauges = nil
	if err != nil {
		return fmt.Errorf("slot metrics: unregister the gauges: %w", err)
	}
	return nil
}
