// Package analyzer defines an Analyzer that finds legacy unique-key job code
// and suggests the fixes that move it to concurrency keys and limits.
//
// # Analyzer migrateunique
//
// migrateunique: migrate legacy UniqueKey jobs to ConcurrencyKey and ConcurrencyLimit
//
// A job queue that used a unique key (one active job per key) now takes a
// concurrency key and a limit. The analyzer finds job types by their types,
// never by spelling: a job type implements a legacy job interface, which by
// default is any interface whose method set has UniqueKey() string together
// with a method that runs the job (Run, Perform, Execute, Handle, Process,
// Work or Do), the run method being the type's own: declared on it, or
// promoted from a type of the analysed module(s) or from one that is itself
// a job, never from the standard library or a dependency that is no job
// (sync.Once's Do, *exec.Cmd's Run, *http.Client's Do). The -interface flag
// (importpath.Name, repeatable) names the
// legacy job interfaces exactly instead. Go's interfaces are structural, so
// a package that sees no job interface (with -interface: none of the named
// ones) reads a job-shaped type, one whose method set has UniqueKey() string
// and a run method, as a job: go vet and go fix then migrate the jobs of
// packages that never import the interface, as a whole-module rewrite
// does. Drivers that load a whole module or workspace decide over all of it
// instead (Config.ForProgram). Types with a UniqueKey method that are not
// jobs (cache entries, rate-limiter identities, cloud resources, mempool
// transactions: none has a run method) are never reported.
//
// With a suggested fix:
//
//   - job-type: a job type's UniqueKey() string (also one a job type promotes
//     from an embedded type) is renamed to ConcurrencyKey, with the same body
//     and receiver, and ConcurrencyLimit() (int, bool) is added after it. It
//     returns 1, true when every return path of the body is provably a
//     non-empty string, else 1, recv.ConcurrencyKey() != "", which keeps
//     "empty key = no limit". A method promoted from a type the package
//     cannot edit, or from one that also serves a type that is no job, gets
//     both new methods on the job type, delegating to it.
//   - interface: an interface declaring the legacy method declares
//     ConcurrencyKey() string and ConcurrencyLimit() (int, bool) instead.
//   - call-site: calls, method values and method expressions of a migrated
//     method, in every package (facts carry the migration across packages).
//     Methods declared outside the analysed module are never touched.
//   - rename: configured renames (-rename importpath.Old=New) of option
//     functions and sentinel errors.
//   - span-error: the span error string "DuplicateJob" becomes
//     "ConcurrencyLimitReached".
//
// Reported without a fix:
//
//   - sql: SQL text naming the unique_key column where it can concern the
//     queue: a string naming one of the layout's tables (plain-jobs' by
//     default, -table otherwise) in any package, or SQL in a package with
//     legacy jobs (not on another system's table, such as River's
//     river_job); never struct tags, Lua scripts or JSON. -all-sql reports
//     SQL naming unique_key in every package;
//   - unique-violation: code handling a unique violation (SQLSTATE 23505,
//     pgerrcode.UniqueViolation, "duplicate key") in a function that
//     enqueues a job, where the violation can come from the queue's legacy
//     unique rule: in a package with legacy jobs or naming one of the
//     layout's tables (-all-sql: every package);
//   - generated: any finding in a generated file (regenerate it instead);
//   - clash: a job type or interface that already has ConcurrencyKey or
//     ConcurrencyLimit;
//   - external: a job whose legacy method is required by an interface the
//     analyzer cannot edit;
//   - directive: a suppression directive without a reason.
//
// A comment //migrate-unique:ignore <reason> on a line, or on the line
// above it, silences the findings of that line.
package analyzer

const doc = `migrate legacy UniqueKey jobs to ConcurrencyKey and ConcurrencyLimit

The migrateunique analyzer finds job types (types implementing a legacy job
interface: one declaring UniqueKey() string and a run method Run, Perform,
Execute, Handle, Process, Work or Do, or the interfaces named by -interface;
where no such interface is in sight, types whose method set has UniqueKey()
string and a run method) and suggests fixes: rename UniqueKey to ConcurrencyKey and add
ConcurrencyLimit() (int, bool); rewrite interfaces declaring UniqueKey;
rename calls, method values and method expressions in every package; apply
configured -rename pairs; replace the span error string "DuplicateJob" with
"ConcurrencyLimitReached". It reports without a fix: SQL text naming
unique_key in the queue's tables (-table; default plain-jobs') or in
packages with legacy jobs (-all-sql: everywhere), unique-violation (23505) handling around an enqueue
(in the same scope), findings in
generated files, clashes with existing ConcurrencyKey/ConcurrencyLimit
methods, and legacy methods required by interfaces it cannot edit.

//migrate-unique:ignore <reason> on a line or the line above silences it.`
