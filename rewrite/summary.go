package rewrite

import (
	"bufio"
	"fmt"
	"io"
	"sort"
)

// Summary writes what the rewrite does, finding by finding: the fixed
// findings grouped by category (job types, interfaces, call sites, ...),
// then the findings left for a human, each with its position relative to
// the module root. title names a category in the output; nil prints the
// category as is.
func (r *Result) Summary(w io.Writer, title func(category string) string) error {
	if title == nil {
		title = func(c string) string { return c }
	}
	bw := bufio.NewWriter(w)
	fixed := map[string][]Finding{}
	var left []Finding
	for _, f := range r.Findings {
		if f.Fixed {
			fixed[f.Category] = append(fixed[f.Category], f)
		} else {
			left = append(left, f)
		}
	}
	cats := make([]string, 0, len(fixed))
	for c := range fixed {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	fmt.Fprintf(bw, "%s: %d file(s) to change, %d finding(s) fixed, %d left for a human\n",
		r.Module, len(r.Files), len(r.Findings)-len(left), len(left))
	for _, c := range cats {
		fmt.Fprintf(bw, "%s: %d\n", title(c), len(fixed[c]))
		for _, f := range fixed[c] {
			fmt.Fprintf(bw, "\t%s: %s\n", r.position(f), f.Message)
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(bw, "left for a human: %d\n", len(left))
		for _, f := range left {
			fmt.Fprintf(bw, "\t%s: [%s] %s\n", r.position(f), title(f.Category), f.Message)
		}
	}
	if len(r.TypeErrors) > 0 {
		fmt.Fprintf(bw, "the rewritten module does not type-check until these are fixed (regenerate generated files first): %d\n", len(r.TypeErrors))
		for _, e := range r.TypeErrors {
			fmt.Fprintf(bw, "\t%s\n", e)
		}
	}
	return bw.Flush()
}

// position is "file:line:col" with the file relative to the module root.
func (r *Result) position(f Finding) string {
	return fmt.Sprintf("%s:%d:%d", relPath(r.ModuleDir, f.Position.Filename), f.Position.Line, f.Position.Column)
}
