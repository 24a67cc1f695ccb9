package compat

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// instrumentationName names the runtime's tracer and meter.
const instrumentationName = "github.com/migrate-unique/migrate-unique/compat"

// Span attributes and the error type of a blocked enqueue.
const (
	// AttrEnqueueSkipped is true on an enqueue span when the limit blocked
	// the job.
	AttrEnqueueSkipped = "job.enqueue.skipped"
	// AttrJobClass is the job class, on spans and metrics.
	AttrJobClass = "job.class"
	// ErrorTypeLimitReached is the span's error.type when the limit blocked
	// the job (it replaces the old "DuplicateJob").
	ErrorTypeLimitReached = "ConcurrencyLimitReached"
)

// OpenTelemetry's messaging semantic conventions, as the enqueue span and
// the enqueue metrics carry them: an enqueue is a producer's "send" to a
// destination, the table the queue keeps its new jobs in.
const (
	// AttrMessagingSystem is the messaging system: MessagingSystem.
	AttrMessagingSystem = "messaging.system"
	// AttrMessagingOperationName is the operation: "enqueue".
	AttrMessagingOperationName = "messaging.operation.name"
	// AttrMessagingOperationType is the operation's type: "send".
	AttrMessagingOperationType = "messaging.operation.type"
	// AttrMessagingDestination is the destination: the schema-qualified
	// table new jobs go to (the requests table, or the jobs table of a
	// single-table layout).
	AttrMessagingDestination = "messaging.destination.name"
	// AttrMessagingBatchCount is the number of jobs of a batch enqueue.
	AttrMessagingBatchCount = "messaging.batch.message_count"
	// MessagingSystem names the queue system in messaging.system: a
	// PostgreSQL table queue driven by this runtime.
	MessagingSystem = "migrate_unique"
)

// enqueueDurationBounds are compat.enqueue.duration's bucket boundaries, in
// seconds: an enqueue takes about a millisecond, so the buckets start at
// 100 µs and reach the default lock wait.
var enqueueDurationBounds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Option configures a Client.
type Option func(*options)

type options struct {
	logger   *slog.Logger
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	lockWait time.Duration
	waitSet  bool
	// python are the classes plain-jobs' Python workers run
	// (WithPythonClasses).
	python map[string]bool
}

// WithLockWait bounds how long an enqueue waits for a group's lock that
// another transaction holds (a caller's transaction that enqueued into the
// group and has not committed, for one): past it the enqueue fails with
// ErrLockTimeout and inserts nothing. It is the transaction's lock_timeout
// while the enqueue runs (restored afterwards in a caller's transaction), so
// it bounds the insert's other lock waits too. Default DefaultLockWait; 0
// leaves the session's lock_timeout in force (PostgreSQL's default: wait
// without bound).
func WithLockWait(d time.Duration) Option {
	return func(o *options) { o.lockWait, o.waitSet = max(d, 0), true }
}

// WithLogger sets the logger. The runtime logs admissions and skips at
// debug level and never at warning level for an expected outcome.
// Default: a logger that discards everything.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithTracerProvider sets the OpenTelemetry tracer provider. Default: no-op.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// WithMeterProvider sets the OpenTelemetry meter provider. Default: no-op.
// Metrics carry the job class, never the key (keys are unbounded).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.mp = mp } }

// instruments are the runtime's metrics.
type instruments struct {
	admitted, rejected, retried, errors metric.Int64Counter
	duration                            metric.Float64Histogram

	// classes caches classAttr's option per job class: building the
	// attribute set hashes and allocates, and an enqueue records up to
	// three measurements. Classes are few (they name code), but the cache
	// stops growing at maxCachedClasses all the same.
	classes  sync.Map // class -> metric.MeasurementOption
	nClasses atomic.Int32
	// destination is the enqueue destination, on every measurement.
	destination string
}

// maxCachedClasses bounds instruments.classes.
const maxCachedClasses = 1024

func newInstruments(m metric.Meter, destination string) *instruments {
	ins := &instruments{destination: destination}
	// Creating an instrument fails only for an invalid name; these are
	// constants, and the no-op instrument is a safe fallback either way.
	ins.admitted, _ = m.Int64Counter("compat.enqueue.admitted", metric.WithUnit("{job}"), metric.WithDescription("jobs the admission check let in, by job class"))
	ins.rejected, _ = m.Int64Counter("compat.enqueue.rejected", metric.WithUnit("{job}"), metric.WithDescription("jobs the concurrency limit kept out, by job class"))
	ins.retried, _ = m.Int64Counter("compat.retry.created", metric.WithUnit("{job}"), metric.WithDescription("retry requests created, by job class"))
	ins.errors, _ = m.Int64Counter("compat.enqueue.errors", metric.WithUnit("{call}"), metric.WithDescription("enqueue calls that failed with an error, by job class"))
	ins.duration, _ = m.Float64Histogram("compat.enqueue.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(enqueueDurationBounds...),
		metric.WithDescription("time of one enqueue call, admission check included"))
	noop := metricnoop.Meter{}
	if ins.admitted == nil {
		ins.admitted, _ = noop.Int64Counter("")
	}
	if ins.rejected == nil {
		ins.rejected, _ = noop.Int64Counter("")
	}
	if ins.retried == nil {
		ins.retried, _ = noop.Int64Counter("")
	}
	if ins.errors == nil {
		ins.errors, _ = noop.Int64Counter("")
	}
	if ins.duration == nil {
		ins.duration, _ = noop.Float64Histogram("")
	}
	return ins
}

// classAttr is a measurement's attributes: the job class and the
// messaging attributes, never a key or a group (keys are unbounded).
func classAttr(class, destination string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrJobClass, class),
		attribute.String(AttrMessagingSystem, MessagingSystem), attribute.String(AttrMessagingOperationName, "enqueue"),
		attribute.String(AttrMessagingDestination, destination)))
}

// class returns classAttr(class), cached.
func (ins *instruments) class(class string) metric.MeasurementOption {
	if o, ok := ins.classes.Load(class); ok {
		return o.(metric.MeasurementOption)
	}
	o := classAttr(class, ins.destination)
	if ins.nClasses.Load() < maxCachedClasses {
		if _, loaded := ins.classes.LoadOrStore(class, o); !loaded {
			ins.nClasses.Add(1)
		}
	}
	return o
}

func (o *options) defaults() {
	if !o.waitSet {
		o.lockWait = DefaultLockWait
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.tp == nil {
		o.tp = tracenoop.NewTracerProvider()
	}
	if o.mp == nil {
		o.mp = metricnoop.NewMeterProvider()
	}
}
