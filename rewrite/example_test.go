package rewrite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/migrate-unique/migrate-unique/analyzer"
	"github.com/migrate-unique/migrate-unique/rewrite"
)

// Plan a module's migration: what it finds and the rewritten files.
// Nothing is written until Result.Write; Result.Diff prints a patch.
func Example() {
	dir, err := os.MkdirTemp("", "rewrite-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/app\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "jobs.go"), []byte(`package app

type Job interface {
	UniqueKey() string
	Run() error
}

type Report struct{ ID string }

func (r Report) UniqueKey() string { return r.ID }
func (r Report) Run() error        { return nil }
`), 0o644)

	a, err := analyzer.New(analyzer.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := rewrite.Plan(context.Background(), rewrite.Options{Analyzer: a, Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Summary(os.Stdout, nil)
	for _, f := range res.Files {
		fmt.Printf("\n%s:\n%s", filepath.Base(f.Path), f.New)
	}
	// Output:
	// example.com/app: 1 file(s) to change, 2 finding(s) fixed, 0 left for a human
	// interface: 1
	// 	jobs.go:4:2: interface Job declares UniqueKey: declare ConcurrencyKey and ConcurrencyLimit instead
	// job-type: 1
	// 	jobs.go:10:17: job type Report: rename UniqueKey to ConcurrencyKey and add ConcurrencyLimit
	//
	// jobs.go:
	// package app
	//
	// type Job interface {
	// 	ConcurrencyKey() string
	// 	ConcurrencyLimit() (int, bool)
	// 	Run() error
	// }
	//
	// type Report struct{ ID string }
	//
	// func (r Report) ConcurrencyKey() string { return r.ID }
	//
	// // ConcurrencyLimit admits one active job per concurrency key, the legacy unique-key rule;
	// // an empty key means no limit.
	// func (r Report) ConcurrencyLimit() (int, bool) {
	// 	return 1, r.ConcurrencyKey() != ""
	// }
	//
	// func (r Report) Run() error { return nil }
}
