// Package jobs declares a legacy job interface and job types of every shape.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
)

// Job is the legacy job interface.
type Job interface { // want Job:"legacy job interface \\(migrated\\)"
	// UniqueKey returns the job's unique key.
	UniqueKey() string // want UniqueKey:"migrates to ConcurrencyKey" `interface Job declares UniqueKey`
	Run(ctx context.Context) error
}

// Retryable embeds Job: it is a job interface too, migrated with Job.
type Retryable interface { // want Retryable:"legacy job interface \\(migrated\\)"
	Job
	Retries() int
}

// keyed is no job interface, but Handler embeds it: it migrates with Handler.
type keyed interface { // want `CacheItem is used as keyed, which migrates to ConcurrencyKey with the job interfaces, but CacheItem is no job and keeps UniqueKey`
	UniqueKey() string // want UniqueKey:"migrates to ConcurrencyKey" `interface keyed declares UniqueKey for job interface Handler`
}

// Handler is a job interface through keyed.
type Handler interface { // want Handler:"legacy job interface \\(migrated\\)"
	keyed
	Handle(ctx context.Context) error
}

// single is written on one line, as gofmt keeps a one-method interface.
type single interface{ UniqueKey() string } // want UniqueKey:"migrates to ConcurrencyKey" `interface single declares UniqueKey for job interface Worker`

// Worker is a job interface through single.
type Worker interface { // want Worker:"legacy job interface \\(migrated\\)"
	single
	Work()
}

// Hook is a Handler.
type Hook struct{}

func (Hook) UniqueKey() string { return "hook" } // want UniqueKey:"migrates to ConcurrencyKey" `job type Hook`

func (Hook) Handle(ctx context.Context) error { return nil }

// Typed is a generic job interface.
type Typed[A any] interface { // want Typed:"legacy job interface \\(migrated\\)"
	UniqueKey() string // want UniqueKey:"migrates to ConcurrencyKey" `interface Typed declares UniqueKey`
	Execute(ctx context.Context, arg A) error
}

// Resize is a Typed[int].
type Resize struct{ Width int }

func (r Resize) UniqueKey() string { return "resize:" + strconv.Itoa(r.Width) } // want UniqueKey:"migrates to ConcurrencyKey" `job type Resize`

func (r Resize) Execute(ctx context.Context, width int) error { return nil }

func typedKey(t Typed[int]) string { return t.UniqueKey() } // want `call of Typed\[int\].UniqueKey`

// Report is keyed by its ID: pointer receiver, key never empty.
type Report struct{ ID int }

// UniqueKey returns the report's key. UniqueKey is never empty.
func (r *Report) UniqueKey() string { return "report:" + strconv.Itoa(r.ID) } // want UniqueKey:"migrates to ConcurrencyKey" `job type Report: rename UniqueKey to ConcurrencyKey`

// Run runs the report.
func (r *Report) Run(ctx context.Context) error { return nil }

// Sync is keyed by tenant: value receiver, key may be empty.
type Sync struct{ Tenant string }

func (s Sync) UniqueKey() string { return s.Tenant } // want UniqueKey:"migrates to ConcurrencyKey" `job type Sync`

func (s Sync) Run(ctx context.Context) error { return nil }

// Cleanup is a singleton: unnamed receiver, constant key.
type Cleanup struct{}

func (Cleanup) UniqueKey() string { return "cleanup" } // want UniqueKey:"migrates to ConcurrencyKey" `job type Cleanup`

func (Cleanup) Run(ctx context.Context) error { return nil }

// Env reads its key from the environment: unnamed receiver, key may be
// empty, so ConcurrencyLimit needs a receiver name.
type Env struct{}

func (*Env) UniqueKey() string { return os.Getenv("JOB_KEY") } // want UniqueKey:"migrates to ConcurrencyKey" `job type Env`

func (*Env) Run(ctx context.Context) error { return nil }

// Region is empty on one path.
type Region struct{ Name string }

