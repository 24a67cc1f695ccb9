package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/admission"
)

// TestBenchAdmissionFlags: -h documents every flag; bad flags and a missing
// database are usage errors (exit 2) that say what to fix.
func TestBenchAdmissionFlags(t *testing.T) {
	code, _, stderr := runCLI(t, "bench", "admission", "-h")
	if code != 0 {
		t.Fatalf("-h exited %d", code)
	}
	for _, f := range []string{"-database", "-rows", "-samples", "-json", "over_admitted", "backlog_latency_ratio", "naive_backlog_latency_ratio", "throughput_ratio_vs_insert"} {
		if !strings.Contains(stderr, f) {
			t.Errorf("-h does not mention %s:\n%s", f, stderr)
		}
	}
	t.Setenv("DATABASE_URL", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rows", "3", "--database", "postgres://x"}, "--rows 3"},
		{[]string{"--samples", "0", "--database", "postgres://x"}, "--samples 0"},
		{[]string{"extra", "--database", "postgres://x"}, `unexpected argument "extra"`},
		{nil, "DATABASE_URL"},
	} {
		code, _, stderr := runCLI(t, append([]string{"bench", "admission"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The JSON line carries the fields the issue names, with these exact keys.
func TestBenchAdmissionJSONKeys(t *testing.T) {
	var r struct {
		OverAdmitted *int     `json:"over_admitted"`
		Backlog      *float64 `json:"backlog_latency_ratio"`
		Naive        *float64 `json:"naive_backlog_latency_ratio"`
		Throughput   *float64 `json:"throughput_ratio_vs_insert"`
	}
	b, err := json.Marshal(admission.Result{})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil || r.OverAdmitted == nil || r.Backlog == nil || r.Naive == nil || r.Throughput == nil {
		t.Fatalf("JSON %s lacks a required key (%v)", b, err)
	}
}
