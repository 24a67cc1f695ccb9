package migrations

import (
	"context"
	"fmt"

	"github.com/migrate-unique/migrate-unique/layout"
)

// The expanded layout's enqueue lock (docs/migration.md "Rolling deploys",
// "Old and new writers of one key").
//
// While the unique rule stands, the old version (plain-jobs 0.37) inserts a
// keyed request without any lock and takes the unique rule's 23505 as "in
// progress". The new version (plain-jobs 0.38, github.com/dropseed/plain
// commit 01b6986d, plain-jobs/plain/jobs/jobs.py Job.run_in_worker) takes the
// group's advisory lock, counts the group's processes and requests, and
// inserts, catching nothing: an old insert of the same key that commits
// between its count and its insert fails the new version's insert with a
// raw 23505. So, while expanded, a BEFORE INSERT trigger on the table of
// the unique rule takes the same advisory lock (plain-jobs' id: the first 8
// bytes of md5(class || '::' || key)) for every row with a non-empty key:
// an old insert waits for a new writer's check-and-insert and then meets
// its row in the unique rule (23505, which the old version handles), and a
// new writer's count sees every old insert that took the lock before it.
// The trigger function lives in the version schema, sets its search_path
// and qualifies every name; the cutover drops the trigger (the column it
// reads is renamed there), the cutover back of down makes it again when a
// version schema stays, and dropping the version schema drops the
// function.

// enqueueLockName names the trigger and its function.
const enqueueLockName = "migrate_unique_enqueue_lock"

// enqueueLockTable is the queue table that holds the unique rule (the
// requests table, or the jobs table of a single-table layout).
func enqueueLockTable(l layout.Resolved) string {
	if l.SingleTable() {
		return l.JobsTable
	}
	return l.RequestsTable
}

// enqueueLockFunction is the trigger function's qualified name.
func enqueueLockFunction(vs string) string { return layout.Qualified(vs, enqueueLockName) }

// enqueueLockCreateSQL makes (or replaces) the function in the version
// schema vs and the trigger on the table of the unique rule.
func enqueueLockCreateSQL(l layout.Resolved, vs string) string {
	key, class := layout.Ident(layout.LegacyKeyColumn), layout.Ident(l.ClassColumn)
	return fmt.Sprintf(`CREATE OR REPLACE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $migrate_unique$
BEGIN
    -- The group's advisory lock, as plain-jobs 0.38 and compat take it.
    IF NEW.%[2]s OPERATOR(pg_catalog.<>) '' THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.md5(NEW.%[3]s::pg_catalog.text OPERATOR(pg_catalog.||) '::' OPERATOR(pg_catalog.||) NEW.%[2]s::pg_catalog.text), 1, 16))::pg_catalog.bit(64)::pg_catalog.int8);
    END IF;
    RETURN NEW;
END
$migrate_unique$;
COMMENT ON FUNCTION %[1]s() IS %[4]s;
DROP TRIGGER IF EXISTS %[5]s ON %[6]s;
CREATE TRIGGER %[5]s BEFORE INSERT ON %[6]s FOR EACH ROW EXECUTE FUNCTION %[1]s();
`, enqueueLockFunction(vs), key, class,
		layout.Literal("migrate-unique enqueue lock: while the layout is expanded, an insert with a non-empty "+layout.LegacyKeyColumn+" takes its group's advisory lock, so that the old version's inserts serialize with the new version's check and insert; the cutover drops its trigger"),
		layout.Ident(enqueueLockName), l.Table(enqueueLockTable(l)))
}

// enqueueLockDropTriggerSQL drops the trigger (the cutover, and down).
func enqueueLockDropTriggerSQL(l layout.Resolved) string {
	return fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s;\n", layout.Ident(enqueueLockName), l.Table(enqueueLockTable(l)))
}

// enqueueLockStep makes the function and the trigger of an expanded layout
// (up --expand), after the version schema. CREATE TRIGGER locks the table
// SHARE ROW EXCLUSIVE: the step takes it ACCESS EXCLUSIVE under the bounded
// wait of every such step, for a moment.
func enqueueLockStep(in *inspection) step {
	l := in.l
	t := l.Table(enqueueLockTable(l))
	s := step{name: "enqueue lock: a trigger on " + t + " that takes the group's advisory lock for inserts with a key (old and new writers of one key serialize while the unique rule stands)",
		table: t, lock: "ACCESS EXCLUSIVE (short: creates a trigger)", kind: stepTx, exclusive: []string{t}}
	if in.vs == nil || in.vs.enqueueLock {
		s.skip = "already created"
		return s
	}
	sql := enqueueLockCreateSQL(l, in.vs.name)
	if in.vs.asCreator(in) {
		sql = in.access.setRole() + sql + in.access.resetRole()
	}
	s.sql = sql
	return s
}

// enqueueLockDropStep drops the trigger before the version schema goes
// (down from the expanded layout, or after a cutover back that made it).
func enqueueLockDropStep(in *inspection) step {
	l := in.l
	t := l.Table(enqueueLockTable(l))
	return step{name: "drop the enqueue lock trigger on " + t, table: t, lock: "ACCESS EXCLUSIVE (short: drops a trigger)", kind: stepTx,
		exclusive: []string{t}, sql: enqueueLockDropTriggerSQL(l)}
}

// readEnqueueLock says whether the layout's enqueue lock trigger exists.
func readEnqueueLock(ctx context.Context, q querier, l layout.Resolved) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger tg
WHERE tg.tgrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)::pg_catalog.oid AND tg.tgname OPERATOR(pg_catalog.=) $2)`, l.Table(enqueueLockTable(l)), enqueueLockName).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read the enqueue lock trigger: %w", err)
	}
	return ok, nil
}