func (g *Region) UniqueKey() string { // want UniqueKey:"migrates to ConcurrencyKey" `job type Region`
	if g.Name == "" {
		return ""
	}
	return fmt.Sprintf("region:%s", g.Name)
}

func (g *Region) Run(ctx context.Context) error { return nil }

// Keyed carries a key for the jobs that embed it; it is no job itself.
type Keyed struct{ Key string }

func (k Keyed) UniqueKey() string { return k.Key } // want UniqueKey:"migrates to ConcurrencyKey" `job type Import promotes UniqueKey from Keyed`

// Import promotes UniqueKey from Keyed.
type Import struct {
	Keyed
	Path string
}

func (i *Import) Run(ctx context.Context) error { return nil }

// Batch is a generic job.
type Batch[T any] struct {
	Name  string
	Items []T
}

func (b *Batch[T]) UniqueKey() string { return fmt.Sprintf("batch:%s:%d", b.Name, len(b.Items)) } // want UniqueKey:"migrates to ConcurrencyKey" `job type Batch`

func (b *Batch[T]) Run(ctx context.Context) error { return nil }

// Pair is a generic job with an unnamed receiver and two parameters.
type Pair[K comparable, V any] struct{}

func (Pair[K, V]) UniqueKey() string { return os.Getenv("PAIR") } // want UniqueKey:"migrates to ConcurrencyKey" `job type Pair`

func (Pair[K, V]) Run(ctx context.Context) error { return nil }

// Clashing already has ConcurrencyKey.
type Clashing struct{}

func (Clashing) UniqueKey() string { return "c" } // want `job type Clashing already has ConcurrencyKey or ConcurrencyLimit`

func (Clashing) ConcurrencyKey() string { return "c" }

func (Clashing) Run(ctx context.Context) error { return nil }

// Legacy keeps its UniqueKey on purpose.
type Legacy struct{}

// migrate-unique:ignore kept for the v1 wire format
func (Legacy) UniqueKey() string { return "legacy" }

func (Legacy) Run(ctx context.Context) error { return nil }

// Adapter is silenced as a whole by a directive on its type.
//
// migrate-unique:ignore adapts the v1 API, which keeps UniqueKey
type Adapter struct{}

func (Adapter) UniqueKey() string { return "adapter" }

func (Adapter) Run(ctx context.Context) error { return nil }

// Trailing directives cover their own line only.
var (
	_ = "SELECT unique_key FROM a" //migrate-unique:ignore read-only report
	_ = "SELECT unique_key FROM b" // want `string names the unique_key column`
)

// CacheItem is no job: its UniqueKey names a cache slot.
type CacheItem struct{ Slot int }

func (c CacheItem) UniqueKey() string { return "slot:" + strconv.Itoa(c.Slot) }

// Keyer has only UniqueKey: not a job interface, but a job is used as one.
type Keyer interface { // want `\*Report is used as Keyer, which requires UniqueKey: once migrated it no longer implements Keyer`
	UniqueKey() string
}

// Resource has UniqueKey beside methods that run nothing: not a job interface.
type Resource interface {
	UniqueKey() string
	Close() error
}

var _ Keyer = (*Report)(nil)

var _ keyed = CacheItem{}

var _ keyed = Hook{}

// keys uses the legacy method every way there is.
func keys(j Job, rj Retryable, r *Report, b *Batch[string], c CacheItem, k Keyer) []string {
	f := r.UniqueKey          // want `method value \*Report.UniqueKey: now ConcurrencyKey`
	g := (*Report).UniqueKey  // want `method expression \*Report.UniqueKey`
	h := Job.UniqueKey        // want `method expression Job.UniqueKey`
	i := Import{}.UniqueKey() // want `call of Import.UniqueKey`
	return []string{
		f(), g(r), h(j), i,
		j.UniqueKey(),  // want `call of Job.UniqueKey`
		rj.UniqueKey(), // want `call of Retryable.UniqueKey`
		b.UniqueKey(),  // want `call of \*Batch\[string\].UniqueKey`
		Legacy{}.UniqueKey(),
		Clashing{}.UniqueKey(),
		c.UniqueKey(),
		k.UniqueKey(),
	}
}

