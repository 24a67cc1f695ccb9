// Package dependents reads, from the catalog, everything in the database
// that depends on what a migration run changes: the key column it renames
// (unique_key to concurrency_key on up, back on down) and the unique rules
// up's cutover drops. Each kind of object is one small file with one Check
// and its test, and each Check says, object by object, what the run does
// to it:
//
//   - Carried: PostgreSQL stores it parsed (or by column number) and follows
//     the rename by itself: views, materialized views, rules, check
//     constraints, generated columns, index expressions and predicates,
//     trigger WHEN clauses and UPDATE OF lists, row-level security
//     policies, extended statistics, SQL-standard function bodies,
//     publications, foreign keys from the key column.
//   - Refused: the run would succeed into a database whose next insert (or
//     update) fails, or would stop half-way; it refuses before any change,
//     naming the object and what to do: function bodies stored as text that
//     name the column, trigger arguments naming it, partitioned and
//     inherited tables, a foreign key, replica identity or anything else
//     that needs a unique rule up drops, an INSERT ... ON CONFLICT that
//     infers it, a unique index, exclusion constraint or primary key on the
//     key that up would keep.
//   - Ignored: a refused function whose comment says
//     "migrate-unique:ignore <reason>".
//
// The migration's preflight runs [Run] for up and down (and status, to know
// whether up could finish); plan lists every finding. docs/migration.md,
// "What up checks around the queue", is the operator's view of the same.
package dependents
