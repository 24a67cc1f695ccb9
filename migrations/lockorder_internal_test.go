package migrations

import (
	"slices"
	"testing"
)

// lockOrder moves a table before another the application was seen taking
// after it, adjacent or not, and ends in some order when what was seen is a
// cycle.
func TestLockOrderFollowsWhatTheApplicationWasSeenDoing(t *testing.T) {
	s := step{exclusive: []string{"req", "res", "proc"}}
	cases := []struct {
		edges map[lockEdge]int
		want  []string
	}{
		{nil, []string{"req", "res", "proc"}},
		{map[lockEdge]int{{"proc", "req"}: 1}, []string{"proc", "req", "res"}},
		{map[lockEdge]int{{"res", "req"}: 2, {"proc", "req"}: 1}, []string{"res", "proc", "req"}},
		{map[lockEdge]int{{"proc", "req"}: 1, {"req", "proc"}: 2}, []string{"req", "res", "proc"}},
	}
	for _, c := range cases {
		r := &runner{lockEdges: c.edges}
		if got := r.lockOrder(s); !slices.Equal(got, c.want) {
			t.Errorf("edges %v: order %v, want %v", c.edges, got, c.want)
		}
	}
	// A cycle: the passes are bounded, and end in an order of every table.
	r := &runner{lockEdges: map[lockEdge]int{{"proc", "req"}: 1, {"req", "res"}: 1, {"res", "proc"}: 1}}
	got := r.lockOrder(s)
	slices.Sort(got)
	if !slices.Equal(got, []string{"proc", "req", "res"}) {
		t.Errorf("a cycle: order %v, want the three tables", got)
	}
}
