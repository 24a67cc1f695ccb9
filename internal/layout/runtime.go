package layout

// RuntimeDDL returns the statements that create what the compat runtime needs
// beside the queue's own tables, in the layout's schema: the limit overrides
// table, the slot lease table and the skip-metadata column. Every statement
// is idempotent. The migration runs them after the cutover; down drops them
// only while they hold no operator data.
func (l Layout) RuntimeDDL() []string {
	l = l.WithDefaults()
	stmts := []string{
		// One row per group whose limit an operator has overridden.
		// concurrency_limit 0 blocks the group (the maintenance switch).
		`CREATE TABLE IF NOT EXISTS ` + l.Table(LimitsTable) + ` (
    group_name text PRIMARY KEY,
    concurrency_limit integer NOT NULL CHECK (concurrency_limit >= 0),
    reason text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now()
)`,
		// One row per slot of a group. token is the fencing token: it grows
		// on every acquisition, and release/extend must present the current one.
		`CREATE TABLE IF NOT EXISTS ` + l.Table(SlotsTable) + ` (
    group_name text NOT NULL,
    slot integer NOT NULL CHECK (slot >= 0),
    job_id text NULL,
    worker_id text NULL,
    token bigint NOT NULL DEFAULT 0,
    acquired_at timestamptz NULL,
    expires_at timestamptz NULL,
    PRIMARY KEY (group_name, slot)
)`,
	}
	if t := l.SkipTable(); t != "" {
		stmts = append(stmts, `ALTER TABLE `+l.Table(t)+` ADD COLUMN IF NOT EXISTS `+Ident(SkipMetadataColumn)+` jsonb NULL`)
	}
	return stmts
}

// SkipTable is the table that holds skip records: the results table of a
// two-table layout, or the jobs table. It is "" for a two-table layout
// without a results table, which cannot keep skip records.
func (l Layout) SkipTable() string {
	if l.SingleTable() {
		return l.JobsTable
	}
	return l.ResultsTable
}
