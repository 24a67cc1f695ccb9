package layout

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestFlagsLayout(t *testing.T) {
	tests := []struct {
		args    []string
		want    Layout
		wantErr string
	}{
		{args: nil, want: PlainJobs()},
		{args: []string{"-schema", "Billing Queue", "-class-column", "kind", "-requests-table", "JobRequests", "-processes-table", "job_processes"},
			want: Layout{Schema: "Billing Queue", ClassColumn: "kind", RequestsTable: "JobRequests", ProcessesTable: "job_processes"}},
		{args: []string{"-jobs-table", "jobs", "-state-column", "status", "-active-states", "pending, running,paused"},
			want: Layout{Schema: "public", ClassColumn: "job_class", JobsTable: "jobs", StateColumn: "status", ActiveStates: []string{"pending", "running", "paused"},
				IDColumn: "id", RunAtColumn: "run_at", LeaseColumn: "lease_until", WorkerColumn: "worker_id"}},
		{args: []string{"-active-states", "pending"}, wantErr: "need --jobs-table"},
		{args: []string{"-jobs-table", "jobs"}, wantErr: "needs --active-states"},
		{args: []string{"-jobs-table", "jobs", "-requests-table", "r", "-active-states", "pending"}, wantErr: "choose one layout"},
		{args: []string{"-processes-table", "p"}, wantErr: "needs --requests-table"},
		{args: []string{"-requests-table", "r", "-state-column", "status"}, wantErr: "only apply with --jobs-table"},
		{args: []string{"-jobs-table", "jobs", "-active-states", "pending,,running"}, wantErr: "empty state"},
		{args: []string{"-jobs-table", "jobs", "-active-states", "pending,pending"}, wantErr: "listed twice"},
		{args: []string{"-requests-table", "r", "-processes-table", "r"}, wantErr: "named twice"},
		{args: []string{"-requests-table", strings.Repeat("x", 64)}, wantErr: "at most 63"},
		// An empty value is never the default (a script's unset variable).
		{args: []string{"-schema", ""}, wantErr: "--schema given empty"},
		{args: []string{"-requests-table", ""}, wantErr: "--requests-table given empty"},
		{args: []string{"-requests-table", "r", "-processes-table", " "}, wantErr: "--processes-table given empty"},
		{args: []string{"-results-table", ""}, wantErr: "--results-table given empty"},
		{args: []string{"-jobs-table", "", "-active-states", "pending"}, wantErr: "--jobs-table given empty"},
		{args: []string{"-jobs-table", "jobs", "-active-states", ""}, wantErr: "--active-states given empty"},
		{args: []string{"-jobs-table", "jobs", "-active-states", "a", "-state-column", ""}, wantErr: "--state-column given empty"},
		{args: []string{"-class-column", ""}, wantErr: "--class-column given empty"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := RegisterFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: parse: %v", tt.args, err)
		}
		got, err := f.Layout()
		if tt.wantErr != "" {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: error %v, want ErrInvalid saying %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if !reflect.DeepEqual(got.Layout, tt.want) {
			t.Errorf("%v:\n got %+v\nwant %+v", tt.args, got, tt.want)
		}
	}
}
