package compat

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Keyed is implemented by job types that group their jobs by a concurrency
// key. An empty key groups the job with every job of its class.
type Keyed interface {
	ConcurrencyKey() string
}

// Limited is implemented by job types that limit how many jobs of their group
// may be active at once. ok=false means unlimited.
type Limited interface {
	ConcurrencyLimit() (limit int, ok bool)
}

// LegacyUnique is the old job API. A job that has UniqueKey and neither
// ConcurrencyKey nor ConcurrencyLimit is read as the old queue behaved: an
// empty key means no limit, a non-empty key means that key with limit 1.
type LegacyUnique interface {
	UniqueKey() string
}

// SkipRecorder is implemented by job types that want a skip record when the
// limit blocks an enqueue (SPEC 3): a result row with status SKIPPED, or a
// job row in state skipped, carrying the skip metadata.
type SkipRecorder interface {
	ConcurrencySkipRecord() bool
}

// Identity is a job's concurrency identity: its key and its limit. It
// implements Keyed and Limited, so an Identity can stand in for a job value
// wherever the runtime reads one.
type Identity struct {
	// Key groups the job; "" groups it with its whole class.
	Key string
	// Limit is the most jobs of the group that may be active at once. It
	// applies only when Limited is true.
	Limit int
	// Limited is false for an unlimited group.
	Limited bool
	// NoOverlap makes the limit count every active job whose key starts with
	// Prefix, not only jobs with Key (the scheduled no-overlap mode).
	NoOverlap bool
	// Prefix is the key prefix counted in NoOverlap mode.
	Prefix string
}

// ConcurrencyKey returns id.Key.
func (id Identity) ConcurrencyKey() string { return id.Key }

// ConcurrencyLimit returns id.Limit, id.Limited.
func (id Identity) ConcurrencyLimit() (int, bool) { return id.Limit, id.Limited }

// Limit returns an identity with key and limit n, for callers that want to
// set both without a job type of their own.
func Limit(key string, n int) Identity { return Identity{Key: key, Limit: n, Limited: true} }

// IdentityOf reads a job value's concurrency identity (SPEC 2). A value with
// neither new method nor UniqueKey has key "" and no limit; nil is such a
// value. IdentityOf does not validate the limit; Enqueue does.
func IdentityOf(job any) Identity {
	if id, ok := job.(Identity); ok {
		return id
	}
	if id, ok := job.(*Identity); ok {
		if id == nil {
			return Identity{} // its methods would dereference nil
		}
		return *id
	}
	keyed, hasKey := job.(Keyed)
	limited, hasLimit := job.(Limited)
	if !hasKey && !hasLimit {
		if legacy, ok := job.(LegacyUnique); ok {
			if k := legacy.UniqueKey(); k != "" {
				return Identity{Key: k, Limit: 1, Limited: true}
			}
			return Identity{}
		}
	}
	var id Identity
	if hasKey {
		id.Key = keyed.ConcurrencyKey()
	}
	if hasLimit {
		id.Limit, id.Limited = limited.ConcurrencyLimit()
	}
	return id
}

// ScheduledSeparator sits between a schedule's base key and the occurrence
// time in a scheduled job's key.
const ScheduledSeparator = ":scheduled:"

// ScheduledKey returns the key of one occurrence of a schedule (SPEC 5):
// baseKey + ":scheduled:" + the occurrence's Unix seconds. Occurrences are
// whole minutes; a time inside a minute is truncated to the minute.
func ScheduledKey(baseKey string, occurrence time.Time) string {
	return SchedulePrefix(baseKey) + strconv.FormatInt(occurrence.Truncate(time.Minute).Unix(), 10)
}

// SchedulePrefix returns the prefix every occurrence key of a schedule
// starts with: baseKey + ":scheduled:".
func SchedulePrefix(baseKey string) string { return baseKey + ScheduledSeparator }

// ScheduleOption changes Scheduled.
type ScheduleOption func(*Identity)

// NoOverlap refuses an occurrence while any occurrence of the same schedule
// is still active, not only the same one.
func NoOverlap() ScheduleOption {
	return func(id *Identity) { id.NoOverlap = true }
}

// Scheduled returns the identity of one occurrence of a scheduled job: the
// key is ScheduledKey of the job's own key, and the limit is the job's own
// limit or, when it has none, 1 (so two schedulers cannot enqueue the same
// occurrence twice).
func Scheduled(job any, occurrence time.Time, opts ...ScheduleOption) Identity {
	base := IdentityOf(job)
	id := Identity{Key: ScheduledKey(base.Key, occurrence), Limit: 1, Limited: true}
	if base.Limited {
		id.Limit = base.Limit
	}
	for _, o := range opts {
		o(&id)
	}
	if id.NoOverlap {
		id.Prefix = SchedulePrefix(base.Key)
	}
	return id
}

// validate checks an identity for the column that will hold its key.
// maxLen is the column's length limit in characters (0: none).
func (id Identity) validate(class string, maxLen int) error {
	switch {
	case class == "":
		return fmt.Errorf("%w: the job class is empty; set Job.Class", ErrInvalidJob)
	case strings.ContainsRune(class, 0):
		return fmt.Errorf("%w: job class %q contains a NUL byte, which PostgreSQL text cannot hold", ErrInvalidJob, class)
	case id.Limited && id.Limit < 0:
		return fmt.Errorf("%w: job class %s key %q: negative concurrency limit %d; use 0 to block the group or ok=false for no limit", ErrInvalidJob, class, id.Key, id.Limit)
	case strings.ContainsRune(id.Key, 0):
		return fmt.Errorf("%w: job class %s: concurrency key %q contains a NUL byte, which PostgreSQL text cannot hold", ErrInvalidJob, class, id.Key)
	case maxLen > 0 && utf8.RuneCountInString(id.Key) > maxLen:
		return fmt.Errorf("%w: job class %s: concurrency key %.40q... is %d characters long; the key column holds at most %d", ErrInvalidJob, class, id.Key, utf8.RuneCountInString(id.Key), maxLen)
	case id.NoOverlap && (id.Prefix == "" || !strings.HasPrefix(id.Key, id.Prefix) || id.Prefix[len(id.Prefix)-1] == 0xff):
		return fmt.Errorf("%w: job class %s: no-overlap key %q does not start with its schedule prefix %q; build it with Scheduled", ErrInvalidJob, class, id.Key, id.Prefix)
	}
	return nil
}
