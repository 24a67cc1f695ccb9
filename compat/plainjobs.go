package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// PlainArgs is the parameters shape plain-jobs' Python workers read: a
// JSON object {"args": [...], "kwargs": {...}}, from which a worker rebuilds
// the job as JobClass(*args, **kwargs) (plain-jobs' JobParameters.from_json
// reads both keys; a missing key, a null, or any other shape makes the
// worker fail the job). Use it as Job.Args for a class that a Python worker
// runs; nil Args and Kwargs encode as [] and {}. Values are encoded as
// encoding/json does: plain-jobs' own encodings of models and dates
// ("__plain://model/...", "__plain://date/...") are strings the Go side must
// write itself.
type PlainArgs struct {
	Args   []any          `json:"args"`
	Kwargs map[string]any `json:"kwargs"`
}

// MarshalJSON encodes p with "args" a list and "kwargs" an object, never
// null.
func (p PlainArgs) MarshalJSON() ([]byte, error) {
	type shape PlainArgs
	s := shape(p)
	if s.Args == nil {
		s.Args = []any{}
	}
	if s.Kwargs == nil {
		s.Kwargs = map[string]any{}
	}
	return json.Marshal(s)
}

// WithPythonClasses names the job classes that plain-jobs' Python workers
// run (the names its job registry gives them). An enqueue of one of them
// whose Args do not encode to PlainArgs' shape fails with ErrInvalidJob and
// inserts nothing: the Python worker could not rebuild the job.
func WithPythonClasses(classes ...string) Option {
	return func(o *options) {
		if o.python == nil {
			o.python = map[string]bool{}
		}
		for _, c := range classes {
			o.python[c] = true
		}
	}
}

// CheckPlainArgs reports, as an error wrapping ErrInvalidJob, whether
// params (the JSON a parameters column holds) is not plain-jobs' shape
// {"args": [...], "kwargs": {...}}.
func CheckPlainArgs(params []byte) error {
	var shape struct {
		Args   *json.RawMessage `json:"args"`
		Kwargs *json.RawMessage `json:"kwargs"`
	}
	p := bytes.TrimSpace(params)
	if len(p) == 0 || p[0] != '{' || json.Unmarshal(p, &shape) != nil {
		return fmt.Errorf("%w: parameters %s are not a JSON object", ErrInvalidJob, abbreviate(params))
	}
	kind := func(r *json.RawMessage) byte {
		if r == nil {
			return 0
		}
		b := bytes.TrimSpace(*r)
		if len(b) == 0 {
			return 0
		}
		return b[0]
	}
	if kind(shape.Args) != '[' || kind(shape.Kwargs) != '{' {
		return fmt.Errorf("%w: parameters %s have no \"args\" list and \"kwargs\" object", ErrInvalidJob, abbreviate(params))
	}
	return nil
}

// checkPlainArgs is CheckPlainArgs for the encoded Args of a job of class
// (nil: no Args).
func checkPlainArgs(class string, args any) error {
	s, _ := args.(string)
	if err := CheckPlainArgs([]byte(s)); err != nil {
		return fmt.Errorf("job class %s is run by plain-jobs' Python workers (WithPythonClasses), which read parameters as {\"args\": [...], \"kwargs\": {...}}: %w; use compat.PlainArgs as Args", class, err)
	}
	return nil
}

func abbreviate(b []byte) string {
	if len(b) == 0 {
		return "(none)"
	}
	const max = 80
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
