// Package compat is the drop-in runtime that lets old UniqueKey job types and
// new ConcurrencyKey/ConcurrencyLimit job types run side by side on a
// PostgreSQL job queue: the exact counting admission check, enqueue, retries,
// scheduled keys, limit overrides, skip records, worker-side slot leases and
// reschedule without an attempt. See docs/runtime.md.
package compat
