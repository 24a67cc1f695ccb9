package compat

import "testing"

// TestIdentityOf reads SPEC 2's job API: the new methods, the legacy
// UniqueKey, neither, and an Identity (also a nil *Identity) standing in
// for a job value.
func TestIdentityOf(t *testing.T) {
	tests := []struct {
		name string
		job  any
		want Identity
	}{
		{"nil", nil, Identity{}},
		{"no methods", struct{}{}, Identity{}},
		{"key and limit", limited("k", 3), Identity{Key: "k", Limit: 3, Limited: true}},
		{"key, no limit", keyedJob{key: "k"}, Identity{Key: "k"}},
		{"legacy key: limit 1", legacyJob{"x"}, Identity{Key: "x", Limit: 1, Limited: true}},
		{"legacy empty key: no limit", legacyJob{""}, Identity{}},
		{"Identity", Limit("k", 2), Identity{Key: "k", Limit: 2, Limited: true}},
		{"*Identity", &Identity{Key: "k"}, Identity{Key: "k"}},
		{"nil *Identity", (*Identity)(nil), Identity{}},
	}
	for _, tt := range tests {
		if got := IdentityOf(tt.job); got != tt.want {
			t.Errorf("%s: IdentityOf = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
