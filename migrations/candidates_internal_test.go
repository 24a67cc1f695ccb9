package migrations

import (
	"reflect"
	"testing"
)

// The suggested --active-states reproduce the unique rule's predicate, as
// pg_get_expr renders it, or say that they cannot.
func TestStatesOfReadsTheRulesPredicate(t *testing.T) {
	cases := []struct {
		pred   string
		states []string
		rest   []string
		ok     bool
	}{
		{`(status = ANY (ARRAY['pending'::text, 'running'::text, 'paused'::text]))`, []string{"pending", "running", "paused"}, nil, true},
		{`(status = 'pending'::text)`, []string{"pending"}, nil, true},
		{`((status)::text = ANY ((ARRAY['pending'::character varying, 'it''s running'::character varying])::text[]))`, []string{"pending", "it's running"}, nil, true},
		{`(status = ANY (ARRAY['queued'::job_state, 'running'::job_state]))`, []string{"queued", "running"}, nil, true},
		{`((status = ANY (ARRAY['pending'::text, 'running'::text])) AND (unique_key IS NOT NULL))`, []string{"pending", "running"}, nil, true},
		{`((status = ANY (ARRAY['pending'::text])) AND (retry_attempt = 0))`, []string{"pending"}, []string{"(retry_attempt = 0)"}, true},
		{`(status <> 'done'::text)`, nil, []string{"status <> 'done'::text"}, false},
		{`((status = 'a'::text) OR (status = 'b'::text))`, nil, nil, false},
		{`(state = ANY (ARRAY['pending'::text]))`, nil, []string{"state = ANY (ARRAY['pending'::text])"}, false},
	}
	for _, c := range cases {
		states, rest, ok := statesOf(c.pred, "status")
		if ok != c.ok || !reflect.DeepEqual(states, c.states) || !reflect.DeepEqual(rest, c.rest) {
			t.Errorf("statesOf(%s) = %q, %q, %v; want %q, %q, %v", c.pred, states, rest, ok, c.states, c.rest, c.ok)
		}
	}
}
