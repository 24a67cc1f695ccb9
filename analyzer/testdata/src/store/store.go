// Package store has no legacy job: only SQL naming the queue's own tables
// (plain-jobs' by default) together with unique_key is reported here.
package store

const (
	byKey = `SELECT id FROM plainjobs_jobrequest WHERE job_class = $1 AND unique_key = $2` // want `string names the unique_key column`

	running = `SELECT count(*) FROM "public"."plainjobs_jobprocess" p WHERE p.unique_key = $1` // want `string names the unique_key column`

	// a table whose name only starts like the queue's is another table
	archive = "SELECT id FROM plainjobs_jobrequest_archive WHERE unique_key = $1"

	// SQL on the queue's table that does not name unique_key
	pending = "SELECT count(*) FROM plainjobs_jobrequest"
)

// Queries lists them.
var Queries = []string{byKey, running, archive, pending}

type sqlStater interface{ SQLState() string }

// EnqueueRequest is the enqueue itself: its 23505 handling is the legacy
// unique rule's.
func EnqueueRequest(err error) error {
	if s, ok := err.(sqlStater); ok && s.SQLState() == "23505" { // want `handles a unique violation \("23505"\) around an enqueue`
		return nil
	}
	return err
}
