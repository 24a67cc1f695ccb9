// Package migrations moves a legacy job queue's tables from a binary
// unique_key to a concurrency key, online, and back (SPEC section 7).
//
// Up builds the counting indexes CONCURRENTLY (reusing an equivalent valid
// index, dropping an invalid leftover of its own first), then renames
// unique_key to concurrency_key on every table of the layout and drops the
// unique constraint or index covering the key in one short transaction under
// SET LOCAL lock_timeout, saving the rule's exact definition in the tool's
// own version table (layout.VersionTable, never schema_migrations), then
// creates the runtime's tables and runs ANALYZE. Lock timeouts (55P03) and
// deadlocks (40P01) are retried with jittered backoff. Every step is
// idempotent, so a run killed anywhere finishes when it is run again.
//
// Down refuses, before any change, while a group breaks the old unique rule
// (a *DuplicatesError lists them); otherwise it rebuilds the saved rule
// CONCURRENTLY, attaches it as it was and renames the column back, and never
// drops a table that holds operator data.
//
// Before any change, both read the catalog for everything that depends on
// what they change (trigger and other functions naming the key column,
// views, partitions, foreign keys and replica identities that need the
// unique rule, ...; package migrations/internal/dependents, one file per
// kind of object): an object PostgreSQL carries through the rename is a
// note, one that would break the queue's next insert or stop the run
// half-way is a refusal (a *PreflightError), which Plan lists too.
//
// The statements come from the templates in templates/, which also render
// the golang-migrate files of Files (one statement per file wherever
// CONCURRENTLY is involved); plainjobs/ holds them for plain-jobs' layout.
package migrations
