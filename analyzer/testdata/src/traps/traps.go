// Package traps holds types with a UniqueKey() string that are no jobs:
// none has a run method, so none is ever reported, here or where used.
package traps

import (
	"context"
	"strconv"
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
