// Package rewrite applies an analyzer's suggested fixes to a whole Go module
// in one step: the engine behind `migrate-unique rewrite`.
//
// Renaming an interface method is only safe when every implementation, call
// site and method value changes together, so rewrite never works package by
// package. [Plan] loads every package of the module once per build-tag set
// (tests included) with golang.org/x/tools/go/packages, runs the analyzer with
// facts over the whole import graph (golang.org/x/tools/go/analysis/checker),
// merges the edits of every package and test variant (identical edits are
// kept once, overlapping different edits are refused), gofmts each changed
// file and type-checks the rewritten module in memory. Only then does the
// caller choose what to do with the [Result]: print a unified diff
// ([Result.Diff]) or write the files ([Result.Write]), each replaced
// atomically with its mode kept.
//
// Plan refuses, before anything is written, when the module does not
// type-check, when two fixes conflict, when a fix would touch a file outside
// the main module, or when the rewritten module would not type-check; the
// error says which file and why, and is one of the exported error types so
// callers can branch on it.
package rewrite