// optionalKey reads a key through the optional-interface idiom: migrated
// jobs stop matching these interfaces without a compile error.
func optionalKey(v any) string {
	if k, ok := v.(interface{ UniqueKey() string }); ok { // want `type assertion to interface\{UniqueKey\(\) string\}, which requires UniqueKey`
		return k.UniqueKey()
	}
	switch x := v.(type) {
	case Keyer: // want `type assertion to Keyer, which requires UniqueKey`
		return x.UniqueKey()
	case Job:
		return x.UniqueKey() // want `call of Job.UniqueKey`
	}
	return ""
}

// firstKey calls through a type parameter constrained by Job.
func firstKey[J Job](js []J) string {
	return js[0].UniqueKey() // want `call of J.UniqueKey`
}

// ErrDuplicate is the legacy sentinel, renamed by configuration.
var ErrDuplicate = errors.New("job already enqueued") // want `rename jobs.ErrDuplicate to ErrConcurrencyLimitReached`

// spanError is the legacy span error type.
const spanError = "DuplicateJob" // want `span error string "DuplicateJob"`

// selectByKey names the legacy column.
const selectByKey = `SELECT id FROM plainjobs_jobrequest WHERE unique_key = $1` // want `string names the unique_key column`

// row maps the legacy column: a tag is no SQL text, never reported (the
// database migration's rename is what a reader of the row follows).
type row struct {
	Key string `db:"unique_key"`
}

var (
	keyColumn = "unique_key"                                                           // want `string names the unique_key column`
	qualified = "r.unique_key"                                                         // want `string names the unique_key column`
	prose     = "moves a queue from unique_key to concurrency keys"                    // prose, not SQL: silent
	message   = "tables with a unique_key column, and the flags that select them"      // prose too
	usage     = "cutover (rename unique_key to concurrency_key, drop the unique rule)" // prose too
	columns   = "(job_class, unique_key)"                                              // want `string names the unique_key column`
	upsert    = "INSERT INTO q (k) VALUES ($1) ON CONFLICT (unique_key) DO NOTHING"    // want `string names the unique_key column`
	riverSQL  = "UPDATE river_job SET unique_key = NULL WHERE id = $1"                 // River's own table: silent, even here
	luaScript = `return redis.call("HGET", KEYS[1], "unique_key")`                     // Lua, not SQL: silent
)

// inEnqueuer only has "enqueue" inside a longer word: it enqueues nothing.
func inEnqueuer(err error) bool { return strings.Contains(err.Error(), "duplicate key") }

// Enqueue inserts a job.
func Enqueue(ctx context.Context, j Job) error {
	if _, err := fmt.Println(selectByKey, spanError, j.UniqueKey()); err != nil { // want `call of Job.UniqueKey`
		return err
	}
	return ErrDuplicate // want `rename jobs.ErrDuplicate`
}

type sqlStater interface{ SQLState() string }

// submit treats a duplicate as success: that handling must be revisited.
func submit(ctx context.Context, r *Report) error {
	err := Enqueue(ctx, r)
	var pgErr sqlStater
	if errors.As(err, &pgErr) && pgErr.SQLState() == pgerrcode.UniqueViolation { // want `handles a unique violation \(pgerrcode.UniqueViolation\) around an enqueue`
		return nil
	}
	if err != nil && strings.Contains(err.Error(), "duplicate key") { // want `handles a unique violation \("duplicate key"\)`
		return nil
	}
	return err
}

// isConflict is no enqueue: its 23505 is someone else's business.
func isConflict(err error) bool {
	var pgErr sqlStater
	return errors.As(err, &pgErr) && pgErr.SQLState() == "23505"
}

var _ = CacheItem{} //migrate-unique:ignore // want `//migrate-unique:ignore needs a reason`

// legacyReport reads old rows on purpose: a trailing directive silences it.
const legacyReport = "SELECT count(*) FROM archive WHERE unique_key <> ''" //migrate-unique:ignore the archive keeps its legacy column
