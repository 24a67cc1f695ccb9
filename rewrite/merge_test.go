package rewrite

import (
	"errors"
	"strings"
	"testing"
)

func TestMergeEdits(t *testing.T) {
	content := []byte("package p\n\nfunc (T) UniqueKey() string { return \"k\" }\n")
	for _, tc := range []struct {
		name    string
		edits   []edit
		want    int    // merged edits
		wantErr string // substring of the conflict's reason
	}{
		{
			name: "identical edits from two package variants are kept once",
			edits: []edit{
				{start: 20, end: 29, text: "ConcurrencyKey", owner: "a"},
				{start: 20, end: 29, text: "ConcurrencyKey", owner: "a (test variant)"},
			},
			want: 1,
		},
		{
			name: "adjacent edits both apply",
			edits: []edit{
				{start: 29, end: 29, text: "()", owner: "b"},
				{start: 20, end: 29, text: "ConcurrencyKey", owner: "a"},
				{start: 29, end: 31, text: "", owner: "c"},
			},
			want: 3,
		},
		{
			name: "overlapping different edits conflict",
			edits: []edit{
				{start: 20, end: 29, text: "ConcurrencyKey", owner: "a"},
				{start: 25, end: 31, text: "X", owner: "b"},
			},
			wantErr: "3:10-3:19 and 3:15-3:21 overlap",
		},
		{
			name: "different replacements of the same bytes conflict",
			edits: []edit{
				{start: 20, end: 29, text: "ConcurrencyKey", owner: "a"},
				{start: 20, end: 29, text: "Key", owner: "b"},
			},
			wantErr: "overlap with different replacements",
		},
		{
			name: "different insertions at one point conflict",
			edits: []edit{
				{start: 29, end: 29, text: "A", owner: "a"},
				{start: 29, end: 29, text: "B", owner: "b"},
			},
			wantErr: "both insert different text at 3:19",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mergeEdits("p/p.go", content, tc.edits)
			if tc.wantErr != "" {
				var ce *ConflictError
				if !errors.As(err, &ce) || ce.File != "p/p.go" || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a ConflictError in p/p.go containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("%d merged edits, want %d: %+v", len(got), tc.want, got)
			}
			for i := 1; i < len(got); i++ {
				if got[i].start < got[i-1].end {
					t.Fatalf("merged edits overlap: %+v", got)
				}
			}
		})
	}
}
