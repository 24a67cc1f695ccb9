package rewrite

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Causes reduces the load errors of a package graph to their root causes,
// each once, so that a user sees what to fix rather than every error that
// follows from it:
//
//   - an import that fails because a package failed (`could not import X`,
//     `no metadata for X`) is a follow-on of that package's own error, and
//     is left out whenever that error is listed;
//   - a go command error about a module or a package (a download that
//     failed, a missing go.sum entry, a package no module provides) is
//     listed once per module or package it names, with how many packages
//     met it, wherever they are;
//   - the errors of a package that does not compile (parse and type errors)
//     are listed once, under the package's name, however many test
//     variants and tag sets saw them.
//
// Positions under dir are shown relative to it. The result is in the order
// of the graph (dependencies first).
func Causes(pkgs []*packages.Package, dir string) []string {
	type cause struct {
		text     string
		packages map[string]bool
	}
	var order []string
	causes := map[string]*cause{}
	add := func(key, text, pkg string) {
		c := causes[key]
		if c == nil {
			c = &cause{text: text, packages: map[string]bool{}}
			causes[key] = c
			order = append(order, key)
		}
		c.packages[pkg] = true
	}
	var followOns []string
	seenFollowOn := map[string]bool{}
	packages.Visit(pkgs, nil, func(pkg *packages.Package) {
		name := pkg.PkgPath
		if name == "" {
			name = pkg.ID
		}
		for _, e := range pkg.Errors {
			msg := e.Msg
			pos := shortPos(e.Pos, dir)
			text := msg
			if pos != "" && pos != "-" {
				text = pos + ": " + msg
			}
			switch {
			case isFollowOn(msg):
				if !seenFollowOn[text] {
					seenFollowOn[text] = true
					followOns = append(followOns, text)
				}
			case e.Kind == packages.ListError:
				// The same failed download or missing module shows up in
				// every package that imports it, each at its own import.
				key := "list: " + listErrorSubject(msg)
				add(key, text, name)
			default:
				add("pkg: "+name+": "+text, text, name)
			}
		}
	})
	if len(order) == 0 {
		return followOns
	}
	out := make([]string, 0, len(order))
	for _, key := range order {
		c := causes[key]
		if n := len(c.packages); strings.HasPrefix(key, "list: ") && n > 1 {
			names := make([]string, 0, n)
			for p := range c.packages {
				names = append(names, p)
			}
			sort.Strings(names)
			more := ""
			if n > 3 {
				names, more = names[:3], fmt.Sprintf(" and %d more", n-3)
			}
			out = append(out, fmt.Sprintf("%s (met by %d packages: %s%s)", c.text, n, strings.Join(names, ", "), more))
			continue
		}
		out = append(out, c.text)
	}
	return out
}

// isFollowOn reports whether a load error only says that an import failed,
// which the imported package's own error explains.
func isFollowOn(msg string) bool {
	return strings.Contains(msg, "could not import ") || strings.Contains(msg, "no metadata for ") ||
		strings.HasPrefix(msg, "missing package: ") || strings.Contains(msg, "invalid package name: \"\"")
}

// moduleVersion finds "path@version" in a go command error: the module a
// download or a lookup failed for.
var moduleVersion = regexp.MustCompile(`\b([a-zA-Z0-9][-a-zA-Z0-9_.~/]*\.[a-zA-Z0-9_.~/-]+)@(v[0-9][-a-zA-Z0-9_.+]*)`)

// providingPackage finds the package a "no required module provides" or a
// "missing go.sum entry" error is about.
var providingPackage = regexp.MustCompile(`(?:providing|provides) package ([^\s;:()]+)`)

// listErrorSubject names what a go command error is about, so that the
// same failure met by many importing packages is one cause: the module and
// version it names, else the package, else the message itself.
func listErrorSubject(msg string) string {
	if m := moduleVersion.FindStringSubmatch(msg); m != nil {
		return m[1] + "@" + m[2]
	}
	if m := providingPackage.FindStringSubmatch(msg); m != nil {
		return "package " + m[1]
	}
	return msg
}

// shortPos shows a position relative to dir when it is a file under it.
func shortPos(pos, dir string) string {
	if dir == "" || !filepath.IsAbs(pos) {
		return pos
	}
	return relPath(dir, pos)
}
