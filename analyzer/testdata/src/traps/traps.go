// Package traps holds types with a UniqueKey() string that are no jobs:
// none has a run method, so none is ever reported, here or where used.
package traps

import (
	"context"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// CacheEntry is a cache object keyed for its slot.
type CacheEntry struct{ Slot int }

func (c CacheEntry) UniqueKey() string { return "slot:" + strconv.Itoa(c.Slot) }

func (c CacheEntry) Expire() time.Time { return time.Time{} }

// Identity is a rate limiter's identity.
type Identity struct{ User, Route string }

func (i Identity) UniqueKey() string { return i.User + "|" + i.Route }

func (i Identity) Allow() bool { return true }

// Bucket is a cloud resource.
type Bucket struct{ ARN string }

func (b *Bucket) UniqueKey() string { return b.ARN }

func (b *Bucket) Create(ctx context.Context) error { return nil }

func (b *Bucket) Delete(ctx context.Context) error { return nil }

// Tx is a mempool transaction: its hook fields are no methods.
type Tx struct {
	Hash    [32]byte
	Run     func() error
	Process func() error
}

func (tx *Tx) UniqueKey() string { return string(tx.Hash[:]) }

func (tx *Tx) Validate() error { return nil }

// Runner has run-like names that are no run methods.
type Runner struct{}

func (Runner) UniqueKey() string { return "runner" }

func (Runner) Runs() int { return 0 }

func (Runner) Done() bool { return true }

func (Runner) Handler() func() { return nil }

// Bytes has a run method but its UniqueKey is no string.
type Bytes struct{}

func (Bytes) UniqueKey() []byte { return nil }

func (Bytes) Run() error { return nil }

// Param has a run method but its UniqueKey takes an argument.
type Param struct{}

func (Param) UniqueKey(n int) string { return strconv.Itoa(n) }

func (Param) Do() error { return nil }

// Pool keeps transactions by their UniqueKey, through an interface that
// runs nothing.
type Pool struct{ byKey map[string]Keyed }

// Keyed is what the pool stores.
type Keyed interface{ UniqueKey() string }

// Add stores a transaction.
func (p *Pool) Add(tx *Tx) { p.byKey[tx.UniqueKey()] = tx }

// Keys lists every trap's key.
func Keys() []string {
	var tx Tx
	return []string{CacheEntry{}.UniqueKey(), Identity{}.UniqueKey(), (&Bucket{}).UniqueKey(), tx.UniqueKey(), Runner{}.UniqueKey()}
}

// OnceEntry is a cache entry computed once: the Do it promotes from
// sync.Once is the standard library's, not a run method of its own.
type OnceEntry struct {
	sync.Once
	Key string
}

func (e *OnceEntry) UniqueKey() string { return e.Key }

// Command wraps a process: *exec.Cmd's Run is no run method of its own.
type Command struct {
	*exec.Cmd
	ID string
}

func (c Command) UniqueKey() string { return c.ID }

// Client is an API client: *http.Client's Do is no run method of its own.
type Client struct {
	*http.Client
	Tenant string
}

func (c *Client) UniqueKey() string { return c.Tenant }

// Wrappers keeps the wrappers by key: their UniqueKey must stay.
func Wrappers(e *OnceEntry, c Command, cl *Client) []Keyed { return []Keyed{e, c, cl} }

// Strings that say unique_key and are no SQL about the queue: this package
// has no legacy job, and none names the queue's tables.
const (
	// a Redis Lua script, as asynq keeps its unique locks
	releaseLock = `
local key = redis.call("HGET", KEYS[1], "unique_key")
if key == ARGV[1] then
  return redis.call("DEL", KEYS[1], "unique_key")
end
return 0`
	// a Redis hash field name
	uniqueKeyField = "unique_key"
	// a JSON document
	payload = `{"type": "email", "unique_key": "user:1"}`
	// another system's own unique_key table (River's)
	riverByKey = "SELECT id FROM river_job WHERE unique_key = $1 AND kind = $2"
	// a cache's own table, in a package with no legacy job
	cacheByKey = "DELETE FROM cache_entries WHERE unique_key = $1"
)

// Row maps a row with tags naming the column: tags are never reported.
type Row struct {
	Key string `json:"unique_key" db:"unique_key"`
}

// Keys lists every wrapper's key.
func WrapperKeys(e *OnceEntry, c Command, cl *Client) []string {
	return []string{e.UniqueKey(), c.UniqueKey(), cl.UniqueKey(), releaseLock, uniqueKeyField, payload, riverByKey, cacheByKey}
}
