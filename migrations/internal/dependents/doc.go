// Package dependents reads, from the catalog, everything in the database
// that depends on what a migration run changes: the key column it renames
// (unique_key to concurrency_key on up, back on down) and the unique rules
// up's cutover drops. Each kind of object is one small file with one Check,
// and each Check says, object by object, what the run does to it:
//
//   - Carried: PostgreSQL stores it parsed and follows the rename by itself
//     (views, materialized views, rules, check constraints, generated
//     columns, index expressions and predicates, trigger WHEN clauses and
//     UPDATE OF lists, row-level security policies, extended statistics,
//     SQL-standard BEGIN ATOMIC function bodies, publication column lists
//     and row filters).
//   - Refused: the run would succeed into a database whose next insert (or
//     update) fails, or would fail half-way; it refuses before any change,
//     naming the object and what to do (function bodies stored as text,
//     partitioned and inherited tables, a foreign key or replica identity
//     that needs a unique index up drops, a unique index or exclusion
//     constraint on an expression of the key, which up would keep).
//
// The migration's preflight runs [All] for up and down, and plan lists every
// finding.
package dependents
