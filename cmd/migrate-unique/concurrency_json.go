package main

import (
	"bytes"
	"flag"
	"strings"
)

// changeJSON is the --json output of concurrency set, release, pause and
// resume: what the command changed, field by field, and the text line it
// prints without --json. Every field is always there: "" / 0 / false /
// null where it does not apply (docs/operations.md).
type changeJSON struct {
	// Command is "set", "clear", "release", "pause" or "resume".
	Command string `json:"command"`
	// Group is the group of set, clear and release; Class the class of
	// pause and resume.
	Group string `json:"group"`
	Class string `json:"class"`
	// Changed is false when the command found nothing to change (clear
	// without an override, resume of a class that is not paused).
	Changed bool `json:"changed"`
	// Limit and Reason are what set wrote (Limit null otherwise); Reason
	// is also pause's.
	Limit  *int   `json:"limit"`
	Reason string `json:"reason"`
	// HoldersOverLimit counts the slot holders at or above set's new limit
	// (null when they could not be read, or for other commands).
	HoldersOverLimit *int `json:"holders_over_limit"`
	// Slot, JobID, WorkerID and Token are the lease release freed.
	Slot     int    `json:"slot"`
	JobID    string `json:"job_id"`
	WorkerID string `json:"worker_id"`
	Token    int64  `json:"token"`
	// Message is the text the command prints without --json.
	Message string `json:"message"`
}

// jsonChange registers --json on fs. When given, begin swaps the command's
// stdout for a buffer that collects its text line, and finish prints the
// change as JSON with that line as its message.
type jsonChange struct {
	on  *bool
	out *env
	msg bytes.Buffer
	res changeJSON
}

func newJSONChange(fs *flag.FlagSet, command string) *jsonChange {
	return &jsonChange{on: fs.Bool("json", false, "print one JSON object saying what changed instead of the text line (schema in docs/operations.md)"), res: changeJSON{Command: command}}
}

// begin returns the env the command prints its text to.
func (j *jsonChange) begin(e *env) *env {
	if !*j.on {
		return e
	}
	j.out = e
	return &env{stdout: &j.msg, stderr: e.stderr, isTerminal: false}
}

// finish prints the JSON object when --json was given and the command
// succeeded; it returns err.
func (j *jsonChange) finish(err error) error {
	if err != nil || j.out == nil {
		return err
	}
	j.res.Message = strings.TrimSpace(j.msg.String())
	return writeJSON(j.out.stdout, j.res)
}
