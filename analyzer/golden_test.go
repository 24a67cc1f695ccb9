package analyzer_test

import (
	"flag"
	"os"
	"sort"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"
)

var update = flag.Bool("update", false, "rewrite the .golden files from the analyzer's fixes")

// writeGoldens applies the first fix of every diagnostic and writes each
// fixed file's .golden file, for -update. The goldens are then read by eye
// and committed; the tests compare against them.
func writeGoldens(t *testing.T, results []*analysistest.Result) {
	t.Helper()
	type edit struct {
		start, end int
		text       string
	}
	edits := map[string][]edit{}
	for _, r := range results {
		fset := r.Action.Package.Fset
		for _, d := range r.Action.Diagnostics {
			if len(d.SuggestedFixes) == 0 {
				continue
			}
			for _, e := range d.SuggestedFixes[0].TextEdits {
				start, end := fset.Position(e.Pos), fset.Position(e.End)
				edits[start.Filename] = append(edits[start.Filename], edit{start.Offset, end.Offset, string(e.NewText)})
			}
		}
	}
	for name, es := range edits {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sort.SliceStable(es, func(i, j int) bool { return es[i].start > es[j].start })
		out := string(src)
		for _, e := range es {
			out = out[:e.start] + e.text + out[e.end:]
		}
		if err := os.WriteFile(name+".golden", []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
