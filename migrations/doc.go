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
// No step holds a lock that blocks writers for a time that grows with the
// table: what a step must know about the rows it learns before its lock
// (Down's probe index tells its skip-metadata step whether any row holds
// skip metadata); PlannedStep.GrowsWithTable and BlocksWriters say which
// step is which. On a partitioned table each index is built ON ONLY the
// table, then CONCURRENTLY on each partition and attached, until no
// partition (one created meanwhile included) lacks it; Up saves every
// partition's index of the unique rule and Down rebuilds each
// (SavedUnique.Partitions). A unique rule that is a constraint on a
// partitioned table, and inherited tables, are refused.
//
// Before any change, both read the catalog for everything that depends on
// what they change (trigger and other functions naming the key column,
// views, partitions, foreign keys and replica identities that need the
// unique rule, ...; package migrations/internal/dependents, one file per
// kind of object): an object PostgreSQL carries through the rename is a
// note, one that would break the queue's next insert or stop the run
// half-way is a refusal (a *PreflightError), which Plan lists too.
//
// Cancelling the context of Up, Down, Plan, Status or FilesFor ends the
// call soon and leaves nothing running on the server: the statement in
// progress is sent a cancel request (PostgreSQL's, the one psql sends on
// Ctrl-C) and the call waits for the server to end it, at most 30
// seconds, before returning. The error of Up and Down then satisfies
// errors.Is(err, context.Canceled) (or context.DeadlineExceeded) and wraps
// the server's 57014 when the server cancelled a statement; that of Plan,
// Status and FilesFor wraps one or the other. A transaction in progress is
// rolled back, and Up and Down release their run lock before returning, so
// the next run can start at once; an index build that was cancelled leaves
// an INVALID index, which the next run drops and rebuilds (Down drops a
// cancelled unique rule's INVALID index itself, waiting at most
// Options.LockTimeout and never more than 10 seconds). Only
// when the server does not answer within that time is the connection
// dropped; the run's output then names the session that may go on.
//
// The statements come from the templates in templates/, which also render
// the golang-migrate files of Files (one statement per file wherever
// CONCURRENTLY is involved); plainjobs/ holds them for plain-jobs' layout.
package migrations
