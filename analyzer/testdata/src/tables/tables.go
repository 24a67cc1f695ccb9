// Package tables is analysed with -table jobs.queue_jobs: the configured
// tables replace plain-jobs' as the layout's.
package tables

const (
	byKey    = `SELECT id FROM jobs.queue_jobs WHERE unique_key = $1` // want `string names the unique_key column`
	quoted   = `UPDATE "queue_jobs" SET unique_key = NULL`            // want `string names the unique_key column`
	plain    = `SELECT id FROM plainjobs_jobrequest WHERE unique_key = $1`
	elsewise = `SELECT id FROM other_jobs WHERE unique_key = $1`
)

// Queries lists them.
var Queries = []string{byKey, quoted, plain, elsewise}
